/* pcoll-train's matrix kernels (tools/train/gemm.c) against a double-precision
 * reference: every kernel this CPU can run, both layouts (A and A^T), shapes
 * that are not multiples of the register tile, padded leading dimensions,
 * K longer than a cache block, and accumulate vs overwrite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm.h"
#include "prng.h"
#include "testutil.h"

static float *rand_matrix(rng_t *r, size_t n)
{
    float *m = malloc((n ? n : 1) * sizeof *m);
    CHECK(m != NULL);
    for (size_t i = 0; i < n; i++) m[i] = (float)(rng_uniform(r) * 2.0 - 1.0);
    return m;
}

/* C (M x N, ldc) vs ref = [C0 if accumulate] + op(A) B, in double; padded
 * rows (lda, ldb, ldc larger than the rows) unless tight */
static void check_one(const char *kernel, int trans, size_t M, size_t N, size_t K, int accumulate, int tight,
                      rng_t *r)
{
    const size_t pad = tight ? 0 : 1;
    const size_t lda = (trans ? M : K) + 3 * pad, ldb = N + pad, ldc = N + 5 * pad;
    const size_t arows = trans ? K : M;
    float *A = rand_matrix(r, arows * lda), *B = rand_matrix(r, K * ldb), *C = rand_matrix(r, M * ldc);
    float *C0 = malloc(M * ldc * sizeof *C0 + 1);
    CHECK(C0 != NULL);
    memcpy(C0, C, M * ldc * sizeof *C);
    if (trans) gemm_tn(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    else gemm_nn(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    for (size_t i = 0; i < M; i++) {
        for (size_t j = 0; j < N; j++) {
            double ref = accumulate ? C0[i * ldc + j] : 0.0, mag = fabs(ref);
            for (size_t k = 0; k < K; k++) {
                double a = trans ? A[k * lda + i] : A[i * lda + k];
                ref += a * B[k * ldb + j];
                mag += fabs(a * B[k * ldb + j]);
            }
            /* float accumulation over K terms: error below K * eps * sum|terms| */
            double tol = 4.0 * (double)(K + 1) * 6e-8 * mag + 1e-30;
            CHECK_MSG(fabs(C[i * ldc + j] - ref) <= tol,
                      "%s %s M=%zu N=%zu K=%zu acc=%d: C[%zu][%zu] = %.9g, expected %.9g", kernel,
                      trans ? "tn" : "nn", M, N, K, accumulate, i, j, (double)C[i * ldc + j], ref);
        }
        /* the padding between rows must be untouched */
        for (size_t j = N; j < ldc; j++) CHECK_MSG(C[i * ldc + j] == C0[i * ldc + j], "%s wrote past N", kernel);
    }
    free(A);
    free(B);
    free(C);
    free(C0);
}

static double gflops(int trans, size_t M, size_t N, size_t K)
{
    rng_t r;
    rng_seed(&r, 7);
    float *A = rand_matrix(&r, M * K), *B = rand_matrix(&r, K * N), *C = rand_matrix(&r, M * N);
    struct timespec t0, t1;
    int reps = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double el = 0;
    do {
        if (trans) gemm_tn(M, N, K, A, M, B, N, C, N, 1);
        else gemm_nn(M, N, K, A, K, B, N, C, N, 1);
        reps++;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        el = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    } while (el < 0.2);
    free(A);
    free(B);
    free(C);
    return 2.0 * (double)M * (double)N * (double)K * reps / el / 1e9;
}

int main(void)
{
    tu_timeout(120);
    const size_t sizes[] = {1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 33};
    CHECK(gemm_select_kernel("no-such-kernel") != 0);
    const char *const *names = gemm_kernels_available();
    CHECK(names[0] != NULL);
    for (const char *const *k = names; *k; k++) {
        CHECK_MSG(gemm_select_kernel(*k) == 0, "select %s", *k);
        CHECK(strcmp(gemm_kernel_name(), *k) == 0);
        rng_t r;
        rng_seed(&r, 42);
        for (int trans = 0; trans < 2; trans++)
            for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
                for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b += 2)
                    for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c += 3)
                        for (int tight = 0; tight < 2; tight++)
                            check_one(*k, trans, sizes[a], sizes[b], sizes[c], (int)((a + b + c) % 2), tight, &r);
        /* K across several cache blocks, odd edges everywhere */
        check_one(*k, 0, 37, 45, 600, 1, 0, &r);
        check_one(*k, 1, 45, 37, 600, 0, 0, &r);
        check_one(*k, 0, 64, 512, 784, 0, 1, &r);
        /* one output column (the dot-product and row-update paths), long K */
        for (int trans = 0; trans < 2; trans++) {
            check_one(*k, trans, 19, 1, 1000, 1, 1, &r);
            check_one(*k, trans, 64, 1, 8192, 0, 1, &r);
            check_one(*k, trans, 5, 1, 3, 1, 1, &r);
        }
        printf("%-8s ok; 32x784 * 784x512: %.1f GFLOP/s, (784x32)^T * 32x512: %.1f GFLOP/s\n", *k,
               gflops(0, 32, 512, 784), gflops(1, 784, 512, 32));
    }
    CHECK(gemm_select_kernel("auto") == 0);
    printf("test_gemm: %ld checks passed (kernel in use: %s)\n", tu_checks_, gemm_kernel_name());
    return 0;
}
