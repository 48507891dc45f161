/* Thread-local error message and checked allocation for pcoll-train. */
#include "err.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static _Thread_local char tr_msg[1024];

int tr_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tr_msg, sizeof tr_msg, fmt, ap);
    va_end(ap);
    return -1;
}

const char *tr_error(void) { return tr_msg; }

float *tr_alloc_floats(size_t n, const char *what)
{
    /* aligned_alloc wants a size that is a multiple of the alignment */
    if (n > (SIZE_MAX - 64) / sizeof(float)) {
        tr_fail("%s: %zu values do not fit in memory", what, n);
        return NULL;
    }
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    if (bytes == 0) bytes = 64;
    float *p = aligned_alloc(64, bytes);
    if (!p) tr_fail("%s: out of memory allocating %zu bytes", what, bytes);
    return p;
}
