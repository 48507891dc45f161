/*
 * Operation identity (docs/design.md): operations that share ranks never take
 * each other's messages.
 *   - two groups that the old hashed channels put on one channel, sharing
 *     two ranks, posted in opposite orders at those ranks, on the direct
 *     algorithm (every member sends to every member on tag step 0): their
 *     results are exact (the old layout mixed them up: wrong sums);
 *   - thousands of operations in flight at once, on all ranks and on a
 *     group list, completed out of order;
 *   - thousands of distinct groups, a few in flight at a time: exact, and
 *     the registry holds only what is in flight;
 *   - persistent plans: start after start bit-identical to pcoll_allreduce,
 *     on all ranks and on a group; a plan whose members disagree fails at
 *     every member; a second start before the first completed is refused.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../rng.h"
#include "../testutil.h"
#include "core/context.h"
#include "core/op.h"

static int rank, size;

/* ---- the channel a group list got before (the hash modulo the channel
 * space of the old tag layout: 5 step bits, 10 sequence bits, the first
 * half of the channels for groups) ---- */

static uint64_t old_hash(const int *ranks, int n)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)ranks[i];
        h *= 1099511628211ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static uint32_t old_channel(const int *ranks, int n)
{
    int *ub = NULL, flag = 0, bits = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    long tag_ub = flag ? *ub : 8388607;
    while (bits < 31 && (1L << (bits + 1)) - 1 <= tag_ub) bits++;
    uint32_t first_object_chan = 1u << (bits - 15 - 1);
    return 1 + (uint32_t)(old_hash(ranks, n) % (uint64_t)(first_object_chan - 1));
}

typedef struct list {
    int n;
    int r[8];
    uint32_t chan;
} list_t;

static int members_in_common(const list_t *a, const list_t *b, int *x, int *y)
{
    int k = 0;
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++)
            if (a->r[i] == b->r[j]) {
                if (k == 0) *x = a->r[i];
                if (k == 1) *y = a->r[i];
                k++;
            }
    return k;
}

/* every ordered list of 2..limit distinct ranks, into lists (when not
 * NULL); returns how many there are */
static int enumerate(list_t *lists, list_t *cur, int limit)
{
    int n = 0;
    if (cur->n >= 2) {
        if (lists) {
            lists[0] = *cur;
            lists[0].chan = old_channel(cur->r, cur->n);
        }
        n++;
    }
    if (cur->n == limit) return n;
    for (int x = 0; x < size; x++) {
        int used = 0;
        for (int i = 0; i < cur->n; i++) used |= cur->r[i] == x;
        if (used) continue;
        cur->r[cur->n++] = x;
        n += enumerate(lists ? lists + n : NULL, cur, limit);
        cur->n--;
    }
    return n;
}

static void colliding_groups(pcoll_t *ctx)
{
    if (size < 5) {
        if (rank == 0) printf("  colliding groups: needs 5 ranks or more, skipped at P=%d\n", size);
        return;
    }
    int limit = size < 5 ? size : 5;
    list_t cur = {0};
    int total = enumerate(NULL, &cur, limit);
    list_t *all = malloc(sizeof *all * (size_t)total);
    CHECK(all);
    memset(&cur, 0, sizeof cur);
    CHECK(enumerate(all, &cur, limit) == total);
    /* two lists on one old channel sharing at least two ranks */
    int A = -1, B = -1, a = -1, b = -1;
    for (int i = 0; i < total && A < 0; i++)
        for (int j = i + 1; j < total && A < 0; j++)
            if (all[i].chan == all[j].chan && members_in_common(&all[i], &all[j], &a, &b) >= 2) {
                A = i;
                B = j;
            }
    CHECK_MSG(A >= 0, "no two of %d group lists share an old channel at P=%d (the search space is too small)", total,
              size);
    if (a > b) {
        int t = a;
        a = b;
        b = t;
    }
    list_t *ga = &all[A], *gb = &all[B];
    if (rank == 0) {
        printf("  colliding groups: [");
        for (int i = 0; i < ga->n; i++) printf("%s%d", i ? "," : "", ga->r[i]);
        printf("] and [");
        for (int i = 0; i < gb->n; i++) printf("%s%d", i ? "," : "", gb->r[i]);
        printf("] were both on channel %u, sharing ranks %d and %d\n", ga->chan, a, b);
    }
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_DIRECT));
    enum { N = 64 };
    int32_t in[2][N], out[2][N];
    list_t *g[2] = {ga, gb};
    int member[2];
    pcoll_request_t *req[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        member[k] = 0;
        for (int i = 0; i < g[k]->n; i++) member[k] |= g[k]->r[i] == rank;
        for (int e = 0; e < N; e++) in[k][e] = (k + 1) * 100000 + rank * 100 + e;
    }
    /* the shared ranks post in opposite orders */
    int first = rank == b ? 1 : 0;
    for (int k = 0; k < 2; k++) {
        int x = (first + k) % 2;
        if (member[x])
            CHECK_RC(pcoll_iallreduce(ctx, in[x], out[x], N, PCOLL_INT32, PCOLL_SUM, g[x]->r, g[x]->n, &req[x]));
    }
    for (int k = 0; k < 2; k++) CHECK_RC(pcoll_wait(&req[k]));
    for (int k = 0; k < 2; k++) {
        if (!member[k]) continue;
        for (int e = 0; e < N; e++) {
            int32_t want = 0;
            for (int i = 0; i < g[k]->n; i++) want += (k + 1) * 100000 + g[k]->r[i] * 100 + e;
            CHECK_MSG(out[k][e] == want, "group %c: element %d is %d, expected %d (messages of the other group?)",
                      'A' + k, e, out[k][e], want);
        }
    }
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO));
    free(all);
}

