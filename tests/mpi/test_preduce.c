/*
 * Dynamic-group partial reduce over MPI (pcoll_preduce_*), every policy:
 *   - each call returns a group that contains this rank, members in
 *     increasing order, a weight (1/n with constant weights), and (FIFO)
 *     an iteration no smaller than the rank's own;
 *   - the averages are real: with constant weights and no local steps the
 *     sum of all ranks' models stays what it was (FIFO, static), to
 *     rounding; the spread of the models across ranks shrinks;
 *   - every member of a group reports the same group (id, members) and
 *     ends with the same model: the group's average;
 *   - random delays between calls and hundreds of groups per rank: no
 *     deadlock; ranks stop at different call counts (controller policies)
 *     and pcoll_preduce_drain runs the groups still planned with them, so
 *     with constant weights the sum of the models stays what it was for
 *     every policy;
 *   - the config parser: every spec of the docs, and bad ones named;
 *   - bad arguments: named errors at every rank;
 *   - a rank that stops calling: the others time out (PCOLL_ERR_TIMEOUT)
 *     with a report, not a hang (controller policies, last).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pcoll.h"
#include "testutil.h"

#define COUNT 1000

static int rank, size;

static void test_parse(void)
{
    pcoll_preduce_config_t c;
    pcoll_preduce_config_default(&c);
    CHECK_RC(pcoll_preduce_config_parse("fifo:3:dyn", &c));
    CHECK(c.policy == PCOLL_PREDUCE_FIFO && c.group_size == 3 && c.dynamic_weights == 1);
    CHECK_RC(pcoll_preduce_config_parse("fifo:2:const:noavoid:window=9:alpha=0.25", &c));
    CHECK(c.group_size == 2 && !c.dynamic_weights && !c.frozen_avoidance && c.window == 9 && c.alpha == 0.25);
    CHECK_RC(pcoll_preduce_config_parse("ripples:random:3", &c));
    CHECK(c.policy == PCOLL_PREDUCE_RIPPLES_RANDOM && c.group_size == 3);
    CHECK_RC(pcoll_preduce_config_parse("ripples:smart:4:c=2:ii:ctl=0:seed=5", &c));
    CHECK(c.policy == PCOLL_PREDUCE_RIPPLES_SMART && c.group_size == 4 && c.slow_threshold == 2 && c.inter_intra &&
          c.seed == 5);
    CHECK_RC(pcoll_preduce_config_parse("ripples:static", &c));
    CHECK(c.policy == PCOLL_PREDUCE_RIPPLES_STATIC);
    const char *bad[] = {"", "lifo:3", "ripples", "ripples:clever", "fifo:0", "fifo:3:ii", "ripples:static:3",
                         "fifo:alpha=1", "fifo:3 ", "ripples:smart:c=-1"};
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        CHECK(pcoll_preduce_config_parse(bad[i], &c) == PCOLL_ERR_ARG);
        CHECK(strstr(pcoll_last_error(), "pcoll_preduce_config_parse") != NULL);
    }
}

static void test_bad_args(pcoll_t *ctx)
{
    pcoll_preduce_config_t c;
    pcoll_preduce_config_default(&c);
    pcoll_preduce_t *o = NULL;
    CHECK(pcoll_preduce_create(ctx, COUNT, PCOLL_INT32, &c, &o) == PCOLL_ERR_DTYPE && !o);
    CHECK(strstr(pcoll_last_error(), "dtype") != NULL);
    c.group_size = size + 1;
    CHECK(pcoll_preduce_create(ctx, COUNT, PCOLL_FLOAT64, &c, &o) == PCOLL_ERR_ARG && !o);
    CHECK(strstr(pcoll_last_error(), "group_size") != NULL);
    /* one rank differs: every rank fails, naming the field */
    pcoll_preduce_config_default(&c);
    if (size > 1 && rank == size - 1) c.dynamic_weights = 1;
    int rc = pcoll_preduce_create(ctx, COUNT, PCOLL_FLOAT64, &c, &o);
    if (size > 1) {
        CHECK(rc == PCOLL_ERR_ARG && !o);
        CHECK(strstr(pcoll_last_error(), "dynamic_weights") != NULL);
    } else {
        CHECK_RC(rc);
        CHECK_RC(pcoll_preduce_free(&o));
    }
    CHECK(pcoll_preduce(NULL, NULL, 0, NULL) == PCOLL_ERR_NULL);
}

