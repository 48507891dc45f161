/* A few steps of training with every gradient exchange (mpi, sync and, when
 * the library provides them, solo, majority, quorum:2) under random delays;
 * afterwards the ranks' models must agree.  With momentum 0 and a constant
 * learning rate a rank's model is the initial model minus lr times the sum of
 * every update it applied, and every algorithm delivers every gradient to
 * every rank (partial modes after the final flush), so the models differ at
 * most by rounding: the partial modes may add the same updates in different
 * groupings.  (Momentum or a decaying lr would weigh an update by when each
 * rank received it, so the models would drift apart: that is what
 * --model-sync-epochs is for.)  sync must agree bit for bit (pcoll_allreduce
 * gives identical results everywhere), and every rank must have received the
 * same number of rounds.
 * The dynamic-group exchanges (preduce:SPEC) average models in groups that
 * differ from rank to rank, so the models differ while training; their
 * final average over all ranks must leave every rank with the same model
 * bit for bit, every rank must have averaged in groups (one per step it
 * computed, no more steps than planned; ripples:static, which never moves a
 * rank ahead, computes every step).
 * Merged-gradient buckets (--fusion, sync and mpi) on a 6-layer MLP: the
 * models agree, and with sync every plan trains the same model bit for bit
 * (each layer's sum has the same bits whatever its bucket): the same loss
 * every epoch. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "err.h"
#include "exchange.h"
#include "testutil.h"
#include "train.h"

static void run_one(pcoll_t *ctx, train_task_t task, const char *algo, const char *imbalance, double tol)
{
    train_opts_t o;
    train_opts_default(&o);
    o.task = task;
    o.algo = algo;
    o.imbalance = imbalance;
    o.momentum = 0;
    o.lr_schedule = LR_CONSTANT;
    o.max_steps = 25;
    o.epochs = 100;
    if (task == TASK_HYPERPLANE) {
        o.dim = 100;
        o.train_points = 3 * 16 * 10;
        o.val_points = 64;
        o.batch = 16;
        o.lr = 0.02;
    } else {
        o.layers = "784,24,16,10";
        o.train_limit = 3 * 8 * 10;
        o.batch = 8;
        o.lr = 0.05;
    }
    train_result_t r;
    CHECK_MSG(train_run(&o, ctx, &r) == 0, "%s: %s", algo, tr_error());
    CHECK(r.steps == 25 && r.nepochs == 3);
    if (tu_rank_ == 0)
        printf("%-10s %-10s %-12s max model difference %.3g (tolerance %.3g), final %s %.4g\n",
               train_task_name(task), algo, imbalance, r.model_max_diff, tol,
               task == TASK_FMNIST ? "accuracy" : "val MSE", task == TASK_FMNIST ? r.test_accuracy : r.val_mse);
    /* every rank received every round (the flush included) */
    unsigned long long mine = r.rounds_delivered, lo = 0, hi = 0;
    CHECK(MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK_MSG(lo == hi && lo >= 1, "%s: ranks received between %llu and %llu rounds", algo, lo, hi);
    CHECK_MSG(r.model_max_diff <= tol, "%s %s %s: models differ by %g > %g (%llu rounds everywhere)",
              train_task_name(task), algo, imbalance, r.model_max_diff, tol, lo);
    if (tu_rank_ == 0) CHECK(isfinite(r.final_loss));
    train_result_free(&r);
}

static void run_fusion(pcoll_t *ctx, const char *algo)
{
    const char *plans[] = {"single", "wfbp", "mgwfbp", "optimal", "fixed:20K"};
    double first_loss = NAN;
    for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++) {
        train_opts_t o;
        train_opts_default(&o);
        o.algo = algo;
        o.fusion = plans[k];
        o.fusion_model = "100,0.001";
        o.layers = "784,24x5,10";
        o.train_limit = 3 * 8 * 10;
        o.batch = 8;
        o.lr = 0.05;
        o.momentum = 0;
        o.lr_schedule = LR_CONSTANT;
        o.max_steps = 25;
        o.epochs = 100;
        o.imbalance = "random:1:2";
        train_result_t r;
        CHECK_MSG(train_run(&o, ctx, &r) == 0, "%s --fusion %s: %s", algo, plans[k], tr_error());
        CHECK(r.steps == 25 && r.fusion_buckets >= 1 && r.fusion_buckets <= 6);
        CHECK_MSG(strcmp(algo, "sync") ? r.model_max_diff <= 1e-5 : r.model_max_diff == 0.0,
                  "%s --fusion %s: models differ by %g", algo, plans[k], r.model_max_diff);
        if (tu_rank_ == 0) {
            printf("fmnist     %-4s --fusion %-9s %d buckets, max model difference %.3g, final loss %.9g\n", algo,
                   plans[k], r.fusion_buckets, r.model_max_diff, r.final_loss);
            if (k == 0) first_loss = r.final_loss;
            if (!strcmp(algo, "sync"))
                CHECK_MSG(r.final_loss == first_loss, "--fusion %s trained another model than single: loss %.17g, "
                          "not %.17g", plans[k], r.final_loss, first_loss);
        }
        train_result_free(&r);
    }
}

