/* The data-parallel training run of pcoll-train: options, per-epoch records
 * and the result, and train_run(), which main.c and the tests call. */
#ifndef PCOLL_TRAIN_TRAIN_H
#define PCOLL_TRAIN_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "exchange.h"
#include "pcoll.h"

typedef enum train_task { TASK_FMNIST = 0, TASK_HYPERPLANE = 1 } train_task_t;

typedef enum lr_schedule {
    LR_DEFAULT = -1, /* the task's default */
    LR_CONSTANT = 0,
    LR_COSINE = 1 /* lr * (1 + cos(pi * step / steps)) / 2 over the planned steps */
} lr_schedule_t;

/* Values left at their "unset" marker (NAN, 0, NULL) take the task's default
 * in train_opts_resolve(); see options.c for the defaults and why. */
typedef struct train_opts {
    train_task_t task;
    const char *algo;          /* mpi, sync, solo, majority, quorum:Q, wagma[:S], preduce:SPEC */
    int sync_every;            /* partial modes: tau */
    const char *layers;        /* fmnist: "784,512,256,128,10" */
    const char *data_dir;      /* fmnist */
    size_t train_limit;        /* fmnist: use the first N training images (0 = all) */
    size_t dim;                /* hyperplane */
    size_t train_points;       /* hyperplane */
    size_t val_points;         /* hyperplane */
    double noise;              /* hyperplane: noise standard deviation */
    double lr;                 /* NAN = task default */
    lr_schedule_t lr_schedule;
    double momentum;           /* NAN = task default */
    size_t batch;              /* per rank; 0 = task default */
    long epochs;               /* 0 = task default */
    long max_steps;            /* stop after this many steps (0 = no limit) */
    uint64_t seed;
    long model_sync_epochs;    /* average the models every N epochs (0 = never) */
    const char *imbalance;     /* none, random:K:MS, skew:MIN:MAX, slow:R[,R...]:F[:MS], dist:MEAN:SD */
    long eval_every;           /* snapshot (and evaluate) every N epochs */
    double target;             /* accuracy (fmnist) or MSE (hyperplane); NAN = none */
    const char *csv_path;      /* NULL = none */
    const char *json_path;     /* NULL = none */
    const char *timeline;      /* --timeline PREFIX: record one (NULL = none) */
    const char *gemm;          /* kernel: auto, avx512, avx2, generic */
    const char *fusion;        /* mpi, sync: a merge plan for the layers' gradients
                                  (optimal, mgwfbp, wfbp, single, fixed:BYTES); NULL: none */
    const char *fusion_model;  /* "A,B" for the plan; NULL: calibrated on the job */
    int quiet;                 /* no table on stdout */
    int on_failure_shrink;     /* --on-failure shrink: go on without a dead rank */
    double failure_timeout;    /* its PCOLL_TIMEOUT_S when none is set (seconds) */
    int inject;                /* --inject: INJECT_NONE, _KILL, _STOP */
    int inject_ranks[16], ninject_ranks; /* the world ranks that fail (kill: one) */
    char inject_ranks_text[64]; /* ... as listed */
    long inject_step;          /* before its step STEP */
    double inject_seconds;     /* stop: for this long */
    int inject_outside;        /* stop: sent from outside, at a moment of step STEP
                                  that the process does not choose (freeze) */
    const char *checkpoint_dir; /* --checkpoint DIR: write DIR/checkpoint (NULL = none) */
    long checkpoint_every;     /* ... every N steps (0 = at every epoch's end) */
    const char *resume_dir;    /* --resume DIR: start from DIR/checkpoint (NULL = none) */
} train_opts_t;

enum { INJECT_NONE, INJECT_KILL, INJECT_STOP };

void train_opts_default(train_opts_t *o);
/* Fills the task defaults into unset fields. */
void train_opts_resolve(train_opts_t *o);
const char *train_task_name(train_task_t t);
const char *lr_schedule_name(lr_schedule_t s);

/* One epoch as seen by rank 0 (times) and all ranks (loss). */
typedef struct epoch_record {
    long epoch;
    double elapsed_s;       /* rank 0's clock at the epoch's end (after the flush for the last) */
    uint64_t steps;         /* steps so far (per rank) */
    uint64_t epoch_steps;
    double steps_per_s;     /* this epoch's steps / its duration at rank 0 */
    double train_loss;      /* mean minibatch loss of the epoch, over all ranks */
    int evaluated;          /* a snapshot was taken and evaluated */
    double test_accuracy;   /* fmnist (NAN otherwise) */
    double test_loss;       /* fmnist: test cross-entropy; hyperplane: validation MSE */
    double val_mse;         /* hyperplane (NAN otherwise) */
    uint64_t rounds;        /* rank 0: rounds delivered this epoch */
    uint64_t empty_steps;   /* rank 0: steps that delivered nothing */
    double mean_active;     /* rank 0: mean active ranks in the delivered rounds */
    double compute_ms;      /* rank 0: mean per step */
    double sleep_ms;        /* rank 0: mean injected delay per step */
    double exchange_ms;     /* rank 0: mean time in the exchange per step */
} epoch_record_t;

