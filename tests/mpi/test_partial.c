/*
 * Partial allreduce objects under random arrival delays (0-5 ms, some ranks
 * persistently slower), several objects interleaved, then a flush:
 *   - conservation, exactly: at every rank the sum of everything delivered
 *     equals the sum over ranks of every contribution (integer-valued data);
 *   - every round's result is the same at every rank (checksums per round,
 *     recorded by an observer, compared at the end); rounds arrive in order,
 *     none twice, the same number at every rank;
 *   - MAJORITY: the round initiators are the same at every rank and follow
 *     pcoll_partial_initiator until the first rank starts flushing;
 *   - QUORUM(q): every round had at least q active ranks;
 *   - sync_every = tau: no call ever delivers more than tau rounds;
 *   - REPLACE: the flush returns the sum of every rank's latest contribution;
 * then freeing objects with rounds in flight, and bad arguments.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../rng.h"
#include "../testutil.h"

static int rank, size;

typedef struct round_rec {
    uint64_t round, checksum;
    int root, active, sync, stand_in;
} round_rec_t;

typedef struct obj {
    const char *name;
    pcoll_partial_config_t cfg;
    pcoll_dtype_t dtype;
    size_t count;
    pcoll_partial_t *p;
    void *contrib, *out;
    double *total_in, *total_out; /* my contributions, everything delivered */
    double *latest;               /* REPLACE: my latest contribution */
    round_rec_t *recs;            /* observer: rounds completed here */
    int nrecs, caprecs;
    uint64_t delivered_rounds, next_round, last_regular_round;
    long calls, own_calls, stand_ins, parked_calls;
    int alone; /* the only object in use: no rank can be parked elsewhere */
} obj_t;

/* on the progress thread: record the round (no pcoll calls here) */
static void observe(const pcoll_round_t *r, void *arg)
{
    obj_t *o = arg;
    if (o->nrecs == o->caprecs) {
        o->caprecs = o->caprecs ? 2 * o->caprecs : 256;
        o->recs = realloc(o->recs, sizeof *o->recs * (size_t)o->caprecs);
        if (!o->recs) abort();
    }
    round_rec_t *rec = &o->recs[o->nrecs++];
    rec->round = r->round;
    rec->checksum = tu_hash_bytes(r->result, r->count * pcoll_dtype_size(r->dtype));
    rec->root = r->root;
    rec->active = r->active;
    rec->sync = r->synchronous;
    rec->stand_in = r->stand_in;
}

static double get(const void *buf, pcoll_dtype_t t, size_t i)
{
    switch (t) {
    case PCOLL_FLOAT32: return ((const float *)buf)[i];
    case PCOLL_FLOAT64: return ((const double *)buf)[i];
    case PCOLL_INT32: return ((const int32_t *)buf)[i];
    default: return (double)((const int64_t *)buf)[i];
    }
}

static void set(void *buf, pcoll_dtype_t t, size_t i, int v)
{
    switch (t) {
    case PCOLL_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case PCOLL_FLOAT64: ((double *)buf)[i] = v; break;
    case PCOLL_INT32: ((int32_t *)buf)[i] = v; break;
    default: ((int64_t *)buf)[i] = v; break;
    }
}

static void obj_init(obj_t *o, pcoll_t *ctx, const char *name, const char *kind, pcoll_contrib_mode_t mode,
                     int sync_every, pcoll_dtype_t dtype, size_t count)
{
    memset(o, 0, sizeof *o);
    o->name = name;
    pcoll_partial_config_default(&o->cfg);
    CHECK_RC(pcoll_partial_config_parse(kind, &o->cfg));
    o->cfg.mode = mode;
    o->cfg.sync_every = sync_every;
    o->cfg.seed = 12345;
    /* from round 0 on: a rank's first rounds may complete before its first call */
    o->cfg.observer = observe;
    o->cfg.observer_arg = o;
    o->dtype = dtype;
    o->count = count;
    size_t es = pcoll_dtype_size(dtype);
    o->contrib = calloc(count, es);
    o->out = calloc(count, es);
    o->total_in = calloc(count, sizeof(double));
    o->total_out = calloc(count, sizeof(double));
    o->latest = calloc(count, sizeof(double));
    CHECK_RC(pcoll_partial_create(ctx, count, dtype, &o->cfg, &o->p));
    CHECK_RC(pcoll_partial_set_observer(o->p, observe, o)); /* the same again: allowed */
    /* the ctest entry says which data phase it is meant to run */
    const char *want = getenv("PCOLL_TEST_DATA_PHASE");
    if (want && size > 1)
        CHECK_MSG(strcmp(pcoll_partial_data_phase(o->p), want) == 0, "%s: data phase %s, expected %s", name,
                  pcoll_partial_data_phase(o->p), want);
}

