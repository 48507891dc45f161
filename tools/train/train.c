/* The training run: loads the data shard, builds the model, then per step
 * computes the gradient, sleeps the injected delay, exchanges the gradient
 * and applies what was delivered.  Rank 0 keeps a copy of the parameters at
 * epoch ends; they are evaluated only after training so that measuring
 * accuracy never slows the run being timed. */
#include "train.h"

#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "data.h"
#include "err.h"
#include "exchange.h"
#include "freeze.h"
#include "gemm.h"
#include "imbalance.h"
#include "mlp.h"
#include "prng.h"
#include "sgd.h"
#include "tool.h"

#define TAG_SHUFFLE 0x53485546u
#define EVAL_BATCH 1000

const char *train_task_name(train_task_t t) { return t == TASK_HYPERPLANE ? "hyperplane" : "fmnist"; }

const char *lr_schedule_name(lr_schedule_t s) { return s == LR_COSINE ? "cosine" : "constant"; }

/* The learning rate of a step: a function of the step number only, so every
 * rank uses the same one whatever the exchange delivers. */
static double lr_at(const train_opts_t *o, uint64_t step, uint64_t total)
{
    if (o->lr_schedule != LR_COSINE || total == 0) return o->lr;
    return o->lr * 0.5 * (1.0 + cos(M_PI * (double)step / (double)total));
}

/* Everything a run allocates, so that one cleanup path frees it. */
typedef struct run {
    MPI_Comm comm; /* MPI_COMM_WORLD, or the survivors' after a shrink */
    int rank, nranks;
    int world_rank; /* the rank at the start (--inject names it) */
    train_opts_t o;
    imbalance_t imb;
    dataset_t train, eval;
    size_t *widths;
    size_t nwidths;
    mlp_t *model;
    mlp_work_t *work, *eval_work;
    float *params, *velocity, *grad, *update;
    float *xb, *yb; /* the batch's inputs and regression targets */
    int32_t *lb;    /* the batch's labels */
    size_t *order;  /* shuffled indices into the shard */
    exchange_t *ex;
    pcoll_t *ctx;     /* NULL for the mpi baseline without a timeline */
    int marks;        /* a timeline records: mark the step's phases */
    float *snapshots; /* rank 0: snap_cap x nparams, nsnap taken */
    size_t nsnap, snap_cap;
    long *snap_epoch; /* the epoch index (0-based) of each snapshot */
    double *loss_sum, *loss_cnt; /* per epoch, this rank */
    /* --fusion: each layer's place in the gradient, and the plan */
    size_t *layer_off, *layer_cnt;
    pcoll_fusion_plan_t *plan;
    /* the schedule, the same at every rank */
    long epochs, steps_per_epoch;
    uint64_t total_steps;
    /* where training stands */
    uint64_t step, executed; /* iterations; steps this rank computed */
    double compute_s, sleep_s, exchange_s;
    float *before_sync; /* the model before the final synchronization */
    /* --inject stop: when each executed step ended (CLOCK_MONOTONIC, one
       clock for every process of the machine), and the stop */
    double *step_end;
    uint64_t nstep_end;
    int injected;
    double stopped_at, resumed_at;
    tr_freeze_t freeze; /* --inject freeze */
    /* --on-failure shrink */
    int shrinks;
    uint64_t shrink_step;
    double recovery_s;
    /* --checkpoint */
    int checkpoints;
    double checkpoint_s;
    /* gradient exchanges: this rank's gradients handed to the exchange, and
       the contributions summed in what it delivered here */
    uint64_t contributed, delivered_contributions;
    uint64_t left_out_rounds, caught_up; /* delivered here (exchange_info_t) */
} run_t;

/* Every rank learns whether the setup succeeded everywhere; if not, every rank
 * gets the message of the lowest failing rank and returns -1.  Collective. */
