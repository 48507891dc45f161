/* Allocation, buffers, files, messages and quantiles for pcoll-trace. */
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void out_of_memory(size_t size)
{
    fprintf(stderr, "%s: out of memory (%zu bytes)\n", TRACE_PROG, size);
    exit(1);
}

void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) out_of_memory(size);
    return p;
}

void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) out_of_memory(count * size);
    return p;
}

void *xrealloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (!p) out_of_memory(size);
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

void grow_array(void **items, size_t *cap, size_t need, size_t item_size)
{
    if (need <= *cap) return;
    size_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    *items = xrealloc(*items, cap2 * item_size);
    *cap = cap2;
}

void sb_append(strbuf_t *sb, const char *text, size_t len)
{
    grow_array((void **)&sb->data, &sb->cap, sb->len + len + 1, 1);
    memcpy(sb->data + sb->len, text, len);
    sb->len += len;
    sb->data[sb->len] = '\0';
}

void sb_puts(strbuf_t *sb, const char *text)
{
    sb_append(sb, text, strlen(text));
}

void sb_putc(strbuf_t *sb, char c)
{
    sb_append(sb, &c, 1);
}

void sb_printf(strbuf_t *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    grow_array((void **)&sb->data, &sb->cap, sb->len + (size_t)n + 1, 1);
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void sb_free(strbuf_t *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
}

int read_whole_file(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        errorf("%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, used = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (cap - used < 2) buf = xrealloc(buf, cap *= 2);
        size_t got = fread(buf + used, 1, cap - used - 1, f);
        used += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        errorf("%s: read error", path);
        free(buf);
        return -1;
    }
    buf[used] = '\0';
    *text = buf;
    *len = used;
    return 0;
}

/* One line on standard error: "pcoll-trace: KIND" and the message */
static void say(const char *kind, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: %s", TRACE_PROG, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("", fmt, ap);
    va_end(ap);
}

void warnf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say("warning: ", fmt, ap);
    va_end(ap);
}

enum { WARN_SHOWN = 5 };

void warn_limited(warn_limit_t *w, const char *fmt, ...)
{
    if (w->count++ >= WARN_SHOWN) return;
    va_list ap;
    va_start(ap, fmt);
    say("warning: ", fmt, ap);
    va_end(ap);
}

void warn_limit_done(warn_limit_t *w)
{
    if (w->count > WARN_SHOWN) warnf("... %ld %s in all (the first %d shown)", w->count, w->what, WARN_SHOWN);
}

double quantile_sorted(const double *sorted, size_t n, double p)
{
    if (n == 0) return NAN;
    double pos = p * (double)(n - 1);
    size_t lo = (size_t)floor(pos);
    if (lo >= n - 1) return sorted[n - 1];
    double frac = pos - (double)lo;
    return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void sort_doubles(double *v, size_t n)
{
    if (n > 1) qsort(v, n, sizeof *v, cmp_double);
}
