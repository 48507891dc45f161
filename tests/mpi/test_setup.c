/*
 * Every collective setup call fails at every member at once when one
 * member passes a bad argument or runs out of memory: no member waits for
 * the one that failed (no timeout is set: a wait would be a hang, which
 * the test's alarm turns into a failure), each returns within a second,
 * and the others' messages name the member that failed.
 *
 *   init        PCOLL_SPIN_US malformed at the last rank
 *   partial     a bad quorum at the last rank; no memory there for the buffers
 *   preduce     a bad controller at the last rank; no memory there
 *   fusion      a NULL gradient at the last rank; no memory there for a
 *               staged bucket
 *   calibrate   min_bytes below one float at the last rank; no memory there
 *   plans       recvbuf NULL at the last rank
 * and after each, a good call of the same kind works (nothing left behind).
 * Every create sets its output to NULL when it fails, a NULL context too.
 * "No memory" is real: the last rank lowers its address-space limit
 * (RLIMIT_AS) around the call, so its large allocation fails.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../testutil.h"

static int rank, size, last;

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the address space this process uses now (bytes) */
static size_t address_space(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static struct rlimit saved;

/* the last rank: from here on, at most `room` bytes more */
static void tight(size_t room)
{
    if (rank != last) return;
    CHECK(getrlimit(RLIMIT_AS, &saved) == 0);
    struct rlimit r = saved;
    r.rlim_cur = address_space() + room;
    CHECK(setrlimit(RLIMIT_AS, &r) == 0);
}

static void loose(void)
{
    if (rank == last) CHECK(setrlimit(RLIMIT_AS, &saved) == 0);
}

/* the call failed at every rank, within a second; the others name the
 * last rank; `what` is in the last rank's own message */
static void failed_fast(const char *call, int rc, double t0, const char *what)
{
    double t = seconds() - t0;
    CHECK_MSG(rc != PCOLL_SUCCESS, "%s succeeded at rank %d", call, rank);
    CHECK_MSG(t < 1.0, "%s took %.2f s to fail at rank %d", call, t, rank);
    if (rank == last)
        CHECK_MSG(strstr(pcoll_last_error(), what), "%s: \"%s\" does not say %s", call, pcoll_last_error(), what);
    else {
        char words[32];
        snprintf(words, sizeof words, "rank %d", last);
        CHECK_MSG(strstr(pcoll_last_error(), words), "%s: \"%s\" does not name %s", call, pcoll_last_error(), words);
    }
    double worst = t;
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("  %-30s every rank failed within %.3f s\n", call, worst);
}

static void init_fails(void)
{
    if (rank == last) setenv("PCOLL_SPIN_US", "fast", 1);
    pcoll_t *ctx = NULL;
    double t0 = seconds();
    int rc = pcoll_init(MPI_COMM_WORLD, &ctx);
    unsetenv("PCOLL_SPIN_US");
    failed_fast("pcoll_init (bad variable)", rc, t0, "PCOLL_SPIN_US");
    CHECK(ctx == NULL);
}

static void partial_fails(pcoll_t *ctx)
{
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_config_parse("quorum:1", &cfg));
    if (rank == last) cfg.quorum = size + 5;
    pcoll_partial_t *p = (pcoll_partial_t *)&cfg;
    double t0 = seconds();
    failed_fast("pcoll_partial_create (bad arg)", pcoll_partial_create(ctx, 16, PCOLL_FLOAT32, &cfg, &p), t0,
                "quorum");
    CHECK(p == NULL);
    p = (pcoll_partial_t *)&cfg;
    CHECK(pcoll_partial_create(NULL, 16, PCOLL_FLOAT32, &cfg, &p) == PCOLL_ERR_NULL && p == NULL);
    /* no memory at the last rank for 256 MB of buffers */
    pcoll_partial_config_default(&cfg);
    tight(64 << 20);
    t0 = seconds();
    int rc = pcoll_partial_create(ctx, (size_t)64 << 20, PCOLL_FLOAT32, &cfg, &p);
    loose();
    failed_fast("pcoll_partial_create (no memory)", rc, t0, "no memory");
    CHECK(p == NULL);
    float one[4] = {1, 1, 1, 1}, out[4];
    CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p));
    CHECK_RC(pcoll_partial_allreduce(p, one, out, NULL));
    CHECK_RC(pcoll_partial_flush(p, out, NULL));
    CHECK_RC(pcoll_partial_free(&p));
}

