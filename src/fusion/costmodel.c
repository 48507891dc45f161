/*
 * The allreduce cost model of the merged-gradient planner, pure: T(M) in
 * microseconds for M bytes, a + bM, or piecewise-linear by size range.
 *
 *   samples (M_i, t_i)  --least squares-->  a, b            (linear)
 *                       --segmented fit-->  [from_k: a_k + b_k M] (piecewise)
 *
 * The linear fit is ordinary least squares (the large sizes weigh most, as
 * in the paper's fit of its OSU measurements), with a >= 0 and b >= 0 (a
 * noisy curve of near-constant times may fit a slope below 0: then b = 0;
 * one through the origin, an intercept below 0: then a = 0).
 *
 * The piecewise fit splits the sizes, sorted, into consecutive ranges of
 * two samples or more that span a factor of two in size at least (a range
 * is a regime of the protocol, not a sample's noise; the last one is
 * extrapolated to larger sizes), each fitted by least squares on relative
 * errors (a small size's 10 us matter as much as a large size's 10 ms),
 * with b >= 0 (its intercept may be below 0), choosing the ranges by
 * dynamic programming; it takes the fewest ranges whose rms relative error
 * is within 3%, or else the most accurate split.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "../util/parse.h"
#include "pcoll.h"

#define REL_TOLERANCE 0.03

int pcoll_cost_model_linear(double a_us, double b_us, pcoll_cost_model_t *m)
{
    if (!m) return PC_ERR(PCOLL_ERR_NULL, "model is NULL");
    if (!isfinite(a_us) || a_us < 0) return PC_ERR(PCOLL_ERR_ARG, "a_us %g is not a finite number >= 0", a_us);
    if (!isfinite(b_us) || b_us < 0) return PC_ERR(PCOLL_ERR_ARG, "b_us %g is not a finite number >= 0", b_us);
    memset(m, 0, sizeof *m);
    m->a_us = a_us;
    m->b_us = b_us;
    return PCOLL_SUCCESS;
}

int pcoll_cost_model_parse(const char *text, pcoll_cost_model_t *m)
{
    if (!text) return PC_ERR(PCOLL_ERR_NULL, "text is NULL");
    if (!m) return PC_ERR(PCOLL_ERR_NULL, "model is NULL");
    const char *comma = strchr(text, ',');
    char a_text[64];
    double a, b;
    if (!comma || (size_t)(comma - text) >= sizeof a_text)
        return PC_ERR(PCOLL_ERR_ARG, "\"%s\" is not A,B (a in microseconds, b in microseconds per byte)", text);
    memcpy(a_text, text, (size_t)(comma - text));
    a_text[comma - text] = '\0';
    if (pc_parse_double(a_text, &a) != 0 || pc_parse_double(comma + 1, &b) != 0)
        return PC_ERR(PCOLL_ERR_ARG, "\"%s\" is not A,B (two numbers: a in microseconds, b in microseconds per byte)",
                      text);
    return pcoll_cost_model_linear(a, b, m) == PCOLL_SUCCESS
               ? PCOLL_SUCCESS
               : PC_ERR(PCOLL_ERR_ARG, "\"%s\": a and b must be finite numbers >= 0", text);
}

static double linear_at(double a, double b, double x) { return a + b * x; }

double pcoll_cost_predict(const pcoll_cost_model_t *m, double bytes)
{
    if (!m) return NAN;
    if (!m->piecewise || m->nsegments < 1) return linear_at(m->a_us, m->b_us, bytes);
    int k = 0;
    while (k + 1 < m->nsegments && m->segment[k + 1].from_bytes <= bytes) k++;
    return linear_at(m->segment[k].a_us, m->segment[k].b_us, bytes);
}

/* ---- fitting ---- */

typedef struct sample {
    double x, y;
} sample_t;

static int by_size(const void *p, const void *q)
{
    const sample_t *a = p, *b = q;
    return a->x < b->x ? -1 : a->x > b->x;
}

/* Weighted least squares of y = a + b x over s[i .. j) (weights w = 1 or
 * 1/y^2); returns the weighted squared error, a and b in *a, *b.  x is in
 * megabytes here, for the conditioning of the sums. */
static double fit_range(const sample_t *s, int i, int j, int relative, double *a, double *b)
{
    double S = 0, Sx = 0, Sy = 0, Sxx = 0, Sxy = 0;
    for (int k = i; k < j; k++) {
        double w = relative ? 1.0 / (s[k].y * s[k].y) : 1.0, x = s[k].x * 1e-6;
        S += w;
        Sx += w * x;
        Sy += w * s[k].y;
        Sxx += w * x * x;
        Sxy += w * x * s[k].y;
    }
    double det = S * Sxx - Sx * Sx;
    double bm = det > 0 ? (S * Sxy - Sx * Sy) / det : 0; /* one size: a constant */
    if (bm < 0) bm = 0;                                 /* never faster with more bytes */
    double am = (Sy - bm * Sx) / S;
    if (!relative && am < 0 && Sxx > 0) { /* the linear model: through the origin */
        am = 0;
        bm = Sxy / Sxx;
    }
    double err = 0;
    for (int k = i; k < j; k++) {
        double w = relative ? 1.0 / (s[k].y * s[k].y) : 1.0, e = s[k].y - am - bm * s[k].x * 1e-6;
        err += w * e * e;
    }
    *a = am;
    *b = bm * 1e-6;
    return err;
}

/* rms error in microseconds, the largest relative error and the rms
 * relative error of the model in use over the samples */
