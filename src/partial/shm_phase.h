/*
 * The data phase of partial rounds through node-shared memory, for objects
 * whose ranks all share one node (the message schedule serves the others).
 *
 *   rank j, its part of round r            slot s = r % 2
 *   ---------------------------            ---------------
 *   copy its round buffer to deposit[j][s]
 *   arrived[s] += 1; the P-th arrival:     result[s] = sum over j of deposit[j][s]
 *                                          arrived[s] = 0; done[s] = r + 1
 *                                          nudge every rank with want[j][s] set
 *   any later look: done[s] > r?           copy result[s] to the round buffer
 *
 * A rank thus wakes once per round (for the activation), not once per
 * message of an allreduce.  Only a rank whose application waits for r sets
 * want and is nudged; the others complete r lazily, at their next look (the
 * next activation, or their application's next call).  Completing r lazily is
 * safe for the slots: a rank deposits r + 2 only after completing r + 1 and
 * so r, and the P-th deposit of r + 2, which overwrites result[s], comes
 * after every rank's.
 */
#ifndef PC_PARTIAL_SHM_PHASE_H
#define PC_PARTIAL_SHM_PHASE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine/progress.h"
#include "pcoll.h"

typedef struct pc_shm_phase pc_shm_phase_t;

/* Collective over comm: *out is NULL, with PCOLL_SUCCESS, unless every rank
 * asks for it (use), there are two ranks or more, all on one node, and
 * shared memory works. */
int pc_shm_phase_create(MPI_Comm comm, int use, size_t count, pcoll_dtype_t dtype, pc_shm_phase_t **out);
/* Collective. */
void pc_shm_phase_destroy(pc_shm_phase_t *s);

/* This rank's part of round r: deposits buf (count elements).  Returns 1 when
 * this was the last part and buf now holds the result, else 0. */
int pc_shm_phase_start(pc_shm_phase_t *s, pc_engine_t *e, uint64_t round, void *buf);
/* Returns 1, with the result in buf, once round r is done; 0 before.  want:
 * the application waits for r, so the last depositor nudges this rank. */
int pc_shm_phase_poll(pc_shm_phase_t *s, uint64_t round, void *buf, int want);

#endif