static void preduce_fails(pcoll_t *ctx)
{
    pcoll_preduce_config_t cfg;
    pcoll_preduce_config_default(&cfg);
    if (rank == last) cfg.controller = -1;
    pcoll_preduce_t *o = (pcoll_preduce_t *)&cfg;
    double t0 = seconds();
    failed_fast("pcoll_preduce_create (bad arg)", pcoll_preduce_create(ctx, 16, PCOLL_FLOAT32, &cfg, &o), t0,
                "controller");
    CHECK(o == NULL);
    o = (pcoll_preduce_t *)&cfg;
    CHECK(pcoll_preduce_create(NULL, 16, PCOLL_FLOAT32, &cfg, &o) == PCOLL_ERR_NULL && o == NULL);
    pcoll_preduce_config_default(&cfg);
    tight(64 << 20);
    t0 = seconds();
    int rc = pcoll_preduce_create(ctx, (size_t)64 << 20, PCOLL_FLOAT32, &cfg, &o);
    loose();
    failed_fast("pcoll_preduce_create (no memory)", rc, t0, "no memory");
    CHECK(o == NULL);
    CHECK_RC(pcoll_preduce_create(ctx, 4, PCOLL_FLOAT32, &cfg, &o));
    CHECK_RC(pcoll_preduce_free(&o));
}

static void fusion_fails(pcoll_t *ctx)
{
    /* two layers of 32 M floats, laid out apart: each bucket of both is staged */
    enum { L = 2 };
    size_t n = (size_t)32 << 20, bytes[L] = {n * 4, n * 4}, offset[L] = {0, n + 1}, count[L] = {n, n};
    double tb[L] = {10, 10};
    pcoll_fusion_profile_t prof = {.nlayers = L, .bytes = bytes, .backward_us = tb, .forward_us = 0};
    pcoll_cost_model_t m;
    pcoll_fusion_spec_t spec;
    pcoll_fusion_plan_t *pl;
    CHECK_RC(pcoll_cost_model_linear(0, 0, &m));
    CHECK_RC(pcoll_fusion_spec_parse("single", &spec));
    CHECK_RC(pcoll_fusion_plan_create(&prof, &m, &spec, &pl));
    /* the gradient: reserved, never touched but by a bucket that runs */
    float *grad = malloc(sizeof(float) * (2 * n + 1));
    CHECK(grad != NULL);
    pcoll_fusion_t *f = (pcoll_fusion_t *)pl;
    double t0 = seconds();
    failed_fast("pcoll_fusion_create (bad arg)",
                pcoll_fusion_create(ctx, NULL, 0, rank == last ? NULL : grad, PCOLL_FLOAT32, PCOLL_SUM, offset, count,
                                    pl, &f),
                t0, "grad");
    CHECK(f == NULL);
    f = (pcoll_fusion_t *)pl;
    CHECK(pcoll_fusion_create(NULL, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, offset, count, pl, &f) == PCOLL_ERR_NULL &&
          f == NULL);
    tight(64 << 20);
    t0 = seconds();
    int rc = pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, offset, count, pl, &f);
    loose();
    failed_fast("pcoll_fusion_create (no memory)", rc, t0, "no memory");
    CHECK(f == NULL);
    t0 = seconds();
    failed_fast("pcoll_fusion_create (no output pointer)",
                pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, offset, count, pl,
                                    rank == last ? NULL : &f),
                t0, "fusion");
    CHECK(f == NULL);
    free(grad);
    pcoll_fusion_plan_free(&pl);
    /* the failures left nothing out of step: a small executor works */
    size_t sbytes[L] = {16, 16}, soffset[L] = {0, 4}, scount[L] = {4, 4};
    prof.bytes = sbytes;
    CHECK_RC(pcoll_fusion_plan_create(&prof, &m, &spec, &pl));
    float small[8];
    for (int i = 0; i < 8; i++) small[i] = (float)(rank + i);
    CHECK_RC(pcoll_fusion_create(ctx, NULL, 0, small, PCOLL_FLOAT32, PCOLL_SUM, soffset, scount, pl, &f));
    for (int l = L - 1; l >= 0; l--) CHECK_RC(pcoll_fusion_ready(f, l));
    CHECK_RC(pcoll_fusion_wait(f));
    for (int i = 0; i < 8; i++) CHECK(small[i] == (float)(size * (size - 1) / 2 + size * i));
    CHECK_RC(pcoll_fusion_free(&f));
    pcoll_fusion_plan_free(&pl);
}