typedef struct train_result {
    /* the resolved configuration */
    train_opts_t opts;
    int ranks;
    int ranks_at_end;        /* fewer after --on-failure shrink */
    int shrinks;             /* times the run went on without dead ranks */
    uint64_t shrink_step;    /* the step of the first (rank 0's count) */
    double recovery_s;       /* rank 0: time in pcoll_shrink and the rebuild */
    /* --inject stop: the others' steps per second (the slowest of them)
       while the rank was stopped, and as long before it; how long after
       SIGCONT its next step ended */
    double stop_s, others_steps_per_s_during, others_steps_per_s_before, resume_step_s;
    /* --checkpoint: checkpoints written (the final one included) and the
       time spent at them (rank 0); --resume: where the run started */
    int checkpoints;
    double checkpoint_s;
    int resumed;
    uint64_t resumed_step;   /* the checkpoint's step */
    uint64_t resumed_at;     /* the step this run started at (the same with as
                                many ranks; scaled to the epoch's share else) */
    int resumed_ranks;       /* the ranks that wrote the checkpoint */
    pcoll_t *ctx_at_end;     /* after a shrink: the survivors' context (the
                                caller finalizes it, and ends without
                                MPI_Finalize: a dead rank can hold it) */
    char model[256];        /* "784-512-256-128-10" (truncated if longer) */
    size_t nparams;
    char imbalance[512];
    const char *gemm_kernel;
    /* outcome (rank 0; model_max_diff at every rank) */
    epoch_record_t *epochs;
    size_t nepochs;
    uint64_t steps;          /* iterations at the end (every rank: the planned ones) */
    uint64_t steps_executed; /* steps this rank computed: fewer than `steps` when
                                a preduce group moved it ahead */
    double wall_s;
    double steps_per_s;
    double final_loss;       /* training loss of the last epoch */
    double test_accuracy;    /* of the final model (fmnist) */
    double test_loss;
    double val_mse;          /* of the final model (hyperplane) */
    double time_to_target_s; /* NAN if not reached or no target */
    double model_max_diff;   /* max over parameters of max - min over ranks */
    double model_max_diff_before_sync; /* the same before the final flush */
    double gflops;           /* dense-layer GFLOP/s per rank while computing */
    double compute_ms, sleep_ms, exchange_ms; /* per step, mean over ranks and steps */
    uint64_t flush_rounds;   /* rounds the final flush delivered (this rank) */
    /* gradient exchanges, over the ranks: the gradients handed to the
       exchange (this run's, since a resume), and the least and most
       contributions summed in what a rank got delivered (flush included);
       all three equal: nothing lost, nothing counted twice */
    uint64_t contributions_made, contributions_delivered_min, contributions_delivered_max;
    uint64_t left_out_rounds, caught_up; /* partial: see the JSON keys */
    int models_exchanged;    /* a model exchange (wagma, preduce): no such counts */
    uint64_t rounds_delivered; /* rounds this rank received in all (flush included):
                                  the same at every rank unless a round was lost */
    exchange_stats_t exchange_stats; /* preduce: this rank's groups and waits and,
                                        at the controller's rank, its load up to
                                        this rank's last step */
    /* --fusion: the plan (empty name: none) and the cost model it used */
    char fusion[64];
    int fusion_buckets;
    double fusion_predicted_ms; /* a step as planned: the planner's iteration (forward,
                                   backward, exchanges) + the update */
    double fusion_compute_ms;   /* ... of which the forward and backward passes */
    double fusion_update_ms;    /* ... of which the update (mean gradient, SGD step),
                                   timed at the start */
    double fusion_a_us, fusion_b_us;
    int fusion_piecewise;
} train_result_t;

/* Collective over MPI_COMM_WORLD.  ctx may be NULL for --algo mpi.  Returns 0,
 * or -1 at every rank with the same message (tr_error) when the setup fails
 * (bad options, missing data); failures during training abort the job, or
 * with --on-failure shrink go on without the dead ranks (ctx is then
 * replaced: res->ctx_at_end). */
int train_run(const train_opts_t *opts, pcoll_t *ctx, train_result_t *res);
void train_result_free(train_result_t *res);

#endif
