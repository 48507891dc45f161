/*
 * Bad arguments get the right status and a message naming the problem, crash
 * nothing and leave nothing half-done: a valid call still works afterwards.
 */
#include <stdint.h>
#include <string.h>

#include "../testutil.h"

int main(int argc, char **argv)
{
    int rank, size;
    tu_mpi_start(&argc, &argv, 120, &rank, &size);
    pcoll_set_log_level(PCOLL_LOG_NONE); /* the errors below are expected */

    pcoll_t *ctx = NULL;
    EXPECT_ERR(pcoll_init(MPI_COMM_WORLD, NULL), PCOLL_ERR_NULL, "ctx");
    EXPECT_ERR(pcoll_init(MPI_COMM_NULL, &ctx), PCOLL_ERR_ARG, "MPI_COMM_NULL");
    CHECK(ctx == NULL);

    /* a malformed environment variable names itself (nothing collective yet) */
    setenv("PCOLL_ALLREDUCE_ALGO", "bogus", 1);
    EXPECT_ERR(pcoll_init(MPI_COMM_WORLD, &ctx), PCOLL_ERR_CONFIG, "PCOLL_ALLREDUCE_ALGO");
    unsetenv("PCOLL_ALLREDUCE_ALGO");
    setenv("PCOLL_POLL_MAX_US", "-5", 1);
    EXPECT_ERR(pcoll_init(MPI_COMM_WORLD, &ctx), PCOLL_ERR_CONFIG, "PCOLL_POLL_MAX_US");
    unsetenv("PCOLL_POLL_MAX_US");
    setenv("PCOLL_LOG_LEVEL", "loud", 1);
    EXPECT_ERR(pcoll_init(MPI_COMM_WORLD, &ctx), PCOLL_ERR_CONFIG, "PCOLL_LOG_LEVEL");
    unsetenv("PCOLL_LOG_LEVEL");
    CHECK(ctx == NULL);

    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];

    EXPECT_ERR(pcoll_allreduce(NULL, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0), PCOLL_ERR_NULL, "ctx");
    EXPECT_ERR(pcoll_allreduce(ctx, in, NULL, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0), PCOLL_ERR_NULL, "recvbuf");
    EXPECT_ERR(pcoll_allreduce(ctx, NULL, out, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0), PCOLL_ERR_NULL, "sendbuf");
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, SIZE_MAX / 2, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0), PCOLL_ERR_COUNT,
               "count");
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, SIZE_MAX, PCOLL_INT64, PCOLL_SUM, NULL, 0), PCOLL_ERR_COUNT, "count");
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, (pcoll_dtype_t)42, PCOLL_SUM, NULL, 0), PCOLL_ERR_DTYPE, "dtype");
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, (pcoll_dtype_t)-1, PCOLL_SUM, NULL, 0), PCOLL_ERR_DTYPE, "dtype");
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, PCOLL_FLOAT32, (pcoll_op_t)7, NULL, 0), PCOLL_ERR_OP, "op");

    int dup[3] = {rank, rank, (rank + 1) % size};
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, dup, 3), PCOLL_ERR_GROUP, "twice");
    int neg[2] = {rank, -1};
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, neg, 2), PCOLL_ERR_GROUP, "-1");
    int big[2] = {rank, size};
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, big, 2), PCOLL_ERR_GROUP,
               "not a rank");
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, big, 0), PCOLL_ERR_GROUP, "group_size");
    EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, big, -3), PCOLL_ERR_GROUP, "group_size");
    if (size > 1) {
        int other[1] = {(rank + 1) % size};
        EXPECT_ERR(pcoll_allreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, other, 1), PCOLL_ERR_GROUP,
                   "not a member");
    }

    pcoll_request_t *req = NULL;
    EXPECT_ERR(pcoll_iallreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, NULL), PCOLL_ERR_NULL, "req");
    EXPECT_ERR(pcoll_iallreduce(ctx, in, NULL, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &req), PCOLL_ERR_NULL,
               "recvbuf");
    CHECK(req == NULL);
    EXPECT_ERR(pcoll_wait(NULL), PCOLL_ERR_NULL, "req");
    int flag = 0;
    EXPECT_ERR(pcoll_test(NULL, &flag), PCOLL_ERR_NULL, "req");
    EXPECT_ERR(pcoll_test(&req, NULL), PCOLL_ERR_NULL, "flag");
    CHECK_RC(pcoll_wait(&req)); /* a NULL request is already complete */

    EXPECT_ERR(pcoll_set_allreduce_algo(ctx, (pcoll_allreduce_algo_t)9), PCOLL_ERR_ARG, "algo");
    EXPECT_ERR(pcoll_set_allreduce_algo(NULL, PCOLL_ALGO_RING), PCOLL_ERR_NULL, "ctx");
    pcoll_progress_policy_t pol, bad_spin, bad_sleep;
    CHECK_RC(pcoll_get_progress_policy(ctx, &pol));
    CHECK(pol.max_sleep_us >= 1 && pol.active_spin_us >= 0);
    bad_spin = pol;
    bad_spin.wait_spin_us = -1;
    bad_sleep = pol;
    bad_sleep.max_sleep_us = 0;
    EXPECT_ERR(pcoll_set_progress_policy(ctx, NULL), PCOLL_ERR_NULL, "policy");
    EXPECT_ERR(pcoll_set_progress_policy(ctx, &bad_spin), PCOLL_ERR_ARG, "spin");
    EXPECT_ERR(pcoll_set_progress_policy(ctx, &bad_sleep), PCOLL_ERR_ARG, "max_sleep_us");
    EXPECT_ERR(pcoll_set_log_level((pcoll_log_level_t)9), PCOLL_ERR_ARG, "log level");
    CHECK_RC(pcoll_set_progress_policy(ctx, &pol)); /* valid: back to the defaults */
    EXPECT_ERR(pcoll_finalize(NULL), PCOLL_ERR_NULL, "ctx");
    pcoll_t *none = NULL;
    EXPECT_ERR(pcoll_finalize(&none), PCOLL_ERR_NULL, "ctx");
    CHECK(strcmp(pcoll_strerror(PCOLL_ERR_GROUP), "invalid group map") == 0);
    CHECK(strcmp(pcoll_strerror(12345), "unknown status code") == 0);

    /* count 0 needs no buffers */
    CHECK_RC(pcoll_allreduce(ctx, NULL, NULL, 0, PCOLL_FLOAT64, PCOLL_SUM, NULL, 0));

    /* nothing was left half-done: valid operations still work */
    for (int algo = PCOLL_ALGO_AUTO; algo <= PCOLL_ALGO_DIRECT; algo++) {
        CHECK_RC(pcoll_set_allreduce_algo(ctx, (pcoll_allreduce_algo_t)algo));
        CHECK_RC(pcoll_allreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0));
        for (int i = 0; i < 8; i++) CHECK(out[i] == in[i] * (float)size);
    }
    CHECK_RC(pcoll_iallreduce(ctx, in, out, 8, PCOLL_FLOAT32, PCOLL_AVG, NULL, 0, &req));
    CHECK_RC(pcoll_wait(&req));
    for (int i = 0; i < 8; i++) CHECK(out[i] == in[i]);
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_args: P=%d, %ld checks passed\n", size, tu_checks_);
    MPI_Finalize();
    return 0;
}
