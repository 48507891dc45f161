/*
 * The node-shared allreduce (src/core/shm_allreduce.c):
 *   - pcoll_allreduce_algo_for says shm exactly where the path applies
 *     (every rank on one node, all ranks, up to PCOLL_SHM_ALLREDUCE_BYTES)
 *     (and for a group on one node: shm_group_call.c) and not for larger
 *     sizes or a forced algorithm;
 *   - every type, SUM and AVG, in place and not, sizes from one element to
 *     several slots' worth (latency path, slice path in one and in several
 *     pieces, slices that are not whole lines): bit for bit the direct
 *     algorithm's result (forced, by messages);
 *   - many calls back to back with data that changes every call, some
 *     ranks late at random (they sleep and are woken): the two slots are
 *     reused without one call's data leaking into another;
 *   - mixed with operations in flight on other paths: a large iallreduce
 *     and a group allreduce started before and waited for after, and a
 *     partial object's rounds in between;
 *   - ranks that sleep in the path and are woken: one rank late by 20 ms
 *     in turn; and a rank whose other thread holds the progress token in
 *     a blocking group call meanwhile (the wake-up must reach the waiter);
 *   - calls that differ: a count that differs at one rank fails every rank
 *     the same way (each compares every header) and the next call works;
 *     under PCOLL_CHECK=1 an algorithm forced at one rank (so it alone
 *     would take messages) fails every rank naming the path.
 * With one rank, or nodes of unequal sizes, the path is absent and the
 * checks say so.  Across nodes of equal sizes (PCOLL_RANKS_PER_NODE, or an
 * emulated cluster) the hierarchical path serves the calls: the direct
 * algorithm's sums in another order (bit for bit on integers), the same
 * bits at every rank; the headers are compared within a node only, so the
 * calls that differ are tried on one node.  ctest runs it with the default sizes and
 * with tiny ones (PCOLL_SHM_CHUNK_BYTES=4K, PCOLL_SHM_SLICE_BYTES=0: every
 * call but the smallest takes the slice path, in many pieces).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static int rank, size;

/* Ranks per node: the machine's, split into blocks of PCOLL_RANKS_PER_NODE */
static int per_node(void)
{
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int n;
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    const char *per = getenv("PCOLL_RANKS_PER_NODE");
    return per && atoi(per) > 0 && atoi(per) < n ? atoi(per) : n;
}

/* The blocking path exists: every node holds as many ranks (one machine
 * here, or an emulated cluster of equal nodes; blocks of
 * PCOLL_RANKS_PER_NODE leave a smaller last one unless they divide size) */
static int path_exists(void)
{
    int k = per_node(), lo = k, hi = k;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return size >= 2 && lo == hi && size % k == 0;
}

static int on_one_node(void) { return per_node() == size; }

static void choice(pcoll_t *ctx, int expect)
{
    char text[64];
    CHECK_RC(pcoll_config_get("PCOLL_SHM_ALLREDUCE_BYTES", text, sizeof text));
    size_t limit = (size_t)strtoull(text, NULL, 10);
    CHECK(limit > 0);
    /* one rank per node: small calls take the message algorithms alone */
    CHECK((pcoll_allreduce_algo_for(ctx, 8, size) == PCOLL_ALGO_SHM) == (expect && per_node() > 1));
    CHECK((pcoll_allreduce_algo_for(ctx, limit, size) == PCOLL_ALGO_SHM) == expect);
    CHECK(pcoll_allreduce_algo_for(ctx, limit + 1, size) != PCOLL_ALGO_SHM);
    /* a group: the path of group calls, on one node */
    if (size > 2) CHECK((pcoll_allreduce_algo_for(ctx, 8, size - 1) == PCOLL_ALGO_SHM) == (expect && on_one_node()));
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_RECDBL));
    CHECK(pcoll_allreduce_algo_for(ctx, 8, size) == PCOLL_ALGO_RECDBL);
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO));
    pcoll_log_level_t level = pcoll_get_log_level();
    pcoll_set_log_level(PCOLL_LOG_NONE); /* the error is expected */
    CHECK(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_SHM) == PCOLL_ERR_ARG); /* chosen, never forced */
    pcoll_set_log_level(level);
    CHECK(!strcmp(pcoll_allreduce_algo_name(PCOLL_ALGO_SHM), "shm"));
}

/* want = rank 0's `bytes` of got at every rank: an exact integer sum of
 * its bytes and zeros (through pcoll, whose synchronization the thread
 * sanitizer sees; MPI's own it does not) */