/* ---- thousands in flight ---- */

static void many_in_flight(pcoll_t *ctx, int ops, const int *group, int gsize)
{
    int32_t *in = malloc(sizeof(int32_t) * (size_t)ops), *out = malloc(sizeof(int32_t) * (size_t)ops);
    pcoll_request_t **req = calloc((size_t)ops, sizeof *req);
    CHECK(in && out && req);
    int member = group == NULL, n = group ? gsize : size;
    for (int i = 0; i < gsize && group; i++) member |= group[i] == rank;
    if (!member) goto out;
    for (int i = 0; i < ops; i++) {
        in[i] = i * 7 + rank;
        CHECK_RC(pcoll_iallreduce(ctx, &in[i], &out[i], 1, PCOLL_INT32, PCOLL_SUM, group, gsize, &req[i]));
    }
    /* complete them out of order: test the odd ones from the end, wait for the rest */
    for (int i = ops - 1; i >= 0; i -= 2) {
        int flag = 0, rc = PCOLL_SUCCESS;
        while (!flag && rc == PCOLL_SUCCESS) rc = pcoll_test(&req[i], &flag);
        CHECK_RC(rc);
    }
    for (int i = 0; i < ops; i++) CHECK_RC(pcoll_wait(&req[i]));
    for (int i = 0; i < ops; i++) {
        int32_t want = 0;
        for (int m = 0; m < n; m++) want += i * 7 + (group ? group[m] : m);
        CHECK_MSG(out[i] == want, "operation %d of %d in flight: %d, expected %d", i, ops, out[i], want);
    }
out:
    free(in);
    free(out);
    free(req);
}

/* ---- many distinct groups ---- */

