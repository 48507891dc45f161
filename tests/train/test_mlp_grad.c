/* The MLP's gradients (tools/train/mlp.c, float) against central finite
 * differences of an independent double-precision forward pass, for every
 * weight and bias of every layer, with softmax cross-entropy and with mean
 * squared error.  The checker is first shown to reject a gradient that is
 * off by 1% in any single layer, so the test can fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "prng.h"
#include "testutil.h"

typedef struct problem {
    mlp_t *m;
    const float *x;
    const int32_t *labels;
    const float *y;
    size_t n;
} problem_t;

/* Reference loss in double, written from the definitions rather than from
 * mlp.c: z = a W + b, a = relu(z) between layers, mean over samples of the
 * cross-entropy or of the summed squared error.  pattern (if non-NULL)
 * receives the sign of every hidden pre-activation, to detect kinks. */
static double ref_loss(const problem_t *p, const double *w, unsigned char *pattern)
{
    const mlp_t *m = p->m;
    size_t maxw = 0;
    for (size_t l = 0; l <= m->nlayers; l++)
        if (m->width[l] > maxw) maxw = m->width[l];
    double *a = malloc(maxw * sizeof *a), *z = malloc(maxw * sizeof *z);
    CHECK(a && z);
    double total = 0.0;
    size_t pat = 0;
    for (size_t s = 0; s < p->n; s++) {
        for (size_t i = 0; i < m->width[0]; i++) a[i] = p->x[s * m->width[0] + i];
        for (size_t l = 0; l < m->nlayers; l++) {
            size_t in = m->width[l], o = m->width[l + 1];
            for (size_t j = 0; j < o; j++) {
                double v = w[m->b_off[l] + j];
                for (size_t i = 0; i < in; i++) v += a[i] * w[m->w_off[l] + i * o + j];
                z[j] = v;
            }
            int hidden = l + 1 < m->nlayers;
            for (size_t j = 0; j < o; j++) {
                if (hidden && pattern) pattern[pat++] = z[j] > 0;
                a[j] = hidden ? (z[j] > 0 ? z[j] : 0.0) : z[j];
            }
        }
        size_t o = m->width[m->nlayers];
        if (m->loss == MLP_SOFTMAX_XENT) {
            double mx = a[0], sum = 0;
            for (size_t j = 1; j < o; j++) mx = a[j] > mx ? a[j] : mx;
            for (size_t j = 0; j < o; j++) sum += exp(a[j] - mx);
            total += mx + log(sum) - a[p->labels[s]];
        } else {
            for (size_t j = 0; j < o; j++) total += (a[j] - p->y[s * o + j]) * (a[j] - p->y[s * o + j]);
        }
    }
    free(a);
    free(z);
    return total / (double)p->n;
}

static size_t pattern_len(const problem_t *p)
{
    size_t h = 0;
    for (size_t l = 1; l < p->m->nlayers; l++) h += p->m->width[l];
    return h * p->n + 1;
}

/* Finite-difference gradient (double) at params; skipped[i] = 1 where a
 * ReLU changes side within +-h (the loss is not differentiable there). */
static void fd_grad(const problem_t *p, const float *params, double *g, unsigned char *skipped)
{
    const size_t n = p->m->nparams, plen = pattern_len(p);
    double *w = calloc(n, sizeof *w);
    unsigned char *p0 = calloc(plen, 1), *p1 = calloc(plen, 1), *p2 = calloc(plen, 1);
    CHECK(w && p0 && p1 && p2);
    for (size_t i = 0; i < n; i++) w[i] = params[i];
    ref_loss(p, w, p0);
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = w[i];
        w[i] = keep + h;
        double lp = ref_loss(p, w, p1);
        w[i] = keep - h;
        double lm = ref_loss(p, w, p2);
        w[i] = keep;
        g[i] = (lp - lm) / (2 * h);
        skipped[i] = memcmp(p0, p1, plen) != 0 || memcmp(p0, p2, plen) != 0;
    }
    free(w);
    free(p0);
    free(p1);
    free(p2);
}

/* Number of parameters whose analytic gradient disagrees with the reference:
 * |ga - gfd| > 1e-3 |gfd| + 1e-4 max|gfd|.  Float rounding stays orders of
 * magnitude below this; a wrong formula does not. */