static double quality(const pcoll_cost_model_t *m, const sample_t *s, int n, double *rms, double *max_rel)
{
    double sq = 0, mr = 0, rel = 0;
    for (int i = 0; i < n; i++) {
        double e = pcoll_cost_predict(m, s[i].x) - s[i].y;
        sq += e * e;
        rel += (e / s[i].y) * (e / s[i].y);
        if (fabs(e) / s[i].y > mr) mr = fabs(e) / s[i].y;
    }
    *rms = sqrt(sq / n);
    *max_rel = mr;
    return sqrt(rel / n);
}

/* The best split of the n sorted samples into k ranges of at least two for
 * every k <= kmax: cost[k][j] the least error of the first j samples in k
 * ranges, from[k][j] where the last of them begins; err ((n + 1)^2) is
 * scratch for each range's fit. */
static void segment(const sample_t *s, int n, int kmax, double *cost, int *from, double *err)
{
#define AT(t, k, j) (t)[(size_t)(k) * (size_t)(n + 1) + (size_t)(j)]
    for (int k = 0; k <= kmax; k++)
        for (int j = 0; j <= n; j++) AT(cost, k, j) = INFINITY;
    AT(cost, 0, 0) = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 2; j <= n; j++) {
            double a, b;
            /* a range spans a factor of two in size at least */
            int wide = s[j - 1].x >= 2 * s[i].x;
            err[(size_t)i * (size_t)(n + 1) + (size_t)j] = wide ? fit_range(s, i, j, 1, &a, &b) : INFINITY;
        }
    for (int k = 1; k <= kmax; k++)
        for (int j = 2 * k; j <= n; j++)
            for (int i = 2 * (k - 1); i <= j - 2; i++) {
                double c = AT(cost, k - 1, i) + err[(size_t)i * (size_t)(n + 1) + (size_t)j];
                if (c < AT(cost, k, j)) {
                    AT(cost, k, j) = c;
                    AT(from, k, j) = i;
                }
            }
#undef AT
}

int pcoll_cost_model_fit(const double *bytes, const double *us, int n, pcoll_cost_model_t *m)
{
    if (!m) return PC_ERR(PCOLL_ERR_NULL, "model is NULL");
    if (!bytes || !us) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !bytes ? "bytes" : "us");
    if (n < 2) return PC_ERR(PCOLL_ERR_ARG, "n is %d: a fit needs two samples or more", n);
    sample_t *s = malloc(sizeof *s * (size_t)n);
    if (!s) return PC_ERR(PCOLL_ERR_NOMEM, "no memory for %d samples", n);
    for (int i = 0; i < n; i++) {
        if (!isfinite(bytes[i]) || bytes[i] < 0 || !isfinite(us[i]) || us[i] <= 0) {
            free(s);
            return PC_ERR(PCOLL_ERR_ARG, "sample %d (%g bytes, %g us): sizes must be >= 0 and times > 0", i, bytes[i],
                          us[i]);
        }
        s[i] = (sample_t){bytes[i], us[i]};
    }
    qsort(s, (size_t)n, sizeof *s, by_size);
    memset(m, 0, sizeof *m);
    m->nsamples = n;
    (void)fit_range(s, 0, n, 0, &m->a_us, &m->b_us);
    (void)quality(m, s, n, &m->linear_rms_us, &m->linear_max_rel);
    m->nsegments = 1;
    m->segment[0] = (pcoll_cost_segment_t){0, m->a_us, m->b_us};
    int kmax = n / 2 < PCOLL_COST_MAX_SEGMENTS ? n / 2 : PCOLL_COST_MAX_SEGMENTS;
    if (n >= 4) {
        double *cost = malloc(sizeof(double) * (size_t)(kmax + 1) * (size_t)(n + 1));
        int *from = calloc((size_t)(kmax + 1) * (size_t)(n + 1), sizeof *from);
        double *err = malloc(sizeof(double) * (size_t)(n + 1) * (size_t)(n + 1)); /* [i][j]: range i..j-1 */
        if (!cost || !from || !err) {
            free(cost);
            free(from);
            free(err);
            free(s);
            return PC_ERR(PCOLL_ERR_NOMEM, "no memory for the piecewise fit of %d samples", n);
        }
        segment(s, n, kmax, cost, from, err);
        free(err);
        pcoll_cost_model_t best = *m;
        double best_rel = INFINITY;
        for (int k = 1; k <= kmax; k++) {
            if (!isfinite(cost[(size_t)k * (size_t)(n + 1) + (size_t)n])) continue;
            pcoll_cost_model_t t = *m;
            t.piecewise = 1;
            t.nsegments = k;
            for (int q = k, j = n; q >= 1; q--) {
                int i = from[(size_t)q * (size_t)(n + 1) + (size_t)j];
                double a, b;
                (void)fit_range(s, i, j, 1, &a, &b);
                t.segment[q - 1] = (pcoll_cost_segment_t){q == 1 ? 0 : s[i].x, a, b};
                j = i;
            }
            double rel = quality(&t, s, n, &t.piecewise_rms_us, &t.piecewise_max_rel);
            if (rel < best_rel) {
                best = t;
                best_rel = rel;
            }
            if (rel <= REL_TOLERANCE) break;
        }
        *m = best;
        free(cost);
        free(from);
    } else {
        m->piecewise_rms_us = m->linear_rms_us;
        m->piecewise_max_rel = m->linear_max_rel;
    }
    free(s);
    return PCOLL_SUCCESS;
}