static void distinct_groups(pcoll_t *ctx, int want_groups)
{
    if (size < 2) return;
    enum { BATCH = 32 };
    rng_t r;
    rng_seed(&r, 2024); /* the same lists at every rank */
    int (*lists)[16] = malloc(sizeof *lists * BATCH), n[BATCH];
    int32_t in[BATCH], out[BATCH];
    pcoll_request_t *req[BATCH];
    int made = 0, maxlive = 0, mine = 0;
    while (made < want_groups) {
        int nb = 0;
        for (; nb < BATCH && made < want_groups; nb++, made++) {
            /* a random subset of 2..min(P, 16) ranks in random order: with
             * the batch and the size drawn, lists hardly ever repeat */
            int k = 2 + (int)rng_below(&r, (uint64_t)((size < 16 ? size : 16) - 1));
            int perm[64];
            for (int i = 0; i < size; i++) perm[i] = i;
            for (int i = 0; i < k; i++) {
                int j = i + (int)rng_below(&r, (uint64_t)(size - i)), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            n[nb] = k;
            memcpy(lists[nb], perm, sizeof(int) * (size_t)k);
        }
        for (int i = 0; i < nb; i++) {
            req[i] = NULL;
            int member = 0;
            for (int m = 0; m < n[i]; m++) member |= lists[i][m] == rank;
            if (!member) continue;
            in[i] = rank + 1;
            CHECK_RC(pcoll_iallreduce(ctx, &in[i], &out[i], 1, PCOLL_INT32, PCOLL_SUM, lists[i], n[i], &req[i]));
            mine++;
        }
        pthread_mutex_lock(&ctx->lock);
        int live = pc_groups_live(&ctx->groups);
        pthread_mutex_unlock(&ctx->lock);
        if (live > maxlive) maxlive = live;
        for (int i = 0; i < nb; i++) {
            if (!req[i]) continue;
            CHECK_RC(pcoll_wait(&req[i]));
            int32_t want = 0;
            for (int m = 0; m < n[i]; m++) want += lists[i][m] + 1;
            CHECK_MSG(out[i] == want, "group %d: %d, expected %d", made - nb + i, out[i], want);
        }
    }
    /* every operation completed: every record went (HELLOs included) */
    MPI_Barrier(MPI_COMM_WORLD);
    pthread_mutex_lock(&ctx->lock);
    int live = pc_groups_live(&ctx->groups);
    pthread_mutex_unlock(&ctx->lock);
    CHECK_MSG(live == 0, "%d group records left after every operation completed", live);
    CHECK_MSG(maxlive <= 2 * BATCH, "%d group records alive at once with %d operations in flight", maxlive, BATCH);
    MPI_Barrier(MPI_COMM_WORLD); /* nobody starts the next part (its HELLOs make records) before all checked */
    int total = 0;
    MPI_Reduce(&maxlive, &total, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("  %d random groups (%d here), at most %d records alive at a time\n", want_groups, mine, total);
    free(lists);
}

/* ---- persistent plans ---- */

static void plans(pcoll_t *ctx)
{
    enum { N = 1000, STARTS = 20 };
    float *in = malloc(sizeof(float) * N), *out = malloc(sizeof(float) * N), *ref = malloc(sizeof(float) * N);
    int *group = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) group[i] = size - 1 - i; /* all ranks, reversed */
    for (int variant = 0; variant < 2; variant++) {
        const int *g = variant ? group : NULL;
        pcoll_plan_t *plan;
        CHECK_RC(pcoll_allreduce_init(ctx, in, out, N, PCOLL_FLOAT32, PCOLL_SUM, g, size, &plan));
        for (int s = 0; s < STARTS; s++) {
            for (int e = 0; e < N; e++) in[e] = (float)((s * 31 + e * 7 + rank) % 100);
            pcoll_request_t *req;
            CHECK_RC(pcoll_start(plan, &req));
            pcoll_request_t *again;
            if (s == 0) {
                pcoll_log_level_t old = pcoll_get_log_level();
                pcoll_set_log_level(PCOLL_LOG_NONE);
                EXPECT_ERR(pcoll_start(plan, &again), PCOLL_ERR_STATE, "pcoll_wait");
                /* also once it has surely finished: the wait is what completes it */
                while (!atomic_load(&req->done)) usleep(100);
                EXPECT_ERR(pcoll_start(plan, &again), PCOLL_ERR_STATE, "pcoll_wait");
                EXPECT_ERR(pcoll_plan_free(&plan), PCOLL_ERR_STATE, "pcoll_wait");
                pcoll_set_log_level(old);
            }
            CHECK_RC(pcoll_wait(&req));
            CHECK(req == NULL);
            CHECK_RC(pcoll_allreduce(ctx, in, ref, N, PCOLL_FLOAT32, PCOLL_SUM, g, size));
            CHECK_MSG(memcmp(out, ref, sizeof(float) * N) == 0, "plan start %d differs from pcoll_allreduce", s);
        }
        CHECK_RC(pcoll_plan_free(&plan));
        CHECK(plan == NULL);
    }
    /* the members disagree (count at the last rank): every member fails */
    if (size > 1) {
        pcoll_log_level_t old = pcoll_get_log_level();
        pcoll_set_log_level(PCOLL_LOG_NONE);
        pcoll_plan_t *plan = NULL;
        EXPECT_ERR(pcoll_allreduce_init(ctx, in, out, rank == size - 1 ? N : N - 1, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0,
                                        &plan),
                   PCOLL_ERR_ARG, "count");
        CHECK(plan == NULL);
        pcoll_set_log_level(old);
        /* and the group still works */
        CHECK_RC(pcoll_allreduce_init(ctx, in, out, N, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &plan));
        pcoll_request_t *req;
        CHECK_RC(pcoll_start(plan, &req));
        CHECK_RC(pcoll_wait(&req));
        CHECK_RC(pcoll_plan_free(&plan));
    }
    free(in);
    free(out);
    free(ref);
    free(group);
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 600, &rank, &size);
    int quick = getenv("PCOLL_TEST_QUICK") != NULL;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    if (rank == 0) printf("test_identity: P=%d\n", size);
    colliding_groups(ctx);
    int many = quick ? 1500 : 3000;
    many_in_flight(ctx, many, NULL, 0);
    int *rev = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) rev[i] = size - 1 - i;
    many_in_flight(ctx, many, rev, size);
    if (rank == 0) printf("  %d operations in flight at once, on all ranks and on a group list\n", many);
    free(rev);
    distinct_groups(ctx, quick ? 500 : 5000);
    plans(ctx);
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_identity: P=%d, %ld checks passed\n", size, tu_checks_);
    MPI_Finalize();
    return 0;
}
