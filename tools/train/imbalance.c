/* Delay injection for the load-imbalance experiments (eager-SGD paper 7.2:
 * one or a few random ranks delayed per step, or all ranks skewed). */
#include "imbalance.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "prng.h"

/* purpose tags that keep the random streams apart */
#define TAG_RANDOM 0x52414e44u
#define TAG_DIST 0x44495354u

static int parse_num(const char *what, const char *s, const char *spec, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end != '\0' || errno || !isfinite(x) || x < 0)
        return tr_fail("--imbalance %s: %s \"%s\" is not a number >= 0", spec, what, s);
    *v = x;
    return 0;
}

/* splits "kind:A:B[:C]" into kind, A, B and C (NULL if absent; copies:
 * fields point into buf) */
static int split_fields(const char *spec, char *buf, size_t len, char **f)
{
    if (strlen(spec) >= len) return tr_fail("--imbalance: \"%s\" is too long", spec);
    strcpy(buf, spec);
    f[0] = buf;
    char *c1 = strchr(buf, ':');
    if (!c1) return 1;
    *c1 = '\0';
    f[1] = c1 + 1;
    char *c2 = strchr(f[1], ':');
    if (!c2) return tr_fail("--imbalance %s: expected %s:A:B", spec, buf);
    *c2 = '\0';
    f[2] = c2 + 1;
    char *c3 = strchr(f[2], ':');
    if (!c3) return 0;
    *c3 = '\0';
    f[3] = c3 + 1;
    if (strcmp(buf, "slow") != 0 || strchr(f[3], ':')) return tr_fail("--imbalance %s: too many fields", spec);
    return 0;
}

/* "R1,R2,..." into out->slow (sorted; a rank listed twice is an error) */
static int parse_slow_ranks(const char *list, const char *spec, imbalance_t *out)
{
    const char *p = list;
    out->count = 0;
    for (;;) {
        char *end;
        errno = 0;
        long r = strtol(p, &end, 10);
        if (!isdigit((unsigned char)*p) || (*end != ',' && *end != '\0') || errno || r > 1000000)
            return tr_fail("--imbalance %s: RANK \"%.*s\" is not a whole number in 0..1000000", spec,
                           (int)strcspn(p, ","), p);
        if (out->count == IMB_MAX_SLOW)
            return tr_fail("--imbalance %s: more than %d slow ranks", spec, IMB_MAX_SLOW);
        long i = out->count++;
        while (i > 0 && out->slow[i - 1] > r) {
            out->slow[i] = out->slow[i - 1];
            i--;
        }
        if (i > 0 && out->slow[i - 1] == r) return tr_fail("--imbalance %s: rank %ld is listed twice", spec, r);
        out->slow[i] = r;
        if (*end == '\0') return 0;
        p = end + 1;
    }
}

static int is_slow(const imbalance_t *imb, int rank)
{
    for (long i = 0; i < imb->count; i++)
        if (imb->slow[i] == rank) return 1;
    return 0;
}