static void rank_0_bits(pcoll_t *ctx, const void *got, void *want, size_t bytes)
{
    size_t words = (bytes + 7) / 8;
    memset(want, 0, words * 8);
    if (rank == 0) memcpy(want, got, bytes);
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_DIRECT));
    CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, want, words, PCOLL_INT64, PCOLL_SUM, NULL, 0));
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO));
}

/* every type, op, placement and a range of sizes: the direct algorithm's bits */
static void against_direct(pcoll_t *ctx)
{
    static const pcoll_dtype_t types[] = {PCOLL_FLOAT32, PCOLL_FLOAT64, PCOLL_INT32, PCOLL_INT64};
    static const size_t counts[] = {1, 2, 3, 7, 8, 31, 64, 129, 255, 512, 2049, 20000, 70001, 150001};
    enum { MAX_BYTES = 150001 * 8 + 8 };
    char *in = malloc(MAX_BYTES), *got = malloc(MAX_BYTES), *want = malloc(MAX_BYTES);
    CHECK(in && got && want);
    for (size_t t = 0; t < 4; t++)
        for (int op = 0; op < 2; op++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    pcoll_dtype_t dt = types[t];
                    size_t n = counts[c], es = pcoll_dtype_size(dt);
                    pcoll_op_t o = op ? PCOLL_AVG : PCOLL_SUM;
                    if (o == PCOLL_AVG && (dt == PCOLL_INT32 || dt == PCOLL_INT64)) continue;
                    unsigned seed = (unsigned)(t * 1000 + c * 10 + (size_t)rank * 77 + 1);
                    tu_fill(in, n, dt, seed);
                    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_DIRECT));
                    CHECK_RC(pcoll_allreduce(ctx, in, want, n, dt, o, NULL, 0));
                    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO));
                    if (inplace) {
                        memcpy(got, in, n * es);
                        CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, got, n, dt, o, NULL, 0));
                    } else {
                        CHECK_RC(pcoll_allreduce(ctx, in, got, n, dt, o, NULL, 0));
                    }
                    pcoll_allreduce_algo_t took = pcoll_allreduce_algo_for(ctx, n * es, size);
                    if ((took == PCOLL_ALGO_SHM && on_one_node()) || took == PCOLL_ALGO_DIRECT ||
                        dt == PCOLL_INT32 || dt == PCOLL_INT64)
                        CHECK_MSG(memcmp(got, want, n * es) == 0, "%s %s count %zu %s: not the direct algorithm's bits",
                                  pcoll_dtype_name(dt), op ? "avg" : "sum", n, inplace ? "in place" : "");
                    else /* another algorithm, or across nodes: its own order of the sums */
                        CHECK_MSG(tu_close_enough(got, want, n, dt), "%s %s count %zu: not the direct algorithm's sums",
                                  pcoll_dtype_name(dt), op ? "avg" : "sum", n);
                    /* whatever the order, the same bits at every rank */
                    rank_0_bits(ctx, got, want, n * es);
                    CHECK_MSG(memcmp(got, want, n * es) == 0, "%s %s count %zu: not rank 0's bits",
                              pcoll_dtype_name(dt), op ? "avg" : "sum", n);
                }
    free(in);
    free(got);
    free(want);
}

/* back to back, data changing every call, some ranks late: exact integer sums */
static void back_to_back(pcoll_t *ctx, int calls)
{
    enum { N = 100, LARGE = 4000 };
    static int64_t in[LARGE], out[LARGE];
    unsigned lcg = 12345u + (unsigned)rank;
    for (int k = 0; k < calls; k++) {
        for (int i = 0; i < LARGE; i++) in[i] = (int64_t)k * 1000003 + (int64_t)rank * 7919 + i;
        lcg = lcg * 1103515245u + 12345u;
        if ((lcg >> 16) % 50 == 0) usleep((lcg >> 8) % 3000); /* late: the others sleep, then are woken */
        int n = k % 10 == 9 ? LARGE - k % 7 : 1 + k % N;      /* the size changes too */
        CHECK_RC(pcoll_allreduce(ctx, in, out, (size_t)n, PCOLL_INT64, PCOLL_SUM, NULL, 0));
        int64_t ranks_sum = (int64_t)size * (size - 1) / 2;
        for (int i = 0; i < n; i++)
            CHECK_MSG(out[i] == (int64_t)size * ((int64_t)k * 1000003 + i) + 7919 * ranks_sum,
                      "call %d element %d: %lld", k, i, (long long)out[i]);
    }
}

