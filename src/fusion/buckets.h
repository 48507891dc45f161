/* What the bucket allreduces of merged-gradient plans run, shared by the
 * executor and the calibration that measures them. */
#ifndef PC_FUSION_BUCKETS_H
#define PC_FUSION_BUCKETS_H

#include <stddef.h>

#include "../core/context.h"

/* A tree-shaped algorithm for a bucket of `bytes` among n ranks: recursive
 * doubling up to the context's small size, Rabenseifner above (both add an
 * element up in the same order, so a layer's result does not depend on the
 * bucket it is in). */
static inline pcoll_allreduce_algo_t pc_bucket_algo(const pcoll_t *ctx, size_t bytes, int n)
{
    return n <= 2 || bytes <= atomic_load(&ctx->small_bytes) ? PCOLL_ALGO_RECDBL : PCOLL_ALGO_RABENSEIFNER;
}

/* The calling rank's index in the group (NULL: every rank), or -1. */
static inline int pc_bucket_index(const pcoll_t *ctx, const int *group, int group_size)
{
    if (!group) return ctx->rank;
    for (int i = 0; i < group_size; i++)
        if (group[i] == ctx->rank) return i;
    return -1;
}

#endif
