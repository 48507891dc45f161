/*
 * pcoll_shrink (core/shrink.c).
 *
 * test_shrink (any P): nobody died.  Every rank calls pcoll_shrink and gets
 * a context of all P ranks in the same order (an allreduce on it is
 * right); the old context's calls then fail with PCOLL_ERR_STATE naming
 * pcoll_shrink (so do its objects' calls: a partial object, a plan's
 * start; freeing the plan frees its handle only), and its pcoll_finalize
 * returns at once.  Bad arguments
 * (NULL pointers) are refused.
 *
 * test_shrink kill (run by shrink_test.sh under a hard timeout, P >= 3):
 * rank 1 kills itself with SIGKILL in the middle of allreduces and majority
 * partial calls.  Every other rank gets PCOLL_ERR_TIMEOUT, calls
 * pcoll_shrink, and gets a context of the P - 1 others (the old ranks in
 * increasing order); on it an allreduce, a majority partial object (its
 * flush delivers exactly everything contributed) and a second pcoll_shrink
 * with nobody lost all work.  Each survivor says so on stdout ("SHRUNK"),
 * then leaves without MPI_Finalize (a dead rank can keep it from
 * returning).
 */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../testutil.h"

static int rank, size;

/* an allreduce of every rank's old rank + 1 on ctx, checked */
static void check_sum(pcoll_t *ctx, int old_rank, int64_t want)
{
    int64_t x = old_rank + 1, y = -1;
    CHECK_RC(pcoll_allreduce(ctx, &x, &y, 1, PCOLL_INT64, PCOLL_SUM, NULL, 0));
    CHECK_MSG(y == want, "allreduce on the shrunk context gave %lld, not %lld", (long long)y, (long long)want);
}

static void nobody_died(void)
{
    pcoll_t *ctx, *ctx2;
    MPI_Comm comm;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, 1, PCOLL_INT64, &cfg, &p));
    int64_t a = 1, b = 0;
    pcoll_plan_t *plan;
    CHECK_RC(pcoll_allreduce_init(ctx, &a, &b, 1, PCOLL_INT64, PCOLL_SUM, NULL, 0, &plan));
    EXPECT_ERR(pcoll_shrink(ctx, NULL, &ctx2), PCOLL_ERR_NULL, "survivors");
    EXPECT_ERR(pcoll_shrink(ctx, &comm, NULL), PCOLL_ERR_NULL, "newctx");
    EXPECT_ERR(pcoll_shrink(NULL, &comm, &ctx2), PCOLL_ERR_NULL, "ctx");
    CHECK_RC(pcoll_shrink(ctx, &comm, &ctx2));
    int r2, s2;
    MPI_Comm_rank(comm, &r2);
    MPI_Comm_size(comm, &s2);
    CHECK(s2 == size && r2 == rank);
    CHECK(pcoll_size(ctx2) == size && pcoll_rank(ctx2) == rank);
    check_sum(ctx2, rank, (int64_t)size * (size + 1) / 2);
    int64_t x = 1, y;
    EXPECT_ERR(pcoll_allreduce(ctx, &x, &y, 1, PCOLL_INT64, PCOLL_SUM, NULL, 0), PCOLL_ERR_STATE, "pcoll_shrink");
    MPI_Comm c3;
    pcoll_t *ctx3;
    EXPECT_ERR(pcoll_shrink(ctx, &c3, &ctx3), PCOLL_ERR_STATE, "pcoll_shrink");
    /* its objects refuse too, free included (left with it) */
    EXPECT_ERR(pcoll_partial_allreduce(p, &a, &b, NULL), PCOLL_ERR_STATE, "pcoll_shrink");
    EXPECT_ERR(pcoll_partial_free(&p), PCOLL_ERR_STATE, "pcoll_shrink");
    pcoll_request_t *req;
    EXPECT_ERR(pcoll_start(plan, &req), PCOLL_ERR_STATE, "pcoll_shrink");
    CHECK_RC(pcoll_plan_free(&plan)); /* the handle only */
    CHECK(plan == NULL);
    pcoll_t *copy = ctx;
    CHECK_RC(pcoll_finalize(&ctx));
    CHECK(ctx == NULL);
    CHECK_RC(pcoll_finalize(&copy)); /* again, from another copy: nothing more */
    CHECK_RC(pcoll_finalize(&ctx2));
    MPI_Comm_free(&comm);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("test_shrink: nobody died: %d ranks shrunk to %d, old context refused, passed\n", size, s2);
    MPI_Finalize();
}

