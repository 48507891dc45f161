/*
 * Clock offsets to rank 0, for timelines (docs/timeline.md, "Clocks").
 *
 *   rank 0                      rank i (its turn, one after another)
 *     "go" ---------------------->  (waits sleeping, not spinning)
 *          <----- ping ---------   t1 = its clock
 *     t0 = its clock -- t0 ----->  t2 = its clock
 *     ... PINGS times; the shortest t2 - t1 counts:
 *       offset = (t1 + t2) / 2 - t0,  error <= (t2 - t1) / 2
 *
 * The waiting ranks sleep between polls, so that on an oversubscribed
 * node the two ranks in turn get the cores, and none goes on before the
 * last one is measured.
 */
#include "clocks.h"

#include <time.h>

#include "../util/error.h"
#include "../util/recorder.h"

#define PINGS 16
#define TAG_GO 1
#define TAG_PING 2
#define TAG_PONG 3

static int sleep_until_done(MPI_Request *req)
{
    for (;;) {
        int flag = 0;
        int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) return rc;
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

static int serve(MPI_Comm comm, int size, int64_t shift)
{
    for (int i = 1; i < size; i++) {
        char go = 1;
        int rc = MPI_Send(&go, 1, MPI_CHAR, i, TAG_GO, comm);
        for (int k = 0; rc == MPI_SUCCESS && k < PINGS; k++) {
            char ping;
            rc = MPI_Recv(&ping, 1, MPI_CHAR, i, TAG_PING, comm, MPI_STATUS_IGNORE);
            uint64_t t0 = pc_rec_mono_ns() + (uint64_t)shift;
            if (rc == MPI_SUCCESS) rc = MPI_Send(&t0, 1, MPI_UINT64_T, i, TAG_PONG, comm);
        }
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

static int measure(MPI_Comm comm, int64_t shift, int64_t *offset_ns, int64_t *err_ns)
{
    char go;
    MPI_Request req;
    int rc = MPI_Irecv(&go, 1, MPI_CHAR, 0, TAG_GO, comm, &req);
    if (rc == MPI_SUCCESS) rc = sleep_until_done(&req);
    uint64_t best = UINT64_MAX;
    for (int k = 0; rc == MPI_SUCCESS && k < PINGS; k++) {
        char ping = 1;
        uint64_t t0 = 0, t1 = pc_rec_mono_ns() + (uint64_t)shift;
        rc = MPI_Send(&ping, 1, MPI_CHAR, 0, TAG_PING, comm);
        if (rc == MPI_SUCCESS) rc = MPI_Recv(&t0, 1, MPI_UINT64_T, 0, TAG_PONG, comm, MPI_STATUS_IGNORE);
        uint64_t t2 = pc_rec_mono_ns() + (uint64_t)shift;
        if (rc == MPI_SUCCESS && t2 - t1 < best) {
            best = t2 - t1;
            *offset_ns = (int64_t)(t1 + (t2 - t1) / 2) - (int64_t)t0;
            *err_ns = (int64_t)((t2 - t1 + 1) / 2);
        }
    }
    return rc;
}

int pc_clock_offset(MPI_Comm comm, int64_t shift_ns, int64_t *offset_ns, int64_t *err_ns, const char *fn)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    *offset_ns = 0;
    *err_ns = 0;
    int rc = rank == 0 ? serve(comm, size, shift_ns) : measure(comm, shift_ns, offset_ns, err_ns);
    /* nobody leaves before the last rank is measured: a rank that went on
     * (computing, on a shared core) would slow the later ping-pongs */
    MPI_Request req;
    if (rc == MPI_SUCCESS) rc = MPI_Ibarrier(comm, &req);
    if (rc == MPI_SUCCESS) rc = sleep_until_done(&req);
    return rc == MPI_SUCCESS ? PCOLL_SUCCESS : pc_mpi_error(rc, fn, "measuring the clock offsets");
}