static size_t count_bad(const problem_t *p, const float *ga, const double *gfd, const unsigned char *skipped,
                        int verbose)
{
    double scale = 0;
    for (size_t i = 0; i < p->m->nparams; i++) scale = fabs(gfd[i]) > scale ? fabs(gfd[i]) : scale;
    size_t bad = 0;
    for (size_t i = 0; i < p->m->nparams; i++) {
        if (skipped[i]) continue;
        double err = fabs((double)ga[i] - gfd[i]);
        if (err > 1e-3 * fabs(gfd[i]) + 1e-4 * scale) {
            if (verbose && bad < 10) fprintf(stderr, "  param %zu: analytic %.8g, finite differences %.8g\n", i, (double)ga[i], gfd[i]);
            bad++;
        }
    }
    return bad;
}

static void check_problem(const char *name, const size_t *widths, size_t nw, mlp_loss_t loss, size_t batch,
                          uint64_t seed)
{
    problem_t p;
    memset(&p, 0, sizeof p);
    CHECK(mlp_create(widths, nw, loss, &p.m) == 0);
    const mlp_t *m = p.m;
    const size_t n = m->nparams, in = widths[0], out = widths[nw - 1];
    rng_t r;
    rng_seed(&r, seed);
    float *params = malloc(n * sizeof *params), *ga = malloc(n * sizeof *ga);
    float *x = malloc(batch * in * sizeof *x), *y = malloc(batch * out * sizeof *y);
    int32_t *labels = malloc(batch * sizeof *labels);
    double *gfd = malloc(n * sizeof *gfd);
    unsigned char *skipped = malloc(n);
    CHECK(params && ga && x && y && labels && gfd && skipped);
    /* random weights and nonzero biases, so every bias gradient matters and
       the ReLUs are in varied states */
    for (size_t i = 0; i < n; i++) params[i] = (float)(rng_uniform(&r) * 2 - 1);
    for (size_t i = 0; i < batch * in; i++) x[i] = (float)(rng_uniform(&r) * 2 - 1);
    for (size_t i = 0; i < batch * out; i++) y[i] = (float)(rng_uniform(&r) * 4 - 2);
    for (size_t i = 0; i < batch; i++) labels[i] = (int32_t)rng_below(&r, out);
    p.x = x;
    p.labels = labels;
    p.y = y;
    p.n = batch;

    mlp_work_t *w;
    CHECK(mlp_work_create(m, batch, &w) == 0);
    mlp_batch_t b = {x, loss == MLP_SOFTMAX_XENT ? labels : NULL, loss == MLP_MSE ? y : NULL, batch};
    double l = mlp_loss_grad(m, params, w, &b, ga);
    double *wd = malloc(n * sizeof *wd);
    CHECK(wd != NULL);
    for (size_t i = 0; i < n; i++) wd[i] = params[i];
    double lref = ref_loss(&p, wd, NULL);
    free(wd);
    CHECK_MSG(fabs(l - lref) <= 1e-5 * fabs(lref) + 1e-6, "%s: loss %.9g, reference %.9g", name, l, lref);

    fd_grad(&p, params, gfd, skipped);
    size_t nskip = 0;
    for (size_t i = 0; i < n; i++) nskip += skipped[i];
    CHECK_MSG(nskip * 10 <= n, "%s: %zu of %zu parameters at ReLU kinks", name, nskip, n);

    /* the checker rejects a 1% error in the largest weight or bias gradient
       of any single layer */
    for (size_t L = 0; L < m->nlayers; L++) {
        for (int bias = 0; bias < 2; bias++) {
            size_t off = bias ? m->b_off[L] : m->w_off[L];
            size_t len = bias ? widths[L + 1] : widths[L] * widths[L + 1];
            size_t best = off;
            for (size_t i = off; i < off + len; i++)
                if (!skipped[i] && fabs(gfd[i]) > fabs(gfd[best])) best = i;
            if (skipped[best] || gfd[best] == 0) continue;
            float keep = ga[best];
            ga[best] = (float)(gfd[best] * 1.01);
            CHECK_MSG(count_bad(&p, ga, gfd, skipped, 0) >= 1, "%s: the checker missed a 1%% error in layer %zu %s",
                      name, L + 1, bias ? "biases" : "weights");
            ga[best] = keep;
        }
    }

    size_t bad = count_bad(&p, ga, gfd, skipped, 1);
    CHECK_MSG(bad == 0, "%s: %zu of %zu gradients disagree with finite differences", name, bad, n);
    printf("%-24s %5zu parameters checked (%zu at ReLU kinks skipped), loss %.6f\n", name, n - nskip, nskip, l);

    mlp_work_free(&w);
    mlp_free(&p.m);
    free(params);
    free(ga);
    free(x);
    free(y);
    free(labels);
    free(gfd);
    free(skipped);
}