static void killed(void)
{
    int victim = 1;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 2));
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_config_parse("majority", &cfg));
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, 16, PCOLL_FLOAT32, &cfg, &p));
    float x[16] = {1}, y[16];
    int rc = PCOLL_SUCCESS;
    for (int it = 0; it < 1000 && rc == PCOLL_SUCCESS; it++) {
        if (rank == victim && it == 5) {
            fflush(stdout);
            raise(SIGKILL);
        }
        rc = pcoll_allreduce(ctx, x, y, 16, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0);
        if (rc == PCOLL_SUCCESS) rc = pcoll_partial_allreduce(p, x, y, NULL);
    }
    CHECK_MSG(rc == PCOLL_ERR_TIMEOUT, "the survivors' call returned %d (%s)", rc, pcoll_last_error());
    MPI_Comm comm;
    pcoll_t *ctx2;
    double t0 = MPI_Wtime();
    CHECK_RC(pcoll_shrink(ctx, &comm, &ctx2));
    double took = MPI_Wtime() - t0;
    int r2, s2;
    MPI_Comm_rank(comm, &r2);
    MPI_Comm_size(comm, &s2);
    CHECK_MSG(s2 == size - 1, "%d survivors, not %d", s2, size - 1);
    CHECK_MSG(r2 == (rank < victim ? rank : rank - 1), "old rank %d is %d among the survivors", rank, r2);
    CHECK_RC(pcoll_finalize(&ctx)); /* stops its progress thread only */
    int64_t want = (int64_t)size * (size + 1) / 2 - (victim + 1);
    check_sum(ctx2, rank, want);

    /* a partial object on the survivors: every contribution delivered once */
    pcoll_partial_t *q;
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_config_parse("majority", &cfg));
    CHECK_RC(pcoll_partial_create(ctx2, 1, PCOLL_INT64, &cfg, &q));
    int64_t one = 1, got = 0, total = 0;
    int calls = 50;
    for (int it = 0; it < calls; it++) {
        CHECK_RC(pcoll_partial_allreduce(q, &one, &got, NULL));
        total += got;
    }
    CHECK_RC(pcoll_partial_flush(q, &got, NULL));
    total += got;
    CHECK_MSG(total == (int64_t)calls * s2, "delivered %lld of %lld contributions", (long long)total,
              (long long)calls * s2);
    CHECK_RC(pcoll_partial_free(&q));

    /* and again with nobody lost: the same survivors */
    MPI_Comm comm3;
    pcoll_t *ctx3;
    CHECK_RC(pcoll_shrink(ctx2, &comm3, &ctx3));
    CHECK(pcoll_size(ctx3) == s2);
    check_sum(ctx3, rank, want);
    CHECK_RC(pcoll_finalize(&ctx2));
    CHECK_RC(pcoll_finalize(&ctx3));
    MPI_Comm_free(&comm3);
    printf("SHRUNK %d: %d survivors (now rank %d) in %.2f s; allreduce, partial (%lld delivered) and a second "
           "shrink on them work\n",
           rank, s2, r2, took, (long long)total);
    fflush(stdout);
    /* leave together, without MPI_Finalize (the dead rank can hold it) */
    MPI_Barrier(comm);
    sleep(1);
    _exit(0);
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 120, &rank, &size);
    if (argc > 1 && strcmp(argv[1], "kill") == 0) killed();
    else nobody_died();
    return 0;
}