static int agree(const run_t *r, int ok)
{
    int mine = ok ? r->nranks : r->rank, first = r->nranks;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, r->comm) != MPI_SUCCESS) {
        fprintf(stderr, "pcoll-train: MPI_Allreduce failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (first == r->nranks) return 0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tr_error());
    if (MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, r->comm) != MPI_SUCCESS) {
        fprintf(stderr, "pcoll-train: MPI_Bcast failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (first == 0) tr_fail("%s", msg);
    else tr_fail("rank %d: %s", first, msg);
    return -1;
}

/* A failure in the middle of training: other ranks may be inside a
 * collective, so the only clean way out is to end the job. */
static void fatal(int rank)
{
    fprintf(stderr, "pcoll-train: rank %d: %s\n", rank, tr_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void check_mpi(int rc, const char *what, int rank)
{
    if (rc != MPI_SUCCESS) {
        tr_fail("%s failed (MPI error %d)", what, rc);
        fatal(rank);
    }
}

static void run_free(run_t *r)
{
    dataset_free(&r->train);
    dataset_free(&r->eval);
    free(r->step_end);
    free(r->widths);
    mlp_work_free(&r->work);
    mlp_work_free(&r->eval_work);
    mlp_free(&r->model);
    free(r->params);
    free(r->velocity);
    free(r->grad);
    free(r->update);
    free(r->xb);
    free(r->yb);
    free(r->lb);
    free(r->order);
    free(r->snapshots);
    free(r->before_sync);
    free(r->snap_epoch);
    free(r->loss_sum);
    free(r->loss_cnt);
    if (r->ex && exchange_free(&r->ex) != 0) fatal(r->rank);
    free(r->layer_off);
    free(r->layer_cnt);
    pcoll_fusion_plan_free(&r->plan);
}

/* ---- --fusion: the model's profile, a cost model, the plan ---- */

static void gather_batch(run_t *r, size_t b, mlp_batch_t *mb);

/* A phase of the step in the timeline (when one records). */
static void mark(const run_t *r, const char *name, pcoll_mark_phase_t phase)
{
    if (r->marks && pcoll_timeline_mark(r->ctx, name, phase) != PCOLL_SUCCESS) {
        tr_fail("pcoll_timeline_mark: %s", pcoll_last_error());
        fatal(r->rank);
    }
}

/* backprop's hook during training: the forward pass is done (layer -1), or
 * layer `layer`'s gradient is complete */
static void layer_done(void *arg, int layer)
{
    run_t *r = arg;
    if (layer < 0) {
        mark(r, "forward", PCOLL_MARK_END);
        mark(r, "backward", PCOLL_MARK_BEGIN);
    } else if (exchange_wants_layers(r->ex) && exchange_layer_ready(r->ex, layer) != 0) {
        fatal(r->rank);
    }
}

typedef struct hook_times {
    double t[1025]; /* [0]: the forward pass done; [1 + l]: layer l's gradient */
} hook_times_t;

static void record_hook(void *arg, int layer)
{
    ((hook_times_t *)arg)->t[layer + 1] = MPI_Wtime();
}

/* Backward time of each layer and the forward time, from a few passes on the
 * first batch, every rank starting each pass together (as in training).
 * Where ranks share cores, a pass runs in slices: a layer either runs through
 * or waits a whole slice of another rank, so the median of each layer alone
 * misses the waits (their sum was half the median backward pass at 4 ranks
 * on 2 cores).  So the layers' medians give only the shape, averaged over the
 * ranks; the total is the median backward pass of the slowest rank, and the
 * forward time its median forward pass.  Every rank gets the same profile. */
static int measure_profile(run_t *r, double *tb, double *tf)
{
    enum { WARMUP = 2, PASSES = 9 };
    const int L = (int)r->model->nlayers;
    /* samples[i * PASSES + p]: i = 0 the forward pass, 1 + l layer l's
       backward, 1 + L the whole backward pass */
    double *samples = malloc(sizeof(double) * (size_t)(L + 2) * PASSES);
    double *shape = malloc(sizeof(double) * (size_t)L);
    if (!samples || !shape) {
        free(samples);
        free(shape);
        return tr_fail("out of memory");
    }
    mlp_batch_t mb;
    gather_batch(r, 0, &mb);
    hook_times_t h;
    for (int p = -WARMUP; p < PASSES; p++) {
        check_mpi(MPI_Barrier(r->comm), "MPI_Barrier", r->rank);
        double t0 = MPI_Wtime();
        (void)mlp_loss_grad_hooked(r->model, r->params, r->work, &mb, r->grad, record_hook, &h);
        if (p < 0) continue;
        samples[p] = h.t[0] - t0;
        for (int l = L - 1; l >= 0; l--)
            samples[(size_t)(l + 1) * PASSES + (size_t)p] = h.t[l + 1] - (l == L - 1 ? h.t[0] : h.t[l + 2]);
        samples[(size_t)(L + 1) * PASSES + (size_t)p] = h.t[1] - h.t[0];
    }
    double sum = 0;
    for (int l = 0; l < L; l++) sum += shape[l] = tool_median(samples + (size_t)(l + 1) * PASSES, PASSES);
    for (int l = 0; l < L; l++) shape[l] = sum > 0 ? shape[l] / sum / r->nranks : 1.0 / L / r->nranks;
    double total[2] = {tool_median(samples, PASSES) * 1e6,
                       tool_median(samples + (size_t)(L + 1) * PASSES, PASSES) * 1e6};
    /* the shape's sum over the ranks at rank 0, handed to all: the same
       numbers everywhere */
    const int root = r->rank == 0;
    check_mpi(MPI_Reduce(root ? MPI_IN_PLACE : shape, root ? shape : NULL, L, MPI_DOUBLE, MPI_SUM, 0, r->comm),
              "MPI_Reduce", r->rank);
    check_mpi(MPI_Bcast(shape, L, MPI_DOUBLE, 0, r->comm), "MPI_Bcast", r->rank);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, total, 2, MPI_DOUBLE, MPI_MAX, r->comm), "MPI_Allreduce", r->rank);
    *tf = total[0];
    for (int l = 0; l < L; l++) tb[l] = shape[l] * total[1];
    free(samples);
    free(shape);
    return 0;
}

/* The plan of --fusion: the layers' places (layer after layer in the
 * parameters), the profile, the cost model (--fusion-model, or calibrated
 * on this job with the exchange's transport) and the strategy. */
static int plan_fusion(run_t *r, pcoll_t *ctx, train_result_t *res)
{
    const train_opts_t *o = &r->o;
    const int L = (int)r->model->nlayers;
    pcoll_fusion_spec_t spec;
    if (pcoll_fusion_spec_parse(o->fusion, &spec) != PCOLL_SUCCESS) return tr_fail("--fusion: %s", pcoll_last_error());
    r->layer_off = malloc(sizeof(size_t) * (size_t)L);
    r->layer_cnt = malloc(sizeof(size_t) * (size_t)L);
    size_t *bytes = malloc(sizeof(size_t) * (size_t)L);
    double *tb = malloc(sizeof(double) * (size_t)L), tf = 0;
    if (!r->layer_off || !r->layer_cnt || !bytes || !tb) {
        free(bytes);
        free(tb);
        return tr_fail("out of memory");
    }
    for (int l = 0; l < L; l++) {
        r->layer_off[l] = r->model->w_off[l];
        r->layer_cnt[l] = r->model->b_off[l] + r->model->width[l + 1] - r->model->w_off[l];
        bytes[l] = r->layer_cnt[l] * sizeof(float);
    }
    int rc = measure_profile(r, tb, &tf);
    pcoll_cost_model_t model;
    if (rc == 0 && o->fusion_model) {
        if (pcoll_cost_model_parse(o->fusion_model, &model) != PCOLL_SUCCESS)
            rc = tr_fail("--fusion-model: %s", pcoll_last_error());
    } else if (rc == 0) {
        size_t top = 4;
        while (top < r->model->nparams * sizeof(float)) top *= 2;
        rc = exchange_calibrate(o->algo, r->comm, ctx, top, &model);
    }
    pcoll_fusion_profile_t prof = {.nlayers = L, .bytes = bytes, .backward_us = tb, .forward_us = tf};
    if (rc == 0 && pcoll_fusion_plan_create(&prof, &model, &spec, &r->plan) != PCOLL_SUCCESS)
        rc = tr_fail("--fusion: %s", pcoll_last_error());
    /* a step is the plan's iteration (forward, backward, exchanges) and the
     * update after it (the mean gradient, the SGD step), which no plan
     * changes: timed here on this model (lr 0; the momentum cleared after) */
    double update_ms = 0;
    if (rc == 0) {
        enum { PASSES = 5 };
        double t[PASSES];
        const size_t n = r->model->nparams;
        for (int p = 0; p < PASSES; p++) {
            double t0 = MPI_Wtime();
            for (size_t i = 0; i < n; i++) r->update[i] = r->grad[i] * (1.0f / (float)r->nranks);
            sgd_step(r->params, r->velocity, r->update, n, 0.0f, (float)o->momentum);
            t[p] = (MPI_Wtime() - t0) * 1e3;
        }
        memset(r->velocity, 0, n * sizeof *r->velocity);
        update_ms = tool_median(t, PASSES);
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, &update_ms, 1, MPI_DOUBLE, MPI_MAX, r->comm), "MPI_Allreduce",
                  r->rank);
    }
    if (rc == 0) {
        pcoll_fusion_spec_name(&spec, res->fusion, sizeof res->fusion);
        res->fusion_buckets = r->plan->nbuckets;
        res->fusion_update_ms = update_ms;
        res->fusion_predicted_ms = r->plan->iter_us / 1e3 + update_ms;
        res->fusion_compute_ms = r->plan->compute_us / 1e3;
        res->fusion_a_us = model.a_us;
        res->fusion_b_us = model.b_us;
        res->fusion_piecewise = model.piecewise;
    }
    free(bytes);
    free(tb);
    return rc;
}

/* Option values train_run cannot work with (main.c checks them earlier with
 * friendlier messages; the tests call train_run directly). */
