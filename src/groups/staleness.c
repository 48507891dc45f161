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

uint64_t pc_staleness_weights(int n, const uint64_t *iters, double alpha, double *w)
{
    uint64_t top = newest(n, iters);
    if (n <= 0) return top;
    /* K, the largest age, and how many members each age has */
    uint64_t K = 1;
    for (int i = 0; i < n; i++)
        if (top - iters[i] + 1 > K) K = top - iters[i] + 1;
    if (K > 1u << 20) K = 1u << 20; /* older than a million iterations: as old as that */
    int *members = calloc((size_t)K + 1, sizeof(int));
    double *weight = calloc((size_t)K + 1, sizeof(double)); /* by age, for ages with members */
    if (!members || !weight) { /* no memory: the constant rule */
        free(members);
        free(weight);
        return pc_constant_weights(n, iters, w);
    }
    for (int i = 0; i < n; i++) {
        uint64_t v = top - iters[i] + 1;
        members[v > K ? K : v]++;
    }
    /* beta_v goes to age v, or to the nearest age with members */
    double norm = 1.0 - pow(alpha, (double)K);
    for (uint64_t v = 1; v <= K; v++) {
        double beta = (1.0 - alpha) * pow(alpha, (double)(v - 1)) / norm;
        uint64_t to = v;
        for (uint64_t d = 1; !members[to]; d++) { /* age 1 (the newest) always has a member: this ends */
            if (v > d && members[v - d])
                to = v - d;
            else if (v + d <= K && members[v + d])
                to = v + d;
        }
        weight[to] += beta;
    }
    double sum = 0;
    for (int i = 0; i < n; i++) {
        uint64_t v = top - iters[i] + 1;
        if (v > K) v = K;
        w[i] = weight[v] / members[v];
        sum += w[i];
    }
    for (int i = 0; i < n; i++) w[i] /= sum; /* exactly 1 up to rounding */
    free(members);
    free(weight);
    return top;
}
