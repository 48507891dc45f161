/*
 * Stress: the node-shared and hierarchical paths of blocking calls mixed
 * with everything else that can be in flight at once, for many iterations
 * with random delays:
 *   - a blocking world allreduce every iteration, of a random size (latency
 *     path, slice path in one and in many pieces; across nodes the parts
 *     of several pieces in flight), exact integer sums checked; and at
 *     random iterations a blocking group allreduce on a random list (in
 *     node-shared memory where its members share a node);
 *   - around it, started before and waited for one or two iterations later:
 *     a world iallreduce, a group iallreduce on a random group, starts of
 *     persistent plans (all ranks, and the first half: node-shared schedules
 *     where their members share a node);
 *   - partial objects (solo and group kinds) called in between, at random
 *     iterations per rank, flushed at the end: every contribution delivered
 *     exactly once at every rank (conservation).
 * Every rank draws the same collective sequence from one seed (the calls
 * must match), and its own delays from another.
 *   test_stress_paths [iterations]
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rng.h"
#include "testutil.h"

enum { MAX_COUNT = 300000, PLAN_COUNT = 5000, PARTIAL_COUNT = 16 };

static int rank, size;

static int64_t value(int r, int it, size_t i) { return (int64_t)(r + 1) * 1000003 + (int64_t)it * 31 + (int64_t)i; }

/* The sum over `n` ranks (ranks 0 .. n-1 of value) at element i. */
static int64_t sum_of(int n, int it, size_t i)
{
    int64_t s = 0;
    for (int r = 0; r < n; r++) s += value(r, it, i);
    return s;
}

static void fill(int64_t *buf, size_t count, int it)
{
    for (size_t i = 0; i < count; i++) buf[i] = value(rank, it, i);
}

/* A random list of 2 .. min(size, 64) ranks in random order, into list
 * (order: 0 .. size - 1, shuffled here and put back).  Its length. */