static int check_opts(const train_opts_t *o)
{
    if (!o->algo) return tr_fail("--algo: missing");
    if (o->batch < 1) return tr_fail("--batch must be >= 1");
    if (o->epochs < 1) return tr_fail("--epochs must be >= 1");
    if (!(o->lr > 0) || !isfinite(o->lr)) return tr_fail("--lr must be > 0");
    if (!(o->momentum >= 0 && o->momentum < 1)) return tr_fail("--momentum must be in [0, 1)");
    if (o->eval_every < 1) return tr_fail("--eval-every must be >= 1");
    if (o->max_steps < 0 || o->model_sync_epochs < 0 || o->sync_every < 0)
        return tr_fail("--max-steps, --model-sync-epochs and --sync-every must be >= 0");
    if (o->task == TASK_HYPERPLANE && (o->dim < 1 || o->train_points < 1 || o->val_points < 1 || !(o->noise >= 0)))
        return tr_fail("hyperplane: --dim, --train-points and --val-points must be >= 1, --noise >= 0");
    /* a dynamic group may include a rank whose calls ran ahead: a collective
       between epochs would wait for a rank that waits for that group */
    if (strncmp(o->algo, "preduce:", 8) == 0 && (o->model_sync_epochs > 0 || o->sync_every > 0))
        return tr_fail("--algo %s: --model-sync-epochs and --sync-every do not apply (its groups span epochs; "
                       "the models are averaged at the end)", o->algo);
    if (o->fusion && strcmp(o->algo, "mpi") != 0 && strcmp(o->algo, "sync") != 0)
        return tr_fail("--fusion applies to --algo mpi and sync, not %s", o->algo);
    if ((o->checkpoint_dir || o->resume_dir) && strncmp(o->algo, "preduce:", 8) == 0)
        return tr_fail("--checkpoint and --resume apply to every algorithm but preduce:SPEC (its ranks skip steps)");
    if (o->checkpoint_every < 0) return tr_fail("--checkpoint-every must be >= 0");
    return 0;
}

static int load_data(run_t *r)
{
    const train_opts_t *o = &r->o;
    dataset_t *eval = r->rank == 0 ? &r->eval : NULL;
    if (o->task == TASK_FMNIST) return fmnist_load(o->data_dir, o->train_limit, r->rank, r->nranks, &r->train, eval);
    hyperplane_cfg_t hc = {o->dim, o->train_points, o->val_points, o->noise, o->seed};
    return hyperplane_make(&hc, r->rank, r->nranks, &r->train, eval);
}

static int build_model(run_t *r)
{
    const train_opts_t *o = &r->o;
    mlp_loss_t loss = MLP_SOFTMAX_XENT;
    if (o->task == TASK_FMNIST) {
        if (mlp_parse_widths(o->layers, &r->widths, &r->nwidths)) return tr_fail("--layers %s", tr_error());
        if (r->widths[0] != r->train.dim)
            return tr_fail("--layers %s: the input width must be %zu (28x28 pixels)", o->layers, r->train.dim);
        if (r->widths[r->nwidths - 1] != FMNIST_CLASSES)
            return tr_fail("--layers %s: the output width must be %d (classes)", o->layers, FMNIST_CLASSES);
    } else {
        /* the paper's one-layer linear model: dim inputs, one output */
        r->widths = malloc(2 * sizeof *r->widths);
        if (!r->widths) return tr_fail("out of memory");
        r->widths[0] = o->dim;
        r->widths[1] = 1;
        r->nwidths = 2;
        loss = MLP_MSE;
    }
    if (mlp_create(r->widths, r->nwidths, loss, &r->model)) return -1;
    const size_t n = r->model->nparams;
    if (n > (size_t)INT32_MAX) return tr_fail("%zu parameters: more than an MPI count can hold", n);
    r->params = tr_alloc_floats(n, "parameters");
    r->velocity = tr_alloc_floats(n, "momentum");
    r->grad = tr_alloc_floats(n, "gradient");
    r->update = tr_alloc_floats(n, "update");
    if (!r->params || !r->velocity || !r->grad || !r->update) return -1;
    mlp_init_params(r->model, r->params, o->seed);
    memset(r->velocity, 0, n * sizeof *r->velocity);
    if (mlp_work_create(r->model, o->batch, &r->work)) return -1;
    if (r->rank == 0 && mlp_work_create(r->model, EVAL_BATCH, &r->eval_work)) return -1;
    const size_t dim = r->train.dim;
    if (o->batch > SIZE_MAX / dim) return tr_fail("--batch %zu is too large", o->batch);
    r->xb = tr_alloc_floats(o->batch * dim, "batch");
    if (!r->xb) return -1;
    if (o->task == TASK_FMNIST) r->lb = malloc(o->batch * sizeof *r->lb);
    else r->yb = tr_alloc_floats(o->batch, "batch targets");
    r->order = malloc(r->train.n * sizeof *r->order);
    if ((!r->lb && !r->yb) || !r->order) return tr_fail("out of memory for the batch");
    for (size_t i = 0; i < r->train.n; i++) r->order[i] = i; /* the profile's batch, before any epoch */
    return 0;
}

/* Rank 0's snapshot buffers and every rank's per-epoch loss sums. */
static int alloc_records(run_t *r, long epochs)
{
    r->loss_sum = calloc((size_t)epochs, sizeof *r->loss_sum);
    r->loss_cnt = calloc((size_t)epochs, sizeof *r->loss_cnt);
    if (!r->loss_sum || !r->loss_cnt) return tr_fail("out of memory for %ld epoch records", epochs);
    if (r->rank != 0) return 0;
    r->snap_cap = (size_t)(epochs / r->o.eval_every + (epochs % r->o.eval_every ? 1 : 0));
    r->nsnap = 0;
    const size_t n = r->model->nparams;
    if (r->snap_cap > SIZE_MAX / n)
        return tr_fail("%zu snapshots of %zu parameters do not fit in memory (raise --eval-every)", r->snap_cap, n);
    r->snapshots = tr_alloc_floats(r->snap_cap * n, "model snapshots (raise --eval-every to keep fewer)");
    r->snap_epoch = calloc(r->snap_cap, sizeof *r->snap_epoch);
    if (!r->snapshots) return -1;
    if (!r->snap_epoch) return tr_fail("out of memory");
    return 0;
}

/* The epoch's order of the shard: a function of (seed, rank, epoch) only,
 * so that a run resumed in any epoch sees the batches the uninterrupted
 * run would have. */
static void shuffle(run_t *r, long epoch)
{
    for (size_t i = 0; i < r->train.n; i++) r->order[i] = i;
    rng_t g;
    rng_seed(&g, rng_key(r->o.seed, TAG_SHUFFLE, (uint64_t)r->rank, (uint64_t)epoch));
    for (size_t i = r->train.n; i > 1; i--) {
        size_t j = (size_t)rng_below(&g, i);
        size_t t = r->order[i - 1];
        r->order[i - 1] = r->order[j];
        r->order[j] = t;
    }
}

/* Copies the samples of batch `b` of this epoch into xb / lb / yb. */
static void gather_batch(run_t *r, size_t b, mlp_batch_t *mb)
{
    const size_t B = r->o.batch, dim = r->train.dim;
    for (size_t i = 0; i < B; i++) {
        size_t s = r->order[b * B + i];
        memcpy(r->xb + i * dim, r->train.x + s * dim, dim * sizeof *r->xb);
        if (r->lb) r->lb[i] = r->train.labels[s];
        else r->yb[i] = r->train.y[s];
    }
    mb->x = r->xb;
    mb->labels = r->lb;
    mb->y = r->yb;
    mb->n = B;
}

