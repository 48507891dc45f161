/*
 * Merged-gradient buckets (pcoll_fusion_*) over MPI:
 *   - for every strategy and random layer layouts (layers of 0 to 40,000
 *     elements, some laid out with gaps and out of order, so that buckets
 *     are staged, some in backprop order without gaps, as a flat buffer
 *     filled by backprop, reduced in place), random float data: each layer's result is bit for bit
 *     pcoll_allreduce of that layer alone with recursive doubling (with
 *     ranks on several nodes; on one node the buckets run in node-shared
 *     memory, which adds in rank order: the direct algorithm), over
 *     several steps, layers marked ready in backprop order and shuffled;
 *     float64 and AVG too;
 *   - errors: layers out of range or marked twice, a step with a layer
 *     never marked (every rank fails naming it, and the next step works),
 *     plans that differ at one rank (every rank fails naming it), freeing
 *     with a bucket in flight, bad arguments;
 *   - pcoll_calibrate: a model with b >= 0, the same at every rank.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int rank, size;

typedef struct rng {
    unsigned long long s;
} rng_t;
static unsigned long long next(rng_t *r)
{
    r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
    return r->s >> 17;
}

/* a random profile, the same at every rank (seed), and a layout */
typedef struct layout {
    int L;
    size_t count[12], offset[12], total;
    size_t bytes[12];
    double tb[12];
} layout_t;

/* layout modes: the layers one after the other in forward order; in
 * backprop order with gaps (buckets staged); in backprop order without */
enum { FORWARD = 0, SCATTERED = 1, BACKPROP = 2 };
static const char *mode_names[] = {"forward", "scattered", "backprop"};

static void make_layout(layout_t *x, unsigned long long seed, int mode, size_t esize)
{
    rng_t r = {seed};
    x->L = 1 + (int)(next(&r) % 12);
    for (int l = 0; l < x->L; l++) {
        unsigned long long k = next(&r) % 10;
        x->count[l] = k == 0 ? 0 : k < 6 ? next(&r) % 300 + 1 : next(&r) % 40000 + 1;
        x->bytes[l] = x->count[l] * esize;
        x->tb[l] = (double)(next(&r) % 3000);
    }
    size_t at = 0;
    for (int i = 0; i < x->L; i++) {
        int l = mode == FORWARD ? i : x->L - 1 - i;
        x->offset[l] = at;
        at += x->count[l] + (mode == SCATTERED ? next(&r) % 5 : 0);
    }
    x->total = at + 1;
}

static void fill(void *buf, size_t n, pcoll_dtype_t dt, unsigned long long seed)
{
    rng_t r = {seed};
    for (size_t i = 0; i < n; i++) {
        double v = (double)(next(&r) % 2000001) / 1000.0 - 1000.0 + 1.0 / 3.0;
        if (dt == PCOLL_FLOAT32)
            ((float *)buf)[i] = (float)v;
        else
            ((double *)buf)[i] = v;
    }
}

static const char *strategies[] = {"wfbp", "single", "mgwfbp", "optimal", "fixed:4K", "fixed:100K"};

/* every strategy on one layout: results bit for bit those of per-layer
 * recursive-doubling allreduces */
