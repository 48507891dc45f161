/* MPI initialized without thread support: pcoll_init refuses with
 * PCOLL_ERR_THREAD_LEVEL and a message saying what is needed, and crashes
 * nothing; the program can go on using MPI. */
#include <string.h>

#include "../testutil.h"

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tu_rank_ = rank;
    tu_timeout(60);
    pcoll_set_log_level(PCOLL_LOG_NONE);
    CHECK(provided < MPI_THREAD_MULTIPLE);
    pcoll_t *ctx = (pcoll_t *)&provided; /* must be reset to NULL */
    int rc = pcoll_init(MPI_COMM_WORLD, &ctx);
    CHECK_MSG(rc == PCOLL_ERR_THREAD_LEVEL, "pcoll_init returned %d", rc);
    CHECK(ctx == NULL);
    CHECK(strstr(pcoll_last_error(), "MPI_THREAD_MULTIPLE") != NULL);
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(sum == size);
    if (rank == 0) printf("test_thread_level: refused as expected: %s\n", pcoll_last_error());
    MPI_Finalize();
    return 0;
}