/* Every rank's model := the mean of all ranks' models over r->comm (the
 * paper's periodic model synchronization), and with `momenta` the momentum
 * buffers too (a shrink, a checkpoint).  Collective. */
static void average_models(run_t *r, int momenta)
{
    const size_t n = r->model->nparams;
    const float s = 1.0f / (float)r->nranks;
    float *bufs[2] = {r->params, r->velocity};
    for (int k = 0; k < (momenta ? 2 : 1); k++) {
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, bufs[k], (int)n, MPI_FLOAT, MPI_SUM, r->comm), "model averaging",
                  r->rank);
        for (size_t i = 0; i < n; i++) bufs[k][i] *= s;
    }
}

/* max over parameters of (max over ranks - min over ranks); uses grad and
 * update as scratch.  Collective. */
/* max over parameters of max - min over ranks of x (a model); collective,
 * uses r->grad and r->update as scratch */
static double model_max_diff(run_t *r, const float *x)
{
    const size_t n = r->model->nparams;
    check_mpi(MPI_Allreduce(x, r->grad, (int)n, MPI_FLOAT, MPI_MAX, r->comm), "MPI_Allreduce(MAX)", r->rank);
    check_mpi(MPI_Allreduce(x, r->update, (int)n, MPI_FLOAT, MPI_MIN, r->comm), "MPI_Allreduce(MIN)", r->rank);
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)r->grad[i] - (double)r->update[i];
        if (e > d || isnan(e)) d = e;
    }
    return d;
}

/* per-epoch timing and exchange statistics of this rank */
typedef struct epoch_stats {
    uint64_t steps, rounds, empty, active_sum, delivered;
    double compute_s, sleep_s, exchange_s;
} epoch_stats_t;

/* Counts what an exchange delivered; 0 if nothing. */
static int count_delivery(const exchange_info_t *info, epoch_stats_t *st)
{
    st->rounds += info->rounds;
    if (info->rounds == 0) {
        st->empty++;
        return 0;
    }
    st->delivered++;
    st->active_sum += (uint64_t)info->active;
    return 1;
}

/* What an exchange delivered becomes the model: a gradient exchange's mean
 * gradient is applied by SGD, a model exchange's model replaces ours. */
static void apply_delivery(run_t *r, const exchange_info_t *info, double lr, epoch_stats_t *st)
{
    /* nothing arrived: the update is zero and must not even decay the
       momentum, or a rank that is often late would train differently */
    if (!count_delivery(info, st)) return;
    r->delivered_contributions += info->contributions;
    r->left_out_rounds += info->left_out_rounds;
    r->caught_up += info->caught_up;
    if (exchange_averages_models(r->ex)) { /* the new model: swapped in, not copied */
        float *t = r->params;
        r->params = r->update;
        r->update = t;
    } else
        sgd_step(r->params, r->velocity, r->update, r->model->nparams, (float)lr, (float)r->o.momentum);
}

/* Evaluates rank 0's snapshots and fills the records' evaluation fields. */
static void evaluate_snapshots(run_t *r, train_result_t *res)
{
    mlp_batch_t all = {r->eval.x, r->eval.labels, r->eval.y, r->eval.n};
    for (size_t s = 0; s < r->nsnap; s++) {
        epoch_record_t *e = &res->epochs[r->snap_epoch[s]];
        mlp_eval_t ev;
        mlp_evaluate(r->model, r->snapshots + s * r->model->nparams, r->eval_work, &all, &ev);
        e->evaluated = 1;
        e->test_loss = ev.loss;
        if (r->o.task == TASK_FMNIST) e->test_accuracy = ev.accuracy;
        else e->val_mse = ev.loss;
    }
}

/* The setup: options, data, model, records, plan and exchange; every
 * failure is agreed on (every rank returns -1). */
/* The exchange on r->comm and r->ctx (collective). */
static int create_exchange(run_t *r)
{
    const train_opts_t *o = &r->o;
    exchange_config_t xc = {o->algo, r->model->nparams, o->sync_every, o->seed, r->comm, r->ctx,
                            r->plan, r->grad, r->layer_off, r->layer_cnt};
    return exchange_create(&xc, &r->ex);
}

static int resume_from(run_t *r, train_result_t *res);

static int setup(run_t *r, pcoll_t *ctx, train_result_t *res)
{
    const train_opts_t *o = &r->o;
    r->ctx = ctx;
    int ok = check_opts(o) == 0;
    ok = ok && (!o->gemm || gemm_select_kernel(o->gemm) == 0);
    ok = ok && imbalance_parse(o->imbalance ? o->imbalance : "none", o->seed, &r->imb) == 0;
    ok = ok && imbalance_check(&r->imb, r->nranks) == 0;
    for (int i = 0; ok && i < o->ninject_ranks; i++)
        if (o->inject_ranks[i] >= r->nranks)
            ok = tr_fail("--inject: rank %d is not one of the %d ranks", o->inject_ranks[i], r->nranks) == 0;
    ok = ok && load_data(r) == 0;
    ok = ok && build_model(r) == 0;
    if (agree(r, ok)) return -1;
    /* every rank runs the same number of steps per epoch (collectives must
       match): as many full batches as the smallest shard holds */
    long spe = (long)(r->train.n / o->batch), min_spe = 0;
    check_mpi(MPI_Allreduce(&spe, &min_spe, 1, MPI_LONG, MPI_MIN, r->comm), "MPI_Allreduce", r->rank);
    if (min_spe < 1) {
        tr_fail("--batch %zu is larger than the smallest shard of training data (%zu samples at rank %d)", o->batch,
                r->train.n, r->rank);
        ok = 0;
    }
    long epochs = o->epochs;
    if (ok && o->max_steps > 0 && (o->max_steps + min_spe - 1) / min_spe < epochs)
        epochs = (o->max_steps + min_spe - 1) / min_spe;
    r->epochs = epochs;
    r->steps_per_epoch = min_spe;
    r->total_steps = (uint64_t)epochs * (uint64_t)min_spe;
    if (o->max_steps > 0 && (uint64_t)o->max_steps < r->total_steps) r->total_steps = (uint64_t)o->max_steps;
    ok = ok && alloc_records(r, epochs) == 0;
    if (agree(r, ok)) return -1;
    if (o->resume_dir && resume_from(r, res) != 0) return -1;
    if (o->checkpoint_dir && agree(r, r->rank != 0 || ckpt_prepare(o->checkpoint_dir) == 0)) return -1;
    if (o->fusion && agree(r, plan_fusion(r, ctx, res) == 0)) return -1;
    if (o->on_failure_shrink) {
        /* a dead rank is found by the exchange's timeout */
        double warn, timeout;
        if (!ctx) ok = tr_fail("--on-failure shrink needs a pcoll algorithm (not --algo mpi)") == 0;
        else if (pcoll_get_timeouts(ctx, &warn, &timeout) != PCOLL_SUCCESS ||
                 (timeout <= 0 && pcoll_set_timeouts(ctx, warn, o->failure_timeout) != PCOLL_SUCCESS))
            ok = tr_fail("pcoll_set_timeouts: %s", pcoll_last_error()) == 0;
        if (agree(r, ok)) return -1;
    }
    if (agree(r, create_exchange(r) == 0)) return -1;
    return 0;
}

