/*
 * Contexts on communicators other than MPI_COMM_WORLD, several at once:
 *   - MPI_Comm_split (halves), MPI_Comm_create with the ranks in reverse
 *     order, MPI_COMM_SELF, and MPI_COMM_WORLD, all alive together;
 *   - on each: allreduce (blocking and nonblocking, all ranks and a group
 *     list) and a partial object, results exact;
 *   - two contexts used at once: operations of both in flight together,
 *     partial calls alternating between them.
 */
#include <stdint.h>
#include <string.h>

#include "../testutil.h"

static int rank, size;

/* sum over the communicator's ranks r of f(world rank of r) */
static int32_t expect_sum(MPI_Comm comm, int32_t mine)
{
    int32_t s = 0;
    MPI_Allreduce(&mine, &s, 1, MPI_INT32_T, MPI_SUM, comm);
    return s;
}

/* allreduce and a partial object on ctx (over comm) */
static void exercise(pcoll_t *ctx, MPI_Comm comm, const char *name)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    CHECK_MSG(pcoll_rank(ctx) == crank && pcoll_size(ctx) == csize, "%s: rank/size", name);
    int32_t v = rank * 10 + 1, out = 0;
    CHECK_RC(pcoll_allreduce(ctx, &v, &out, 1, PCOLL_INT32, PCOLL_SUM, NULL, 0));
    CHECK_MSG(out == expect_sum(comm, v), "%s: allreduce %d", name, out);
    /* a group list: the communicator's ranks backwards */
    int *g = malloc(sizeof(int) * (size_t)csize);
    for (int i = 0; i < csize; i++) g[i] = csize - 1 - i;
    pcoll_request_t *req;
    int32_t big[300], bout[300];
    for (int i = 0; i < 300; i++) big[i] = rank + i;
    CHECK_RC(pcoll_iallreduce(ctx, big, bout, 300, PCOLL_INT32, PCOLL_SUM, g, csize, &req));
    CHECK_RC(pcoll_wait(&req));
    for (int i = 0; i < 300; i++) CHECK_MSG(bout[i] == expect_sum(comm, rank + i), "%s: group allreduce", name);
    free(g);
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_config_parse("majority", &cfg));
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_INT64, &cfg, &p));
    int64_t one[4] = {1, 2, 3, 4}, res[4], total = 0;
    for (int i = 0; i < 10; i++) {
        CHECK_RC(pcoll_partial_allreduce(p, one, res, NULL));
        total += res[0];
    }
    CHECK_RC(pcoll_partial_flush(p, res, NULL));
    total += res[0];
    CHECK_MSG(total == 10 * csize, "%s: partial delivered %lld, expected %d", name, (long long)total, 10 * csize);
    CHECK_RC(pcoll_partial_free(&p));
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 300, &rank, &size);
    MPI_Comm half, reversed, self = MPI_COMM_SELF;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Group world_group, rev_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int *order = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) order[i] = size - 1 - i;
    MPI_Group_incl(world_group, size, order, &rev_group);
    MPI_Comm_create(MPI_COMM_WORLD, rev_group, &reversed);
    free(order);

    pcoll_t *on_half, *on_rev, *on_self, *on_world;
    CHECK_RC(pcoll_init(half, &on_half));
    CHECK_RC(pcoll_init(reversed, &on_rev));
    CHECK_RC(pcoll_init(self, &on_self));
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &on_world));
    CHECK(pcoll_rank(on_rev) == size - 1 - rank);
    exercise(on_half, half, "split");
    exercise(on_rev, reversed, "created, reversed");
    exercise(on_self, self, "MPI_COMM_SELF");
    exercise(on_world, MPI_COMM_WORLD, "MPI_COMM_WORLD");

    /* two contexts at once: operations of both in flight together ... */
    enum { K = 40 };
    int32_t a[K], b[K], ra[K], rb[K];
    pcoll_request_t *qa[K], *qb[K];
    for (int i = 0; i < K; i++) {
        a[i] = i + rank;
        b[i] = 1000 + i - rank;
        CHECK_RC(pcoll_iallreduce(on_rev, &a[i], &ra[i], 1, PCOLL_INT32, PCOLL_SUM, NULL, 0, &qa[i]));
        CHECK_RC(pcoll_iallreduce(on_half, &b[i], &rb[i], 1, PCOLL_INT32, PCOLL_SUM, NULL, 0, &qb[i]));
    }
    for (int i = K - 1; i >= 0; i--) {
        CHECK_RC(pcoll_wait(&qb[i]));
        CHECK_RC(pcoll_wait(&qa[i]));
        CHECK(ra[i] == expect_sum(reversed, a[i]));
        CHECK(rb[i] == expect_sum(half, b[i]));
    }
    /* ... and partial calls alternating between them */
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    pcoll_partial_t *pw, *ph;
    CHECK_RC(pcoll_partial_create(on_world, 2, PCOLL_INT32, &cfg, &pw));
    CHECK_RC(pcoll_partial_create(on_half, 2, PCOLL_INT32, &cfg, &ph));
    int32_t one[2] = {1, 1}, res[2];
    int64_t tw = 0, th = 0;
    for (int i = 0; i < 20; i++) {
        CHECK_RC(pcoll_partial_allreduce(pw, one, res, NULL));
        tw += res[0];
        CHECK_RC(pcoll_partial_allreduce(ph, one, res, NULL));
        th += res[1];
    }
    CHECK_RC(pcoll_partial_flush(pw, res, NULL));
    tw += res[0];
    CHECK_RC(pcoll_partial_flush(ph, res, NULL));
    th += res[1];
    CHECK(tw == 20 * size);
    CHECK(th == 20 * pcoll_size(on_half));
    CHECK_RC(pcoll_partial_free(&pw));
    CHECK_RC(pcoll_partial_free(&ph));

    CHECK_RC(pcoll_finalize(&on_world));
    CHECK_RC(pcoll_finalize(&on_self));
    CHECK_RC(pcoll_finalize(&on_rev));
    CHECK_RC(pcoll_finalize(&on_half));
    MPI_Comm_free(&half);
    MPI_Comm_free(&reversed);
    MPI_Group_free(&rev_group);
    MPI_Group_free(&world_group);
    if (rank == 0) printf("test_comms: P=%d, %ld checks passed\n", size, tu_checks_);
    MPI_Finalize();
    return 0;
}
