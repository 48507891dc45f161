/*
 * pcoll_allreduce / pcoll_iallreduce against MPI_Allreduce, bit for bit, on
 * integer-valued data: every algorithm forced in turn, every type, sum and
 * average, counts 0, 1, 2, P-1, P+1, odd counts and 1 MiB, in place and not;
 * subset groups in shuffled order; overlapping and disjoint groups in flight
 * at once in different orders at different ranks; 128 operations in flight.
 */
#include <stdint.h>
#include <string.h>

#include "../testutil.h"
#include "../rng.h"

static int rank, size;

static MPI_Datatype mpi_type(pcoll_dtype_t t)
{
    switch (t) {
    case PCOLL_FLOAT32: return MPI_FLOAT;
    case PCOLL_FLOAT64: return MPI_DOUBLE;
    case PCOLL_INT32: return MPI_INT32_T;
    default: return MPI_INT64_T;
    }
}

/* integer values in [-100, 100]: sums of up to 16 ranks stay exact in float */
static void fill(void *buf, size_t count, pcoll_dtype_t t, uint64_t seed)
{
    rng_t r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < count; i++) {
        int v = (int)rng_below(&r, 201) - 100;
        switch (t) {
        case PCOLL_FLOAT32: ((float *)buf)[i] = (float)v; break;
        case PCOLL_FLOAT64: ((double *)buf)[i] = (double)v; break;
        case PCOLL_INT32: ((int32_t *)buf)[i] = v; break;
        default: ((int64_t *)buf)[i] = v; break;
        }
    }
}

/* the reference: MPI's sum (members' data, zeros elsewhere), then / n */
static void reference(const void *mine, void *ref, size_t count, pcoll_dtype_t t, pcoll_op_t op, int member, int n)
{
    size_t es = pcoll_dtype_size(t);
    void *contrib = calloc(count ? count : 1, es);
    if (member && count) memcpy(contrib, mine, count * es);
    MPI_Allreduce(contrib, ref, (int)count, mpi_type(t), MPI_SUM, MPI_COMM_WORLD);
    free(contrib);
    if (op != PCOLL_AVG) return;
    for (size_t i = 0; i < count; i++) switch (t) {
        case PCOLL_FLOAT32: ((float *)ref)[i] = ((float *)ref)[i] / (float)n; break;
        case PCOLL_FLOAT64: ((double *)ref)[i] = ((double *)ref)[i] / (double)n; break;
        case PCOLL_INT32: ((int32_t *)ref)[i] = ((int32_t *)ref)[i] / n; break;
        default: ((int64_t *)ref)[i] = ((int64_t *)ref)[i] / n; break;
        }
}

static long ncases;

static void one_case(pcoll_t *ctx, size_t count, pcoll_dtype_t t, pcoll_op_t op, int inplace, const int *group,
                     int gsize, uint64_t seed)
{
    size_t es = pcoll_dtype_size(t);
    int member = 1, n = size;
    if (group) {
        member = 0;
        n = gsize;
        for (int i = 0; i < gsize; i++) member |= group[i] == rank;
    }
    size_t bytes = (count ? count : 1) * es;
    void *in = malloc(bytes), *out = malloc(bytes), *copy = malloc(bytes), *ref = malloc(bytes);
    fill(in, count, t, seed * 1000003 + (uint64_t)rank);
    memcpy(copy, in, bytes);
    memset(out, 0x5a, bytes);
    if (member) {
        if (inplace) {
            memcpy(out, in, bytes);
            CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, out, count, t, op, group, gsize));
        } else {
            CHECK_RC(pcoll_allreduce(ctx, in, out, count, t, op, group, gsize));
            CHECK_MSG(count == 0 || memcmp(in, copy, count * es) == 0, "sendbuf modified");
        }
    }
    reference(in, ref, count, t, op, member, n);
    if (member)
        CHECK_MSG(count == 0 || memcmp(out, ref, count * es) == 0,
                  "result differs from MPI_Allreduce: count %zu %s %s inplace %d group %d algo %s", count,
                  pcoll_dtype_name(t), op == PCOLL_SUM ? "sum" : "avg", inplace, gsize,
                  pcoll_allreduce_algo_name(pcoll_allreduce_algo_for(ctx, count * es, n)));
    free(in);
    free(out);
    free(copy);
    free(ref);
    ncases++;
}

static int quick; /* PCOLL_TEST_QUICK: sanitizer runs, a smaller sweep */