static void run_layout(pcoll_t *ctx, unsigned long long seed, int mode, pcoll_dtype_t dt, pcoll_op_t op)
{
    /* the algorithm that adds every element in the buckets' order */
    pcoll_allreduce_algo_t same_order =
        pcoll_node_count(ctx) == 1 && pcoll_allreduce_algo_for(ctx, 8, size) == PCOLL_ALGO_SHM ? PCOLL_ALGO_DIRECT
                                                                                      : PCOLL_ALGO_RECDBL;
    size_t es = pcoll_dtype_size(dt);
    layout_t x;
    make_layout(&x, seed, mode, es);
    char *grad = malloc(x.total * es), *want = malloc(x.total * es);
    CHECK(grad && want);
    pcoll_fusion_profile_t prof = {.nlayers = x.L, .bytes = x.bytes, .backward_us = x.tb, .forward_us = 500};
    pcoll_cost_model_t m;
    CHECK_RC(pcoll_cost_model_linear(300, 0.002, &m));
    for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++) {
        pcoll_fusion_spec_t spec;
        CHECK_RC(pcoll_fusion_spec_parse(strategies[s], &spec));
        pcoll_fusion_plan_t *pl;
        CHECK_RC(pcoll_fusion_plan_create(&prof, &m, &spec, &pl));
        pcoll_fusion_t *f;
        CHECK_RC(pcoll_fusion_create(ctx, NULL, 0, grad, dt, op, x.offset, x.count, pl, &f));
        for (int step = 0; step < 3; step++) {
            unsigned long long dseed = seed * 1000 + (unsigned long long)step * 100 + (unsigned long long)rank;
            fill(want, x.total, dt, dseed);
            CHECK_RC(pcoll_set_allreduce_algo(ctx, same_order));
            for (int l = 0; l < x.L; l++)
                CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, want + x.offset[l] * es, x.count[l], dt, op, NULL, 0));
            CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO));
            fill(grad, x.total, dt, dseed);
            if (step == 1) { /* shuffled: every rank the same order */
                int order[12];
                rng_t r = {seed + 7};
                for (int l = 0; l < x.L; l++) order[l] = l;
                for (int l = x.L - 1; l > 0; l--) {
                    int j = (int)(next(&r) % (unsigned long long)(l + 1)), t = order[l];
                    order[l] = order[j];
                    order[j] = t;
                }
                for (int l = 0; l < x.L; l++) CHECK_RC(pcoll_fusion_ready(f, order[l]));
            } else {
                for (int l = x.L - 1; l >= 0; l--) CHECK_RC(pcoll_fusion_ready(f, l));
            }
            CHECK_RC(pcoll_fusion_wait(f));
            for (int l = 0; l < x.L; l++)
                CHECK_MSG(memcmp(grad + x.offset[l] * es, want + x.offset[l] * es, x.count[l] * es) == 0,
                          "%s, layer %d of %d (%zu elements, %s, %s): not the bits of its own allreduce",
                          strategies[s], l, x.L, x.count[l], mode_names[mode],
                          dt == PCOLL_FLOAT32 ? "float32" : "float64");
        }
        CHECK_RC(pcoll_fusion_free(&f));
        CHECK(f == NULL);
        pcoll_fusion_plan_free(&pl);
    }
    free(grad);
    free(want);
}

