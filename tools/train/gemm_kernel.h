/* Template of a blocked GEMM driver, included once per kernel variant by
 * gemm.c with these macros defined:
 *   GK_FN      name of the driver function to define
 *   GK_TARGET  function attribute selecting the instruction set (may be empty)
 *   GK_VW      floats per vector register (4, 8 or 16)
 *   GK_MR      rows of C per register tile
 *   GK_NV      vectors per row of the register tile (tile width GK_VW*GK_NV)
 *
 * C[M x N] (+)= op(A) * B where op(A)(i, k) = A[i*a_rs + k*a_cs], so one
 * driver serves both A (a_rs = lda, a_cs = 1) and A^T (a_rs = 1, a_cs = lda).
 * Without accumulate, the first K chunk stores its tiles instead of adding
 * them: C is never cleared or read beforehand.
 *
 * Blocking: K is cut into chunks of GK_KC so that a B panel (GK_KC x tile
 * width) stays in L1 while every row tile of C passes over it; the register
 * tile (GK_MR x tile width accumulators) is summed over the chunk and added to
 * C once.  Tiles at the right or bottom edge are padded with zeros into local
 * buffers, so the inner kernel always runs on full tiles. */

#define GK_PASTE2(a, b) a##b
#define GK_PASTE(a, b) GK_PASTE2(a, b)
#define GK_VEC GK_PASTE(GK_FN, _vec_t)
#define GK_MICRO GK_PASTE(GK_FN, _micro)
#define GK_NR (GK_VW * GK_NV)
#ifndef GK_KC
#define GK_KC 256
#endif

typedef float GK_VEC __attribute__((vector_size(GK_VW * sizeof(float))));

/* c[GK_MR x GK_NR] (row stride ldc) (+)= a-tile * b-panel over kc steps.
 * Vectors are moved with memcpy: C rows need not be aligned, and the
 * compiler turns it into one unaligned load or store. */
GK_TARGET static inline __attribute__((always_inline)) void
GK_MICRO(size_t kc, const float *a, size_t a_rs, size_t a_cs, const float *b, size_t ldb, float *c, size_t ldc,
         int store)
{
    GK_VEC acc[GK_MR][GK_NV];
    for (int r = 0; r < GK_MR; r++)
        for (int v = 0; v < GK_NV; v++) acc[r][v] = (GK_VEC){0};
    for (size_t k = 0; k < kc; k++) {
        GK_VEC bv[GK_NV];
        for (int v = 0; v < GK_NV; v++) memcpy(&bv[v], b + k * ldb + (size_t)v * GK_VW, sizeof bv[v]);
        for (int r = 0; r < GK_MR; r++) {
            const float ar = a[(size_t)r * a_rs + k * a_cs];
            for (int v = 0; v < GK_NV; v++) acc[r][v] += ar * bv[v];
        }
    }
    for (int r = 0; r < GK_MR; r++)
        for (int v = 0; v < GK_NV; v++) {
            float *p = c + (size_t)r * ldc + (size_t)v * GK_VW;
            if (store) {
                memcpy(p, &acc[r][v], sizeof acc[r][v]);
                continue;
            }
            GK_VEC cv;
            memcpy(&cv, p, sizeof cv);
            cv += acc[r][v];
            memcpy(p, &cv, sizeof cv);
        }
}