static void calibrate_fails(pcoll_t *ctx)
{
    pcoll_calibrate_config_t cfg;
    pcoll_calibrate_config_default(&cfg);
    cfg.max_bytes = 4096;
    cfg.reps = 2;
    if (rank == last) cfg.min_bytes = 2;
    pcoll_cost_model_t m;
    double t0 = seconds();
    failed_fast("pcoll_calibrate (bad arg)", pcoll_calibrate(ctx, NULL, 0, &cfg, &m), t0, "min_bytes");
    pcoll_calibrate_config_default(&cfg);
    cfg.min_bytes = (size_t)512 << 20; /* two sizes, 512 MiB and 1 GiB: the buffer fails before any timing */
    cfg.max_bytes = (size_t)1 << 30;
    tight(64 << 20);
    t0 = seconds();
    int rc = pcoll_calibrate(ctx, NULL, 0, &cfg, &m);
    loose();
    failed_fast("pcoll_calibrate (no memory)", rc, t0, "no memory");
    pcoll_calibrate_config_default(&cfg);
    cfg.max_bytes = 256;
    cfg.reps = 2;
    CHECK_RC(pcoll_calibrate(ctx, NULL, 0, &cfg, &m));
}

static void plan_fails(pcoll_t *ctx)
{
    float in[8] = {0}, out[8];
    pcoll_plan_t *plan = (pcoll_plan_t *)in;
    double t0 = seconds();
    failed_fast("pcoll_allreduce_init (bad arg)",
                pcoll_allreduce_init(ctx, in, rank == last ? NULL : out, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &plan),
                t0, "recvbuf");
    CHECK(plan == NULL);
    plan = (pcoll_plan_t *)in;
    CHECK(pcoll_allreduce_init(NULL, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &plan) == PCOLL_ERR_NULL &&
          plan == NULL);
    CHECK_RC(pcoll_allreduce_init(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &plan));
    pcoll_request_t *req;
    CHECK_RC(pcoll_start(plan, &req));
    CHECK_RC(pcoll_wait(&req));
    CHECK_RC(pcoll_plan_free(&plan));
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 120, &rank, &size);
    last = size - 1;
    unsetenv("PCOLL_LOG_LEVEL"); /* init must keep the level set below */
    pcoll_set_log_level(PCOLL_LOG_NONE); /* the errors below are expected */
    if (size < 2) {
        if (rank == 0) printf("test_setup: needs 2 ranks or more\n");
        MPI_Finalize();
        return 0;
    }
    if (rank == 0) printf("test_setup: P=%d, rank %d fails alone; no timeout is set\n", size, last);
    init_fails();
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    double warn, tmo;
    CHECK_RC(pcoll_get_timeouts(ctx, &warn, &tmo));
    CHECK(tmo == 0); /* a wait would be forever */
    CHECK(pcoll_get_log_level() == PCOLL_LOG_NONE); /* init keeps the caller's level */
    partial_fails(ctx);
    preduce_fails(ctx);
    fusion_fails(ctx);
    calibrate_fails(ctx);
    plan_fails(ctx);
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_setup: P=%d, %ld checks passed\n", size, tu_checks_);
    MPI_Finalize();
    return 0;
}
