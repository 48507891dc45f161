#include "reduce.h"

int pc_dtype_valid(pcoll_dtype_t dtype) { return dtype >= PCOLL_FLOAT32 && dtype <= PCOLL_INT64; }

size_t pcoll_dtype_size(pcoll_dtype_t dtype)
{
    switch (dtype) {
    case PCOLL_FLOAT32: return 4;
    case PCOLL_FLOAT64: return 8;
    case PCOLL_INT32: return 4;
    case PCOLL_INT64: return 8;
    default: return 0;
    }
}

const char *pcoll_dtype_name(pcoll_dtype_t dtype)
{
    switch (dtype) {
    case PCOLL_FLOAT32: return "float32";
    case PCOLL_FLOAT64: return "float64";
    case PCOLL_INT32: return "int32";
    case PCOLL_INT64: return "int64";
    default: return "unknown";
    }
}

/* Plain loops: the compiler vectorizes them (the file is built with -O3).
 * Integers are added as unsigned so that overflow wraps instead of being
 * undefined behaviour. */
#define SUM_LOOP(T)                                                                                \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T *x = a, *y = b;                                                                    \
        for (size_t i = 0; i < count; i++) d[i] = x[i] + y[i];                                     \
    } while (0)

void pc_reduce_sum(void *dst, const void *a, const void *b, size_t count, pcoll_dtype_t dtype)
{
    switch (dtype) {
    case PCOLL_FLOAT32: SUM_LOOP(float); break;
    case PCOLL_FLOAT64: SUM_LOOP(double); break;
    case PCOLL_INT32: SUM_LOOP(uint32_t); break;
    case PCOLL_INT64: SUM_LOOP(uint64_t); break;
    default: break;
    }
}

#define DIV_LOOP(T)                                                                                \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T n = (T)divisor;                                                                    \
        for (size_t i = 0; i < count; i++) d[i] = d[i] / n;                                        \
    } while (0)

void pc_reduce_div(void *dst, size_t count, pcoll_dtype_t dtype, int64_t divisor)
{
    switch (dtype) {
    case PCOLL_FLOAT32: DIV_LOOP(float); break;
    case PCOLL_FLOAT64: DIV_LOOP(double); break;
    case PCOLL_INT32: DIV_LOOP(int32_t); break;
    case PCOLL_INT64: DIV_LOOP(int64_t); break;
    default: break;
    }
}

/* Two loops, so that each is a plain vectorizable loop at -O3 (the branch
 * on b outside them). */
#define AVERAGE_LOOP(T)                                                                            \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T *x = a, *y = b;                                                                    \
        const T n = (T)divisor;                                                                    \
        if (y)                                                                                     \
            for (size_t i = 0; i < count; i++) d[i] = (x[i] + y[i]) / n;                           \
        else                                                                                       \
            for (size_t i = 0; i < count; i++) d[i] = x[i] / n;                                    \
    } while (0)

void pc_reduce_average(void *dst, const void *a, const void *b, size_t count, pcoll_dtype_t dtype, double divisor)
{
    switch (dtype) {
    case PCOLL_FLOAT32: AVERAGE_LOOP(float); break;
    case PCOLL_FLOAT64: AVERAGE_LOOP(double); break;
    default: break;
    }
}

#define SCALE_LOOP(T)                                                                              \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T f = (T)factor;                                                                     \
        for (size_t i = 0; i < count; i++) d[i] *= f;                                              \
    } while (0)

void pc_reduce_scale(void *dst, size_t count, pcoll_dtype_t dtype, double factor)
{
    switch (dtype) {
    case PCOLL_FLOAT32: SCALE_LOOP(float); break;
    case PCOLL_FLOAT64: SCALE_LOOP(double); break;
    default: break;
    }
}
