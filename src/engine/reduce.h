/* Element-wise kernels used by reduce steps. */
#ifndef PC_ENGINE_REDUCE_H
#define PC_ENGINE_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "pcoll.h"

/* dst[i] = a[i] + b[i]; dst may be a or b, otherwise no overlap.  Integer
 * types wrap around on overflow (as two's complement). */
void pc_reduce_sum(void *dst, const void *a, const void *b, size_t count, pcoll_dtype_t dtype);

/* dst[i] /= divisor (integer types: C division). */
void pc_reduce_div(void *dst, size_t count, pcoll_dtype_t dtype, int64_t divisor);

/* dst[i] = (a[i] + b[i]) / divisor, or a[i] / divisor when b is NULL;
 * float32 and float64 only (others: nothing).  dst may be a or b,
 * otherwise no overlap. */
void pc_reduce_average(void *dst, const void *a, const void *b, size_t count, pcoll_dtype_t dtype, double divisor);

/* dst[i] *= factor; float32 and float64 only (others: nothing). */
void pc_reduce_scale(void *dst, size_t count, pcoll_dtype_t dtype, double factor);

/* 1 if the type is one of the four supported. */
int pc_dtype_valid(pcoll_dtype_t dtype);

#endif