static void sweep(pcoll_t *ctx, pcoll_allreduce_algo_t algo)
{
    CHECK_RC(pcoll_set_allreduce_algo(ctx, algo));
    static const pcoll_dtype_t types[] = {PCOLL_FLOAT32, PCOLL_FLOAT64, PCOLL_INT32, PCOLL_INT64};
    for (int ti = 0; ti < (quick ? 2 : 4); ti++) {
        size_t es = pcoll_dtype_size(types[ti]);
        size_t counts[] = {0, 1, 2, (size_t)size - 1, (size_t)size + 1, 7, 33, 1001, 4099,
                           (quick ? (size_t)1 << 16 : (size_t)1 << 20) / es};
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
            for (int op = 0; op < 2; op++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    /* 1 MiB: sum out of place, average in place suffice */
                    if (ci == sizeof counts / sizeof counts[0] - 1 && inplace != op) continue;
                    one_case(ctx, counts[ci], types[ti], (pcoll_op_t)op, inplace, NULL, 0,
                             (uint64_t)(algo * 100000 + ti * 1000 + ci * 10 + op * 2 + inplace));
                }
    }
}

/* A random subset of the ranks in random order, the same at every rank. */
static int random_group(rng_t *r, int *group)
{
    int n = 1 + (int)rng_below(r, (uint64_t)size);
    int *perm = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) perm[i] = i;
    for (int i = size - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint64_t)i + 1), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    memcpy(group, perm, sizeof(int) * (size_t)n);
    free(perm);
    return n;
}

static void subset_groups(pcoll_t *ctx)
{
    rng_t r;
    rng_seed(&r, 4242);
    int *group = malloc(sizeof(int) * (size_t)size);
    for (int algo = PCOLL_ALGO_RECDBL; algo <= PCOLL_ALGO_DIRECT; algo++) {
        CHECK_RC(pcoll_set_allreduce_algo(ctx, (pcoll_allreduce_algo_t)algo));
        for (int g = 0; g < 12; g++) {
            int n = random_group(&r, group);
            size_t count = (size_t)rng_below(&r, 3000);
            one_case(ctx, count, (pcoll_dtype_t)rng_below(&r, 4), (pcoll_op_t)rng_below(&r, 2), (int)rng_below(&r, 2),
                     group, n, 777 + (uint64_t)g);
        }
    }
    free(group);
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO));
}

/* Several overlapping and disjoint groups, operations started in a different
 * order at different ranks, all in flight before any wait; then 128
 * operations in flight on the whole communicator. */
static void in_flight(pcoll_t *ctx)
{
    enum { NG = 5, COUNT = 777, MANY = 128 };
    int groups[NG][64], gsize[NG] = {0};
    for (int i = 0; i < size; i++) {
        if (i <= size / 2) groups[0][gsize[0]++] = i;           /* lower half        */
        if (i >= size / 4) groups[1][gsize[1]++] = size - 1 - i; /* upper, reversed   */
        if (i % 2 == 0) groups[2][gsize[2]++] = i;              /* even              */
        if (i % 2 == 1) groups[3][gsize[3]++] = i;              /* odd (disjoint)    */
        groups[4][gsize[4]++] = (i * 7 + 3) % size;             /* all, shuffled     */
    }
    if (size % 7 == 0) /* then i * 7 + 3 is not a permutation */
        for (int i = 0; i < size; i++) groups[4][i] = size - 1 - i;
    /* one list is one group: its operations must start in the same order
     * everywhere, so a list that came up twice (small P) is dropped */
    for (int g = 1; g < NG; g++)
        for (int h = 0; h < g; h++)
            if (gsize[g] == gsize[h] && memcmp(groups[g], groups[h], sizeof(int) * (size_t)gsize[g]) == 0) gsize[g] = 0;
    float in[NG][COUNT], out[NG][COUNT], ref[COUNT];
    pcoll_request_t *req[NG] = {0};
    int member[NG];
    for (int g = 0; g < NG; g++) {
        member[g] = 0;
        for (int i = 0; i < gsize[g]; i++) member[g] |= groups[g][i] == rank;
        fill(in[g], COUNT, PCOLL_FLOAT32, 99 + (uint64_t)(g * 64 + rank));
    }
    for (int k = 0; k < NG; k++) {
        int g = rank % 2 ? NG - 1 - k : (k + rank) % NG; /* the order differs by rank */
        if (member[g] && gsize[g] > 0)
            CHECK_RC(pcoll_iallreduce(ctx, in[g], out[g], COUNT, PCOLL_FLOAT32, PCOLL_SUM, groups[g], gsize[g], &req[g]));
    }
    for (int g = 0; g < NG; g++) CHECK_RC(pcoll_wait(&req[g]));
    for (int g = 0; g < NG; g++) {
        if (gsize[g] == 0) continue;
        reference(in[g], ref, COUNT, PCOLL_FLOAT32, PCOLL_SUM, member[g], gsize[g]);
        if (member[g]) CHECK_MSG(memcmp(out[g], ref, sizeof ref) == 0, "group %d in flight: wrong result", g);
    }

    static int32_t min[MANY][64], mout[MANY][64], mref[64];
    pcoll_request_t *mreq[MANY];
    for (int i = 0; i < MANY; i++) {
        for (int j = 0; j < 64; j++) min[i][j] = (i * 31 + j * 7 + rank) % 1000;
        CHECK_RC(pcoll_iallreduce(ctx, min[i], mout[i], 1 + (size_t)(i % 64), PCOLL_INT32, PCOLL_SUM, NULL, 0, &mreq[i]));
    }
    /* complete them out of order: test the odd ones, wait for the rest */
    for (int i = MANY - 1; i >= 0; i -= 2) {
        int flag = 0;
        while (!flag) CHECK_RC(pcoll_test(&mreq[i], &flag));
        CHECK(mreq[i] == NULL);
    }
    for (int i = 0; i < MANY; i++) CHECK_RC(pcoll_wait(&mreq[i]));
    for (int i = 0; i < MANY; i++) {
        reference(min[i], mref, 1 + (size_t)(i % 64), PCOLL_INT32, PCOLL_SUM, 1, size);
        CHECK_MSG(memcmp(mout[i], mref, sizeof(int32_t) * (size_t)(1 + i % 64)) == 0, "operation %d of %d in flight",
                  i, MANY);
    }
}

