#include "error.h"

#include <stdarg.h>
#include <stdio.h>

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
    case PCOLL_ERR_CONFIG: return "invalid PCOLL_* configuration value";
    case PCOLL_ERR_STATE: return "object in the wrong state";
    case PCOLL_ERR_LIMIT: return "resource limit reached";
    case PCOLL_ERR_INTERNAL: return "internal error in pcoll";
    default: return "unknown status code";
    }
}

const char *pcoll_last_error(void) { return last_error; }

int pc_error(int status, const char *fn, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(last_error, sizeof last_error, "%s: %s (%s)", fn, msg, pcoll_strerror(status));
    pc_log(PCOLL_LOG_WARN, "%s", last_error);
    return status;
}

int pc_mpi_error(int mpi_rc, const char *fn, const char *what)
{
    char mpimsg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, mpimsg, &len) != MPI_SUCCESS) snprintf(mpimsg, sizeof mpimsg, "code %d", mpi_rc);
    return pc_error(PCOLL_ERR_MPI, fn, "%s failed: %s", what, mpimsg);
}
