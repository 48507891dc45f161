/*
 * Timelines (docs/timeline.md): starting and stopping a session (clock
 * offsets, the rank's file), and the library's events, one function per
 * kind so that every layer records them the same way.  Each records only
 * while the context's recorder is on; a span's start time t0 comes from
 * pc_tl_now, which is 0 when recording was off at the start (the span is
 * then not recorded).
 */
#ifndef PC_CORE_TIMELINE_H
#define PC_CORE_TIMELINE_H

#include "../util/recorder.h"
#include "context.h"

static inline int pc_tl_on(pcoll_t *ctx) { return pc_rec_on(&ctx->rec); }
static inline uint64_t pc_tl_now(pcoll_t *ctx) { return pc_tl_on(ctx) ? pc_rec_now() : 0; }

/* Collective over the context (fn: the public call, for messages). */
int pc_timeline_begin(pcoll_t *ctx, const char *prefix, const char *fn);
int pc_timeline_end(pcoll_t *ctx, const char *fn);

/* t1: its end (0: now) */
void pc_tl_allreduce(pcoll_t *ctx, uint64_t t0, uint64_t t1, const char *call, pcoll_allreduce_algo_t algo,
                     size_t count, pcoll_dtype_t dtype, const int *group, int n, int status);
void pc_tl_partial_call(pcoll_t *ctx, uint64_t t0, uint64_t obj, const char *kind, const char *fn, int64_t round,
                        int waited, uint64_t rounds, int status);
void pc_tl_round_start(pcoll_t *ctx, uint64_t obj, uint64_t round, int root, int sync);
void pc_tl_round(pcoll_t *ctx, uint64_t obj, const char *kind, uint64_t round, int root, int64_t active,
                 int64_t contributions, int sync, int standin, const int *group, int n);
/* A round that went on without silent ranks (n > 0), or a catch-up here:
 * the rounds first..round kept for this rank while it was silent. */
void pc_tl_left_out(pcoll_t *ctx, uint64_t obj, uint64_t round, uint64_t first, int catch_up, const int *ranks,
                    int n);
void pc_tl_preduce(pcoll_t *ctx, uint64_t t0, uint64_t obj, const char *policy, uint64_t iteration,
                   const pcoll_preduce_info_t *info, int status);
void pc_tl_fusion_plan(pcoll_t *ctx, uint64_t obj, const pcoll_fusion_plan_t *plan);
void pc_tl_fusion_ready(pcoll_t *ctx, uint64_t obj, uint64_t step, int layer);
void pc_tl_fusion_bucket(pcoll_t *ctx, uint64_t t0, uint64_t t1, uint64_t obj, uint64_t step, int bucket,
                         size_t bytes);
void pc_tl_fusion_wait(pcoll_t *ctx, uint64_t t0, uint64_t obj, uint64_t step);
void pc_tl_stall(pcoll_t *ctx, const char *fn, int timeout, const int *ranks, int n, const char *what);

#endif