int imbalance_parse(const char *spec, uint64_t seed, imbalance_t *out)
{
    memset(out, 0, sizeof *out);
    out->seed = seed;
    char buf[512], *f[4] = {0};
    if (!spec) return tr_fail("--imbalance: missing value");
    int s = split_fields(spec, buf, sizeof buf, f);
    if (s < 0) return -1;
    if (s == 1) {
        if (strcmp(spec, "none") != 0)
            return tr_fail("--imbalance \"%s\": expected none, random:K:MS, skew:MIN:MAX, slow:R[,R...]:FACTOR[:MS] or "
                           "dist:MEAN:SD",
                           spec);
        out->kind = IMB_NONE;
        snprintf(out->spec, sizeof out->spec, "none");
        return 0;
    }
    double a = 0, b = 0;
    if (strcmp(f[0], "random") == 0) {
        char *end;
        errno = 0;
        long k = strtol(f[1], &end, 10);
        if (end == f[1] || *end || errno || k < 1 || k > 1000000)
            return tr_fail("--imbalance %s: K \"%s\" is not a whole number >= 1", spec, f[1]);
        if (parse_num("MS", f[2], spec, &b)) return -1;
        out->kind = IMB_RANDOM;
        out->count = k;
        out->a = b;
        snprintf(out->spec, sizeof out->spec, "random:%ld:%g", k, b);
        return 0;
    }
    if (strcmp(f[0], "slow") == 0) {
        if (parse_slow_ranks(f[1], spec, out)) return -1;
        if (parse_num("FACTOR", f[2], spec, &b)) return -1;
        if (b < 1 || b > 1000) return tr_fail("--imbalance %s: FACTOR must be in 1..1000", spec);
        if (f[3] && parse_num("MS", f[3], spec, &a)) return -1;
        if (f[3] && a > 3.6e6) return tr_fail("--imbalance %s: MS must be at most 3600000 (an hour)", spec);
        out->kind = IMB_SLOW;
        out->a = b;
        out->b = f[3] ? a : -1.0;
        size_t len = (size_t)snprintf(out->spec, sizeof out->spec, "slow:");
        for (long i = 0; i < out->count && len < sizeof out->spec; i++)
            len += (size_t)snprintf(out->spec + len, sizeof out->spec - len, "%s%ld", i ? "," : "", out->slow[i]);
        if (len < sizeof out->spec) len += (size_t)snprintf(out->spec + len, sizeof out->spec - len, ":%g", b);
        if (f[3] && len < sizeof out->spec) snprintf(out->spec + len, sizeof out->spec - len, ":%g", a);
        return 0;
    }
    if (strcmp(f[0], "skew") == 0 || strcmp(f[0], "dist") == 0) {
        int skew = f[0][0] == 's';
        if (parse_num(skew ? "MIN" : "MEAN", f[1], spec, &a) || parse_num(skew ? "MAX" : "SD", f[2], spec, &b))
            return -1;
        if (skew && b < a) return tr_fail("--imbalance %s: MAX must be >= MIN", spec);
        if (!skew && b > 0 && a <= 0) return tr_fail("--imbalance %s: a lognormal needs MEAN > 0", spec);
        out->kind = skew ? IMB_SKEW : IMB_DIST;
        out->a = a;
        out->b = b;
        snprintf(out->spec, sizeof out->spec, "%s:%g:%g", f[0], a, b);
        return 0;
    }
    return tr_fail("--imbalance \"%s\": unknown kind \"%s\" (none, random, skew, slow, dist)", spec, f[0]);
}

int imbalance_check(const imbalance_t *imb, int nranks)
{
    if (imb->kind == IMB_RANDOM && imb->count > nranks)
        return tr_fail("--imbalance %s: K = %ld is more than the %d ranks", imb->spec, imb->count, nranks);
    if (imb->kind == IMB_SLOW && imb->slow[imb->count - 1] >= nranks)
        return tr_fail("--imbalance %s: rank %ld does not exist (%d ranks)", imb->spec, imb->slow[imb->count - 1],
                       nranks);
    return 0;
}

/* Is `rank` among the K ranks chosen for `step`?  Each rank gets a random key
 * from (seed, step, rank); the K smallest keys are chosen (ties by rank).
 * O(P) per step with no shared state: any rank can evaluate any step. */
static int chosen(const imbalance_t *imb, int rank, int nranks, uint64_t step)
{
    uint64_t mine = rng_key(imb->seed, TAG_RANDOM, step, (uint64_t)rank);
    long smaller = 0;
    for (int r = 0; r < nranks; r++) {
        if (r == rank) continue;
        uint64_t k = rng_key(imb->seed, TAG_RANDOM, step, (uint64_t)r);
        if (k < mine || (k == mine && r < rank)) smaller++;
    }
    return smaller < imb->count;
}

double imbalance_delay_ms(const imbalance_t *imb, int rank, int nranks, uint64_t step, double compute_ms)
{
    switch (imb->kind) {
    case IMB_NONE:
        return 0.0;
    case IMB_RANDOM:
        return chosen(imb, rank, nranks, step) ? imb->a : 0.0;
    case IMB_SKEW: {
        if (nranks < 2) return imb->a;
        uint64_t pos = ((uint64_t)rank + step) % (uint64_t)nranks;
        return imb->a + (imb->b - imb->a) * (double)pos / (double)(nranks - 1);
    }
    case IMB_SLOW:
        if (!is_slow(imb, rank)) return 0.0;
        return (imb->a - 1.0) * (imb->b >= 0 ? imb->b : compute_ms);
    case IMB_DIST: {
        if (imb->b <= 0) return imb->a;
        /* lognormal with mean m and standard deviation s:
           sigma^2 = ln(1 + s^2/m^2), mu = ln m - sigma^2/2 */
        double s2 = log(1.0 + (imb->b * imb->b) / (imb->a * imb->a));
        double mu = log(imb->a) - 0.5 * s2;
        rng_t r;
        rng_seed(&r, rng_key(imb->seed, TAG_DIST, step, (uint64_t)rank));
        return exp(mu + sqrt(s2) * rng_normal(&r));
    }
    }
    return 0.0;
}

void sleep_ms(double ms)
{
    if (!(ms > 0)) return;
    if (ms > 3.6e9) ms = 3.6e9; /* a thousand hours: no overflow of time_t */
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000.0) * 1e6);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