static int random_list(rng_t *r, int *order, int *list)
{
    int n = 2 + (int)rng_below(r, (uint64_t)((size < 64 ? size : 64) - 1));
    for (int i = size - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint64_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    memcpy(list, order, sizeof(int) * (size_t)n);
    for (int i = 0; i < size; i++) order[i] = i;
    return n;
}

/* This rank's place in a list of n, or n if it is not in it. */
static int place_in(const int *list, int n)
{
    int pos = 0;
    while (pos < n && list[pos] != rank) pos++;
    return pos;
}

static void check_sum(const int64_t *buf, size_t count, int n, int it, const char *what)
{
    /* a sample of the elements, and the ends of pieces */
    for (size_t i = 0; i < count; i += 1 + i / 64) {
        int64_t want = sum_of(n, it, i);
        CHECK_MSG(buf[i] == want, "%s of %zu, iteration %d: element %zu is %lld, not %lld", what, count, it, i,
                  (long long)buf[i], (long long)want);
    }
    if (count) CHECK_MSG(buf[count - 1] == sum_of(n, it, count - 1), "%s of %zu, iteration %d: last", what, count, it);
}

/* An operation started at iteration `it`, to be waited for at `due`. */
typedef struct pending {
    pcoll_request_t *req;
    int it, due, n;
    size_t count;
    const char *what;
    int64_t *out;
} pending_t;

static void finish(pending_t *p)
{
    if (!p->req) return;
    CHECK_RC(pcoll_wait(&p->req));
    check_sum(p->out, p->count, p->n, p->it, p->what);
}

static size_t random_count(rng_t *r)
{
    switch (rng_below(r, 4)) {
    case 0: return 1 + rng_below(r, 64);              /* latency path */
    case 1: return 64 + rng_below(r, 8192);           /* either, by ranks per node */
    case 2: return 8192 + rng_below(r, 65536);        /* slice path, a few pieces */
    default: return 65536 + rng_below(r, MAX_COUNT - 65536); /* many pieces */
    }
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 600, &rank, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    rng_t all, mine;
    rng_seed(&all, 2024);
    rng_seed(&mine, 77 + (uint64_t)rank);

    int64_t *in = malloc(sizeof(int64_t) * MAX_COUNT), *out = malloc(sizeof(int64_t) * MAX_COUNT);
    int64_t *w_in = malloc(sizeof(int64_t) * MAX_COUNT), *w_out = malloc(sizeof(int64_t) * MAX_COUNT);
    int64_t g_in[512], g_out[512], p_in[2][PLAN_COUNT], p_out[2][PLAN_COUNT];
    CHECK(in && out && w_in && w_out);
    int half = size / 2 > 1 ? size / 2 : size, *order = malloc(sizeof(int) * (size_t)size);
    CHECK(order);
    for (int i = 0; i < size; i++) order[i] = i;
    pcoll_plan_t *plans[2] = {NULL, NULL};
    CHECK_RC(pcoll_allreduce_init(ctx, p_in[0], p_out[0], PLAN_COUNT, PCOLL_INT64, PCOLL_SUM, NULL, 0, &plans[0]));
    if (rank < half)
        CHECK_RC(pcoll_allreduce_init(ctx, p_in[1], p_out[1], PLAN_COUNT, PCOLL_INT64, PCOLL_SUM, order, half,
                                      &plans[1]));

    pcoll_partial_config_t cfg;
    pcoll_partial_t *parts[2];
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_create(ctx, PARTIAL_COUNT, PCOLL_FLOAT32, &cfg, &parts[0]));
    cfg.kind = PCOLL_PARTIAL_GROUP;
    CHECK_RC(pcoll_partial_create(ctx, PARTIAL_COUNT, PCOLL_FLOAT32, &cfg, &parts[1]));
    double delivered[2] = {0, 0}, contributed[2] = {0, 0};
    float ones[PARTIAL_COUNT], pout[PARTIAL_COUNT];
    for (int i = 0; i < PARTIAL_COUNT; i++) ones[i] = 1.0f;

    /* open: started and not yet due, alike at every rank (a rank outside a
     * group or the half plan has no request, but the same schedule) */
    pending_t world = {0}, group = {0}, plan[2] = {{0}, {0}};
    int world_open = 0, group_open = 0, plan_open[2] = {0, 0};
    int group_ranks[64];
    for (int it = 0; it < iters; it++) {
        /* operations started before the blocking call, waited for later */
        if (!world_open && rng_below(&all, 3) == 0) {
            size_t c = random_count(&all);
            fill(w_in, c, it);
            world = (pending_t){NULL, it, it + 1 + (int)rng_below(&all, 2), size, c, "world iallreduce", w_out};
            world_open = 1;
            CHECK_RC(pcoll_iallreduce(ctx, w_in, w_out, c, PCOLL_INT64, PCOLL_SUM, NULL, 0, &world.req));
        }
        if (!group_open && size >= 2 && rng_below(&all, 3) == 0) {
            int gn = random_list(&all, order, group_ranks);
            size_t c = 1 + rng_below(&all, 512);
            group = (pending_t){NULL, it, it + 1 + (int)rng_below(&all, 2), gn, c, "group iallreduce", g_out};
            group_open = 1;
            int pos = place_in(group_ranks, gn);
            if (pos < gn) { /* a member: the group's sum is of values by position */
                for (size_t i = 0; i < c; i++) g_in[i] = value(pos, it, i);
                CHECK_RC(pcoll_iallreduce(ctx, g_in, g_out, c, PCOLL_INT64, PCOLL_SUM, group_ranks, gn, &group.req));
            }
        }
        for (int k = 0; k < 2; k++)
            if (!plan_open[k] && rng_below(&all, 2) == 0) {
                plan[k] = (pending_t){NULL, it, it + 1, k ? half : size, PLAN_COUNT, k ? "half plan" : "plan", p_out[k]};
                plan_open[k] = 1;
                if (plans[k]) {
                    fill(p_in[k], PLAN_COUNT, it);
                    CHECK_RC(pcoll_start(plans[k], &plan[k].req));
                }
            }
        /* the blocking call, after a random delay of this rank's own */
        usleep((useconds_t)rng_below(&mine, 400));
        size_t count = random_count(&all);
        fill(in, count, it);
        if (rng_below(&all, 2)) {
            memcpy(out, in, sizeof(int64_t) * count);
            CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, out, count, PCOLL_INT64, PCOLL_SUM, NULL, 0));
        } else {
            CHECK_RC(pcoll_allreduce(ctx, in, out, count, PCOLL_INT64, PCOLL_SUM, NULL, 0));
        }
        check_sum(out, count, size, it, "blocking allreduce");
        /* a blocking group call on a random list (node-shared memory where
         * its members share a node), at every other iteration */
        if (size >= 2 && rng_below(&all, 2) == 0) {
            int bl[64], gn = random_list(&all, order, bl);
            size_t c = 1 + rng_below(&all, 40000);
            int pos = place_in(bl, gn);
            if (pos < gn) { /* a member: the sum is of values by position */
                for (size_t i = 0; i < c; i++) in[i] = value(pos, it, i);
                CHECK_RC(pcoll_allreduce(ctx, in, out, c, PCOLL_INT64, PCOLL_SUM, bl, gn));
                check_sum(out, c, gn, it, "blocking group allreduce");
            }
        }
        /* partial rounds at this rank's own pace */
        for (int k = 0; k < 2; k++)
            if (rng_below(&mine, 3) == 0) {
                pcoll_partial_info_t info;
                CHECK_RC(pcoll_partial_allreduce(parts[k], ones, pout, &info));
                contributed[k] += 1;
                delivered[k] += pout[0];
            }
        /* the operations that are due */
        if (world_open && world.due <= it) {
            finish(&world);
            world_open = 0;
        }
        if (group_open && group.due <= it) {
            finish(&group);
            group_open = 0;
        }
        for (int k = 0; k < 2; k++)
            if (plan_open[k] && plan[k].due <= it) {
                finish(&plan[k]);
                plan_open[k] = 0;
            }
    }
    finish(&world);
    finish(&group);
    for (int k = 0; k < 2; k++) finish(&plan[k]);
    /* conservation: every contribution of every rank delivered once here */
    for (int k = 0; k < 2; k++) {
        pcoll_partial_info_t info;
        CHECK_RC(pcoll_partial_flush(parts[k], pout, &info));
        delivered[k] += pout[0];
        double total = contributed[k];
        MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (k == 0) /* solo: every round sums every rank */
            CHECK_MSG(delivered[k] == total, "solo: %.0f delivered, %.0f contributed", delivered[k], total);
        else /* group rounds sum a group's contributions: at least this rank's own */
            CHECK_MSG(delivered[k] >= contributed[k], "group: %.0f delivered, %.0f own", delivered[k], contributed[k]);
        CHECK_RC(pcoll_partial_free(&parts[k]));
    }
    for (int k = 0; k < 2; k++)
        if (plans[k]) CHECK_RC(pcoll_plan_free(&plans[k]));
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_stress_paths: P=%d, %d iterations, %ld checks passed\n", size, iters, (long)tu_checks_);
    free(in);
    free(out);
    free(w_in);
    free(w_out);
    free(order);
    MPI_Finalize();
    return 0;
}
