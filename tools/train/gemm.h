/* Single-precision matrix multiplies for the dense layers (row-major).
 * A register-blocked kernel, chosen at run time for the CPU (AVX-512, AVX2
 * or portable C), computes every product; see gemm.c. */
#ifndef PCOLL_TRAIN_GEMM_H
#define PCOLL_TRAIN_GEMM_H

#include <stddef.h>

/* C[M x N] = A[M x K] * B[K x N]  (accumulate != 0: C += A * B).
 * lda, ldb, ldc are the row strides (>= the row lengths). */
void gemm_nn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
             float *C, size_t ldc, int accumulate);

/* C[M x N] = A^T * B with A stored as K x M  (accumulate != 0: C += A^T * B).
 * The weight gradient of a dense layer: dW = X^T * dZ. */
void gemm_tn(size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B, size_t ldb,
             float *C, size_t ldc, int accumulate);

/* Kernel in use: "avx512", "avx2" or "generic". */
const char *gemm_kernel_name(void);

/* Forces a kernel ("auto" = the best the CPU supports).  Returns -1 (with a
 * message, see err.h) for an unknown name or one this CPU cannot run.
 * The environment variable PCOLL_TRAIN_GEMM has the same effect at first use. */
int gemm_select_kernel(const char *name);

/* Kernels this build and CPU can run, best first, NULL-terminated. */
const char *const *gemm_kernels_available(void);

#endif