/* other paths in flight meanwhile */
static void mixed(pcoll_t *ctx)
{
    size_t big = (size_t)1 << 18;
    float *a = malloc(sizeof(float) * big), *b = malloc(sizeof(float) * big);
    CHECK(a && b);
    for (size_t i = 0; i < big; i++) a[i] = (float)(rank + 1);
    pcoll_request_t *req;
    CHECK_RC(pcoll_iallreduce(ctx, a, b, big, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &req));
    int group[2] = {0, size - 1}, in_group = rank == 0 || rank == size - 1;
    float g_in = (float)rank, g_out = -1;
    pcoll_request_t *greq = NULL;
    if (in_group && size > 1)
        CHECK_RC(pcoll_iallreduce(ctx, &g_in, &g_out, 1, PCOLL_FLOAT32, PCOLL_SUM, group, 2, &greq));
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, 16, PCOLL_FLOAT32, &cfg, &p));
    float contrib[16], pout[16];
    for (int i = 0; i < 16; i++) contrib[i] = 1;
    for (int k = 0; k < 50; k++) {
        int64_t x = rank + k, y = 0;
        CHECK_RC(pcoll_allreduce(ctx, &x, &y, 1, PCOLL_INT64, PCOLL_SUM, NULL, 0));
        CHECK(y == (int64_t)size * (size - 1) / 2 + (int64_t)size * k);
        if (k % 10 == 0) CHECK_RC(pcoll_partial_allreduce(p, contrib, pout, NULL));
    }
    float fl[16];
    CHECK_RC(pcoll_partial_flush(p, fl, NULL));
    CHECK_RC(pcoll_partial_free(&p));
    CHECK_RC(pcoll_wait(&req));
    float want = (float)size * (float)(size + 1) / 2;
    for (size_t i = 0; i < big; i += 4099) CHECK(b[i] == want);
    if (greq) {
        CHECK_RC(pcoll_wait(&greq));
        CHECK(g_out == (float)(size - 1));
    }
    free(a);
    free(b);
}

/* 1 if the ranks of group (n of them) share a node: one machine here, split
 * into blocks of PCOLL_RANKS_PER_NODE if set */
static int group_on_one_node(const int *group, int n)
{
    const char *per = getenv("PCOLL_RANKS_PER_NODE");
    int k = per && atoi(per) > 0 ? atoi(per) : size;
    for (int i = 1; i < n; i++)
        if (group[i] / k != group[0] / k) return 0;
    return n >= 2;
}

/* Persistent plans (all ranks, and the first half of them) take the
 * node-shared schedule where their members share a node: every start the
 * bits of the direct algorithm (elsewhere: of the algorithm the plan's rule
 * picks), across sizes of both paths and several pieces, in place and not,
 * SUM and AVG, data changing every start; two plans in flight at once,
 * started in one order and waited for in the other; a rank late in turn. */
