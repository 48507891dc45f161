/*
 * Errors.  Every failing public call records a detailed message, thread-local
 * (pcoll_last_error), that starts with the public call's name and names the
 * offending argument, and logs it at WARN.
 *
 * An error found on another thread (the progress engine's token holder, see
 * engine/progress.h) is kept in a fault record of the operation or object it
 * belongs to; the application thread that collects the operation raises it
 * under the name of its own call (pc_fault_raise).
 */
#ifndef PC_UTIL_ERROR_H
#define PC_UTIL_ERROR_H

#include <mpi.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "pcoll.h"

#if defined(__GNUC__)
#define PC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PC_PRINTF(f, a)
#endif

/* Records "<fn>: <message> (<pcoll_strerror(status)>)" as the calling
 * thread's last error, logs it and returns status, so callers can write
 * `return pc_error(PCOLL_ERR_ARG, fn, ...)`.  fn is a public call's name. */
int pc_error(int status, const char *fn, const char *fmt, ...) PC_PRINTF(3, 4);

/* pc_error under the name of the enclosing function: only in public calls. */
#define PC_ERR(status, ...) pc_error((status), __func__, __VA_ARGS__)

/* "<what> failed: <MPI's error string>" as PCOLL_ERR_MPI. */
int pc_mpi_error(int mpi_rc, const char *fn, const char *what);

/* MPI's text for an error code into buf. */
const char *pc_mpi_strerror(int mpi_rc, char *buf, int len);

/* A failure found on one thread, reported on another.  The first one set
 * wins; `status` is published last (release), so a reader that sees it
 * nonzero (acquire) sees the message. */
typedef struct pc_fault {
    atomic_int status;
    char msg[320];
} pc_fault_t;

void pc_fault_clear(pc_fault_t *f);
/* Sets the fault unless one is set already; returns status. */
int pc_fault_set(pc_fault_t *f, int status, const char *fmt, ...) PC_PRINTF(3, 4);
int pc_fault_vset(pc_fault_t *f, int status, const char *fmt, va_list ap);
int pc_fault_status(const pc_fault_t *f);
/* The calling thread's last error becomes "<fn>: <fault message>"; returns
 * the fault's status (PCOLL_SUCCESS if none). */
int pc_fault_raise(const pc_fault_t *f, const char *fn);
/* Copies a set fault into dst (if dst has none). */
void pc_fault_copy(pc_fault_t *dst, const pc_fault_t *src);

#endif
