/* Prints pcoll_partial_group_of for rounds 0..R-1 of a GROUP partial object
 * at every rank, one JSON line per (rank, round), in rank order:
 *   mpirun -np P group_of S R      (S: group size, 0 for the default)
 * The simulator's groups are compared with these (tests/sim/test_exactness.sh). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "pcoll.h"

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: group_of S R\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int S = atoi(argv[1]), R = atoi(argv[2]);
    pcoll_t *ctx;
    pcoll_partial_t *p;
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    cfg.kind = PCOLL_PARTIAL_GROUP;
    cfg.group_size = S;
    if (pcoll_init(MPI_COMM_WORLD, &ctx) != PCOLL_SUCCESS || pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p) != PCOLL_SUCCESS) {
        fprintf(stderr, "group_of: %s\n", pcoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int *members = malloc(sizeof(int) * (size_t)size);
    for (int r = 0; r < size; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (r != rank) continue;
        for (int t = 0; t < R; t++) {
            int n = size;
            if (pcoll_partial_group_of(p, (uint64_t)t, members, &n) != PCOLL_SUCCESS) {
                fprintf(stderr, "group_of: %s\n", pcoll_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            printf("{\"rank\": %d, \"round\": %d, \"group\": [", rank, t);
            for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", members[i]);
            printf("]}\n");
        }
        fflush(stdout);
    }
    free(members);
    pcoll_partial_free(&p);
    pcoll_finalize(&ctx);
    MPI_Finalize();
    return 0;
}
