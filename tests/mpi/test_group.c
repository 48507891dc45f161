/*
 * GROUP partial objects (WAGMA): rounds that sum inside rotating groups.
 * Under random arrival delays, for several group sizes S and sync_every:
 *   ACCUMULATE, every rank adds 1 to its own element (element j counts rank
 *   j's calls) and a weight to element P:
 *   - every round's result sums exactly its group: the elements of ranks
 *     outside the group are zero; the group is the one
 *     pcoll_partial_group_of gives for the round (synchronous rounds:
 *     every rank, exactly every tau-th and the flush);
 *   - every member of a group has the same result for the round (checksums
 *     gathered at the end);
 *   - nothing lost: over the run (after a flush), the sum over every round
 *     and every group (each counted once, by its smallest member) of
 *     element j equals rank j's number of calls, and the recorded per-round
 *     group sums add up to every contribution made;
 *   - info.group of a call is its last round's group;
 *   - drift: ranks complete group rounds with their group alone, but a rank
 *     completes round r only after every rank completed r - D (D =
 *     ceil(log_S P), the depth of the rotation): the round-completion times
 *     of all ranks (one monotonic clock on one node) never show two ranks
 *     more than D rounds apart.  The largest drift seen is printed; a run
 *     without sleeps lets it grow.
 *   REPLACE (models): pcoll_partial_average gives exactly sum / n when the
 *   call's model was in the round and (sum + model) / (n + 1) when not,
 *   keeps the sum of a group's models in every round where every member's
 *   fresh model was included (so the mean of all models, when all groups
 *   are), and leaves every rank with the same model after a deposit and a
 *   flush: the mean of the current models; a rank that never contributed
 *   adds zeros and is not counted.
 * Then bad arguments: group:1, group sizes that differ between ranks.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../rng.h"
#include "../testutil.h"

static int rank, size;
static pcoll_t *ctx;

typedef struct rec {
    uint64_t round, checksum;
    int sync, nmembers, *members;
    double *values; /* P + 1 elements of the result */
    double t_us;    /* when the round completed here (CLOCK_MONOTONIC) */
} rec_t;

typedef struct run {
    rec_t *recs;
    int nrecs, cap;
} run_t;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* called on completion, before this rank gives its part of the next round:
 * a round that needed this one is recorded later at any rank */
static void observe(const pcoll_round_t *r, void *arg)
{
    double t = now_us();
    run_t *run = arg;
    if (run->nrecs == run->cap) {
        run->cap = run->cap ? 2 * run->cap : 256;
        run->recs = realloc(run->recs, sizeof *run->recs * (size_t)run->cap);
        CHECK(run->recs);
    }
    rec_t *x = &run->recs[run->nrecs++];
    x->round = r->round;
    x->t_us = t;
    x->checksum = tu_hash_bytes(r->result, r->count * sizeof(double));
    x->sync = r->synchronous;
    x->nmembers = r->group_size;
    x->members = malloc(sizeof(int) * (size_t)r->group_size);
    x->values = malloc(sizeof(double) * r->count);
    CHECK(x->members && x->values);
    memcpy(x->members, r->group, sizeof(int) * (size_t)r->group_size);
    memcpy(x->values, r->result, sizeof(double) * r->count);
}

/* The most rounds two ranks were apart: at every completion (rank a, round
 * i), i + 1 against the rounds the slowest rank had completed by then. */