/* A failed exchange step with --on-failure shrink: the live ranks agree on
 * who is left (pcoll_shrink) and go on with them: the models and momenta
 * averaged, the training set sharded among them, a new exchange.  The step
 * schedule stays (each epoch then covers a smaller part of the set); rank 0
 * must be alive (it keeps the evaluation data and the records).  Without
 * the flag, or if this fails: the job ends. */
static void recover(run_t *r)
{
    if (!r->o.on_failure_shrink) fatal(r->rank);
    fprintf(stderr, "pcoll-train: rank %d: %s; going on without the ranks that are gone (--on-failure shrink)\n",
            r->world_rank, tr_error());
    double t0 = MPI_Wtime();
    MPI_Comm comm;
    pcoll_t *ctx;
    int rc = pcoll_shrink(r->ctx, &comm, &ctx);
    if (rc == PCOLL_ERR_STATE) {
        /* cut off from the majority (it came too late): the others go on,
           so this rank leaves alone, without MPI_Abort's end of the job */
        fprintf(stderr, "pcoll-train: rank %d: pcoll_shrink: %s\n", r->world_rank, pcoll_last_error());
        fflush(NULL);
        _exit(3);
    }
    if (rc != PCOLL_SUCCESS) {
        tr_fail("pcoll_shrink: %s", pcoll_last_error());
        fatal(r->rank);
    }
    exchange_abandon(&r->ex);
    /* the replaced context's progress thread stops now (it would go on
       polling for runs with the dead); the caller's finalize of it later
       does nothing */
    pcoll_t *old = r->ctx;
    pcoll_finalize(&old);
    /* the old communicator (after an earlier shrink) is left: freeing it
       could need the dead */
    r->comm = comm;
    r->ctx = ctx;
    check_mpi(MPI_Comm_rank(comm, &r->rank), "MPI_Comm_rank", r->rank);
    check_mpi(MPI_Comm_size(comm, &r->nranks), "MPI_Comm_size", r->rank);
    int first = r->world_rank;
    check_mpi(MPI_Bcast(&first, 1, MPI_INT, 0, comm), "MPI_Bcast", r->rank);
    if (first != 0) {
        tr_fail("rank 0 is gone, and with it the evaluation data and the epoch records: --on-failure shrink "
                "goes on only while rank 0 lives");
        fatal(r->rank);
    }
    average_models(r, 1);
    /* the dead ranks' samples are shared out again */
    dataset_free(&r->train);
    const train_opts_t *o = &r->o;
    if (o->task == TASK_FMNIST) {
        rc = fmnist_load(o->data_dir, o->train_limit, r->rank, r->nranks, &r->train, NULL);
    } else {
        hyperplane_cfg_t hc = {o->dim, o->train_points, o->val_points, o->noise, o->seed};
        rc = hyperplane_make(&hc, r->rank, r->nranks, &r->train, NULL);
    }
    size_t *order = rc == 0 ? realloc(r->order, r->train.n * sizeof *r->order) : NULL;
    if (!order) {
        if (rc == 0) tr_fail("out of memory for the new shard");
        fatal(r->rank);
    }
    r->order = order;
    shuffle(r, (long)(r->step / (uint64_t)r->steps_per_epoch));
    if (create_exchange(r) != 0) fatal(r->rank);
    if (r->shrinks++ == 0) r->shrink_step = r->step;
    double t = MPI_Wtime() - t0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce", r->rank);
    r->recovery_s += t;
    if (r->rank == 0)
        fprintf(stderr, "pcoll-train: going on with %d ranks after %.2f s (pcoll_shrink and the rebuild)\n",
                r->nranks, t);
}

/* ---- --checkpoint and --resume ---- */

/* The header of this run's state at r->step. */
static void ckpt_header_of(const run_t *r, ckpt_header_t *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->task, sizeof h->task, "%s", train_task_name(r->o.task));
    mlp_describe(r->model, h->model, sizeof h->model);
    h->nparams = r->model->nparams;
    snprintf(h->algo, sizeof h->algo, "%s", r->o.algo);
    h->seed = r->o.seed;
    h->ranks = r->nranks;
    h->step = r->step;
    h->epoch = (long)(r->step / (uint64_t)r->steps_per_epoch);
    h->epoch_step = (long)(r->step % (uint64_t)r->steps_per_epoch);
    h->steps_per_epoch = r->steps_per_epoch;
    h->total_steps = r->total_steps;
}

/* Where a run with this many steps per epoch continues a checkpoint: the
 * same step with as many; otherwise the same epoch, at the same share of it
 * (rounded down). */
static uint64_t resume_step_of(const ckpt_header_t *h, long spe)
{
    if (h->steps_per_epoch == spe) return h->step;
    return (uint64_t)h->epoch * (uint64_t)spe + (uint64_t)h->epoch_step * (uint64_t)spe / (uint64_t)h->steps_per_epoch;
}

/* --resume (collective, in the setup): rank 0 reads DIR/checkpoint, every
 * rank gets its model, momentum and step.  -1 at every rank with the same
 * message if it is missing or is not for this model. */
static int resume_from(run_t *r, train_result_t *res)
{
    const char *dir = r->o.resume_dir;
    ckpt_header_t h, mine;
    ckpt_header_of(r, &mine);
    int ok = 1;
    if (r->rank == 0) {
        ok = ckpt_read_header(dir, &h) == 0;
        if (ok && (strcmp(h.task, mine.task) != 0 || strcmp(h.model, mine.model) != 0 || h.nparams != mine.nparams))
            ok = tr_fail("--resume %s: the checkpoint is of task %s, model %s (%llu parameters); this run trains "
                         "task %s, model %s (%llu)", dir, h.task, h.model, (unsigned long long)h.nparams, mine.task,
                         mine.model, (unsigned long long)mine.nparams) == 0;
        ok = ok && ckpt_read_state(dir, &h, r->params, r->velocity) == 0;
    }
    if (agree(r, ok)) return -1;
    check_mpi(MPI_Bcast(&h, (int)sizeof h, MPI_BYTE, 0, r->comm), "MPI_Bcast", r->rank);
    const int n = (int)r->model->nparams;
    check_mpi(MPI_Bcast(r->params, n, MPI_FLOAT, 0, r->comm), "MPI_Bcast", r->rank);
    check_mpi(MPI_Bcast(r->velocity, n, MPI_FLOAT, 0, r->comm), "MPI_Bcast", r->rank);
    const uint64_t at = resume_step_of(&h, r->steps_per_epoch);
    if (at >= r->total_steps) {
        tr_fail("--resume %s: the checkpoint stands at step %llu (epoch %ld); this run's %llu steps end there "
                "(raise --epochs or --max-steps)", dir, (unsigned long long)h.step, h.epoch + 1,
                (unsigned long long)r->total_steps);
        return -1; /* the same at every rank: no need to agree */
    }
    r->step = at;
    res->resumed = 1;
    res->resumed_step = h.step;
    res->resumed_at = at;
    res->resumed_ranks = h.ranks;
    if (r->rank == 0)
        fprintf(stderr, "pcoll-train: resuming from %s/checkpoint (step %llu of %d ranks) at step %llu of %llu\n", dir,
                (unsigned long long)h.step, h.ranks, (unsigned long long)at, (unsigned long long)r->total_steps);
    return 0;
}