/* checks one call's info and adds what it delivered */
static void account(obj_t *o, const pcoll_partial_info_t *info, int is_flush)
{
    CHECK_MSG(info->rounds >= 1, "%s: a call returned without any round", o->name);
    CHECK_MSG(info->first_round == o->next_round, "%s: rounds out of order: got %llu, expected %llu", o->name,
              (unsigned long long)info->first_round, (unsigned long long)o->next_round);
    CHECK_MSG(info->last_round == info->first_round + info->rounds - 1, "%s: rounds not contiguous", o->name);
    o->next_round = info->last_round + 1;
    o->delivered_rounds += info->rounds;
    if (!is_flush) o->last_regular_round = info->last_round;
    if (o->cfg.kind == PCOLL_PARTIAL_QUORUM)
        CHECK_MSG(info->active_min >= o->cfg.quorum, "%s: a round had %d active ranks, quorum %d", o->name,
                  info->active_min, o->cfg.quorum);
    /* bounded staleness: exact for calls of a rank that was not counted as
     * parked in another call meanwhile (and always for an object used
     * alone); a flush delivers whatever is outstanding */
    if (o->alone) CHECK_MSG(info->parked == 0, "%s: parked in another call, but it is used alone", o->name);
    if (o->cfg.sync_every > 0 && !is_flush && info->parked == 0)
        CHECK_MSG(info->rounds <= (uint64_t)o->cfg.sync_every, "%s: a call delivered %llu rounds, sync_every %d",
                  o->name, (unsigned long long)info->rounds, o->cfg.sync_every);
    o->parked_calls += info->parked > 0;
    if (info->own_included) CHECK_MSG(info->active_total >= 1, "%s: own contribution but no active rank", o->name);
    CHECK(info->active_min >= 0 && info->active_min <= size && info->active <= size);
    if (is_flush) CHECK_MSG(info->synchronous, "%s: the flush round is not marked synchronous", o->name);
    if (o->cfg.mode == PCOLL_ACCUMULATE)
        for (size_t i = 0; i < o->count; i++) o->total_out[i] += get(o->out, o->dtype, i);
}

static void obj_call(obj_t *o, rng_t *r)
{
    for (size_t i = 0; i < o->count; i++) {
        int v = (int)rng_below(r, 101) - 50;
        set(o->contrib, o->dtype, i, v);
        o->total_in[i] += v;
        o->latest[i] = v;
    }
    pcoll_partial_info_t info;
    CHECK_RC(pcoll_partial_allreduce(o->p, o->contrib, o->out, &info));
    o->calls++;
    o->own_calls += info.own_included;
    account(o, &info, 0);
}

