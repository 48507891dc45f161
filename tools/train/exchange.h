/* The exchange of a training step, behind one interface so that the training
 * loop does not know which algorithm runs.  Gradient exchanges:
 *   mpi        MPI_Allreduce of the gradients every step (the baseline)
 *   sync       pcoll_allreduce every step
 *   solo, majority, quorum:Q
 *              eager-SGD: a pcoll partial allreduce in ACCUMULATE mode
 *              (exchange_partial.c)
 * return in `update` the mean gradient to apply: the delivered sum divided
 * by P.  A partial call may deliver the sum of several rounds, or of none
 * (info.rounds == 0: update is zero and nothing should be applied).
 * A model exchange (exchange_averages_models):
 *   wagma, wagma:S
 *              WAGMA-SGD: the step's input is the model after a local SGD
 *              step, `update` receives the new model: its group's average
 *              by the library's rule (a PCOLL_AVERAGE object).
 *   preduce:SPEC
 *              Partial Reduce / Ripples: a local SGD step, then the model
 *              is averaged with a group of ready ranks that a controller
 *              forms (pcoll_preduce; SPEC as pcoll_preduce_config_parse:
 *              fifo:3:dyn, ripples:random:3, ripples:smart, ripples:static
 *              ...; exchange_preduce.c).
 * With a fusion plan (--fusion, mpi and sync only: exchange_fusion.c) the
 * gradient is reduced in buckets during backprop: the training loop marks
 * each layer's gradient ready (exchange_layer_ready) as backprop completes
 * it, and the step waits for the buckets still in flight. */
#ifndef PCOLL_TRAIN_EXCHANGE_H
#define PCOLL_TRAIN_EXCHANGE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "pcoll.h"

typedef struct exchange_info {
    uint64_t rounds;        /* rounds whose results were delivered (sync: 1) */
    int own_included;       /* this call's gradient is in the delivered sum */
    int active;             /* ranks active in the last round (sync: P) */
    uint64_t contributions; /* contributions summed in the delivered rounds */
    uint64_t left_out_rounds; /* partial: delivered rounds that went on without
                               a silent rank (PCOLL_EXCLUDE_MS) */
    uint64_t caught_up;     /* partial: delivered rounds kept for this rank
                               while it was silent */
    uint64_t iteration;     /* preduce: the steps this rank stands at after the
                               exchange, its group's largest iteration (more
                               than its own if it averaged with ranks ahead
                               of it); 0 for the others */
} exchange_info_t;

typedef struct exchange_config {
    const char *algo;  /* mpi, sync, solo, majority, quorum:Q, wagma[:S],
                          preduce:SPEC */
    size_t count;      /* gradient length (floats) */
    int sync_every;    /* partial: every tau-th round synchronous (0 = never) */
    uint64_t seed;     /* partial: majority's initiator sequence */
    MPI_Comm comm;     /* mpi: the communicator */
    pcoll_t *ctx;      /* sync and partial: the pcoll context */
    /* --fusion: the plan, and the gradient buffer with each layer's place
       in it (elements); NULL: no buckets */
    const pcoll_fusion_plan_t *fusion_plan;
    float *grad;
    const size_t *layer_offset, *layer_count;
} exchange_config_t;

typedef struct exchange exchange_t;

/* What a dynamic-group exchange (preduce:) saw; zeros for the others. */
typedef struct exchange_stats {
    uint64_t groups_joined; /* this rank's groups */
    double wait_s;          /* this rank: from ready to its groups' starts */
    uint64_t ctl_groups;    /* the controller's rank: groups it formed */
    double ctl_busy_s;      /* ... time in its decisions */
    double ctl_open_s;      /* ... since the object was created */
} exchange_stats_t;

/* Collective.  -1 with a message for an unknown algorithm or a failure. */
int exchange_create(const exchange_config_t *cfg, exchange_t **out);