/* mpi and sync apply the same mean gradient at every rank: their models
 * are equal without averaging (which could change their last bits) */
static int models_equal_by_construction(const train_opts_t *o)
{
    return strcmp(o->algo, "mpi") == 0 || strcmp(o->algo, "sync") == 0;
}

/* A partial exchange flushed (collective, at a step every rank reaches):
 * its pending gradients applied (wagma: the models averaged).  A
 * collective outside pcoll may follow it, and only it: before, a rank's
 * last call may wait for a round (a majority initiator's, a quorum's, a
 * synchronous one) that needs the call of a rank already in that
 * collective. */
static void flush_exchange(run_t *r, epoch_stats_t *st)
{
    if (!r->ex) return;
    exchange_info_t info;
    if (exchange_finish(r->ex, r->params, r->update, &info)) {
        recover(r);
        if (exchange_finish(r->ex, r->params, r->update, &info)) fatal(r->rank);
    }
    if (info.rounds > 0) apply_delivery(r, &info, lr_at(&r->o, r->step, r->total_steps), st);
}

/* A checkpoint (collective, at a step every rank reaches): a partial
 * exchange is flushed (its pending gradients applied; wagma: the models
 * averaged), then the models and momenta averaged, and rank 0 writes them
 * with the position.  After training (r->ex NULL) only the averaging and
 * the write.  A failed write ends the job: training on without the
 * checkpoints asked for would lose work silently. */
static void checkpoint(run_t *r, epoch_stats_t *st)
{
    const double t0 = MPI_Wtime();
    flush_exchange(r, st);
    if (!models_equal_by_construction(&r->o)) average_models(r, 1);
    int ok = 1;
    if (r->rank == 0) {
        ckpt_header_t h;
        ckpt_header_of(r, &h);
        ok = ckpt_write(r->o.checkpoint_dir, &h, r->params, r->velocity) == 0;
    }
    check_mpi(MPI_Bcast(&ok, 1, MPI_INT, 0, r->comm), "MPI_Bcast", r->rank);
    if (!ok) {
        if (r->rank != 0) tr_fail("rank 0 could not write the checkpoint");
        fatal(r->rank);
    }
    r->checkpoints++;
    r->checkpoint_s += MPI_Wtime() - t0;
}

/* Is a checkpoint due now (r->step steps done, not the last)?  The same
 * answer at every rank.  epoch_end: the step closes an epoch. */
static int checkpoint_due(const run_t *r, int epoch_end)
{
    if (!r->o.checkpoint_dir || r->step >= r->total_steps) return 0;
    if (r->o.checkpoint_every > 0) return r->step % (uint64_t)r->o.checkpoint_every == 0;
    return epoch_end;
}

/* --inject: SIGKILL of this process, or SIGSTOP for inject_seconds (a
 * helper process sends the SIGCONT: a stopped process cannot) */
static void inject_failure(run_t *r)
{
    const train_opts_t *o = &r->o;
    r->injected = 1;
    fflush(NULL);
    if (o->inject == INJECT_KILL) {
        fprintf(stderr, "pcoll-train: rank %d: --inject: killing this process at step %ld\n", r->world_rank,
                o->inject_step);
        fflush(NULL);
        raise(SIGKILL);
    }
    if (o->inject_outside) { /* stopped from outside, a moment of the next 50 ms: this step goes on */
        double delay = 0.001 + 0.049 * (double)((unsigned)(tr_mono_now() * 1e6) % 1000u) / 1000.0;
        if (tr_freeze_start(&r->freeze, delay, o->inject_seconds) != 0) {
            tr_fail("--inject freeze: cannot start the process that would stop this one");
            fatal(r->rank);
        }
        return;
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "sleep %.3f; kill -CONT %ld", o->inject_seconds, (long)getpid());
    char *argv[] = {"sh", "-c", cmd, NULL};
    pid_t helper;
    if (posix_spawnp(&helper, "sh", NULL, NULL, argv, environ) != 0) {
        tr_fail("--inject stop: cannot start the process that would resume this one");
        fatal(r->rank);
    }
    r->stopped_at = tr_mono_now();
    raise(SIGSTOP);
    r->resumed_at = tr_mono_now();
    waitpid(helper, NULL, 0);
}

/* whether --inject names this world rank */
static int injects_here(const train_opts_t *o, int world_rank)
{
    for (int i = 0; i < o->ninject_ranks; i++)
        if (o->inject_ranks[i] == world_rank) return 1;
    return 0;
}

/* --inject stop, after training (collective): the others' steps per second
 * while the rank was stopped and as long before it (the slowest rank's),
 * and how long after SIGCONT the stopped rank's next step ended (each
 * stopped rank from its own SIGCONT, the longest: ranks stopped at the same
 * step may reach it far apart, and the first back may have ended every
 * step before the last is back). */
static void stop_report(run_t *r, train_result_t *res)
{
    if (r->injected && r->o.inject_outside) { /* when the helper's stop came */
        tr_freeze_end(&r->freeze);
        r->stopped_at = r->freeze.stopped_at;
        r->resumed_at = r->freeze.resumed_at;
        if (r->stopped_at == 0) {
            tr_fail("--inject freeze: the stop was not seen (the helper failed?)");
            fatal(r->rank);
        }
    }
    double t[2] = {r->stopped_at, r->resumed_at};
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, r->comm), "MPI_Allreduce", r->rank);
    const double len = r->o.inject_seconds;
    uint64_t during = 0, before = 0;
    double resume = 1e300;
    for (uint64_t i = 0; i < r->nstep_end; i++) {
        double e = r->step_end[i];
        if (e >= t[0] && e < t[0] + len) during++;
        if (e >= t[0] - len && e < t[0]) before++;
        if (r->injected && e >= r->resumed_at && e - r->resumed_at < resume) resume = e - r->resumed_at;
    }
    /* the others' slowest (the stopped rank counts as infinitely fast) */
    double mine[3] = {r->injected ? 1e300 : (double)during / len, r->injected ? 1e300 : (double)before / len,
                      r->injected ? resume : 0};
    double all[3];
    check_mpi(MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MIN, r->comm), "MPI_Allreduce", r->rank);
    check_mpi(MPI_Allreduce(mine + 2, all + 2, 1, MPI_DOUBLE, MPI_MAX, r->comm), "MPI_Allreduce", r->rank);
    res->stop_s = t[1] - t[0];
    res->others_steps_per_s_during = all[0];
    res->others_steps_per_s_before = all[1];
    res->resume_step_s = all[2] < 1e299 ? all[2] : NAN;
}

