/* Persistent allreduce plans for the layers above the public API. */
#ifndef PC_CORE_PLAN_H
#define PC_CORE_PLAN_H

#include "pcoll.h"

#include "../algo/allreduce.h"

/* pcoll_allreduce_init for a use (algo/allreduce.h): with algo
 * PCOLL_ALGO_AUTO the node-shared path where the members share a node
 * (shm_group.h), else the context's choice for the use; or the algorithm
 * given.  Errors name fn. */
int pc_plan_init(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                 const int *group, int group_size, pc_algo_use_t use, pcoll_allreduce_algo_t algo, const char *fn,
                 pcoll_plan_t **plan);

/* Completes *req as pcoll_wait does, except that an operation not complete
 * yet is given up at once, as after a timeout (PCOLL_ERR_TIMEOUT): for a
 * caller whose earlier wait on the same ranks timed out already, so that
 * one call does not wait PCOLL_TIMEOUT_S once per request.  It sets no
 * message: the earlier timeout's says why. */
int pc_request_give_up(pcoll_request_t **req, const char *fn);

/* When the plan's last start completed here (its timeline clock: set only
 * while a timeline records; 0 otherwise). */
uint64_t pc_plan_completed_at(const pcoll_plan_t *plan);

#endif