/* after the flush: everything the test promises */
static void obj_verify(obj_t *o)
{
    size_t n = o->count;
    double *global = calloc(n, sizeof(double));
    if (o->cfg.mode == PCOLL_ACCUMULATE) {
        MPI_Allreduce(o->total_in, global, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++)
            CHECK_MSG(o->total_out[i] == global[i], "%s: conservation broken at element %zu: delivered %.0f, contributed %.0f",
                      o->name, i, o->total_out[i], global[i]);
    } else {
        MPI_Allreduce(o->latest, global, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++)
            CHECK_MSG(get(o->out, o->dtype, i) == global[i], "%s: REPLACE flush is not the sum of the latest models",
                      o->name);
    }
    free(global);

    /* the same rounds everywhere, observed in order, all delivered */
    CHECK_MSG((uint64_t)o->nrecs == o->delivered_rounds, "%s: observer saw %d rounds, calls delivered %llu", o->name,
              o->nrecs, (unsigned long long)o->delivered_rounds);
    for (int i = 0; i < o->nrecs; i++) CHECK_MSG(o->recs[i].round == (uint64_t)i, "%s: round %d observed out of order", o->name, i);
    int nr = o->nrecs, minr = 0, maxr = 0;
    MPI_Allreduce(&nr, &minr, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&nr, &maxr, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK_MSG(minr == maxr, "%s: ranks saw different numbers of rounds (%d..%d)", o->name, minr, maxr);
    uint64_t *sums = malloc(sizeof(uint64_t) * (size_t)nr), *sums0 = malloc(sizeof(uint64_t) * (size_t)nr);
    int *roots = malloc(sizeof(int) * (size_t)nr), *roots0 = malloc(sizeof(int) * (size_t)nr);
    for (int i = 0; i < nr; i++) {
        sums[i] = o->recs[i].checksum;
        roots[i] = o->recs[i].root;
    }
    memcpy(sums0, sums, sizeof(uint64_t) * (size_t)nr);
    memcpy(roots0, roots, sizeof(int) * (size_t)nr);
    MPI_Bcast(sums0, nr, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(roots0, nr, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 0; i < nr; i++)
        CHECK_MSG(sums[i] == sums0[i], "%s: round %d has a different result here than at rank 0", o->name, i);

    if (o->cfg.kind == PCOLL_PARTIAL_MAJORITY) {
        /* the same initiators everywhere, and every non-synchronous round
         * names initiator(r) (the leader may start it on the initiator's
         * behalf while that rank is parked in a flush or another object's
         * call; an object used alone sees no stand-in before the flushes) */
        uint64_t cut = 0;
        MPI_Allreduce(&o->last_regular_round, &cut, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
        for (int i = 0; i < nr; i++) {
            CHECK_MSG(roots[i] == roots0[i], "%s: round %d started by %d here, by %d at rank 0", o->name, i, roots[i],
                      roots0[i]);
            if (o->recs[i].sync) continue;
            int init = pcoll_partial_initiator(o->p, (uint64_t)i);
            int ok = roots[i] == init;
            if (o->alone && (uint64_t)i <= cut) ok = ok && !o->recs[i].stand_in;
            CHECK_MSG(ok, "%s: round %d started by %d (stand-in %d), initiator is %d", o->name, i, roots[i],
                      o->recs[i].stand_in, init);
            o->stand_ins += o->recs[i].stand_in;
        }
    }
    if (o->cfg.kind == PCOLL_PARTIAL_QUORUM)
        for (int i = 0; i < nr; i++)
            CHECK_MSG(o->recs[i].active >= o->cfg.quorum, "%s: round %d had %d active ranks", o->name, i, o->recs[i].active);
    free(sums);
    free(sums0);
    free(roots);
    free(roots0);
}

static void obj_flush_free(obj_t *o)
{
    pcoll_partial_info_t info;
    CHECK_RC(pcoll_partial_flush(o->p, o->out, &info));
    account(o, &info, 1);
    obj_verify(o);
    CHECK_RC(pcoll_partial_free(&o->p));
    CHECK(o->p == NULL);
    free(o->contrib);
    free(o->out);
    free(o->total_in);
    free(o->total_out);
    free(o->latest);
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* 0-5 ms; every fourth rank is persistently slower */
static long delay_us(rng_t *r) { return rank % 4 == 1 ? 2000 + (long)rng_below(r, 3001) : (long)rng_below(r, 2001); }

static long total_rounds;

/* Runs n objects interleaved for `iters` iterations (the call order rotates
 * so the objects overlap in every way), then flushes, checks and frees them. */
static void run_objects(obj_t *o, int n, int iters)
{
    rng_t r;
    rng_seed(&r, 1000 + (uint64_t)rank * 7919 + (uint64_t)size + (uint64_t)n);
    for (int it = 0; it < iters; it++) {
        sleep_us(delay_us(&r));
        for (int k = 0; k < n; k++) obj_call(&o[(it + k) % n], &r);
    }
    for (int k = 0; k < n; k++) {
        total_rounds += o[k].nrecs;
        obj_flush_free(&o[k]);
        if (rank == 0)
            printf("  %-19s %5d rounds, %ld calls, own contribution in %ld, stand-ins %ld, parked in %ld\n",
                   o[k].name, o[k].nrecs, o[k].calls, o[k].own_calls, o[k].stand_ins, o[k].parked_calls);
        free(o[k].recs);
    }
}

static void interleaved(pcoll_t *ctx, int iters)
{
    /* MAJORITY alone: before anyone flushes, initiator(r) starts every round */
    obj_t m;
    obj_init(&m, ctx, "majority-alone", "majority", PCOLL_ACCUMULATE, 0, PCOLL_INT32, 9);
    m.alone = 1;
    run_objects(&m, 1, iters);
    /* bounded staleness, strictly, on objects used alone */
    obj_t t;
    obj_init(&t, ctx, "solo-tau4-alone", "solo", PCOLL_ACCUMULATE, 4, PCOLL_FLOAT32, 7);
    t.alone = 1;
    run_objects(&t, 1, iters);
    obj_init(&t, ctx, "majority-tau3-alone", "majority", PCOLL_ACCUMULATE, 3, PCOLL_INT64, 7);
    t.alone = 1;
    run_objects(&t, 1, iters);
    char q_half[32], q_all[32];
    snprintf(q_half, sizeof q_half, "quorum:%d", (size + 1) / 2);
    snprintf(q_all, sizeof q_all, "quorum:%d", size);
    /* free-running objects together: nothing makes the ranks wait for each other */
    obj_t a[4];
    obj_init(&a[0], ctx, "solo", "solo", PCOLL_ACCUMULATE, 0, PCOLL_FLOAT32, 1000);
    obj_init(&a[1], ctx, "majority", "majority", PCOLL_ACCUMULATE, 0, PCOLL_INT64, 17);
    obj_init(&a[2], ctx, "quorum-half", q_half, PCOLL_ACCUMULATE, 0, PCOLL_FLOAT64, 5);
    obj_init(&a[3], ctx, "solo-replace", "solo", PCOLL_REPLACE, 0, PCOLL_FLOAT32, 64);
    run_objects(a, 4, iters);
    /* objects with synchronous rounds (every tau-th, or all of them) */
    obj_t b[3];
    obj_init(&b[0], ctx, "solo-tau4", "solo", PCOLL_ACCUMULATE, 4, PCOLL_INT32, 3);
    obj_init(&b[1], ctx, "majority-tau3", "majority", PCOLL_ACCUMULATE, 3, PCOLL_FLOAT32, 33);
    obj_init(&b[2], ctx, "quorum-all", q_all, PCOLL_ACCUMULATE, 0, PCOLL_INT64, 2);
    run_objects(b, 3, iters);
}

/* info.own_included is exact: each rank contributes the unit vector e_rank,
 * so its element of the deliveries counts its own contributions delivered;
 * they arrive in order, so a call's own is in its result exactly when that
 * count has reached the number of calls.  Short random pauses (and 64K
 * elements, so that adding takes a while) make rounds take parts in every
 * phase of a call. */
static void own_included_exact(pcoll_t *ctx)
{
    const char *kinds[3] = {"solo", "majority", "quorum:1"};
    size_t n = 65536;
    int64_t *in = calloc(n, sizeof *in), *out = calloc(n, sizeof *out);
    CHECK(in && out);
    in[rank] = 1;
    rng_t r;
    rng_seed(&r, 99 + (uint64_t)rank);
    for (int k = 0; k < 3; k++) {
        pcoll_partial_config_t cfg;
        pcoll_partial_config_default(&cfg);
        CHECK_RC(pcoll_partial_config_parse(kinds[k], &cfg));
        pcoll_partial_t *p;
        CHECK_RC(pcoll_partial_create(ctx, n, PCOLL_INT64, &cfg, &p));
        int64_t mine = 0;
        for (int call = 1; call <= 60; call++) {
            if (rng_below(&r, 3) == 0) sleep_us((long)rng_below(&r, 500));
            pcoll_partial_info_t info;
            CHECK_RC(pcoll_partial_allreduce(p, in, out, &info));
            mine += out[rank];
            CHECK_MSG(info.own_included == (mine == call), "%s call %d: own_included %d, own contributions delivered %lld",
                      kinds[k], call, info.own_included, (long long)mine);
        }
        CHECK_RC(pcoll_partial_flush(p, out, NULL));
        CHECK_RC(pcoll_partial_free(&p));
    }
    free(in);
    free(out);
}

/* objects freed while rounds are in flight at some ranks; then a new object
 * (another channel) must work and see none of the old traffic */
static void free_in_flight(pcoll_t *ctx)
{
    rng_t r;
    rng_seed(&r, 77 + (uint64_t)rank);
    for (int rep = 0; rep < 5; rep++) {
        pcoll_partial_config_t cfg;
        pcoll_partial_config_default(&cfg);
        cfg.kind = (pcoll_partial_kind_t)(rep % 3);
        cfg.quorum = 1;
        pcoll_partial_t *p;
        float in[4] = {1, 2, 3, 4}, out[4];
        CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p));
        int calls = 1 + (int)rng_below(&r, 4);
        for (int c = 0; c < calls; c++) {
            if (rank % 2) sleep_us((long)rng_below(&r, 3000));
            CHECK_RC(pcoll_partial_allreduce(p, in, out, NULL));
        }
        CHECK_RC(pcoll_partial_free(&p));
        CHECK(p == NULL);
    }
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    pcoll_partial_t *p;
    int64_t one = 1, got = 0, total = 0;
    CHECK_RC(pcoll_partial_create(ctx, 1, PCOLL_INT64, &cfg, &p));
    for (int c = 0; c < 20; c++) {
        CHECK_RC(pcoll_partial_allreduce(p, &one, &got, NULL));
        total += got;
    }
    CHECK_RC(pcoll_partial_flush(p, &got, NULL));
    total += got;
    CHECK_MSG(total == 20 * size, "after freeing objects in flight a new object delivered %lld, expected %d",
              (long long)total, 20 * size);
    CHECK_RC(pcoll_partial_free(&p));
}

static void bad_arguments(pcoll_t *ctx)
{
    pcoll_log_level_t old = pcoll_get_log_level();
    pcoll_set_log_level(PCOLL_LOG_NONE);
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    pcoll_partial_t *p = (pcoll_partial_t *)&cfg; /* must come back NULL */
    cfg.kind = PCOLL_PARTIAL_QUORUM;
    cfg.quorum = size + 1;
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "quorum");
    CHECK(p == NULL);
    cfg.quorum = 0;
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "quorum");
    cfg.quorum = -3;
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "quorum");
    pcoll_partial_config_default(&cfg);
    EXPECT_ERR(pcoll_partial_create(ctx, 0, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_COUNT, "count");
    EXPECT_ERR(pcoll_partial_create(ctx, SIZE_MAX / 2, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_COUNT, "count");
    EXPECT_ERR(pcoll_partial_create(ctx, 4, (pcoll_dtype_t)9, &cfg, &p), PCOLL_ERR_DTYPE, "dtype");
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, NULL, &p), PCOLL_ERR_NULL, "cfg");
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, NULL), PCOLL_ERR_NULL, "p");
    EXPECT_ERR(pcoll_partial_create(NULL, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_NULL, "ctx");
    cfg.kind = (pcoll_partial_kind_t)7;
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "kind");
    pcoll_partial_config_default(&cfg);
    cfg.mode = (pcoll_contrib_mode_t)5;
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "mode");
    pcoll_partial_config_default(&cfg);
    cfg.sync_every = -1;
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "sync_every");
    EXPECT_ERR(pcoll_partial_config_parse("quorum:", &cfg), PCOLL_ERR_ARG, "quorum");
    EXPECT_ERR(pcoll_partial_config_parse("quorum:0", &cfg), PCOLL_ERR_ARG, "quorum");
    EXPECT_ERR(pcoll_partial_config_parse("quorum:2x", &cfg), PCOLL_ERR_ARG, "quorum");
    EXPECT_ERR(pcoll_partial_config_parse("lonely", &cfg), PCOLL_ERR_ARG, "solo");
    EXPECT_ERR(pcoll_partial_config_parse(NULL, &cfg), PCOLL_ERR_NULL, "spec");
    float x[4] = {0}, y[4];
    EXPECT_ERR(pcoll_partial_allreduce(NULL, x, y, NULL), PCOLL_ERR_NULL, "p");
    EXPECT_ERR(pcoll_partial_flush(NULL, y, NULL), PCOLL_ERR_NULL, "p");
    EXPECT_ERR(pcoll_partial_free(NULL), PCOLL_ERR_NULL, "p");
    pcoll_partial_t *none = NULL;
    EXPECT_ERR(pcoll_partial_free(&none), PCOLL_ERR_NULL, "p");
    /* a valid object still works after all that, and rejects a NULL out */
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p));
    EXPECT_ERR(pcoll_partial_allreduce(p, x, NULL, NULL), PCOLL_ERR_NULL, "out");
    EXPECT_ERR(pcoll_partial_flush(p, NULL, NULL), PCOLL_ERR_NULL, "out");
    x[0] = 1;
    float sum = 0;
    pcoll_partial_info_t info;
    for (int i = 0; i < 3; i++) {
        CHECK_RC(pcoll_partial_allreduce(p, x, y, &info));
        sum += y[0];
    }
    CHECK_RC(pcoll_partial_flush(p, y, &info));
    sum += y[0];
    CHECK(sum == 3.0f * (float)size);
    CHECK_RC(pcoll_partial_free(&p));
    pcoll_set_log_level(old);
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 600, &rank, &size);
    int iters = getenv("PCOLL_TEST_QUICK") ? 40 : 150;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    if (rank == 0) printf("test_partial: P=%d, %d iterations: objects alone, then interleaved\n", size, iters);
    interleaved(ctx, iters);
    own_included_exact(ctx);
    free_in_flight(ctx);
    bad_arguments(ctx);
    long all = 0;
    MPI_Reduce(&total_rounds, &all, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_partial: P=%d passed, %ld rounds checked\n", size, all);
    MPI_Finalize();
    return 0;
}
