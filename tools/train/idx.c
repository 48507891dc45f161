/* IDX reader on zlib's gzFile, which reads gzip and plain files alike. */
#include "idx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "err.h"

/* the largest file accepted: a bound against absurd headers, far above any
 * data set this trainer can hold in memory anyway */
#define IDX_MAX_BYTES (1ULL << 36)

void idx_free(idx_u8_t *a)
{
    if (!a) return;
    free(a->data);
    free(a->dims);
    memset(a, 0, sizeof *a);
}

/* Reads exactly len bytes; returns the number read (< len at end of file) or
 * -1 on a read or decompression error (message set). */
static long long read_full(gzFile f, const char *path, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        size_t chunk = len - got > (1u << 30) ? (1u << 30) : len - got;
        int n = gzread(f, (char *)buf + got, (unsigned)chunk);
        if (n < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            tr_fail("%s: read error (truncated or corrupt file?): %s", path, zerr == Z_ERRNO ? strerror(errno) : msg);
            return -1;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    return (long long)got;
}

int idx_read_u8(const char *path, idx_u8_t *out)
{
    memset(out, 0, sizeof *out);
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        int e = errno ? errno : ENOMEM;
        tr_fail("%s: cannot open: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    unsigned char head[4];
    long long n = read_full(f, path, head, 4);
    if (n < 0) goto fail;
    if (n < 4) {
        tr_fail("%s: truncated: %lld bytes, shorter than the 4-byte IDX header", path, n);
        goto fail;
    }
    if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] == 0) {
        tr_fail("%s: wrong magic number 0x%02x%02x%02x%02x: not an IDX file of unsigned bytes "
                "(expected 0x000008NN, NN = number of dimensions)",
                path, head[0], head[1], head[2], head[3]);
        goto fail;
    }
    out->ndims = head[3];
    out->dims = malloc(out->ndims * sizeof *out->dims);
    unsigned char *raw = malloc(out->ndims * 4);
    if (!out->dims || !raw) {
        free(raw);
        tr_fail("%s: out of memory", path);
        goto fail;
    }
    n = read_full(f, path, raw, out->ndims * 4);
    if (n < 0 || (size_t)n < out->ndims * 4) {
        free(raw);
        if (n >= 0) tr_fail("%s: truncated: the header declares %zu dimensions but ends after %lld of their %zu bytes",
                            path, out->ndims, n, out->ndims * 4);
        goto fail;
    }
    unsigned long long count = 1;
    for (size_t i = 0; i < out->ndims; i++) {
        const unsigned char *b = raw + 4 * i;
        out->dims[i] = (size_t)b[0] << 24 | (size_t)b[1] << 16 | (size_t)b[2] << 8 | (size_t)b[3];
        if (out->dims[i] == 0 || count > IDX_MAX_BYTES / out->dims[i]) count = IDX_MAX_BYTES + 1;
        else count *= out->dims[i];
    }
    free(raw);
    if (count > IDX_MAX_BYTES) {
        tr_fail("%s: wrong dimensions: a size is 0 or the data would exceed %llu bytes", path,
                (unsigned long long)IDX_MAX_BYTES);
        goto fail;
    }
    out->count = (size_t)count;
    out->data = malloc(out->count);
    if (!out->data) {
        tr_fail("%s: out of memory for %zu bytes", path, out->count);
        goto fail;
    }
    n = read_full(f, path, out->data, out->count);
    if (n < 0) goto fail;
    if ((size_t)n < out->count) {
        tr_fail("%s: truncated: the header declares %zu data bytes, the file has %lld", path, out->count, n);
        goto fail;
    }
    unsigned char extra;
    n = read_full(f, path, &extra, 1);
    if (n < 0) goto fail;
    if (n > 0) {
        tr_fail("%s: unexpected data after the %zu bytes the header declares (wrong dimensions?)", path, out->count);
        goto fail;
    }
    if (gzclose(f) != Z_OK) {
        f = NULL;
        tr_fail("%s: error closing the file (corrupt gzip trailer?)", path);
        goto fail;
    }
    return 0;
fail:
    if (f) gzclose(f);
    idx_free(out);
    return -1;
}
