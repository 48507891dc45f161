/* Matrix multiplies of the dense layers: three instantiations of the blocked
 * driver in gemm_kernel.h (AVX-512, AVX2+FMA, portable 4-wide vectors) and
 * the run-time choice between them.
 *
 * Why not one build for the host (-march=native)?  The binary would then fail
 * on an older CPU; compiling each kernel for its own instruction set and
 * asking the CPU at first use keeps one portable binary that is still fast
 * (on this project's machine: ~90 GFLOP/s with AVX-512 against ~30 portable). */
#include "gemm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

typedef void (*gemm_fn_t)(size_t M, size_t N, size_t K, const float *A, size_t a_rs, size_t a_cs,
                          const float *B, size_t ldb, float *C, size_t ldc, int accumulate);
/* N == 1: c[i*ldc] (+)= A[i,:] . b (b contiguous) */
typedef void (*gemv_n_fn_t)(size_t M, size_t K, const float *A, size_t lda, const float *b, float *c, size_t ldc,
                            int accumulate);
/* N == 1: c[0..M) += A^T b for A stored K x M (c contiguous) */
typedef void (*gemv_t_fn_t)(size_t M, size_t K, const float *A, size_t lda, const float *b, size_t ldb, float *c);

/* Portable: 4-wide vectors exist on every target GCC and Clang know (SSE2 on
 * x86-64, NEON on arm64, split into scalars elsewhere). */
#define GK_FN gemm_generic
#define GK_TARGET
#define GK_VW 4
#define GK_MR 4
#define GK_NV 2
#include "gemm_kernel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GEMM_HAVE_X86 1
/* AVX2+FMA: 16 vector registers hold 6x2 accumulators, 2 B vectors and 1 A
 * broadcast. */
#define GK_FN gemm_avx2
#define GK_TARGET __attribute__((target("avx2,fma")))
#define GK_VW 8
#define GK_MR 6
#define GK_NV 2
#include "gemm_kernel.h"
/* AVX-512: 32 registers, 8x2 accumulators of 16 floats. */
#define GK_FN gemm_avx512
#define GK_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma")))
#define GK_VW 16
#define GK_MR 8
#define GK_NV 2
#include "gemm_kernel.h"
#endif

typedef struct gemm_kernel {
    const char *name;
    gemm_fn_t fn;
    gemv_n_fn_t gemv_n;
    gemv_t_fn_t gemv_t;
    int (*supported)(void);
} gemm_kernel_t;

static int always(void) { return 1; }
#ifdef GEMM_HAVE_X86
static int cpu_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
static int cpu_avx512(void)
{
    __builtin_cpu_init();
    return cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
}
#endif

/* best first */
static const gemm_kernel_t kernels[] = {
#ifdef GEMM_HAVE_X86
    {"avx512", gemm_avx512, gemm_avx512_gemv_n, gemm_avx512_gemv_t, cpu_avx512},
    {"avx2", gemm_avx2, gemm_avx2_gemv_n, gemm_avx2_gemv_t, cpu_avx2},
#endif
    {"generic", gemm_generic, gemm_generic_gemv_n, gemm_generic_gemv_t, always},
};
#define NKERNELS (sizeof kernels / sizeof kernels[0])

static const gemm_kernel_t *current;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;

static void pick_default(void)
{
    const char *env = getenv("PCOLL_TRAIN_GEMM");
    if (env && *env) {
        if (gemm_select_kernel(env) == 0) return;
        fprintf(stderr, "pcoll-train: PCOLL_TRAIN_GEMM: %s; using the automatic choice\n", tr_error());
    }
    for (size_t i = 0; i < NKERNELS; i++)
        if (kernels[i].supported()) {
            current = &kernels[i];
            return;
        }
}

static const gemm_kernel_t *kernel(void)
{
    if (!current) pthread_once(&pick_once, pick_default);
    return current;
}

int gemm_select_kernel(const char *name)
{
    if (!name) return tr_fail("gemm kernel: no name given");
    if (strcmp(name, "auto") == 0) {
        for (size_t i = 0; i < NKERNELS; i++)
            if (kernels[i].supported()) {
                current = &kernels[i];
                return 0;
            }
    }
    for (size_t i = 0; i < NKERNELS; i++) {
        if (strcmp(kernels[i].name, name) != 0) continue;
        if (!kernels[i].supported()) return tr_fail("gemm kernel \"%s\": this CPU cannot run it", name);
        current = &kernels[i];
        return 0;
    }
    return tr_fail("gemm kernel \"%s\": unknown (auto, avx512, avx2, generic)", name);
}

const char *gemm_kernel_name(void) { return kernel()->name; }

const char *const *gemm_kernels_available(void)
{
    static const char *names[NKERNELS + 1];
    size_t n = 0;
    for (size_t i = 0; i < NKERNELS; i++)
        if (kernels[i].supported()) names[n++] = kernels[i].name;
    names[n] = NULL;
    return names;
}

static void zero_rows(size_t M, size_t N, float *C, size_t ldc)
{
    for (size_t i = 0; i < M; i++) memset(C + i * ldc, 0, N * sizeof *C);
}

void gemm_nn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
             float *C, size_t ldc, int accumulate)
{
    if (M == 0 || N == 0) return;
    if (K == 0) {
        if (!accumulate) zero_rows(M, N, C, ldc);
        return;
    }
    if (N == 1 && ldb == 1) kernel()->gemv_n(M, K, A, lda, B, C, ldc, accumulate);
    else kernel()->fn(M, N, K, A, lda, 1, B, ldb, C, ldc, accumulate);
}

void gemm_tn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
             float *C, size_t ldc, int accumulate)
{
    if (M == 0 || N == 0) return;
    if (K == 0 || (N == 1 && ldc == 1)) {
        /* the row updates add into C */
        if (!accumulate) zero_rows(M, N, C, ldc);
        if (K == 0) return;
        kernel()->gemv_t(M, K, A, lda, B, ldb, C);
        return;
    }
    kernel()->fn(M, N, K, A, 1, lda, B, ldb, C, ldc, accumulate);
}