static void plans(pcoll_t *ctx)
{
    static const size_t counts[] = {1, 7, 300, 5000, 70001, 150001};
    int half = size / 2 > 1 ? size / 2 : size, members[64], me_in = rank < half;
    for (int i = 0; i < size && i < 64; i++) members[i] = i; /* the first n of them: a group of n */
    char *in = malloc(150001 * 8), *got = malloc(150001 * 8), *want = malloc(150001 * 8);
    char *in2 = malloc(4096), *got2 = malloc(4096), *want2 = malloc(4096);
    CHECK(in && got && want && in2 && got2 && want2);
    for (int grp = 0; grp < 2; grp++) {
        const int *g = grp ? members : NULL;
        int n = grp ? half : size;
        if (grp && !me_in) continue;
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (int variant = 0; variant < 3; variant++) {
                pcoll_dtype_t dt = variant == 2 ? PCOLL_INT64 : PCOLL_FLOAT32;
                pcoll_op_t op = variant == 1 ? PCOLL_AVG : PCOLL_SUM;
                int inplace = variant == 1;
                size_t count = counts[c], bytes = count * pcoll_dtype_size(dt);
                int shm = g ? group_on_one_node(g, n) : on_one_node() && size >= 2;
                /* the reference: a blocking group call (never the node-shared
                 * path itself) with the algorithm of the same sums */
                pcoll_allreduce_algo_t ref = shm ? PCOLL_ALGO_DIRECT : pcoll_allreduce_algo_for(ctx, bytes, n);
                /* all ranks on several nodes: calls take the hierarchical
                 * path, plans a message algorithm (not a forced one): the
                 * same sums, in another order */
                int exact = ref != PCOLL_ALGO_SHM || dt == PCOLL_INT64;
                if (ref == PCOLL_ALGO_SHM) ref = PCOLL_ALGO_RECDBL;
                pcoll_plan_t *plan;
                CHECK_RC(pcoll_allreduce_init(ctx, inplace ? PCOLL_IN_PLACE : in, got, count, dt, op, g, n, &plan));
                for (int start = 0; start < 3; start++) {
                    tu_fill(in, count, dt, (unsigned)(c * 100 + (size_t)variant * 10 + (size_t)start + (size_t)rank * 7 + 1));
                    CHECK_RC(pcoll_set_allreduce_algo(ctx, ref));
                    CHECK_RC(pcoll_allreduce(ctx, in, want, count, dt, op, members, n)); /* group form, any n */
                    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO));
                    if (inplace) memcpy(got, in, bytes);
                    pcoll_request_t *req;
                    CHECK_RC(pcoll_start(plan, &req));
                    CHECK_RC(pcoll_wait(&req));
                    CHECK_MSG(exact ? memcmp(got, want, bytes) == 0 : tu_close_enough(got, want, count, dt),
                              "plan on %d ranks, %zu x %s %s%s, start %d: not the %s bits",
                              n, count, pcoll_dtype_name(dt), op == PCOLL_AVG ? "avg" : "sum",
                              inplace ? " in place" : "", start, pcoll_allreduce_algo_name(ref));
                }
                CHECK_RC(pcoll_plan_free(&plan));
            }
        /* two plans in flight at once, one late rank in turn */
        pcoll_plan_t *a, *b;
        CHECK_RC(pcoll_allreduce_init(ctx, in2, got2, 100, PCOLL_INT64, PCOLL_SUM, g, n, &a));
        CHECK_RC(pcoll_allreduce_init(ctx, in, got, 70001, PCOLL_INT64, PCOLL_SUM, g, n, &b));
        for (int k = 0; k < 8; k++) {
            for (int i = 0; i < 100; i++) ((int64_t *)in2)[i] = rank * 1000 + k + i;
            for (int i = 0; i < 70001; i++) ((int64_t *)in)[i] = rank + k * 3 + i;
            if (rank == k % n) usleep(3000);
            pcoll_request_t *ra, *rb;
            CHECK_RC(pcoll_start(a, &ra));
            CHECK_RC(pcoll_start(b, &rb));
            CHECK_RC(pcoll_wait(&rb));
            CHECK_RC(pcoll_wait(&ra));
            int64_t ranks = (int64_t)n * (n - 1) / 2;
            for (int i = 0; i < 100; i++) CHECK(((int64_t *)got2)[i] == 1000 * ranks + (int64_t)n * (k + i));
            for (int i = 0; i < 70001; i += 997) CHECK(((int64_t *)got)[i] == ranks + (int64_t)n * (k * 3 + i));
        }
        CHECK_RC(pcoll_plan_free(&a));
        CHECK_RC(pcoll_plan_free(&b));
    }
    free(in);
    free(got);
    free(want);
    free(in2);
    free(got2);
    free(want2);
}

/* A start that one rank never makes: the others' waits time out naming it
 * (the barrier step is abandoned, nothing hangs), the plan can be freed,
 * and the context goes on. */
static void plan_start_missed(pcoll_t *ctx)
{
    if (size < 2) return;
    int64_t x = rank, y = 0;
    pcoll_plan_t *plan;
    CHECK_RC(pcoll_allreduce_init(ctx, &x, &y, 1, PCOLL_INT64, PCOLL_SUM, NULL, 0, &plan));
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 1));
    if (rank != size - 1) {
        pcoll_log_level_t level = pcoll_get_log_level();
        pcoll_set_log_level(PCOLL_LOG_NONE);
        pcoll_request_t *req;
        CHECK_RC(pcoll_start(plan, &req));
        int rc = pcoll_wait(&req);
        pcoll_set_log_level(level);
        char who[32];
        snprintf(who, sizeof who, "rank %d", size - 1);
        CHECK_MSG(rc == PCOLL_ERR_TIMEOUT && strstr(pcoll_last_error(), who), "%d: %s", rc, pcoll_last_error());
        if (rank == 0) printf("  a plan start that rank %d never makes: %s\n", size - 1, pcoll_last_error());
    }
    CHECK_RC(pcoll_plan_free(&plan));
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 0));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* one rank late in turn: the others yield, then sleep, and are woken */
static void late_in_turn(pcoll_t *ctx)
{
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 20)); /* a lost wake-up fails, not hangs */
    for (int k = 0; k < 12; k++) {
        if (rank == k % size) usleep(20000);
        int64_t x = rank * 3 + k, y = 0;
        CHECK_RC(pcoll_allreduce(ctx, &x, &y, 1, PCOLL_INT64, PCOLL_SUM, NULL, 0));
        CHECK(y == 3 * (int64_t)size * (size - 1) / 2 + (int64_t)size * k);
    }
}

