/* The bucketed exchange of merged-gradient plans on the simulated ranks
 * (cmd_fusion.c), which pcoll-sim fusion and train share. */
#ifndef PC_SIM_FUSION_H
#define PC_SIM_FUSION_H

#include "algo/allreduce.h"
#include "sim.h"

/* A plan's buckets on one rank: two schedules per bucket (iteration parity). */
typedef struct sim_fx sim_fx_t;
/* Channels below SIM_FX_CHANNEL_BASE are the calibration's (one per size). */
enum { SIM_FX_CHANNEL_BASE = 64 };
/* The profile CSV (pcoll-bench fusion's --profile) into *prof (forward_us
 * < 0: half the backward time); returns the gradient's bytes. */
size_t sim_fusion_read_profile(const char *cmd, const char *path, double forward_us, pcoll_fusion_profile_t *prof);
void sim_fusion_profile_free(pcoll_fusion_profile_t *prof);
/* Every rank's app actor: times the buckets' allreduce at sizes doubling
 * from 4 bytes to max_bytes (the slowest rank, after a warm-up run) and
 * fits *model with pcoll_cost_model_fit; every rank gets the same model. */
void sim_fusion_calibrate(sim_rank_t *r, size_t max_bytes, pcoll_allreduce_algo_t forced, pcoll_cost_model_t *model);
/* From the app actor: the plan's buckets as schedules of rank r (algorithm
 * by `use` and `forced`, pc_allreduce_choose's arguments), on channels channel_base .. channel_base + 2 nbuckets - 1.
 * serial 0: a bucket starts once its layers are ready and the buckets
 * before it started (the executor: they may run at once); 1: once the one
 * before it completed (the planner's model: one allreduce at a time). */
sim_fx_t *sim_fx_create(sim_rank_t *r, const pcoll_fusion_plan_t *pl, pc_algo_use_t use,
                        pcoll_allreduce_algo_t forced, int serial, int channel_base);
/* From the app actor: one step.  Layer l is ready at simulated time
 * ready_s[l]; layers are marked from the last to the first, each after its
 * time, the buckets start in plan order as the executor's; returns when
 * every bucket is reduced. */
void sim_fx_step(sim_rank_t *r, sim_fx_t *x, const double *ready_s, int parity);
void sim_fx_free(sim_fx_t *x);

#endif