/* pcoll_get_stats counts what a rank sent: recursive doubling over a power
 * of two ranks sends the whole vector once per step (docs/algorithms.md) */
static void stats(pcoll_t *ctx)
{
    enum { N = 1000 };
    int32_t in[N], out[N];
    fill(in, N, PCOLL_INT32, 7);
    pcoll_stats_t a, b;
    pcoll_log_level_t old = pcoll_get_log_level();
    pcoll_set_log_level(PCOLL_LOG_NONE);
    EXPECT_ERR(pcoll_get_stats(ctx, NULL), PCOLL_ERR_NULL, "stats");
    EXPECT_ERR(pcoll_get_stats(NULL, &a), PCOLL_ERR_NULL, "ctx");
    pcoll_set_log_level(old);
    int k = 0;
    while ((1 << (k + 1)) <= size) k++;
    int pow2 = (1 << k) == size;
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_RECDBL));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_RC(pcoll_get_stats(ctx, &a));
    CHECK_RC(pcoll_allreduce(ctx, in, out, N, PCOLL_INT32, PCOLL_SUM, NULL, 0));
    CHECK_RC(pcoll_get_stats(ctx, &b));
    if (pow2) {
        CHECK_MSG(b.data_bytes_sent - a.data_bytes_sent == (uint64_t)k * sizeof in, "sent %llu bytes, expected %llu",
                  (unsigned long long)(b.data_bytes_sent - a.data_bytes_sent),
                  (unsigned long long)((uint64_t)k * sizeof in));
        CHECK(b.data_messages_sent - a.data_messages_sent == (uint64_t)k);
    } else { /* folded ranks send their vector once (docs/algorithms.md) */
        CHECK(b.data_bytes_sent - a.data_bytes_sent >= sizeof in);
    }
    CHECK(b.control_bytes_sent >= a.control_bytes_sent && b.control_messages_sent >= a.control_messages_sent);
    CHECK_RC(pcoll_set_allreduce_algo(ctx, PCOLL_ALGO_AUTO));
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 600, &rank, &size);
    quick = getenv("PCOLL_TEST_QUICK") != NULL;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    CHECK(pcoll_size(ctx) == size && pcoll_rank(ctx) == rank);
    for (int algo = PCOLL_ALGO_AUTO; algo <= PCOLL_ALGO_DIRECT; algo++) sweep(ctx, (pcoll_allreduce_algo_t)algo);
    subset_groups(ctx);
    in_flight(ctx);
    stats(ctx);
    CHECK_RC(pcoll_finalize(&ctx));
    CHECK(ctx == NULL);
    if (rank == 0) printf("test_allreduce: P=%d, %ld cases passed\n", size, ncases);
    MPI_Finalize();
    return 0;
}