static int max_drift(const double *t, int P, int n)
{
    int most = 0;
    for (int a = 0; a < P; a++)
        for (int i = 0; i < n; i++) {
            double when = t[(size_t)a * (size_t)n + (size_t)i];
            int slowest = n;
            for (int b = 0; b < P; b++) {
                int done = 0; /* rounds of b completed by `when`: times increase with the round */
                while (done < n && t[(size_t)b * (size_t)n + (size_t)done] <= when) done++;
                if (done < slowest) slowest = done;
            }
            if (i + 1 - slowest > most) most = i + 1 - slowest;
        }
    return most;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int in_group(const int *m, int n, int r)
{
    for (int i = 0; i < n; i++)
        if (m[i] == r) return 1;
    return 0;
}

static void accumulate_run(int S, int tau, int calls, uint64_t seed, int tight)
{
    int P = size;
    run_t run = {0};
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    char spec[32];
    snprintf(spec, sizeof spec, "group:%d", S);
    CHECK_RC(pcoll_partial_config_parse(spec, &cfg));
    CHECK(cfg.kind == PCOLL_PARTIAL_GROUP && cfg.group_size == S);
    cfg.sync_every = tau;
    cfg.observer = observe;
    cfg.observer_arg = &run;
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, (size_t)P + 1, PCOLL_FLOAT64, &cfg, &p));
    const char *phase = getenv("PCOLL_TEST_DATA_PHASE"); /* the one the test runs on, if it says */
    if (phase && P > 1) CHECK(strcmp(pcoll_partial_data_phase(p), phase) == 0);
    /* node-shared rounds (on one node, or in each node with the node
     * leaders' exchange between them): one round after the other */
    int shm = strcmp(pcoll_partial_data_phase(p), "messages") != 0;
    size_t n = (size_t)P + 1;
    double *c = calloc(n, sizeof *c), *out = calloc(n, sizeof *out), *got = calloc(n, sizeof *got);
    rng_t rng;
    rng_seed(&rng, seed * 1000 + (uint64_t)rank);
    int slow = rank % 3 == 1;
    int members[256], nm;
    double weight = 0;
    for (int i = 0; i < calls; i++) {
        memset(c, 0, n * sizeof *c);
        c[rank] = 1;
        c[P] = rank + 1;
        weight += rank + 1;
        long us = tight ? 0 : (long)(rng_next(&rng) % 1500) + (slow ? 1000 : 0);
        sleep_us(us);
        pcoll_partial_info_t info;
        CHECK_RC(pcoll_partial_allreduce(p, c, out, &info));
        for (size_t k = 0; k < n; k++) got[k] += out[k];
        CHECK(info.rounds >= 1);
        nm = 256;
        CHECK_RC(pcoll_partial_group_of(p, info.last_round, members, &nm));
        if (!info.synchronous) {
            CHECK(info.group_size == nm);
            for (int k = 0; k < nm; k++) CHECK(info.group[k] == members[k]);
        } else {
            CHECK(info.group_size == P);
        }
        if (tau > 0) CHECK(info.synchronous == (int)((info.last_round + 1) % (uint64_t)tau == 0) || info.rounds > 1 ||
                           info.parked);
    }
    pcoll_partial_info_t info;
    CHECK_RC(pcoll_partial_flush(p, out, &info));
    for (size_t k = 0; k < n; k++) got[k] += out[k];
    CHECK(info.synchronous && info.group_size == P);

    /* every round: zeros outside the group, the group of group_of, the
     * synchronous ones every tau-th */
    for (int i = 0; i < run.nrecs; i++) {
        rec_t *x = &run.recs[i];
        CHECK(x->round == (uint64_t)i);
        nm = 256;
        CHECK_RC(pcoll_partial_group_of(p, x->round, members, &nm));
        if (x->sync) {
            CHECK(x->nmembers == P);
            CHECK((tau > 0 && (x->round + 1) % (uint64_t)tau == 0) || i == run.nrecs - 1); /* tau-th, or the flush */
        } else {
            CHECK(x->nmembers == nm && x->nmembers <= S + 2);
            for (int k = 0; k < nm; k++) CHECK(x->members[k] == members[k]);
            CHECK(!(tau > 0 && (x->round + 1) % (uint64_t)tau == 0));
        }
        CHECK(in_group(x->members, x->nmembers, rank));
        double w = 0;
        for (int j = 0; j < P; j++) {
            if (!in_group(x->members, x->nmembers, j)) CHECK_MSG(x->values[j] == 0, "round %llu has rank %d's data, "
                                                                 "which is not in the group",
                                                                 (unsigned long long)x->round, j);
            w += x->values[j] * (j + 1);
        }
        CHECK(fabs(w - x->values[P]) < 1e-9); /* the weight element agrees with the counts */
    }
    /* the same result at every member: checksums by round, gathered */
    int nrounds = run.nrecs, maxr;
    MPI_Allreduce(&nrounds, &maxr, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(nrounds == maxr); /* the flush ended every rank's rounds alike */
    uint64_t *sums = malloc(sizeof(uint64_t) * (size_t)nrounds), *all = NULL;
    for (int i = 0; i < nrounds; i++) sums[i] = run.recs[i].checksum;
    if (rank == 0) all = malloc(sizeof(uint64_t) * (size_t)nrounds * (size_t)P);
    MPI_Gather(sums, nrounds, MPI_UINT64_T, all, nrounds, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    /* conservation: each group counted once, by its smallest member */
    double *mine = calloc(n, sizeof *mine), *total = calloc(n, sizeof *total);
    for (int i = 0; i < nrounds; i++) {
        rec_t *x = &run.recs[i];
        if (x->members[0] != rank) continue;
        for (size_t k = 0; k < n; k++) mine[k] += x->values[k];
    }
    MPI_Allreduce(mine, total, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    long my_calls = calls, *calls_of = malloc(sizeof(long) * (size_t)P);
    MPI_Allgather(&my_calls, 1, MPI_LONG, calls_of, 1, MPI_LONG, MPI_COMM_WORLD);
    double weight_all = 0;
    MPI_Allreduce(&weight, &weight_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < P; j++)
        CHECK_MSG(total[j] == (double)calls_of[j], "rank %d made %ld calls, the groups summed %.0f", j, calls_of[j],
                  total[j]);
    CHECK(fabs(total[P] - weight_all) < 1e-6);
    /* what this rank was delivered is the sum of its own rounds' results */
    for (size_t k = 0; k < n; k++) {
        double s = 0;
        for (int i = 0; i < nrounds; i++) s += run.recs[i].values[k];
        CHECK(fabs(s - got[k]) < 1e-9);
    }
    /* drift: with messages never more than the rotation's depth
     * (synchronous rounds only shorten it); in node-shared memory rounds are
     * summed one after the other, a round only once every rank copied the
     * one two before it (across nodes: every rank of its node, and the other
     * nodes' sums wait for theirs) */
    double *times = malloc(sizeof(double) * (size_t)nrounds), *all_times = NULL;
    CHECK(times);
    for (int i = 0; i < nrounds; i++) times[i] = run.recs[i].t_us;
    if (rank == 0) CHECK((all_times = malloc(sizeof(double) * (size_t)nrounds * (size_t)P)));
    MPI_Gather(times, nrounds, MPI_DOUBLE, all_times, nrounds, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int drift = 0, depth = 1;
    for (long long v = S; v < P; v *= S) depth++;
    int bound = shm ? 2 : depth;
    if (rank == 0) {
        drift = max_drift(all_times, P, nrounds);
        CHECK_MSG(drift <= bound, "group:%d at %d ranks (%s): two ranks were %d rounds apart, more than %d", S, P,
                  pcoll_partial_data_phase(p), drift, bound);
        free(all_times);
    }
    free(times);
    /* members agree: rank r's checksum of round i equals that of the
     * smallest member of r's group, which every rank's record names */
    int *firsts = malloc(sizeof(int) * (size_t)nrounds), *all_firsts = NULL;
    for (int i = 0; i < nrounds; i++) firsts[i] = run.recs[i].members[0];
    if (rank == 0) all_firsts = malloc(sizeof(int) * (size_t)nrounds * (size_t)P);
    MPI_Gather(firsts, nrounds, MPI_INT, all_firsts, nrounds, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long compared = 0;
        for (int r = 0; r < P; r++)
            for (int i = 0; i < nrounds; i++) {
                int f = all_firsts[(size_t)r * (size_t)nrounds + (size_t)i];
                CHECK(all_firsts[(size_t)f * (size_t)nrounds + (size_t)i] == f); /* f names itself first */
                CHECK_MSG(all[(size_t)r * (size_t)nrounds + (size_t)i] == all[(size_t)f * (size_t)nrounds + (size_t)i],
                          "round %d: ranks %d and %d of one group have different results", i, r, f);
                compared += r != f;
            }
        printf("group:%d tau %d at %d ranks%s, %s: %d rounds, %ld member results compared, conservation exact, ranks "
               "at most %d rounds apart (bound %d)\n",
               S, tau, P, tight ? " (no sleeps)" : "", pcoll_partial_data_phase(p), nrounds, compared, drift, bound);
        free(all);
        free(all_firsts);
    }
    CHECK_RC(pcoll_partial_free(&p));
    for (int i = 0; i < run.nrecs; i++) {
        free(run.recs[i].values);
        free(run.recs[i].members);
    }
    free(run.recs);
    free(c);
    free(out);
    free(got);
    free(sums);
    free(mine);
    free(total);
    free(calls_of);
    free(firsts);
}

/* what a rank's call did, for every rank to check group by group: the
 * ranks exchange it with pcoll_allreduce (each rank fills its own row), a
 * pcoll call, so a rank blocked in it counts as arrived (parked) for a
 * synchronous round that a rank one round ahead is waiting in.  (A
 * collective outside pcoll between the calls could deadlock there, as the
 * design says: the ranks' calls need not take the same round.) */
enum { REPORT_ROUND, REPORT_FRESH, REPORT_SIZE, REPORT_FIRST, REPORT_FRESH_SUM, REPORT_NEW_SUM, REPORT_LEN };

/* REPLACE: models averaged with pcoll_partial_average (avg = 0), or by the
 * call itself (PCOLL_AVERAGE, avg = 1: the same rule, no sum to compare) */
static void replace_run(int S, int tau, int calls, int avg)
{
    int P = size;
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    cfg.kind = PCOLL_PARTIAL_GROUP;
    cfg.group_size = S;
    cfg.mode = avg ? PCOLL_AVERAGE : PCOLL_REPLACE;
    cfg.sync_every = tau;
    pcoll_partial_t *p;
    enum { N = 8 };
    CHECK_RC(pcoll_partial_create(ctx, N, PCOLL_FLOAT64, &cfg, &p));
    /* All-fresh groups: synchronous rounds always are; with messages, lockstep
     * calls make group rounds whose members all gave the call's model common.
     * In node-shared memory the first caller takes every rank's part at once,
     * so the others' parts are their previous models (own_included = 0). */
    int expect_fresh = tau > 0 || strcmp(pcoll_partial_data_phase(p), "shared-memory") != 0;
    double model[N], local[N], sum[N];
    for (size_t k = 0; k < N; k++) model[k] = rank * 10.0 + (double)k;
    int kept = 0;  /* groups whose models' sum was checked */
    long stale = 0; /* calls whose own model was not in the round */
    double *reports = malloc(sizeof(double) * REPORT_LEN * (size_t)P);
    double *mine = calloc((size_t)P * REPORT_LEN, sizeof(double));
    CHECK(reports && mine);
    /* a few more calls if no all-fresh group came */
    for (int i = 0; i < calls || (expect_fresh && kept == 0 && i < calls + 200); i++) {
        /* a local step: every rank moves its model by its own amount */
        for (size_t k = 0; k < N; k++) local[k] = model[k] + 0.5 * (rank + 1);
        MPI_Barrier(MPI_COMM_WORLD);
        pcoll_partial_info_t info;
        CHECK_RC(pcoll_partial_allreduce(p, local, model, &info));
        if (!avg) {
            memcpy(sum, model, sizeof sum);
            CHECK_RC(pcoll_partial_average(p, &info, local, model));
            /* Algorithm 2 at this rank: sum / n, or (sum + local) / (n + 1) */
            double n = (double)info.last_contributions;
            for (size_t k = 0; k < N; k++) {
                double want =
                    info.rounds == 0 ? local[k] : info.own_included ? sum[k] / n : (sum[k] + local[k]) / (n + 1);
                CHECK_MSG(fabs(model[k] - want) <= 1e-12 * fabs(want), "averaged %g, expected %g (own %d, n %g)",
                          model[k], want, info.own_included, n);
            }
        }
        stale += info.rounds > 0 && !info.own_included;
        /* per group: where every member's fresh model was in the round, the
         * members' new models sum to their fresh ones */
        double *me = mine + (size_t)rank * REPORT_LEN;
        me[REPORT_ROUND] = (double)info.last_round;
        me[REPORT_FRESH] = info.own_included && info.rounds == 1;
        me[REPORT_SIZE] = info.group_size;
        me[REPORT_FIRST] = info.group[0];
        me[REPORT_FRESH_SUM] = me[REPORT_NEW_SUM] = 0;
        for (size_t k = 0; k < N; k++) {
            me[REPORT_FRESH_SUM] += local[k];
            me[REPORT_NEW_SUM] += model[k];
        }
        /* one nonzero row per rank: the sum is exact */
        CHECK_RC(pcoll_allreduce(ctx, mine, reports, (size_t)P * REPORT_LEN, PCOLL_FLOAT64, PCOLL_SUM, NULL, 0));
        for (int a = 0; a < P; a++) {
            const double *x = reports + (size_t)a * REPORT_LEN;
            if ((int)x[REPORT_FIRST] != a) continue; /* each group once: at its smallest member's report */
            int members = 0, fresh = 1;
            double f = 0, w = 0;
            for (int b = 0; b < P; b++) {
                const double *y = reports + (size_t)b * REPORT_LEN;
                if (y[REPORT_FIRST] == x[REPORT_FIRST] && y[REPORT_ROUND] == x[REPORT_ROUND]) {
                    members++;
                    fresh &= y[REPORT_FRESH] != 0;
                    f += y[REPORT_FRESH_SUM];
                    w += y[REPORT_NEW_SUM];
                }
            }
            if (!fresh || members != (int)x[REPORT_SIZE]) continue;
            CHECK_MSG(fabs(w - f) < 1e-9 * fabs(f) + 1e-9, "round %.0f, group of rank %d: the models summed to %g "
                      "and average to a sum of %g", x[REPORT_ROUND], a, f, w);
            kept++; /* the same count at every rank: the same reports */
        }
    }
    /* the end: each rank's current model deposited, then a flush averages
     * them all, not the models last given to pcoll_partial_allreduce */
    for (size_t k = 0; k < N; k++) local[k] = model[k] + rank; /* a last local step */
    double mean[N];
    MPI_Allreduce(local, mean, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    pcoll_partial_info_t info;
    CHECK_RC(pcoll_partial_deposit(p, local));
    CHECK_RC(pcoll_partial_flush(p, model, &info));
    CHECK(info.own_included && info.synchronous && info.last_contributions == (uint64_t)P);
    if (!avg) CHECK_RC(pcoll_partial_average(p, &info, local, model));
    for (size_t k = 0; k < N; k++)
        CHECK_MSG(fabs(model[k] - mean[k] / P) <= 1e-12 * fabs(mean[k]), "after deposit and flush: %g, the mean is %g",
                  model[k], mean[k] / P);
    long stale_all = 0;
    MPI_Reduce(&stale, &stale_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s group:%d tau %d: %s (%ld calls with a stale own model), the models' sum kept by %d all-fresh "
               "groups, the final flush averages the deposited models\n",
               avg ? "average" : "replace", S, tau,
               avg ? "averaged by the calls" : "the averaging rule checked at every call", stale_all, kept);
        if (expect_fresh) CHECK(kept > 0);
    }
    free(reports);
    free(mine);
    CHECK_RC(pcoll_partial_free(&p));
}

/* REPLACE: a rank that never contributes adds zeros and is not counted.
 * Rank m's model is 2^m everywhere, so a sum names the ranks in it. */
static void never_contributed(void)
{
    int P = size, silent = P - 1;
    if (P < 3 || P > 30) return; /* a rank's model is a bit of an unsigned */
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_config_parse("group:2", &cfg));
    cfg.mode = PCOLL_REPLACE;
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_FLOAT64, &cfg, &p));
    double mine[4], out[4];
    for (int k = 0; k < 4; k++) mine[k] = (double)(1u << rank);
    long checked = 0;
    for (int i = 0; rank != silent && i < 30; i++) {
        pcoll_partial_info_t info;
        CHECK_RC(pcoll_partial_allreduce(p, mine, out, &info));
        if (info.rounds == 0) continue;
        unsigned bits = (unsigned)out[0], inside = 0;
        int ones = 0;
        for (int m = 0; m < info.group_size; m++) inside |= 1u << info.group[m];
        for (unsigned b = bits; b; b &= b - 1) ones++;
        CHECK_MSG(!(bits & (1u << silent)), "round %llu holds the silent rank's data", (unsigned long long)info.last_round);
        CHECK_MSG((bits & ~inside) == 0, "round %llu holds data from outside its group", (unsigned long long)info.last_round);
        CHECK_MSG((uint64_t)ones == info.last_contributions, "round %llu: %d ranks' models summed, %llu counted",
                  (unsigned long long)info.last_round, ones, (unsigned long long)info.last_contributions);
        checked += (inside >> silent) & 1;
    }
    pcoll_partial_info_t info;
    CHECK_RC(pcoll_partial_flush(p, out, &info));
    CHECK(info.last_contributions == (uint64_t)(P - 1));
    CHECK_RC(pcoll_partial_average(p, &info, mine, out));
    CHECK(fabs(out[0] - (double)((1u << (P - 1)) - 1) / (P - 1)) < 1e-12 * out[0]); /* the contributors' mean */
    long all = 0;
    MPI_Reduce(&checked, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("a rank that never contributed: zeros, not counted (%ld rounds of its groups checked)\n", all);
    CHECK_RC(pcoll_partial_free(&p));
}

static void bad_arguments(void)
{
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    EXPECT_ERR(pcoll_partial_config_parse("group:1", &cfg), PCOLL_ERR_ARG, "group:1");
    EXPECT_ERR(pcoll_partial_config_parse("group:x", &cfg), PCOLL_ERR_ARG, "group size");
    cfg.kind = PCOLL_PARTIAL_GROUP;
    cfg.group_size = 1;
    pcoll_partial_t *p = NULL;
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "group_size");
    if (size > 1) { /* a group size that differs at one rank fails everywhere, naming it */
        cfg.group_size = rank == size - 1 ? 3 : 2;
        EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "group_size");
        CHECK(p == NULL);
    }
    cfg.group_size = 2;
    CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_INT32, &cfg, &p));
    int members[1], nm = 1;
    if (size > 2) EXPECT_ERR(pcoll_partial_group_of(p, 0, members, &nm), PCOLL_ERR_ARG, "members");
    pcoll_partial_info_t info;
    memset(&info, 0, sizeof info);
    int32_t v[4] = {0};
    EXPECT_ERR(pcoll_partial_average(p, &info, v, v), PCOLL_ERR_DTYPE, "float");
    CHECK_RC(pcoll_partial_free(&p));
    /* PCOLL_AVERAGE: float types only; it averages by itself */
    cfg.mode = PCOLL_AVERAGE;
    EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_INT32, &cfg, &p), PCOLL_ERR_DTYPE, "PCOLL_AVERAGE");
    CHECK(p == NULL);
    CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p));
    float f[4] = {0};
    EXPECT_ERR(pcoll_partial_average(p, &info, f, f), PCOLL_ERR_ARG, "AVERAGE");
    EXPECT_ERR(pcoll_partial_deposit(p, NULL), PCOLL_ERR_NULL, "contribution");
    CHECK_RC(pcoll_partial_free(&p));
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 600, &rank, &size);
    /* every round's group is checked at every rank through the observer; a
     * catch-up (rounds kept for a rank that looked silent, which a tight
     * loop of 16 ranks on 2 cores once did for 500 ms) merges rounds into
     * one call: exclusion has tests of its own (shm_protocol_unit,
     * train_exclude) */
    setenv("PCOLL_EXCLUDE_MS", "0", 1);
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    int quick = getenv("PCOLL_TEST_QUICK") != NULL;
    int calls = quick ? 30 : 120;
    int sizes[] = {2, 3, 4, size};
    for (int i = 0; i < 4; i++) {
        int S = sizes[i] < 2 ? 2 : sizes[i];
        if (i > 0 && S > size) continue;
        accumulate_run(S, 0, calls, (uint64_t)i + 1, 0);
        accumulate_run(S, 5, calls, (uint64_t)i + 11, 0);
    }
    accumulate_run(2, 0, quick ? 300 : 1500, 21, 1); /* no sleeps: the ranks drift apart */
    replace_run(2, 0, quick ? 20 : 60, 0);
    replace_run(size >= 4 ? 4 : 2, 10, quick ? 20 : 60, 0);
    replace_run(size >= 4 ? 4 : 2, 0, quick ? 20 : 60, 1);
    replace_run(2, 10, quick ? 20 : 60, 1);
    never_contributed();
    bad_arguments();
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_group: %ld checks passed at rank 0\n", (long)tu_checks_);
    MPI_Finalize();
    return 0;
}