/* One step: a batch's gradient, the imbalance's sleep, the exchange. */
static void train_step(run_t *r, long e, long *b, uint64_t epoch_first, epoch_stats_t *st)
{
    const train_opts_t *o = &r->o;
    if (o->inject != INJECT_NONE && injects_here(o, r->world_rank) && (long)r->step == o->inject_step &&
        !r->injected)
        inject_failure(r);
    r->marks = pcoll_timeline_recording(r->ctx);
    mark(r, "step", PCOLL_MARK_BEGIN);
    double ta = MPI_Wtime();
    mlp_batch_t mb;
    gather_batch(r, (size_t)*b, &mb);
    /* with buckets, each layer's gradient is handed over as backprop
       completes it (its allreduce may start at once) */
    mark(r, "forward", PCOLL_MARK_BEGIN);
    double loss = exchange_wants_layers(r->ex) || r->marks
                      ? mlp_loss_grad_hooked(r->model, r->params, r->work, &mb, r->grad, layer_done, r)
                      : mlp_loss_grad(r->model, r->params, r->work, &mb, r->grad);
    mark(r, "backward", PCOLL_MARK_END);
    const double lr = lr_at(o, r->step, r->total_steps);
    /* a model exchange averages the model after a local step */
    if (exchange_averages_models(r->ex))
        sgd_step(r->params, r->velocity, r->grad, r->model->nparams, (float)lr, (float)o->momentum);
    double tb = MPI_Wtime();
    double delay = imbalance_delay_ms(&r->imb, r->rank, r->nranks, r->step, (tb - ta) * 1e3);
    if (delay > 0) {
        mark(r, "delay", PCOLL_MARK_BEGIN);
        sleep_ms(delay);
        mark(r, "delay", PCOLL_MARK_END);
    }
    double tc = MPI_Wtime();
    exchange_info_t info;
    const float *in = exchange_averages_models(r->ex) ? r->params : r->grad;
    mark(r, "exchange", PCOLL_MARK_BEGIN);
    r->contributed++;
    if (exchange_step(r->ex, in, r->update, &info)) {
        recover(r); /* this step's exchange is lost: nothing is applied */
        memset(&info, 0, sizeof info);
    }
    mark(r, "exchange", PCOLL_MARK_END);
    double td = MPI_Wtime();
    apply_delivery(r, &info, lr, st);
    mark(r, "step", PCOLL_MARK_END);
    r->loss_sum[e] += loss;
    r->loss_cnt[e] += 1;
    st->compute_s += tb - ta;
    st->sleep_s += tc - tb;
    st->exchange_s += td - tc;
    st->steps++;
    if (r->step_end && r->nstep_end < r->total_steps) r->step_end[r->nstep_end++] = tr_mono_now();
    r->step++;
    /* Partial Reduce: the group's members continue from its largest
       iteration, so a slow rank that averaged with faster ones skips the
       steps they took (and its shard's batches there) */
    if (info.iteration > r->step) {
        r->step = info.iteration < r->total_steps ? info.iteration : r->total_steps;
        *b = (long)(r->step - epoch_first) - 1;
    }
}

/* After the last epoch: partial modes' synchronous round takes every
 * pending gradient (or averages every model).  The models before it are
 * compared after it: a collective now could wait for a rank whose last
 * call waits for a synchronous round that needs this one. */
static void finish_exchange(run_t *r, train_result_t *res)
{
    r->before_sync = malloc(r->model->nparams * sizeof *r->before_sync);
    if (!r->before_sync) {
        tr_fail("out of memory");
        fatal(r->rank);
    }
    memcpy(r->before_sync, r->params, r->model->nparams * sizeof *r->before_sync);
    exchange_info_t info;
    if (exchange_finish(r->ex, r->params, r->update, &info)) {
        recover(r);
        if (exchange_finish(r->ex, r->params, r->update, &info)) fatal(r->rank);
    }
    res->exchange_stats = *exchange_get_stats(r->ex);
    if (info.rounds > 0) {
        epoch_stats_t fst;
        memset(&fst, 0, sizeof fst);
        apply_delivery(r, &info, lr_at(&r->o, r->step, r->total_steps), &fst);
        res->flush_rounds = info.rounds;
        res->rounds_delivered += info.rounds;
    }
}

/* rank 0: epoch e's record, and a snapshot of the model to evaluate */
static void record_epoch(run_t *r, train_result_t *res, long e, const epoch_stats_t *st, double t0, double epoch_t0,
                         double t)
{
    epoch_record_t *rec = &res->epochs[e];
    rec->epoch = e + 1;
    rec->elapsed_s = t - t0;
    rec->steps = r->step;
    rec->epoch_steps = st->steps;
    rec->steps_per_s = t > epoch_t0 ? (double)st->steps / (t - epoch_t0) : NAN;
    rec->rounds = st->rounds;
    rec->empty_steps = st->empty;
    rec->mean_active = st->delivered ? (double)st->active_sum / (double)st->delivered : NAN;
    double ns = st->steps ? (double)st->steps : NAN;
    rec->compute_ms = st->compute_s * 1e3 / ns;
    rec->sleep_ms = st->sleep_s * 1e3 / ns;
    rec->exchange_ms = st->exchange_s * 1e3 / ns;
    rec->test_accuracy = rec->test_loss = rec->val_mse = NAN;
    if ((e + 1) % r->o.eval_every == 0 || e + 1 == r->epochs) {
        /* a copy now, evaluated after training (untimed) */
        memcpy(r->snapshots + r->nsnap * r->model->nparams, r->params, r->model->nparams * sizeof *r->params);
        r->snap_epoch[r->nsnap++] = e;
    }
}

/* The epochs; returns the wall time. */
static double train_epochs(run_t *r, train_result_t *res)
{
    check_mpi(MPI_Barrier(r->comm), "MPI_Barrier", r->rank);
    const double t0 = MPI_Wtime();
    double epoch_t0 = t0;
    /* a resumed run starts in its checkpoint's epoch */
    for (long e = (long)(r->step / (uint64_t)r->steps_per_epoch); e < r->epochs; e++) {
        epoch_stats_t st;
        memset(&st, 0, sizeof st);
        shuffle(r, e);
        /* a dynamic-group exchange may move this rank ahead: it resumes at
           the batch its iteration count stands for, and an epoch it skipped
           whole has no steps */
        const uint64_t epoch_first = (uint64_t)e * (uint64_t)r->steps_per_epoch;
        const uint64_t epoch_end = epoch_first + (uint64_t)r->steps_per_epoch;
        for (long b = r->step > epoch_first ? (long)(r->step - epoch_first) : 0; b < r->steps_per_epoch; b++) {
            if (r->step >= r->total_steps) break;
            train_step(r, e, &b, epoch_first, &st);
            if (r->step != epoch_end && checkpoint_due(r, 0)) checkpoint(r, &st);
        }
        const int last = e + 1 == r->epochs;
        if (r->o.model_sync_epochs > 0 && (e + 1) % r->o.model_sync_epochs == 0 && !last) {
            flush_exchange(r, &st); /* before MPI_Allreduce: see there */
            average_models(r, 0);
        }
        if (!last && r->step == epoch_end && checkpoint_due(r, 1)) checkpoint(r, &st);
        if (last) finish_exchange(r, res);
        res->rounds_delivered += st.rounds;
        const double t = MPI_Wtime();
        r->executed += st.steps;
        r->compute_s += st.compute_s;
        r->sleep_s += st.sleep_s;
        r->exchange_s += st.exchange_s;
        if (r->rank == 0) record_epoch(r, res, e, &st, t0, epoch_t0, t);
        epoch_t0 = t;
    }
    return MPI_Wtime() - t0;
}

