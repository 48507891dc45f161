/* Delay injection for the load-imbalance experiments (eager-SGD paper 7.2:
 * one or a few random ranks delayed per step, or all ranks skewed). */
#include "imbalance.h"

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

/* splits "kind:A:B" into kind, A, B (copies; fields point into buf) */
static int split3(const char *spec, char *buf, size_t len, char **f)
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
    if (strchr(f[2], ':')) return tr_fail("--imbalance %s: too many fields", spec);
    return 0;
}

int imbalance_parse(const char *spec, uint64_t seed, imbalance_t *out)
{
    memset(out, 0, sizeof *out);
    out->seed = seed;
    char buf[128], *f[3] = {0};
    if (!spec) return tr_fail("--imbalance: missing value");
    int s = split3(spec, buf, sizeof buf, f);
    if (s < 0) return -1;
    if (s == 1) {
        if (strcmp(spec, "none") != 0)
            return tr_fail("--imbalance \"%s\": expected none, random:K:MS, skew:MIN:MAX, slow:RANK:FACTOR or "
                           "dist:MEAN:SD",
                           spec);
        out->kind = IMB_NONE;
        snprintf(out->spec, sizeof out->spec, "none");
        return 0;
    }
    double a = 0, b = 0;
    if (strcmp(f[0], "random") == 0 || strcmp(f[0], "slow") == 0) {
        char *end;
        errno = 0;
        long k = strtol(f[1], &end, 10);
        int random = f[0][0] == 'r';
        if (end == f[1] || *end || errno || k < (random ? 1 : 0) || k > 1000000)
            return tr_fail("--imbalance %s: %s \"%s\" is not a whole number >= %d", spec, random ? "K" : "RANK", f[1],
                           random ? 1 : 0);
        if (parse_num(random ? "MS" : "FACTOR", f[2], spec, &b)) return -1;
        if (!random && b < 1) return tr_fail("--imbalance %s: FACTOR must be >= 1", spec);
        out->kind = random ? IMB_RANDOM : IMB_SLOW;
        out->count = k;
        out->a = b;
        snprintf(out->spec, sizeof out->spec, "%s:%ld:%g", f[0], k, b);
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
    if (imb->kind == IMB_SLOW && imb->count >= nranks)
        return tr_fail("--imbalance %s: rank %ld does not exist (%d ranks)", imb->spec, imb->count, nranks);
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
        return rank == imb->count ? (imb->a - 1.0) * compute_ms : 0.0;
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
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000.0) * 1e6);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