typedef struct group_call {
    pcoll_t *ctx;
    int rc;
    float out;
} group_call_t;

static void *group_thread(void *arg)
{
    group_call_t *g = arg;
    int group[2] = {0, 1};
    float in = 1;
    g->rc = pcoll_allreduce(g->ctx, &in, &g->out, 1, PCOLL_FLOAT32, PCOLL_SUM, group, 2);
    return NULL;
}

/* rank 0: a second thread blocks in a group call (holding the progress
 * token) while the first waits in the path; rank 1 comes last to both */
static void token_held_elsewhere(pcoll_t *ctx)
{
    if (size < 2) return;
    group_call_t g = {ctx, -1, 0};
    pthread_t th;
    if (rank == 0) CHECK(pthread_create(&th, NULL, group_thread, &g) == 0);
    if (rank == 1) usleep(100000);
    /* twice: rank 1 makes its group call only after both, so the group
     * call cannot end rank 0's wait for the first one */
    double t0 = MPI_Wtime();
    for (int k = 0; k < 2; k++) {
        int64_t x = 1, y = 0;
        CHECK_RC(pcoll_allreduce(ctx, &x, &y, 1, PCOLL_INT64, PCOLL_SUM, NULL, 0));
        CHECK(y == size);
    }
    /* a lost wake-up would keep rank 0 until the 20 s deadline */
    CHECK_MSG(MPI_Wtime() - t0 < 5, "the calls took %.1f s: a wake-up was lost", MPI_Wtime() - t0);
    if (rank == 1) group_thread(&g);
    if (rank == 0) CHECK(pthread_join(th, NULL) == 0);
    if (rank <= 1) CHECK(g.rc == PCOLL_SUCCESS && g.out == 2);
    CHECK_RC(pcoll_set_timeouts(ctx, 60, 0));
}

static void calls_that_differ(pcoll_t *ctx, int expect)
{
    if (!expect) return;
    pcoll_log_level_t level = pcoll_get_log_level();
    pcoll_set_log_level(PCOLL_LOG_NONE); /* the errors are expected */
    int32_t in[3] = {1, 2, 3}, out[3];
    int rc = pcoll_allreduce(ctx, in, out, rank == size - 1 ? 2 : 3, PCOLL_INT32, PCOLL_SUM, NULL, 0);
    CHECK_MSG(rc == PCOLL_ERR_ARG && strstr(pcoll_last_error(), "differently"), "%d: %s", rc, pcoll_last_error());
    CHECK_RC(pcoll_allreduce(ctx, in, out, 3, PCOLL_INT32, PCOLL_SUM, NULL, 0));
    CHECK(out[0] == size && out[2] == 3 * size);
    setenv("PCOLL_CHECK", "1", 1);
    pcoll_t *checked;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &checked));
    unsetenv("PCOLL_CHECK");
    if (rank == 0) CHECK_RC(pcoll_set_allreduce_algo(checked, PCOLL_ALGO_DIRECT));
    rc = pcoll_allreduce(checked, in, out, 3, PCOLL_INT32, PCOLL_SUM, NULL, 0);
    /* named by the call's agreement, or (when the forced algorithm also
     * differs for the agreement's own exchange, as at 2 ranks) by it */
    CHECK_MSG(rc == PCOLL_ERR_ARG && (strstr(pcoll_last_error(), "node-shared path") ||
                                      strstr(pcoll_last_error(), "disagree on the algorithm")),
              "%d: %s", rc, pcoll_last_error());
    CHECK_RC(pcoll_set_allreduce_algo(checked, PCOLL_ALGO_AUTO));
    CHECK_RC(pcoll_allreduce(checked, in, out, 3, PCOLL_INT32, PCOLL_SUM, NULL, 0));
    CHECK(out[1] == 2 * size);
    CHECK_RC(pcoll_finalize(&checked));
    pcoll_set_log_level(level);
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 300, &rank, &size);
    int calls = argc > 1 ? atoi(argv[1]) : 3000;
    int expect = path_exists();
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    choice(ctx, expect);
    against_direct(ctx);
    back_to_back(ctx, calls);
    mixed(ctx);
    plans(ctx);
    late_in_turn(ctx);
    token_held_elsewhere(ctx);
    calls_that_differ(ctx, expect && on_one_node());
    plan_start_missed(ctx); /* last: the world operations are out of step after it */
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0)
        printf("test_shm_allreduce: P=%d, path %s, %ld checks passed\n", size, expect ? "taken" : "absent",
               (long)tu_checks_);
    MPI_Finalize();
    return 0;
}
