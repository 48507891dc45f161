/*
 * Clock offsets to rank 0, for timelines (docs/timeline.md, "Clocks").
 *
 *   rank 0                      rank i (its turn, one after another)
 *     "go" (1) ----------------->  (waits sleeping, not spinning)
 *          <----- ping ---------   t1 = its clock
 *     t0 = its clock -- t0 ----->  t2 = its clock
 *     ... PINGS times; the shortest t2 - t1 counts:
 *       offset = (t1 + t2) / 2 - t0,  error <= (t2 - t1) / 2
 *     once rank 0 gave up on a rank, "go" (0) to the later ones
 *
 * The waiting ranks sleep between polls, so that on an oversubscribed
 * node the two ranks in turn get the cores, and none goes on before the
 * last one is measured.  Every wait warns after the context's stall time
 * and gives up after its timeout, naming the rank it waits for.
 */
#include "clocks.h"

#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "../util/error.h"
#include "../util/log.h"
#include "../util/recorder.h"

#define PINGS 16
#define TAG_GO 1
#define TAG_PING 2
#define TAG_PONG 3

typedef struct waiting {
    const pc_clock_limits_t *limits;
    double t0;  /* when the measurement began (s) */
    int warned;
} waiting_t;

static double now_s(void) { return (double)pc_rec_mono_ns() * 1e-9; }

/* Completes req (a receive from peer, or with peer -1 the closing
 * barrier): PCOLL_SUCCESS, PCOLL_ERR_MPI, or PCOLL_ERR_TIMEOUT (a receive
 * cancelled; a barrier cannot be, and is left to MPI).  sleepy: sleep
 * between polls (a rank waiting for its turn), else yield (a ping-pong
 * under way). */
static int wait_for(MPI_Request *req, int peer, int sleepy, waiting_t *w, const char *fn)
{
    char whom[48];
    if (peer >= 0)
        snprintf(whom, sizeof whom, "rank %d", peer);
    else
        snprintf(whom, sizeof whom, "the other ranks to be measured");
    for (;;) {
        int flag = 0;
        int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return pc_mpi_error(rc, fn, "MPI_Test (the clock offsets)");
        if (flag) return PCOLL_SUCCESS;
        double waited = now_s() - w->t0;
        if (w->limits->timeout_s > 0 && waited >= w->limits->timeout_s) {
            if (peer >= 0) {
                MPI_Cancel(req);
                MPI_Wait(req, MPI_STATUS_IGNORE);
            }
            return pc_error(PCOLL_ERR_TIMEOUT, fn,
                            "gave up after %.3g s (PCOLL_TIMEOUT_S) measuring the clock offsets: waiting for %s",
                            waited, whom);
        }
        if (!w->warned && w->limits->stall_warn_s > 0 && waited >= w->limits->stall_warn_s) {
            w->warned = 1;
            pc_log(PCOLL_LOG_WARN, "%s: stalled for %.3g s (PCOLL_STALL_WARN_S) measuring the clock offsets: waiting "
                                   "for %s",
                   fn, waited, whom);
        }
        if (sleepy) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}

static int recv_from(void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, int sleepy,
                     waiting_t *w, const char *fn)
{
    MPI_Request req;
    int rc = MPI_Irecv(buf, count, type, peer, tag, comm, &req);
    if (rc != MPI_SUCCESS) return pc_mpi_error(rc, fn, "MPI_Irecv (the clock offsets)");
    return wait_for(&req, peer, sleepy, w, fn);
}

static int send_to(const void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, const char *fn)
{
    int rc = MPI_Send(buf, count, type, peer, tag, comm);
    return rc == MPI_SUCCESS ? PCOLL_SUCCESS : pc_mpi_error(rc, fn, "MPI_Send (the clock offsets)");
}

/* rank 0: each rank's ping-pongs in turn; after a failure, "go" 0 to the
 * later ranks (they then fail without waiting) */
static int serve(MPI_Comm comm, int size, int64_t shift, waiting_t *w, const char *fn)
{
    int status = PCOLL_SUCCESS;
    for (int i = 1; i < size; i++) {
        char go = status == PCOLL_SUCCESS;
        int rc = send_to(&go, 1, MPI_CHAR, i, TAG_GO, comm, fn);
        for (int k = 0; go && rc == PCOLL_SUCCESS && k < PINGS; k++) {
            char ping;
            rc = recv_from(&ping, 1, MPI_CHAR, i, TAG_PING, comm, 0, w, fn);
            uint64_t t0 = pc_rec_mono_ns() + (uint64_t)shift;
            if (rc == PCOLL_SUCCESS) rc = send_to(&t0, 1, MPI_UINT64_T, i, TAG_PONG, comm, fn);
        }
        if (status == PCOLL_SUCCESS) status = rc;
    }
    return status;
}

static int measure(MPI_Comm comm, int64_t shift, int64_t *offset_ns, int64_t *err_ns, waiting_t *w, const char *fn)
{
    char go = 0;
    int rc = recv_from(&go, 1, MPI_CHAR, 0, TAG_GO, comm, 1, w, fn);
    if (rc == PCOLL_SUCCESS && !go)
        rc = pc_error(PCOLL_ERR_MPI, fn, "rank 0 could not measure the clock offset of an earlier rank");
    uint64_t best = UINT64_MAX;
    for (int k = 0; rc == PCOLL_SUCCESS && k < PINGS; k++) {
        char ping = 1;
        uint64_t t0 = 0, t1 = pc_rec_mono_ns() + (uint64_t)shift;
        rc = send_to(&ping, 1, MPI_CHAR, 0, TAG_PING, comm, fn);
        if (rc == PCOLL_SUCCESS) rc = recv_from(&t0, 1, MPI_UINT64_T, 0, TAG_PONG, comm, 0, w, fn);
        uint64_t t2 = pc_rec_mono_ns() + (uint64_t)shift;
        if (rc == PCOLL_SUCCESS && t2 - t1 < best) {
            best = t2 - t1;
            *offset_ns = (int64_t)(t1 + (t2 - t1) / 2) - (int64_t)t0;
            *err_ns = (int64_t)((t2 - t1 + 1) / 2);
        }
    }
    return rc;
}

int pc_clock_offset(MPI_Comm comm, int64_t shift_ns, const pc_clock_limits_t *limits, int64_t *offset_ns,
                    int64_t *err_ns, const char *fn)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    *offset_ns = 0;
    *err_ns = rank == 0 ? 0 : -1; /* rank 0's clock is the reference */
    waiting_t w = {limits, now_s(), 0};
    int rc = rank == 0 ? serve(comm, size, shift_ns, &w, fn) : measure(comm, shift_ns, offset_ns, err_ns, &w, fn);
    /* nobody leaves before the last rank is measured: a rank that went on
     * (computing, on a shared core) would slow the later ping-pongs */
    MPI_Request req;
    int mrc = MPI_Ibarrier(comm, &req);
    int brc = mrc == MPI_SUCCESS ? wait_for(&req, -1, 1, &w, fn) : pc_mpi_error(mrc, fn, "MPI_Ibarrier");
    if (rc == PCOLL_SUCCESS) rc = brc;
    if (rc != PCOLL_SUCCESS) *err_ns = -1;
    return rc;
}
