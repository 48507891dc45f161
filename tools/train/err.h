/* Error reporting inside pcoll-train: a failing function records a message
 * (naming the file, flag or value at fault) and returns -1; the caller that
 * decides to give up prints tr_error(). */
#ifndef PCOLL_TRAIN_ERR_H
#define PCOLL_TRAIN_ERR_H

#include <stddef.h>

/* Records the message for the calling thread and returns -1, so that
 * `return tr_fail("...")` both reports and fails. */
int tr_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The calling thread's last message ("" if none). */
const char *tr_error(void);

/* 64-byte aligned array of n floats (not initialized), or NULL with a message
 * naming `what` when n is too large or memory is short.  Free with free(). */
float *tr_alloc_floats(size_t n, const char *what);

#endif