static void test_errors(pcoll_t *ctx)
{
    size_t count[3] = {10, 20, 30}, offset[3] = {0, 10, 30}, bytes[3] = {40, 80, 120};
    double tb[3] = {10, 10, 10};
    float grad[60];
    pcoll_fusion_profile_t prof = {.nlayers = 3, .bytes = bytes, .backward_us = tb, .forward_us = 0};
    pcoll_cost_model_t m;
    CHECK_RC(pcoll_cost_model_linear(300, 0.002, &m));
    pcoll_fusion_spec_t spec;
    CHECK_RC(pcoll_fusion_spec_parse("wfbp", &spec));
    pcoll_fusion_plan_t *pl;
    CHECK_RC(pcoll_fusion_plan_create(&prof, &m, &spec, &pl));
    pcoll_fusion_t *f;
    EXPECT_ERR(pcoll_fusion_create(ctx, NULL, 0, NULL, PCOLL_FLOAT32, PCOLL_SUM, offset, count, pl, &f), PCOLL_ERR_NULL,
               "grad");
    CHECK(f == NULL);
    EXPECT_ERR(pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, offset, count, pl, NULL),
               PCOLL_ERR_NULL, "fusion");
    CHECK_RC(pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, offset, count, pl, &f));
    EXPECT_ERR(pcoll_fusion_ready(f, 3), PCOLL_ERR_ARG, "layer 3");
    EXPECT_ERR(pcoll_fusion_ready(f, -1), PCOLL_ERR_ARG, "layer -1");
    CHECK_RC(pcoll_fusion_ready(f, 2));
    EXPECT_ERR(pcoll_fusion_ready(f, 2), PCOLL_ERR_STATE, "layer 2");
    EXPECT_ERR(pcoll_fusion_free(&f), PCOLL_ERR_STATE, "in flight");
    /* a step whose layer 0 is never marked: buckets of layers 2 and 1 run,
     * then the error names layer 0 (at every rank alike) */
    CHECK_RC(pcoll_fusion_ready(f, 1));
    EXPECT_ERR(pcoll_fusion_wait(f), PCOLL_ERR_STATE, "layer 0");
    /* the next step is whole again */
    for (int i = 0; i < 60; i++) grad[i] = (float)(rank + 1);
    for (int l = 2; l >= 0; l--) CHECK_RC(pcoll_fusion_ready(f, l));
    CHECK_RC(pcoll_fusion_wait(f));
    for (int i = 0; i < 60; i++) CHECK(grad[i] == (float)(size * (size + 1) / 2));
    CHECK_RC(pcoll_fusion_free(&f));
    EXPECT_ERR(pcoll_fusion_free(&f), PCOLL_ERR_NULL, "fusion");
    if (size >= 2) {
        /* rank 1 plans otherwise: every rank fails, naming it */
        pcoll_fusion_plan_t *other;
        CHECK_RC(pcoll_fusion_spec_parse("single", &spec));
        CHECK_RC(pcoll_fusion_plan_create(&prof, &m, &spec, &other));
        EXPECT_ERR(pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, offset, count,
                                       rank == 1 ? other : pl, &f),
                   PCOLL_ERR_ARG, "rank(s) 1");
        pcoll_fusion_plan_free(&other);
        /* a bad argument at rank 0 alone: the others fail too, with its
         * status, naming it and the field */
        EXPECT_ERR(pcoll_fusion_create(ctx, NULL, 0, grad, rank == 0 ? (pcoll_dtype_t)99 : PCOLL_FLOAT32, PCOLL_SUM,
                                       offset, count, pl, &f),
                   PCOLL_ERR_DTYPE, rank == 0 ? "dtype 99" : "dtype is invalid at rank 0");
    }
    pcoll_fusion_plan_free(&pl);
}

static void test_calibrate(pcoll_t *ctx)
{
    pcoll_calibrate_config_t cfg;
    pcoll_calibrate_config_default(&cfg);
    cfg.max_bytes = 64 << 10;
    cfg.reps = 5;
    pcoll_cost_model_t m;
    CHECK_RC(pcoll_calibrate(ctx, NULL, 0, &cfg, &m));
    CHECK(m.nsamples == 15 && m.b_us >= 0 && isfinite(m.a_us));
    /* the same model everywhere: rank 0's bytes against everyone's */
    uint64_t h = tu_hash_bytes(&m, sizeof m), h0 = h;
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    CHECK_MSG(h == h0, "rank %d calibrated another model than rank 0", rank);
    cfg.max_bytes = 2;
    EXPECT_ERR(pcoll_calibrate(ctx, NULL, 0, &cfg, &m), PCOLL_ERR_ARG, "max_bytes");
    if (rank == 0) {
        int group[1] = {size - 1};
        if (size > 1) EXPECT_ERR(pcoll_calibrate(ctx, group, 1, NULL, &m), PCOLL_ERR_GROUP, "not a member");
    }
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 280, &rank, &size);
    pcoll_set_log_level(PCOLL_LOG_NONE);
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    int layouts = getenv("PCOLL_TEST_QUICK") ? 4 : 12;
    for (int k = 0; k < layouts; k++) run_layout(ctx, 100 + (unsigned long long)k, k % 3, PCOLL_FLOAT32, PCOLL_SUM);
    run_layout(ctx, 999, SCATTERED, PCOLL_FLOAT64, PCOLL_AVG);
    run_layout(ctx, 998, BACKPROP, PCOLL_FLOAT64, PCOLL_AVG);
    test_errors(ctx);
    test_calibrate(ctx);
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_fusion: P=%d, %ld checks passed\n", size, tu_checks_);
    MPI_Finalize();
    return 0;
}
