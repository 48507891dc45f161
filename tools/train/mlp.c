/* MLP forward and backward passes written as batched matrix multiplies
 * (gemm.c): Z = X W + b forward, dW = X^T dZ and dX = dZ W^T backward. */
#include "mlp.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gemm.h"
#include "prng.h"

struct mlp_work {
    size_t max_batch;
    size_t nlayers;
    float **act; /* act[l], l = 1..nlayers: outputs of layer l-1 (after ReLU
                    for hidden layers, raw for the last); act[0] unused */
    float *delta[2]; /* gradient w.r.t. a layer's output, ping-pong */
    float *dt, *dxt; /* transposed gradients (backward) */
};

int mlp_create(const size_t *widths, size_t nwidths, mlp_loss_t loss, mlp_t **out)
{
    *out = NULL;
    if (nwidths < 2) return tr_fail("a network needs at least 2 layer widths (input and output), got %zu", nwidths);
    for (size_t i = 0; i < nwidths; i++)
        if (widths[i] == 0) return tr_fail("layer width %zu is 0", i);
    if (loss == MLP_SOFTMAX_XENT && widths[nwidths - 1] < 2)
        return tr_fail("classification needs at least 2 outputs, got %zu", widths[nwidths - 1]);
    mlp_t *m = calloc(1, sizeof *m);
    if (!m) return tr_fail("out of memory");
    m->nlayers = nwidths - 1;
    m->loss = loss;
    m->width = malloc(nwidths * sizeof *m->width);
    m->w_off = malloc(m->nlayers * sizeof *m->w_off);
    m->b_off = malloc(m->nlayers * sizeof *m->b_off);
    if (!m->width || !m->w_off || !m->b_off) {
        mlp_free(&m);
        return tr_fail("out of memory");
    }
    memcpy(m->width, widths, nwidths * sizeof *widths);
    size_t off = 0;
    for (size_t l = 0; l < m->nlayers; l++) {
        size_t in = widths[l], o = widths[l + 1];
        if (in > SIZE_MAX / o || in * o > SIZE_MAX - off - o) {
            mlp_free(&m);
            return tr_fail("layer %zu (%zu x %zu) is too large", l + 1, in, o);
        }
        m->w_off[l] = off;
        off += in * o;
        m->b_off[l] = off;
        off += o;
    }
    m->nparams = off;
    *out = m;
    return 0;
}

void mlp_free(mlp_t **m)
{
    if (!m || !*m) return;
    free((*m)->width);
    free((*m)->w_off);
    free((*m)->b_off);
    free(*m);
    *m = NULL;
}

int mlp_parse_widths(const char *spec, size_t **widths, size_t *nwidths)
{
    *widths = NULL;
    *nwidths = 0;
    if (!spec || !*spec) return tr_fail("empty list of layer widths");
    enum { MAX_WIDTHS = 1024 };
    size_t *w = malloc(MAX_WIDTHS * sizeof *w), n = 0;
    if (!w) return tr_fail("out of memory");
    const char *p = spec;
    for (size_t item = 1;; item++) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9') {
            free(w);
            return tr_fail("\"%s\": item %zu is not a positive whole number", spec, item);
        }
        unsigned long long v = strtoull(p, &end, 10), times = 1;
        if (errno || v == 0 || v > (1ULL << 30)) {
            free(w);
            return tr_fail("\"%s\": item %zu is not a width in 1..%llu", spec, item, 1ULL << 30);
        }
        if (*end == 'x') { /* WxN: N layers of width W */
            const char *q = end + 1;
            if (*q < '0' || *q > '9' || (times = strtoull(q, &end, 10)) == 0 || errno) {
                free(w);
                return tr_fail("\"%s\": item %zu: WxN needs a count N >= 1", spec, item);
            }
        }
        if (*end != ',' && *end != '\0') {
            free(w);
            return tr_fail("\"%s\": item %zu is not W or WxN", spec, item);
        }
        if (times > MAX_WIDTHS - n) {
            free(w);
            return tr_fail("\"%s\": more than %d widths", spec, MAX_WIDTHS);
        }
        for (unsigned long long k = 0; k < times; k++) w[n++] = (size_t)v;
        if (*end == '\0') break;
        p = end + 1;
    }
    if (n < 2) {
        free(w);
        return tr_fail("\"%s\": need at least an input and an output width", spec);
    }
    *widths = w;
    *nwidths = n;
    return 0;
}

void mlp_describe(const mlp_t *m, char *buf, size_t len)
{
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (size_t l = 0; l <= m->nlayers && used < len; l++) {
        int k = snprintf(buf + used, len - used, "%s%zu", l ? "-" : "", m->width[l]);
        if (k < 0) break;
        used += (size_t)k;
    }
}