/* One step: grad in, update = (delivered sum) / P out (a model exchange:
 * the locally updated model in, the new model out).  Collective for mpi
 * and sync; for partial modes it follows pcoll_partial_allreduce. */
int exchange_step(exchange_t *ex, const float *grad, float *update, exchange_info_t *info);

/* End of training: partial modes run pcoll_partial_flush (a synchronous round
 * taking every pending gradient) and return its delivered sum / P like a step
 * (apply it if info.rounds > 0); mpi and sync deliver nothing (rounds = 0).
 * A model exchange averages every rank's model: update = the mean, with
 * `model` (this rank's current model) as the fallback.  Collective. */
int exchange_finish(exchange_t *ex, const float *model, float *update, exchange_info_t *info);

/* 1 if the exchange averages models (the training loop steps locally first
 * and takes `update` as the new model), 0 if it averages gradients. */
int exchange_averages_models(const exchange_t *ex);

/* The statistics so far (after exchange_finish: to this rank's last step;
 * the controller goes on forming groups for slower ranks after that). */
const exchange_stats_t *exchange_get_stats(const exchange_t *ex);

/* Collective; frees the partial object.  Sets *ex to NULL. */
int exchange_free(exchange_t **ex);
/* After pcoll_shrink replaced its context: the exchange is dropped without
 * a collective step (its pcoll object stays with the old context, whose
 * memory is kept until the process ends).  Sets *ex to NULL. */
void exchange_abandon(exchange_t **ex);

/* Whether the algorithm needs a pcoll context (sync and partial modes). */
int exchange_needs_pcoll(const char *algo);

/* 1 if the exchange wants each layer's gradient marked ready during
 * backprop (a fusion plan). */
int exchange_wants_layers(const exchange_t *ex);
/* Layer `layer` (forward order) of the step's gradient is complete. */
int exchange_layer_ready(exchange_t *ex, int layer);

/* ---- implementation interface (exchange.c and exchange_partial.c) ---- */
typedef struct exchange_ops {
    int (*step)(exchange_t *ex, const float *grad, float *update, exchange_info_t *info);
    int (*finish)(exchange_t *ex, const float *model, float *update, exchange_info_t *info);
    int (*destroy)(exchange_t *ex);
    int (*layer_ready)(exchange_t *ex, int layer); /* NULL: no buckets */
} exchange_ops_t;

struct exchange {
    const exchange_ops_t *ops;
    exchange_config_t cfg;
    int nranks;
    float scale;  /* 1 / P */
    int models;   /* a model exchange */
    void *impl;   /* the algorithm's state */
    exchange_stats_t stats;
};

/* exchange.c, for every algorithm whose step ends in a sum over all ranks:
 * update = sum / P (sum may be update) and a round with every rank fresh. */
void exchange_synchronous_done(exchange_t *ex, const float *sum, float *update, exchange_info_t *info);

/* exchange.c: the finish of an exchange whose steps leave nothing pending
 * (rounds = 0, update zeroed). */
int exchange_nothing_pending(exchange_t *ex, const float *model, float *update, exchange_info_t *info);

/* exchange_partial.c: set up ex for a partial algorithm (ex->cfg, nranks and
 * scale filled in); 1 if cfg->algo is not a partial spec, -1 on error. */
int exchange_partial_setup(exchange_t *ex);

/* exchange_preduce.c: the same for preduce:SPEC. */
int exchange_preduce_setup(exchange_t *ex);

/* exchange_fusion.c: set up ex for a fusion plan (mpi or sync); -1 on error. */
int exchange_fusion_setup(exchange_t *ex);

/* The cost model of the exchange's allreduce, measured on this job (algo
 * mpi: MPI_Allreduce; else pcoll_calibrate) at sizes up to max_bytes.
 * Collective. */
int exchange_calibrate(const char *algo, MPI_Comm comm, pcoll_t *ctx, size_t max_bytes, pcoll_cost_model_t *model);

#endif