GK_TARGET static void GK_FN(size_t M, size_t N, size_t K, const float *A, size_t a_rs, size_t a_cs,
                            const float *B, size_t ldb, float *C, size_t ldc, int accumulate)
{
    /* edge tiles: zero-padded copies of A rows, B columns and the C tile */
    float apack[GK_KC * GK_MR] __attribute__((aligned(64)));
    float bpack[GK_KC * GK_NR] __attribute__((aligned(64)));
    float ctile[GK_MR * GK_NR] __attribute__((aligned(64)));

    for (size_t k0 = 0; k0 < K; k0 += GK_KC) {
        const size_t kc = K - k0 < GK_KC ? K - k0 : GK_KC;
        const int store = !accumulate && k0 == 0;
        for (size_t j = 0; j < N; j += GK_NR) {
            const size_t nr = N - j < GK_NR ? N - j : GK_NR;
            const float *bp = B + k0 * ldb + j;
            size_t bld = ldb;
            if (nr < GK_NR) {
                for (size_t k = 0; k < kc; k++) {
                    for (size_t c = 0; c < nr; c++) bpack[k * GK_NR + c] = bp[k * ldb + c];
                    for (size_t c = nr; c < GK_NR; c++) bpack[k * GK_NR + c] = 0.0f;
                }
                bp = bpack;
                bld = GK_NR;
            }
            for (size_t i = 0; i < M; i += GK_MR) {
                const size_t mr = M - i < GK_MR ? M - i : GK_MR;
                const float *ap = A + i * a_rs + k0 * a_cs;
                float *cp = C + i * ldc + j;
                if (mr == GK_MR && nr == GK_NR) {
                    GK_MICRO(kc, ap, a_rs, a_cs, bp, bld, cp, ldc, store);
                    continue;
                }
                /* edge: pack A k-major (the kernel then reads it contiguously) */
                const float *aq = ap;
                size_t q_rs = a_rs, q_cs = a_cs;
                if (mr < GK_MR) {
                    for (size_t k = 0; k < kc; k++) {
                        for (size_t r = 0; r < mr; r++) apack[k * GK_MR + r] = ap[r * a_rs + k * a_cs];
                        for (size_t r = mr; r < GK_MR; r++) apack[k * GK_MR + r] = 0.0f;
                    }
                    aq = apack;
                    q_rs = 1;
                    q_cs = GK_MR;
                }
                GK_MICRO(kc, aq, q_rs, q_cs, bp, bld, ctile, GK_NR, 1);
                for (size_t r = 0; r < mr; r++)
                    for (size_t c = 0; c < nr; c++)
                        cp[r * ldc + c] = (store ? 0.0f : cp[r * ldc + c]) + ctile[r * GK_NR + c];
            }
        }
    }
}

/* N == 1 (a layer with one output, e.g. the hyperplane's linear model): the
 * register tile would be mostly padding, so use dot products (A x b) and
 * row updates (A^T x b) instead; both stream A once, which is the bound. */
GK_TARGET static void GK_PASTE(GK_FN, _gemv_n)(size_t M, size_t K, const float *A, size_t lda, const float *b,
                                               float *c, size_t ldc, int accumulate)
{
    enum { U = 4 }; /* independent accumulators hide the add latency */
    for (size_t i = 0; i < M; i++) {
        const float *a = A + i * lda;
        GK_VEC acc[U];
        for (int u = 0; u < U; u++) acc[u] = (GK_VEC){0};
        size_t k = 0;
        for (; k + U * GK_VW <= K; k += U * GK_VW)
            for (int u = 0; u < U; u++) {
                GK_VEC av, bv;
                memcpy(&av, a + k + (size_t)u * GK_VW, sizeof av);
                memcpy(&bv, b + k + (size_t)u * GK_VW, sizeof bv);
                acc[u] += av * bv;
            }
        float s = 0.0f;
        for (; k < K; k++) s += a[k] * b[k];
        for (int u = 1; u < U; u++) acc[0] += acc[u];
        for (int v = 0; v < GK_VW; v++) s += acc[0][v];
        c[i * ldc] = (accumulate ? c[i * ldc] : 0.0f) + s;
    }
}

GK_TARGET static void GK_PASTE(GK_FN, _gemv_t)(size_t M, size_t K, const float *A, size_t lda, const float *b,
                                               size_t ldb, float *c)
{
    for (size_t k = 0; k < K; k++) {
        const float bk = b[k * ldb];
        const float *a = A + k * lda;
        for (size_t m = 0; m < M; m++) c[m] += bk * a[m];
    }
}

#undef GK_FN
#undef GK_TARGET
#undef GK_VW
#undef GK_MR
#undef GK_NV
#undef GK_VEC
#undef GK_MICRO
#undef GK_NR
