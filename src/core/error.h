/* Errors: every failing public call records a detailed message (thread-local,
 * read by pcoll_last_error) and logs it at WARN. */
#ifndef PC_CORE_ERROR_H
#define PC_CORE_ERROR_H

#include "pcoll.h"

#if defined(__GNUC__)
#define PC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PC_PRINTF(f, a)
#endif

/* Records "<fn>: <message>" as the calling thread's last error, logs it and
 * returns status, so callers can write `return pc_error(PCOLL_ERR_ARG, ...)`. */
int pc_error(int status, const char *fn, const char *fmt, ...) PC_PRINTF(3, 4);

#define PC_ERR(status, ...) pc_error((status), __func__, __VA_ARGS__)

/* Evaluates an MPI call; on failure records the MPI error string and returns
 * PCOLL_ERR_MPI from the enclosing function. */
#define PC_MPI_CHECK(call)                                                                         \
    do {                                                                                           \
        int pc_mpi_rc_ = (call);                                                                   \
        if (pc_mpi_rc_ != MPI_SUCCESS) return pc_mpi_error(pc_mpi_rc_, __func__, #call);           \
    } while (0)

int pc_mpi_error(int mpi_rc, const char *fn, const char *what);

#endif