static double total(const double *m)
{
    double s = 0, all;
    for (int i = 0; i < COUNT; i++) s += m[i];
    MPI_Allreduce(&s, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

/* one call's group as a member saw it */
typedef struct seen {
    double group_id, first, members, model; /* members: a hash of the list */
} seen_t;

static int by_group(const void *a, const void *b)
{
    const seen_t *x = a, *y = b;
    if (x->group_id != y->group_id) return x->group_id < y->group_id ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return 0;
}

/* Rank 0 gathers what every rank saw: the records of one group (its id
 * and first member: static steps hold several groups) are as many as its
 * members, with the same member list and the same model. */
static void members_agree(const char *spec, int planned_ahead, const seen_t *mine, int n)
{
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    int doubles = 4 * n;
    MPI_Gather(&doubles, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total_n = 0;
    if (rank == 0)
        for (int r = 0; r < size; r++) {
            displs[r] = total_n;
            total_n += counts[r];
        }
    seen_t *all = rank == 0 ? malloc(sizeof(double) * (size_t)(total_n + 4)) : NULL;
    MPI_Gatherv(mine, doubles, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int records = total_n / 4, groups = 0;
        qsort(all, (size_t)records, sizeof *all, by_group);
        for (int i = 0; i < records;) {
            int j = i;
            while (j < records && by_group(&all[i], &all[j]) == 0) {
                CHECK_MSG(all[j].members == all[i].members, "%s: group %.0f: members differ between members",
                          spec, all[i].group_id);
                CHECK_MSG(fabs(all[j].model - all[i].model) <= 1e-9 * (1 + fabs(all[i].model)),
                          "%s: group %.0f: models %.17g and %.17g after its average", spec, all[i].group_id,
                          all[i].model, all[j].model);
                j++;
            }
            /* the hash carries the size; Ripples plans groups ahead, and a
             * member that had stopped calling ran its group in drain */
            int want = (int)(all[i].members / 1e9);
            CHECK_MSG(planned_ahead ? j - i <= want : j - i == want,
                      "%s: group %.0f (first %.0f): %d members reported it, it has %d", spec, all[i].group_id,
                      all[i].first, j - i, want);
            groups++;
            i = j;
        }
        CHECK(groups > 0);
    }
    free(all);
    free(counts);
    free(displs);
}

static void run(pcoll_t *ctx, const char *spec, int calls)
{
    pcoll_preduce_config_t c;
    pcoll_preduce_config_default(&c);
    CHECK_RC(pcoll_preduce_config_parse(spec, &c));
    if (c.group_size > size) c.group_size = size;
    pcoll_preduce_t *o;
    CHECK_RC(pcoll_preduce_create(ctx, COUNT, PCOLL_FLOAT64, &c, &o));
    double *m = malloc(sizeof(double) * COUNT);
    for (int i = 0; i < COUNT; i++) m[i] = rank * 1000.0 + i;
    double before = total(m);
    int is_static = c.policy == PCOLL_PREDUCE_RIPPLES_STATIC;
    /* controller policies: ranks stop at different counts */
    int mine = is_static ? calls : calls - (rank % 3) * (calls / 10);
    unsigned seed = (unsigned)rank * 7919u + 1;
    uint64_t iter = 0;
    int alone = 0;
    seen_t *seen = malloc(sizeof(seen_t) * (size_t)mine);
    for (int k = 0; k < mine; k++) {
        if (rand_r(&seed) % 4 == 0) usleep((useconds_t)(rand_r(&seed) % 300));
        pcoll_preduce_info_t info;
        iter++;
        CHECK_RC(pcoll_preduce(o, m, iter, &info));
        CHECK(info.group_size >= 1 && info.group_size <= size);
        int in = 0;
        for (int i = 0; i < info.group_size; i++) {
            in |= info.members[i] == rank;
            if (i) CHECK(info.members[i] > info.members[i - 1]);
        }
        CHECK_MSG(in, "%s: call %d: rank %d is not in its group", spec, k, rank);
        if (!c.dynamic_weights) CHECK(fabs(info.weight - 1.0 / info.group_size) < 1e-12);
        /* FIFO groups hold ready ranks: the group's iteration is the
         * largest of theirs now.  Ripples' groups may be formed before a
         * member's latest request: theirs is the largest known then */
        if (c.policy == PCOLL_PREDUCE_FIFO) CHECK(info.iteration >= iter);
        if (info.iteration > iter) iter = info.iteration;
        alone += info.group_size == 1;
        double hash = 0;
        for (int i = 0; i < info.group_size; i++) hash = fmod(hash * 31 + info.members[i] + 1, 1e6);
        seen[k] = (seen_t){(double)info.group_id, info.members[0], info.group_size * 1e9 + hash, m[COUNT - 1]};
    }

    pcoll_preduce_stats_t st;
    CHECK_RC(pcoll_preduce_get_stats(o, &st));
    if (rank == c.controller && !is_static) {
        CHECK(st.requests > 0 && st.groups > 0);
        printf("%s at %d ranks: %llu requests, %llu groups, %llu bridges, %llu holds, %llu conflicts; controller "
               "busy %.3f of %.3f s\n",
               spec, size, (unsigned long long)st.requests, (unsigned long long)st.groups,
               (unsigned long long)st.bridges, (unsigned long long)st.holds, (unsigned long long)st.conflicts,
               st.busy_s, st.open_s);
    }
    /* the groups planned with this rank already (Ripples) average now */
    CHECK_RC(pcoll_preduce_drain(o, m));
    /* (after drain: a rank still calling may wait for a group of this one) */
    members_agree(spec, c.policy == PCOLL_PREDUCE_RIPPLES_RANDOM || c.policy == PCOLL_PREDUCE_RIPPLES_SMART, seen,
                  mine);
    free(seen);
    EXPECT_ERR(pcoll_preduce(o, m, iter + 1, NULL), PCOLL_ERR_STATE, "drain");
    CHECK_RC(pcoll_preduce_free(&o));
    CHECK(o == NULL);
    /* models change only by group averages; with weights 1/n their sum
     * stays, for every policy once the planned groups are drained */
    double after = total(m);
    if (!c.dynamic_weights)
        CHECK_MSG(fabs(after - before) <= 1e-9 * fabs(before), "%s: sum %.17g, was %.17g", spec, after, before);
    /* the models came closer to each other */
    double lo = m[0], hi = m[0];
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (size > 1) CHECK_MSG(hi - lo < 1000.0 * (size - 1), "%s: models spread %g", spec, hi - lo);
    free(m);
}

/* Rank 1 stops calling: with a deadline, the others' calls end with
 * PCOLL_ERR_TIMEOUT instead of a hang; when rank 1 comes, calling again
 * resumes the wait, and so does drain (the group of the standing READY
 * first, then the end). */
static void test_timeout(pcoll_t *ctx)
{
    if (size < 3) return;
    pcoll_preduce_config_t c;
    pcoll_preduce_config_default(&c);
    c.group_size = size; /* FIFO of everyone: nobody gets a group without rank 1 */
    pcoll_preduce_t *o;
    CHECK_RC(pcoll_preduce_create(ctx, COUNT, PCOLL_FLOAT64, &c, &o));
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 2.0));
    double *m = calloc(COUNT, sizeof(double));
    if (rank != 1) {
        int rc = pcoll_preduce(o, m, 1, NULL);
        CHECK_MSG(rc == PCOLL_ERR_TIMEOUT, "rc %d", rc);
        CHECK(strstr(pcoll_last_error(), "pcoll_preduce") != NULL);
        CHECK_MSG(strstr(pcoll_last_error(), "rank 1") != NULL, "report: %s", pcoll_last_error());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* rank 1 wakes up: the others' calls resume (their READY stands) and
     * the group of everyone averages */
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 0));
    pcoll_preduce_info_t info;
    CHECK_RC(pcoll_preduce(o, m, 1, &info));
    CHECK(info.group_size == size);
    /* again, and this time the others drain instead of calling again:
     * their standing READY's group comes first, then the end */
    for (int i = 0; i < COUNT; i++) m[i] = rank;
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 2.0));
    if (rank != 1) CHECK(pcoll_preduce(o, m, 2, NULL) == PCOLL_ERR_TIMEOUT);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 0));
    if (rank == 1) {
        CHECK_RC(pcoll_preduce(o, m, 2, &info));
        CHECK(info.group_size == size);
    }
    CHECK_RC(pcoll_preduce_drain(o, m));
    CHECK_MSG(fabs(m[0] - (size - 1) / 2.0) < 1e-12, "after drain: %g, the mean is %g", m[0], (size - 1) / 2.0);
    CHECK_RC(pcoll_preduce_free(&o));
    free(m);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tu_rank_ = rank;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    test_parse();
    test_bad_args(ctx);
    const char *specs[] = {"fifo:2", "fifo:3:dyn", "fifo:3:const", "ripples:random:2", "ripples:random:3",
                           "ripples:smart:3", "ripples:smart:2:ii", "ripples:static"};
    int calls = argc > 1 ? atoi(argv[1]) : 300;
    for (int i = 0; i < (int)(sizeof specs / sizeof specs[0]); i++) run(ctx, specs[i], calls);
    test_timeout(ctx);
    if (rank == 0) printf("preduce: %ld checks passed at %d ranks\n", (long)tu_checks_, size);
    CHECK_RC(pcoll_finalize(&ctx));
    MPI_Finalize();
    return 0;
}
