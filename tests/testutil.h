/* Minimal checks for the tests: a failed check prints where and why, then
 * aborts the whole MPI job (a test never hangs on a failure). */
#ifndef PCOLL_TESTUTIL_H
#define PCOLL_TESTUTIL_H

#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pcoll.h"

static int tu_rank_ = -1;
static _Atomic long tu_checks_ = 0; /* tests may check from several threads */

static inline void tu_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "[rank %d] FAILED %s:%d: %s (pcoll: %s)\n", tu_rank_, file, line, what, pcoll_last_error());
    fflush(stderr);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        tu_checks_++;                                                                              \
        if (!(cond)) tu_fail(__FILE__, __LINE__, #cond);                                           \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        tu_checks_++;                                                                              \
        if (!(cond)) {                                                                             \
            char tu_buf_[1024];                                                                     \
            snprintf(tu_buf_, sizeof tu_buf_, __VA_ARGS__);                                        \
            tu_fail(__FILE__, __LINE__, tu_buf_);                                                  \
        }                                                                                          \
    } while (0)

#define CHECK_RC(call)                                                                             \
    do {                                                                                           \
        int tu_rc_ = (call);                                                                       \
        CHECK_MSG(tu_rc_ == PCOLL_SUCCESS, "%s returned %d (%s)", #call, tu_rc_, pcoll_strerror(tu_rc_)); \
    } while (0)

/* FNV-1a of a byte range: a checksum of a result, to compare between ranks */
static inline uint64_t tu_hash_bytes(const void *data, size_t n)
{
    const unsigned char *b = data;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* the call fails with `status` and pcoll_last_error names `word` */
#define EXPECT_ERR(call, status, word)                                                             \
    do {                                                                                           \
        int tu_rc_ = (call);                                                                       \
        CHECK_MSG(tu_rc_ == (status), "%s returned %d (%s), expected %d", #call, tu_rc_,           \
                  pcoll_strerror(tu_rc_), (int)(status));                                          \
        CHECK_MSG(strstr(pcoll_last_error(), word) != NULL, "message \"%s\" does not name \"%s\"", \
                  pcoll_last_error(), word);                                                       \
    } while (0)

static inline void tu_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test timed out (deadlock?)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

/* Fails the test after `seconds` (a hang is a failure, not a stuck CI). */
static inline void tu_timeout(unsigned seconds)
{
    signal(SIGALRM, tu_alarm);
    alarm(seconds);
}

/* MPI with MPI_THREAD_MULTIPLE (pcoll_init checks what was provided), the
 * rank for failure messages, and a timeout. */
static inline void tu_mpi_start(int *argc, char ***argv, unsigned timeout_s, int *rank, int *size)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &tu_rank_);
    if (rank) *rank = tu_rank_;
    if (size) MPI_Comm_size(MPI_COMM_WORLD, size);
    tu_timeout(timeout_s);
}

/* Values of every type that sum exactly on integers and stay well scaled
 * on floats: element i of a vector seeded by `seed`. */
static inline void tu_fill(void *buf, size_t n, pcoll_dtype_t dt, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v = (seed * 2654435761u + (unsigned)i * 40503u) >> 7;
        switch (dt) {
        case PCOLL_FLOAT32: ((float *)buf)[i] = (float)(v % 100000) / 977.0f - 40.0f; break;
        case PCOLL_FLOAT64: ((double *)buf)[i] = (double)(v % 100000) / 977.0 - 40.0; break;
        case PCOLL_INT32: ((int32_t *)buf)[i] = (int32_t)(v % 20001) - 10000; break;
        default: ((int64_t *)buf)[i] = (int64_t)(v % 20001) - 10000; break;
        }
    }
}

/* Floats of two sums in different orders: equal within a relative 1e-4. */
static inline int tu_close_enough(const void *a, const void *b, size_t n, pcoll_dtype_t dt)
{
    for (size_t i = 0; i < n; i++) {
        double x = dt == PCOLL_FLOAT32 ? ((const float *)a)[i] : ((const double *)a)[i];
        double y = dt == PCOLL_FLOAT32 ? ((const float *)b)[i] : ((const double *)b)[i];
        if (!(fabs(x - y) <= 1e-4 * (1.0 + fabs(y)))) return 0;
    }
    return 1;
}

#endif
