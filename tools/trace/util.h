/* Small helpers shared by pcoll-trace's parts: allocation that exits on
 * failure (a tool has nothing better to do), a growable byte buffer, reading
 * a whole file, messages on stderr, and the percentile rule the report uses. */
#ifndef PCOLL_TRACE_UTIL_H
#define PCOLL_TRACE_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TRACE_PROG "pcoll-trace"

void *xmalloc(size_t size);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *ptr, size_t size);
char *xstrdup(const char *s);

/* Grow *items (of item_size bytes each) so that it holds at least need. */
void grow_array(void **items, size_t *cap, size_t need, size_t item_size);
#define GROW(arr, cap, need) grow_array((void **)&(arr), &(cap), (need), sizeof *(arr))

typedef struct strbuf {
    char *data; /* NUL-terminated while len < cap */
    size_t len, cap;
} strbuf_t;
void sb_append(strbuf_t *sb, const char *text, size_t len);
void sb_puts(strbuf_t *sb, const char *text);
void sb_putc(strbuf_t *sb, char c);
void sb_printf(strbuf_t *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_free(strbuf_t *sb);

/* The whole file, NUL-terminated (the parser may look one byte past the
 * end).  0, or -1 with a message on stderr naming the path. */
int read_whole_file(const char *path, char **text, size_t *len);

/* "pcoll-trace: ..." and "pcoll-trace: warning: ..." on stderr. */
void errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A kind of warning that may repeat many times: the first few are printed,
 * warn_limit_done says how many more there were. */
typedef struct warn_limit {
    long count;
    const char *what; /* for the summary: "unmatched mark ends" */
} warn_limit_t;
void warn_limited(warn_limit_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void warn_limit_done(warn_limit_t *w);

/* The p-quantile (0 <= p <= 1) of sorted[0..n-1] by linear interpolation
 * between the closest ranks (position p (n - 1)); NaN when n == 0. */
double quantile_sorted(const double *sorted, size_t n, double p);
void sort_doubles(double *v, size_t n);

#endif
