/*
 * Blocking allreduces of a group (any member list) whose members share a
 * node, through areas of the node's segments (one per rank, mapped once
 * at pcoll_init with the node-shared allreduce's segment): no segment per
 * group, no handshake, no record that members would have to agree to
 * evict.  docs/algorithms.md, "Groups in node-shared memory".
 *
 * Used by pcoll_allreduce with a member list when pc_shm_group_call_takes
 * says so (the same at every member: the members share a node, the
 * context has the node-shared segments, the settings allow it).  Results
 * have the same bits at every member: each element is added up in member
 * order (the order of the list), v[0] + v[1] + ... (then / n for AVG).
 */
#ifndef PC_CORE_SHM_GROUP_CALL_H
#define PC_CORE_SHM_GROUP_CALL_H

#include <stddef.h>

#include "context.h"

typedef struct pc_shm_group_calls pc_shm_group_calls_t;

/* Bytes of a rank's area for slots of slot_bytes of data each, on a node
 * of `local` ranks. */
size_t pc_shm_group_call_area_bytes(size_t slot_bytes, int local);

/* Local (no communication), after pc_shm_allreduce_open: ctx->shm_calls
 * set when the context has node-shared segments (else left NULL).
 * PCOLL_SUCCESS or PCOLL_ERR_NOMEM. */
int pc_shm_group_call_open(pcoll_t *ctx);
void pc_shm_group_call_close(pcoll_t *ctx);

/* 1 if a blocking allreduce of count x dtype over the member list (valid:
 * pc_group_index) takes this path; any_algo: whatever algorithm this rank
 * forces (the library's own agreements: agree.c). */
int pc_shm_group_call_takes(const pcoll_t *ctx, const int *group, int n, size_t count, pcoll_dtype_t dtype,
                            int any_algo);

/* The operation (arguments checked, the list valid, `me` this rank's
 * place in it): PCOLL_SUCCESS; PCOLL_ERR_ARG at every member when the
 * members called it with different count, dtype or op (counts on both
 * sides of PCOLL_SHM_ALLREDUCE_BYTES, or of a tuning row, take different
 * paths: a timeout instead, as for a forced algorithm that differs);
 * PCOLL_ERR_STATE when a member gave up while this rank read it; PCOLL_ERR_TIMEOUT
 * naming the members that did not take part (later calls on this list
 * then fail at this rank with PCOLL_ERR_STATE, as for a group whose
 * operation timed out; other lists go on). */
int pc_shm_group_call(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                      pcoll_op_t op, const int *group, int n, int me, const char *fn);

#endif
