/*
 * Several application threads use one context at the same time: the progress
 * token (src/engine/progress.h) passes between them and the progress thread.
 *
 *   thread 0: blocking pcoll_allreduce on group A      (takes the token)
 *   thread 1: pcoll_iallreduce, then pcoll_test until done or pcoll_wait,
 *             on group B                               (polls, or takes it)
 *   thread 2: a SOLO partial object, random work between calls, then a
 *             flush; conservation checked at the end   (waits for rounds)
 *
 * Each thread has its own group or object, so its operations are ordered
 * the same way at every rank whatever the interleaving of the threads.
 * Results are checked exactly (integer-valued data); a hang fails by timeout.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "rng.h"
#include "testutil.h"

enum { ITERS = 300, COUNT = 301, PCOUNT = 64 };

static int rank, size;
static pcoll_t *ctx;
static pcoll_partial_t *partial;
static int group_a[64], group_b[64];

static int32_t expected_sum(int it, int j)
{
    /* sum over ranks r of (r + it + j) % 97 */
    int32_t s = 0;
    for (int r = 0; r < size; r++) s += (r + it + j) % 97;
    return s;
}

static void *blocking_thread(void *arg)
{
    (void)arg;
    int32_t in[COUNT], out[COUNT];
    for (int it = 0; it < ITERS; it++) {
        for (int j = 0; j < COUNT; j++) in[j] = (rank + it + j) % 97;
        CHECK_RC(pcoll_allreduce(ctx, in, out, (size_t)(1 + it % COUNT), PCOLL_INT32, PCOLL_SUM, group_a, size));
        for (int j = 0; j <= it % COUNT; j++) CHECK_MSG(out[j] == expected_sum(it, j), "blocking: it %d j %d", it, j);
    }
    return NULL;
}

static void *nonblocking_thread(void *arg)
{
    (void)arg;
    int32_t in[COUNT], out[COUNT];
    for (int it = 0; it < ITERS; it++) {
        for (int j = 0; j < COUNT; j++) in[j] = (rank + it + j) % 97;
        pcoll_request_t *req;
        CHECK_RC(pcoll_iallreduce(ctx, in, out, COUNT, PCOLL_INT32, PCOLL_SUM, group_b, size, &req));
        if (it % 2) { /* poll: the progress thread (or another waiter) completes it */
            int flag = 0;
            while (!flag) CHECK_RC(pcoll_test(&req, &flag));
        } else {
            CHECK_RC(pcoll_wait(&req));
        }
        for (int j = 0; j < COUNT; j++) CHECK_MSG(out[j] == expected_sum(it, j), "nonblocking: it %d j %d", it, j);
    }
    return NULL;
}

static void *partial_thread(void *arg)
{
    (void)arg;
    rng_t r;
    rng_seed(&r, 1000 + (uint64_t)rank);
    float in[PCOUNT], out[PCOUNT];
    double contributed = 0, delivered = 0;
    for (int it = 0; it < ITERS; it++) {
        for (int j = 0; j < PCOUNT; j++) in[j] = (float)(rng_next(&r) % 5);
        for (int j = 0; j < PCOUNT; j++) contributed += in[j];
        struct timespec ts = {0, (long)(rng_next(&r) % 300) * 1000};
        nanosleep(&ts, NULL);
        CHECK_RC(pcoll_partial_allreduce(partial, in, out, NULL));
        for (int j = 0; j < PCOUNT; j++) delivered += out[j];
    }
    CHECK_RC(pcoll_partial_flush(partial, out, NULL));
    for (int j = 0; j < PCOUNT; j++) delivered += out[j];
    double all_contributed = 0;
    MPI_Allreduce(&contributed, &all_contributed, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK_MSG(delivered == all_contributed, "partial: delivered %.0f, contributed %.0f", delivered, all_contributed);
    return NULL;
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 300, &rank, &size);
    CHECK(size <= 64);
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    for (int i = 0; i < size; i++) {
        group_a[i] = i;
        group_b[i] = size - 1 - i;
    }
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_create(ctx, PCOUNT, PCOLL_FLOAT32, &cfg, &partial));

    /* (with one rank A and B are one group: any order of its operations is
     * the same order everywhere) */
    pthread_t t[3];
    void *(*fn[3])(void *) = {blocking_thread, nonblocking_thread, partial_thread};
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, fn[i], NULL) == 0);
    for (int i = 0; i < 3; i++) CHECK(pthread_join(t[i], NULL) == 0);

    CHECK_RC(pcoll_partial_free(&partial));
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_threads: P=%d, 3 threads, %ld checks passed\n", size, (long)tu_checks_);
    MPI_Finalize();
    return 0;
}
