#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

const char pcoll_in_place_marker = 0;

static _Thread_local char last_error[512];

const char *pcoll_strerror(int status)
{
    switch (status) {
    case PCOLL_SUCCESS: return "success";
    case PCOLL_ERR_NULL: return "a required pointer argument is NULL";
    case PCOLL_ERR_ARG: return "invalid argument";
    case PCOLL_ERR_COUNT: return "invalid element count or byte size overflow";
    case PCOLL_ERR_DTYPE: return "unknown data type";
    case PCOLL_ERR_OP: return "unknown reduction operation";
    case PCOLL_ERR_GROUP: return "invalid group map";
    case PCOLL_ERR_THREAD_LEVEL: return "MPI does not provide MPI_THREAD_MULTIPLE";
    case PCOLL_ERR_MPI: return "an MPI call failed";
    case PCOLL_ERR_NOMEM: return "out of memory";
    case PCOLL_ERR_CONFIG: return "invalid or disagreeing PCOLL_* configuration";
    case PCOLL_ERR_STATE: return "object in the wrong state";
    case PCOLL_ERR_LIMIT: return "resource limit reached";
    case PCOLL_ERR_INTERNAL: return "internal error in pcoll";
    case PCOLL_ERR_TIMEOUT: return "timed out waiting for other ranks";
    default: return "unknown status code";
    }
}

const char *pcoll_last_error(void) { return last_error; }

static int record(int status, const char *fn, const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s: %s (%s)", fn, msg, pcoll_strerror(status));
    pc_log(PCOLL_LOG_WARN, "%s", last_error);
    return status;
}

int pc_error(int status, const char *fn, const char *fmt, ...)
{
    char msg[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return record(status, fn, msg);
}

const char *pc_mpi_strerror(int mpi_rc, char *buf, int len)
{
    int n = 0;
    if (MPI_Error_string(mpi_rc, buf, &n) != MPI_SUCCESS) snprintf(buf, (size_t)len, "MPI error code %d", mpi_rc);
    return buf;
}

int pc_mpi_error(int mpi_rc, const char *fn, const char *what)
{
    char mpimsg[MPI_MAX_ERROR_STRING];
    return pc_error(PCOLL_ERR_MPI, fn, "%s failed: %s", what, pc_mpi_strerror(mpi_rc, mpimsg, sizeof mpimsg));
}

void pc_fault_clear(pc_fault_t *f)
{
    f->msg[0] = '\0';
    atomic_store(&f->status, PCOLL_SUCCESS);
}

int pc_fault_vset(pc_fault_t *f, int status, const char *fmt, va_list ap)
{
    if (atomic_load_explicit(&f->status, memory_order_acquire) != PCOLL_SUCCESS || status == PCOLL_SUCCESS)
        return status;
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    atomic_store_explicit(&f->status, status, memory_order_release);
    pc_log(PCOLL_LOG_DEBUG, "fault: %s", f->msg);
    return status;
}

int pc_fault_set(pc_fault_t *f, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pc_fault_vset(f, status, fmt, ap);
    va_end(ap);
    return status;
}

int pc_fault_status(const pc_fault_t *f) { return atomic_load_explicit(&f->status, memory_order_acquire); }

int pc_fault_raise(const pc_fault_t *f, const char *fn)
{
    int status = pc_fault_status(f);
    if (status == PCOLL_SUCCESS) return PCOLL_SUCCESS;
    return record(status, fn, f->msg);
}

void pc_fault_copy(pc_fault_t *dst, const pc_fault_t *src)
{
    int status = pc_fault_status(src);
    if (status != PCOLL_SUCCESS) pc_fault_set(dst, status, "%s", src->msg);
}
