/*
 * Partial rounds among ranks that all share one node, run in node-shared
 * memory: pending contributions, activations and results live there, so a
 * round needs no message and wakes only the ranks that wait for it.
 *
 *   rank j's segment                      rank 0's segment, in addition
 *   ----------------                      -----------------------------
 *   state: taken | WAITING | ADDING |     activated, done: rounds so far
 *          TAKING | cur                   record[r % 2]: root, flags, the
 *   pending[0], pending[1]  (cur: the       leader's bitmap of parked ranks
 *     one the application adds into)      parts[r % 2]: parts taken
 *   want: nudge me once done >= want      result[r % 2]: record + sum
 *   consumed: results copied here
 *
 *   activate r (initiator / leader):  write record[r % 2], activated = r + 1
 *   take j's part of r (anyone, while j's application is not adding):
 *     flip j's cur, write the trailer (active = WAITING or counted as parked,
 *     contributions) into the old pending buffer: it is j's deposit for r
 *   the P-th part (or whoever finds the sum blocked and can do it):
 *     result[r % 2] = sum of the deposits, done = r + 1, nudge every j whose
 *     want is due; round r + 1 next if activated
 *   rank j, at any look: copy result[c % 2] for each round c < done it has
 *     not completed, consumed = c + 1
 *
 * Only one round is taken at a time (round r's parts only once r - 1 is
 * done), and at most two are activated and not done (a flush or free round
 * may follow a running one), hence two records, deposits and results.  A
 * result slot is summed into only when every rank has consumed the round it
 * held before; a sum that finds a rank behind nudges it and is done by the
 * first helper that finds the way clear.  An application that is adding
 * when its part is taken is skipped; it gives its part itself when done.
 */
#ifndef PC_PARTIAL_NODE_ROUNDS_H
#define PC_PARTIAL_NODE_ROUNDS_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine/progress.h"
#include "pcoll.h"

typedef struct pc_node_rounds pc_node_rounds_t;
struct pcoll_partial;

/* Collective over the object's communicator: *out is NULL, with
 * PCOLL_SUCCESS, unless every rank asks for it (use), there are two ranks or
 * more, all on one node, and shared memory works. */
int pc_nr_create(struct pcoll_partial *p, MPI_Comm comm, int use, pc_node_rounds_t **out);
void pc_nr_destroy(pc_node_rounds_t *s); /* collective */

/* ---- this rank's application thread (one at a time) ---- */
/* Step 1 of a call and the choice of the next step, with no take of this
 * rank's part in between: adds (ACCUMULATE) or copies (REPLACE) the
 * contribution (if not NULL) into pending, then calls choose(arg, taken),
 * taken being the round that will take the contribution; if it returns
 * nonzero (the application will wait for that round), marks this rank
 * waiting in the same atomic step (its part then counts as active).
 * Returns taken. */
uint64_t pc_nr_contribute(pc_node_rounds_t *s, const void *contribution, int (*choose)(void *arg, uint64_t taken),
                          void *arg);
/* Marks this rank waiting (flush, free: in every round until it returns). */
void pc_nr_set_waiting(pc_node_rounds_t *s);
void pc_nr_clear_waiting(pc_node_rounds_t *s);
/* Nudge this rank once `done` reaches want (0: never). */
void pc_nr_set_want(pc_node_rounds_t *s, uint64_t want);

/* ---- any thread of this rank ---- */
uint64_t pc_nr_done(const pc_node_rounds_t *s);
uint64_t pc_nr_activated(const pc_node_rounds_t *s);
/* Activates round r: 1 done here, 0 it already was (or is being), -1 it
 * cannot be (a bug: logged). */
int pc_nr_activate(pc_node_rounds_t *s, uint64_t r, int root, uint32_t flags, const unsigned char *counted);
/* Takes the parts and sums what can be taken and summed now; returns how
 * many things it did. */
int pc_nr_help(pc_node_rounds_t *s);

/* ---- the token holder ---- */
/* Round c's result into buf (count + 2 elements), with its initiator, flags
 * and whether this rank was counted as parked; 1 if round c is done. */
int pc_nr_consume(pc_node_rounds_t *s, uint64_t c, void *buf, int *root, uint32_t *flags, int *parked);

#endif
