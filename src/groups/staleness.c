/* Staleness-aware weights: see staleness.h. */
#include "staleness.h"

#include <math.h>
#include <stdlib.h>

static uint64_t newest(int n, const uint64_t *iters)
{
    uint64_t m = 0;
    for (int i = 0; i < n; i++)
        if (iters[i] > m) m = iters[i];
    return m;
}

uint64_t pc_constant_weights(int n, const uint64_t *iters, double *w)
{
    for (int i = 0; i < n; i++) w[i] = 1.0 / n;
    return newest(n, iters);
}

static int by_age(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The weights age by age need no loop over the ages: with the members'
 * distinct ages a_1 < ... < a_m, the ages that go to a_j are an interval
 * [lo_j, hi_j] (up to the midpoint between a_j and a_j+1, the midpoint
 * itself to the fresher a_j), and the betas of an interval sum to
 * (alpha^(lo-1) - alpha^hi) / (1 - alpha^K).  O(n log n), whatever the
 * ages (a loop over them was O(K^2) for a member far behind). */
uint64_t pc_staleness_weights(int n, const uint64_t *iters, double alpha, double *w)
{
    uint64_t top = newest(n, iters);
    if (n <= 0) return top;
    const uint64_t cap = 1u << 20; /* older than a million iterations: as old as that */
    uint64_t *age = malloc(sizeof(uint64_t) * 2 * (size_t)n);
    if (!age) return pc_constant_weights(n, iters, w); /* no memory: the constant rule */
    uint64_t *sorted = age + n, K = 1;
    for (int i = 0; i < n; i++) {
        age[i] = top - iters[i] + 1 < cap ? top - iters[i] + 1 : cap;
        sorted[i] = age[i];
        if (age[i] > K) K = age[i];
    }
    qsort(sorted, (size_t)n, sizeof *sorted, by_age);
    const double norm = 1.0 - pow(alpha, (double)K);
    /* per distinct age (sorted[j] at its first member j): its interval's
       betas, over its members */
    double sum = 0;
    for (int i = 0; i < n; i++) {
        int first = 0, count = 0, j;
        while (sorted[first] != age[i]) first++;
        for (j = first; j < n && sorted[j] == age[i]; j++) count++;
        uint64_t lo = first == 0 ? 1 : (sorted[first - 1] + age[i]) / 2 + 1;
        uint64_t hi = j == n ? K : (age[i] + sorted[j]) / 2;
        w[i] = (pow(alpha, (double)(lo - 1)) - pow(alpha, (double)hi)) / norm / count;
        sum += w[i];
    }
    for (int i = 0; i < n; i++) w[i] /= sum; /* exactly 1 up to rounding */
    free(age);
    return top;
}
