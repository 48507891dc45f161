/* Reader of IDX files of unsigned bytes (the MNIST / Fashion-MNIST format:
 * magic 00 00 08 <ndims>, ndims big-endian 32-bit sizes, then the data),
 * gzip-compressed or not. */
#ifndef PCOLL_TRAIN_IDX_H
#define PCOLL_TRAIN_IDX_H

#include <stddef.h>
#include <stdint.h>

typedef struct idx_u8 {
    uint8_t *data; /* count bytes */
    size_t ndims;
    size_t *dims;  /* ndims sizes, outermost first */
    size_t count;  /* product of the sizes */
} idx_u8_t;

/* Reads the whole file.  On error returns -1 with a message (tr_error) that
 * names the file and the problem: missing (errno is then ENOENT), not an IDX
 * file of unsigned bytes, truncated, trailing data, corrupt compression. */
int idx_read_u8(const char *path, idx_u8_t *out);
void idx_free(idx_u8_t *a);

#endif