/* the layer hook: called with -1, then L-1 .. 0, each layer's slice of
 * the gradient already final when its call comes; the same loss and
 * gradient as without the hook.  And the WxN widths. */
typedef struct hook_check {
    const mlp_t *m;
    float *grad, *copy;
    int calls[8], n;
} hook_check_t;

static void hook(void *arg, int layer)
{
    hook_check_t *h = arg;
    h->calls[h->n++] = layer;
    if (layer < 0) return;
    size_t lo = h->m->w_off[layer], hi = h->m->b_off[layer] + h->m->width[layer + 1];
    memcpy(h->copy + lo, h->grad + lo, (hi - lo) * sizeof(float)); /* as it is now */
}

static void check_hook_and_widths(void)
{
    size_t *w, n;
    CHECK(mlp_parse_widths("784,32x3,10", &w, &n) == 0);
    CHECK(n == 5 && w[0] == 784 && w[1] == 32 && w[3] == 32 && w[4] == 10);
    free(w);
    CHECK(mlp_parse_widths("784,32x0,10", &w, &n) != 0);
    CHECK(mlp_parse_widths("784,32y3", &w, &n) != 0);
    CHECK(mlp_parse_widths("784,1x2000", &w, &n) != 0);
    const size_t widths[] = {11, 9, 8, 7, 5};
    mlp_t *m;
    CHECK(mlp_create(widths, 5, MLP_SOFTMAX_XENT, &m) == 0);
    float *params = malloc(m->nparams * sizeof(float)), *g1 = malloc(m->nparams * sizeof(float)),
          *g2 = malloc(m->nparams * sizeof(float)), *copy = malloc(m->nparams * sizeof(float));
    float x[3 * 11];
    int32_t labels[3] = {0, 4, 2};
    for (size_t i = 0; i < 33; i++) x[i] = (float)((int)(i * 7 % 13) - 6) / 6.0f;
    mlp_init_params(m, params, 5);
    mlp_work_t *wk;
    CHECK(mlp_work_create(m, 3, &wk) == 0);
    mlp_batch_t b = {x, labels, NULL, 3};
    double l1 = mlp_loss_grad(m, params, wk, &b, g1);
    hook_check_t h = {m, g2, copy, {0}, 0};
    double l2 = mlp_loss_grad_hooked(m, params, wk, &b, g2, hook, &h);
    CHECK(l1 == l2 && memcmp(g1, g2, m->nparams * sizeof(float)) == 0);
    CHECK(memcmp(copy, g2, m->nparams * sizeof(float)) == 0); /* every slice was final at its call */
    CHECK(h.n == 5 && h.calls[0] == -1 && h.calls[1] == 3 && h.calls[4] == 0);
    mlp_work_free(&wk);
    mlp_free(&m);
    free(params);
    free(g1);
    free(g2);
    free(copy);
}

int main(void)
{
    check_hook_and_widths();
    tu_timeout(120);
    const size_t a[] = {9, 7, 6, 5};
    check_problem("softmax 9-7-6-5", a, 4, MLP_SOFTMAX_XENT, 4, 1);
    const size_t b[] = {13, 17, 10};
    check_problem("softmax 13-17-10", b, 3, MLP_SOFTMAX_XENT, 7, 2);
    const size_t c[] = {6, 8, 3};
    check_problem("mse 6-8-3", c, 3, MLP_MSE, 5, 3);
    const size_t d[] = {33, 1};
    check_problem("mse 33-1 (hyperplane)", d, 2, MLP_MSE, 9, 4);
    printf("test_mlp_grad: %ld checks passed\n", tu_checks_);
    return 0;
}
