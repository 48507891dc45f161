/*
 * Many live partial objects at once (default 1000; PCOLL_TEST_OBJECTS):
 * solo, majority, quorum and synchronous ones, every rank calling every
 * object in turn for a few sweeps with random pauses, then a flush of each:
 * conservation exact for every object, no hang.  (The cost per call at 10,
 * 100 and 1000 objects is measured by `pcoll-bench objects`.)
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../rng.h"
#include "../testutil.h"

int main(int argc, char **argv)
{
    int rank, size;
    tu_mpi_start(&argc, &argv, 600, &rank, &size);
    int n = getenv("PCOLL_TEST_OBJECTS") ? atoi(getenv("PCOLL_TEST_OBJECTS")) : 1000;
    int sweeps = 3;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    pcoll_partial_t **p = calloc((size_t)n, sizeof *p);
    int64_t *delivered = calloc((size_t)n, sizeof *delivered);
    CHECK(p && delivered);
    char q[32];
    snprintf(q, sizeof q, "quorum:%d", (size + 1) / 2);
    const char *kinds[3] = {"solo", "majority", q};
    for (int i = 0; i < n; i++) {
        pcoll_partial_config_t cfg;
        pcoll_partial_config_default(&cfg);
        CHECK_RC(pcoll_partial_config_parse(kinds[i % 3], &cfg));
        cfg.sync_every = i % 7 == 0 ? 2 : 0;
        cfg.seed = (uint64_t)i;
        CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_INT64, &cfg, &p[i]));
    }
    const char *phase = getenv("PCOLL_TEST_DATA_PHASE");
    if (phase && size > 1) CHECK(strcmp(pcoll_partial_data_phase(p[0]), phase) == 0);
    rng_t r;
    rng_seed(&r, 5 + (uint64_t)rank);
    int64_t one[4] = {1, 0, 0, 0}, out[4];
    double t0 = MPI_Wtime();
    for (int s = 0; s < sweeps; s++)
        for (int i = 0; i < n; i++) {
            if (rng_below(&r, 50) == 0) {
                struct timespec ts = {0, (long)rng_below(&r, 300) * 1000};
                nanosleep(&ts, NULL);
            }
            CHECK_RC(pcoll_partial_allreduce(p[i], one, out, NULL));
            delivered[i] += out[0];
        }
    double t1 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        CHECK_RC(pcoll_partial_flush(p[i], out, NULL));
        delivered[i] += out[0];
        CHECK_MSG(delivered[i] == (int64_t)sweeps * size, "object %d (%s) delivered %lld, expected %d", i,
                  kinds[i % 3], (long long)delivered[i], sweeps * size);
    }
    for (int i = n - 1; i >= 0; i--) CHECK_RC(pcoll_partial_free(&p[i]));
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0)
        printf("test_objects: P=%d, %d live objects (%s), %d sweeps: %.1f us per call, conservation exact\n", size, n,
               phase ? phase : "default", sweeps, (t1 - t0) * 1e6 / ((double)n * sweeps));
    free(p);
    free(delivered);
    MPI_Finalize();
    return 0;
}