void mlp_init_params(const mlp_t *m, float *params, uint64_t seed)
{
    for (size_t l = 0; l < m->nlayers; l++) {
        size_t in = m->width[l], o = m->width[l + 1];
        int last = l + 1 == m->nlayers;
        double limit = last ? sqrt(6.0 / (double)(in + o)) : sqrt(6.0 / (double)in);
        rng_t r;
        rng_seed(&r, rng_key(seed, 0x1417, l, 0));
        float *w = params + m->w_off[l];
        for (size_t i = 0; i < in * o; i++) w[i] = (float)((2.0 * rng_uniform(&r) - 1.0) * limit);
        memset(params + m->b_off[l], 0, o * sizeof(float));
    }
}

void mlp_work_free(mlp_work_t **w)
{
    if (!w || !*w) return;
    mlp_work_t *k = *w;
    if (k->act) {
        for (size_t l = 1; l <= k->nlayers; l++) free(k->act[l]);
        free(k->act);
    }
    free(k->delta[0]);
    free(k->delta[1]);
    free(k->dt);
    free(k->dxt);
    free(k);
    *w = NULL;
}

int mlp_work_create(const mlp_t *m, size_t max_batch, mlp_work_t **out)
{
    *out = NULL;
    if (max_batch == 0) return tr_fail("batch size 0");
    mlp_work_t *w = calloc(1, sizeof *w);
    if (!w) return tr_fail("out of memory");
    w->max_batch = max_batch;
    w->nlayers = m->nlayers;
    w->act = calloc(m->nlayers + 1, sizeof *w->act); /* slots 1..nlayers used */
    if (!w->act) goto nomem;
    size_t maxw = 1;
    for (size_t l = 1; l <= m->nlayers; l++) {
        if (m->width[l] > SIZE_MAX / max_batch) goto nomem;
        w->act[l] = tr_alloc_floats(max_batch * m->width[l], "activations");
        if (!w->act[l]) goto fail;
        if (m->width[l] > maxw) maxw = m->width[l];
    }
    for (int i = 0; i < 2; i++) {
        w->delta[i] = tr_alloc_floats(max_batch * maxw, "gradient buffers");
        if (!w->delta[i]) goto fail;
    }
    w->dt = tr_alloc_floats(max_batch * maxw, "transposed gradients");
    w->dxt = tr_alloc_floats(max_batch * maxw, "transposed gradients");
    if (!w->dt || !w->dxt) goto fail;
    *out = w;
    return 0;
nomem:
    tr_fail("out of memory for a batch of %zu", max_batch);
fail:
    mlp_work_free(&w);
    return -1;
}

/* out (n x o) = in (n x k) * W (k x o) + b; ReLU if hidden */
static void dense_forward(size_t n, size_t k, size_t o, const float *in, const float *W, const float *b, float *outp,
                          int relu)
{
    for (size_t i = 0; i < n; i++) memcpy(outp + i * o, b, o * sizeof *b);
    gemm_nn(n, o, k, in, k, W, o, outp, o, 1);
    if (relu)
        for (size_t i = 0; i < n * o; i++) outp[i] = outp[i] > 0.0f ? outp[i] : 0.0f;
}

static void forward(const mlp_t *m, const float *params, mlp_work_t *w, const float *x, size_t n)
{
    const float *in = x;
    for (size_t l = 0; l < m->nlayers; l++) {
        dense_forward(n, m->width[l], m->width[l + 1], in, params + m->w_off[l], params + m->b_off[l], w->act[l + 1],
                      l + 1 < m->nlayers);
        in = w->act[l + 1];
    }
}

/* Softmax cross-entropy of one row of logits; writes softmax - onehot
 * scaled by `scale` into d (if non-NULL).  Returns the loss. */
static double xent_row(const float *z, size_t o, int32_t label, float scale, float *d, int *correct)
{
    float zmax = z[0];
    size_t arg = 0;
    for (size_t j = 1; j < o; j++)
        if (z[j] > zmax) {
            zmax = z[j];
            arg = j;
        }
    double s = 0.0;
    for (size_t j = 0; j < o; j++) s += exp((double)(z[j] - zmax));
    double lse = (double)zmax + log(s);
    if (d) {
        for (size_t j = 0; j < o; j++) d[j] = (float)(exp((double)z[j] - lse)) * scale;
        d[label] -= scale;
    }
    if (correct) *correct = (size_t)label == arg;
    return lse - (double)z[label];
}