/* rank 0: the first evaluated epoch that reached the target */
static double time_to_target(const run_t *r, const train_result_t *res)
{
    if (isnan(r->o.target)) return NAN;
    for (long e = 0; e < r->epochs; e++) {
        const epoch_record_t *rec = &res->epochs[e];
        if (!rec->evaluated) continue;
        if (r->o.task == TASK_FMNIST ? rec->test_accuracy >= r->o.target : rec->val_mse <= r->o.target)
            return rec->elapsed_s;
    }
    return NAN;
}

/* After training: the models' agreement, the losses and times over the
 * ranks (collective), the evaluation (rank 0). */
static void summarize(run_t *r, train_result_t *res, double wall)
{
    long epochs = r->epochs;
    res->model_max_diff = model_max_diff(r, r->params);
    res->model_max_diff_before_sync = model_max_diff(r, r->before_sync ? r->before_sync : r->params);
    double *tmp = calloc((size_t)epochs * 2, sizeof *tmp);
    if (!tmp) {
        tr_fail("out of memory");
        fatal(r->rank);
    }
    check_mpi(MPI_Reduce(r->loss_sum, tmp, (int)epochs, MPI_DOUBLE, MPI_SUM, 0, r->comm), "MPI_Reduce",
              r->rank);
    check_mpi(MPI_Reduce(r->loss_cnt, tmp + epochs, (int)epochs, MPI_DOUBLE, MPI_SUM, 0, r->comm), "MPI_Reduce",
              r->rank);
    double mine[4] = {r->compute_s, r->sleep_s, r->exchange_s, (double)r->executed}, all[4] = {0, 0, 0, 0};
    check_mpi(MPI_Reduce(mine, all, 4, MPI_DOUBLE, MPI_SUM, 0, r->comm), "MPI_Reduce", r->rank);
    /* conservation: every gradient handed over is in what every rank got */
    uint64_t c[3] = {r->contributed, r->delivered_contributions, UINT64_MAX - r->delivered_contributions}, call[3];
    check_mpi(MPI_Allreduce(c, call, 1, MPI_UINT64_T, MPI_SUM, r->comm), "MPI_Allreduce", r->rank);
    check_mpi(MPI_Allreduce(c + 1, call + 1, 2, MPI_UINT64_T, MPI_MAX, r->comm), "MPI_Allreduce", r->rank);
    /* rounds that went on without a silent rank: the most any rank saw;
     * rounds kept for a silent rank: summed over the ranks */
    uint64_t lo[2] = {r->left_out_rounds, 0}, caught = r->caught_up;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &caught, 1, MPI_UINT64_T, MPI_SUM, r->comm), "MPI_Allreduce", r->rank);
    check_mpi(MPI_Allreduce(lo, lo + 1, 1, MPI_UINT64_T, MPI_MAX, r->comm), "MPI_Allreduce", r->rank);
    res->left_out_rounds = lo[1];
    res->caught_up = caught;
    res->contributions_made = call[0];
    res->contributions_delivered_max = call[1];
    res->contributions_delivered_min = UINT64_MAX - call[2];
    res->steps = r->step;
    res->steps_executed = r->executed;
    res->ranks_at_end = r->nranks;
    res->shrinks = r->shrinks;
    res->shrink_step = r->shrink_step;
    res->recovery_s = r->recovery_s;
    res->ctx_at_end = r->ctx;
    res->wall_s = wall;
    res->steps_per_s = wall > 0 ? (double)(r->step - res->resumed_at) / wall : NAN; /* this run's steps */
    res->test_accuracy = res->test_loss = res->val_mse = res->time_to_target_s = NAN;
    if (r->rank == 0) {
        for (long e = 0; e < epochs; e++)
            res->epochs[e].train_loss = tmp[epochs + e] > 0 ? tmp[e] / tmp[epochs + e] : NAN;
        res->final_loss = res->epochs[epochs - 1].train_loss;
        /* per step computed (a dynamic-group exchange skips some) */
        double nsteps = all[3] > 0 ? all[3] : NAN;
        res->compute_ms = all[0] * 1e3 / nsteps;
        res->sleep_ms = all[1] * 1e3 / nsteps;
        res->exchange_ms = all[2] * 1e3 / nsteps;
        res->gflops = mlp_flops_per_sample(r->model) * (double)r->o.batch * nsteps / all[0] / 1e9;
        evaluate_snapshots(r, res);
        const epoch_record_t *fin = &res->epochs[epochs - 1];
        res->test_accuracy = fin->test_accuracy;
        res->test_loss = fin->test_loss;
        res->val_mse = fin->val_mse;
        res->time_to_target_s = time_to_target(r, res);
    }
    free(tmp);
}

int train_run(const train_opts_t *opts, pcoll_t *ctx, train_result_t *res)
{
    run_t r;
    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    r.comm = MPI_COMM_WORLD;
    check_mpi(MPI_Comm_rank(r.comm, &r.rank), "MPI_Comm_rank", 0);
    r.world_rank = r.rank;
    check_mpi(MPI_Comm_size(r.comm, &r.nranks), "MPI_Comm_size", r.rank);
    r.o = *opts;
    train_opts_resolve(&r.o);
    if (setup(&r, ctx, res) != 0) {
        run_free(&r);
        return -1;
    }
    res->opts = r.o;
    res->models_exchanged = exchange_averages_models(r.ex);
    res->ranks = r.nranks;
    mlp_describe(r.model, res->model, sizeof res->model);
    res->nparams = r.model->nparams;
    snprintf(res->imbalance, sizeof res->imbalance, "%s", r.imb.spec);
    res->gemm_kernel = gemm_kernel_name();
    res->nepochs = (size_t)r.epochs;
    res->epochs = calloc((size_t)r.epochs, sizeof *res->epochs);
    if (!res->epochs) {
        tr_fail("out of memory");
        fatal(r.rank);
    }
    if (r.o.inject == INJECT_STOP) {
        r.step_end = calloc(r.total_steps ? r.total_steps : 1, sizeof *r.step_end);
        if (!r.step_end) {
            tr_fail("out of memory");
            fatal(r.rank);
        }
    }
    double wall = train_epochs(&r, res);
    if (r.o.inject == INJECT_STOP) stop_report(&r, res);
    if (exchange_free(&r.ex)) fatal(r.rank);
    summarize(&r, res, wall);
    if (r.o.checkpoint_dir) checkpoint(&r, NULL); /* the final model (the exchange is gone) */
    res->checkpoints = r.checkpoints;
    res->checkpoint_s = r.checkpoint_s;
    run_free(&r);
    return 0;
}

void train_result_free(train_result_t *res)
{
    if (!res) return;
    free(res->epochs);
    res->epochs = NULL;
    res->nepochs = 0;
}