static void run_preduce(pcoll_t *ctx, const char *algo)
{
    train_opts_t o;
    train_opts_default(&o);
    o.task = TASK_HYPERPLANE;
    o.algo = algo;
    o.imbalance = "slow:1:3:1"; /* rank 1 sleeps 2 ms a step */
    o.max_steps = 40;
    o.epochs = 100;
    o.dim = 100;
    o.train_points = 3 * 16 * 10;
    o.val_points = 64;
    o.batch = 16;
    o.lr = 0.02;
    train_result_t r;
    CHECK_MSG(train_run(&o, ctx, &r) == 0, "%s: %s", algo, tr_error());
    CHECK_MSG(r.steps == 40, "%s: rank 0 ended at step %llu, not 40", algo, (unsigned long long)r.steps);
    const exchange_stats_t *x = &r.exchange_stats;
    CHECK_MSG(x->groups_joined == r.steps_executed && r.steps_executed <= 40 &&
                  (r.steps_executed == 40 || !strstr(algo, "static")),
              "%s: rank %d computed %llu steps and joined %llu groups", algo, tu_rank_,
              (unsigned long long)r.steps_executed, (unsigned long long)x->groups_joined);
    unsigned long long joined = x->groups_joined, lo = 0;
    CHECK(MPI_Allreduce(&joined, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK_MSG(lo >= 1, "%s: a rank averaged in no group", algo);
    /* the controller (rank 0) formed groups and counted its time */
    if (tu_rank_ == 0) CHECK_MSG(x->ctl_groups >= 1 || strstr(algo, "static"), "%s: no groups formed", algo);
    CHECK_MSG(r.model_max_diff == 0.0, "%s: models differ by %g after the final average", algo, r.model_max_diff);
    if (tu_rank_ == 0) {
        CHECK(isfinite(r.final_loss));
        printf("hyperplane %-24s slow:1:3:1   %llu groups at rank 0, models differ by %.3g before the final "
               "average, val MSE %.4g\n",
               algo, joined, r.model_max_diff_before_sync, r.val_mse);
    }
    if (tu_rank_ == 1) { /* the slow rank: how far its groups moved it */
        printf("  %s: the slow rank computed %llu of 40 steps\n", algo, (unsigned long long)r.steps_executed);
    }
    train_result_free(&r);
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 240, NULL, NULL);
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));

    const char *algos[] = {"mpi", "sync", "solo", "majority", "quorum:2"};
    const size_t nalgos = sizeof algos / sizeof algos[0];
    /* rounding: parameters are O(0.1-1), 25 updates of float32 rounding each */
    const double tol = 1e-5;
    char fmnist_file[512];
    snprintf(fmnist_file, sizeof fmnist_file, "%s/train-images-idx3-ubyte.gz", FMNIST_DEFAULT_DIR);
    const int have_fmnist = access(fmnist_file, R_OK) == 0;
    for (size_t a = 0; a < nalgos; a++) {
        const double t = strcmp(algos[a], "sync") == 0 ? 0.0 : tol;
        /* delays make partial rounds miss ranks, so that updates really are
           delivered in different groupings at different ranks */
        run_one(ctx, TASK_HYPERPLANE, algos[a], "none", t);
        run_one(ctx, TASK_HYPERPLANE, algos[a], "random:1:2", t);
        run_one(ctx, TASK_HYPERPLANE, algos[a], "skew:0:3", t);
        if (have_fmnist) run_one(ctx, TASK_FMNIST, algos[a], "random:1:2", t);
    }
    const char *preduce[] = {"preduce:fifo:2:dyn", "preduce:fifo:3:const", "preduce:ripples:random:2",
                             "preduce:ripples:smart:2", "preduce:ripples:static"};
    for (size_t a = 0; a < sizeof preduce / sizeof preduce[0]; a++) run_preduce(ctx, preduce[a]);
    if (have_fmnist) {
        run_fusion(ctx, "sync");
        run_fusion(ctx, "mpi");
    }
    if (!have_fmnist && tu_rank_ == 0) printf("%s missing: fmnist runs skipped\n", fmnist_file);

    CHECK_RC(pcoll_finalize(&ctx));
    MPI_Finalize();
    if (tu_rank_ == 0) printf("test_agree: %ld checks passed\n", tu_checks_);
    return 0;
}