/* loss of a batch from the last activations; d (n x o) = dLoss/dOutput */
static double loss_and_delta(const mlp_t *m, const float *outp, const mlp_batch_t *b, float *d, size_t *ncorrect)
{
    size_t o = m->width[m->nlayers];
    const float scale = 1.0f / (float)b->n;
    double loss = 0.0;
    size_t good = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (m->loss == MLP_SOFTMAX_XENT) {
            int c;
            loss += xent_row(outp + i * o, o, b->labels[i], scale, d ? d + i * o : NULL, &c);
            good += (size_t)c;
        } else {
            for (size_t j = 0; j < o; j++) {
                float e = outp[i * o + j] - b->y[i * o + j];
                loss += (double)e * (double)e;
                if (d) d[i * o + j] = 2.0f * e * scale;
            }
        }
    }
    if (ncorrect) *ncorrect = good;
    return loss;
}

/* t (cols x rows) = a^T for a (rows x cols), in 16 x 16 blocks that stay in
 * L1 (only batch-sized matrices are transposed, see mlp_loss_grad) */
static void transpose(size_t rows, size_t cols, const float *a, float *t)
{
    const size_t B = 16;
    for (size_t i0 = 0; i0 < rows; i0 += B)
        for (size_t j0 = 0; j0 < cols; j0 += B) {
            size_t i1 = i0 + B < rows ? i0 + B : rows, j1 = j0 + B < cols ? j0 + B : cols;
            for (size_t j = j0; j < j1; j++)
                for (size_t i = i0; i < i1; i++) t[j * rows + i] = a[i * cols + j];
        }
}

double mlp_loss_grad(const mlp_t *m, const float *params, mlp_work_t *w, const mlp_batch_t *b, float *grad)
{
    return mlp_loss_grad_hooked(m, params, w, b, grad, NULL, NULL);
}

double mlp_loss_grad_hooked(const mlp_t *m, const float *params, mlp_work_t *w, const mlp_batch_t *b, float *grad,
                            mlp_layer_hook_t hook, void *arg)
{
    const size_t n = b->n, L = m->nlayers;
    forward(m, params, w, b->x, n);
    float *d = w->delta[0], *dprev = w->delta[1];
    double loss = loss_and_delta(m, w->act[L], b, d, NULL) / (double)n;
    if (hook) hook(arg, -1);

    for (size_t l = L; l-- > 0;) {
        const size_t in = m->width[l], o = m->width[l + 1];
        const float *x = l ? w->act[l] : b->x;
        /* dW = X^T dZ, db = column sums of dZ */
        gemm_tn(in, o, n, x, in, d, o, grad + m->w_off[l], o, 0);
        float *db = grad + m->b_off[l];
        memset(db, 0, o * sizeof *db);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < o; j++) db[j] += d[i * o + j];
        if (hook) hook(arg, (int)l); /* layer l's gradient is complete */
        if (l == 0) break; /* no gradient for the input */
        /* dX = dZ W^T, computed as dX^T = W dZ^T: transposing the batch-sized
           dZ and dX^T moves n (in + o) values, W^T would move in x o (16x
           more at batch 32) */
        transpose(n, o, d, w->dt);
        gemm_nn(in, n, o, params + m->w_off[l], o, w->dt, n, w->dxt, n, 0);
        transpose(in, n, w->dxt, dprev);
        /* through the ReLU that produced X (X > 0 iff Z > 0) */
        for (size_t i = 0; i < n * in; i++) dprev[i] = x[i] > 0.0f ? dprev[i] : 0.0f;
        float *t = d;
        d = dprev;
        dprev = t;
    }
    return loss;
}

void mlp_evaluate(const mlp_t *m, const float *params, mlp_work_t *w, const mlp_batch_t *all, mlp_eval_t *out)
{
    double loss = 0.0;
    size_t good = 0;
    const size_t in = m->width[0], o = m->width[m->nlayers];
    for (size_t s = 0; s < all->n; s += w->max_batch) {
        size_t c = all->n - s < w->max_batch ? all->n - s : w->max_batch;
        mlp_batch_t b = {all->x + s * in, all->labels ? all->labels + s : NULL, all->y ? all->y + s * o : NULL, c};
        forward(m, params, w, b.x, c);
        size_t g = 0;
        loss += loss_and_delta(m, w->act[m->nlayers], &b, NULL, &g);
        good += g;
    }
    out->n = all->n;
    out->loss = all->n ? loss / (double)all->n : NAN;
    out->accuracy = m->loss == MLP_SOFTMAX_XENT && all->n ? (double)good / (double)all->n : NAN;
}

double mlp_flops_per_sample(const mlp_t *m)
{
    double f = 0;
    for (size_t l = 0; l < m->nlayers; l++) {
        double mac = (double)m->width[l] * (double)m->width[l + 1];
        f += 2 * mac /* forward */ + 2 * mac /* dW */ + (l ? 2 * mac : 0) /* dX */;
    }
    return f;
}
