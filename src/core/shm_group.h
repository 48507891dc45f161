/*
 * Node-shared segments of persistent plans (and fusion buckets, which are
 * plans): a plan whose members all share one node runs the node-shared
 * allreduce as a schedule (algo/shm.c) in a segment of its own, mapped once
 * at pcoll_allreduce_init and unmapped by each member when it frees the
 * plan (no collective free).
 *
 *   segment: | counter | member 0: arrived, slot 0, slot 1 | member 1: ... |
 *            (every part on whole cache lines)
 *
 * Each start binds the members' slots (the parity of the run: slot uses so
 * far) and the barrier base (barriers so far) to the schedule.
 */
#ifndef PC_CORE_SHM_GROUP_H
#define PC_CORE_SHM_GROUP_H

#include <stddef.h>

#include "context.h"

typedef struct pc_shm_group pc_shm_group_t;

/* 1 if a plan of count x dtype over n members (group NULL: all ranks, n
 * the context's size) takes the node-shared path: allowed by the settings
 * (pc_shm_allowed; the tuning table for a call, use PC_USE_CALL), and every
 * member on one node and reachable by doorbell.  The same at every member. */
int pc_shm_group_takes(const pcoll_t *ctx, const int *group, int n, size_t count, pcoll_dtype_t dtype,
                       pc_algo_use_t use);

/* Collective over the n members: the segment for a plan of count x dtype
 * (want: pc_shm_group_takes, the same at every member).  *out is NULL when
 * want is 0, or when any member could not map it (then at every member:
 * the plan takes messages). */
void pc_shm_group_open(pcoll_t *ctx, const int *group, int n, int me, size_t count, pcoll_dtype_t dtype, int want,
                       pc_shm_group_t **out);
/* Before each run of the plan's schedule (built by pc_allreduce_build with
 * PCOLL_ALGO_SHM and the shape of pc_shm_shape). */
void pc_shm_group_bind(pc_shm_group_t *g, pc_sched_t *s);
void pc_shm_group_close(pc_shm_group_t *g);

#endif
