/* Persistent allreduce plans for the layers above the public API. */
#ifndef PC_CORE_PLAN_H
#define PC_CORE_PLAN_H

#include "pcoll.h"

/* pcoll_allreduce_init with a given algorithm (PCOLL_ALGO_AUTO: the
 * context's choice); errors name fn. */
int pc_plan_init(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                 const int *group, int group_size, pcoll_allreduce_algo_t algo, const char *fn, pcoll_plan_t **plan);

#endif
