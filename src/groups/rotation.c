/* Rotating groups: see rotation.h. */
#include "rotation.h"

#include <math.h>

#define MAX_DIGITS 64

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

static int log2i(int x)
{
    int l = 0;
    while ((1 << l) < x) l++;
    return l;
}

int pc_rot_default_size(int P)
{
    int s = (int)lround(sqrt((double)P));
    if (s < 2) s = 2;
    return s > P ? P : s;
}

int pc_rot_depth(int P, int S)
{
    if (S >= P) return 1;
    int D = 0;
    for (long long v = 1; v < P; v *= S) D++;
    return D;
}

/* b^e, saturated above P (no overflow) */
static long long power_capped(long long b, int e, long long cap)
{
    long long v = 1;
    for (int i = 0; i < e; i++) {
        v *= b;
        if (v > cap) return cap + 1;
    }
    return v;
}

/* The mixed-radix grid of (P, S): D digits with radices s[], size Q. */
typedef struct grid {
    int D;
    int s[MAX_DIGITS];
    long long Q;
} grid_t;

static void grid_of(int P, int S, grid_t *g)
{
    int D = pc_rot_depth(P, S);
    long long b = 1;
    while (power_capped(b + 1, D, P) <= P) b++;
    int j = 0;
    for (int c = D; c >= 0; c--) {
        long long v = power_capped(b + 1, c, P);
        if (v <= P && v * power_capped(b, D - c, P) <= P) {
            j = c;
            break;
        }
    }
    /* b = 1 (S = 2, P not a power of two): the digits of radix 1 would make
     * every rank of the grid a group of its own; without them the grid is a
     * hypercube of 2^j ranks, the others join its lines, and every rank's
     * value still reaches every other within j <= D rounds */
    if (b == 1) D = j;
    g->D = D;
    g->Q = 1;
    for (int k = 0; k < D; k++) {
        g->s[k] = (int)(k < j ? b + 1 : b);
        g->Q *= g->s[k];
    }
}

static int butterfly(int P, int S, uint64_t t, int rank, int *members)
{
    int p = log2i(P), s = log2i(S);
    int mask = 0;
    for (int i = 0; i < s; i++) mask |= 1 << (int)((t * (uint64_t)s + (uint64_t)i) % (uint64_t)p);
    /* every subset of mask, in increasing order of the resulting rank */
    int base = rank & ~mask, n = 0;
    for (int sub = 0;; sub = (sub - mask) & mask) { /* subsets of mask in increasing order */
        members[n++] = base | sub;
        if (sub == mask) break;
    }
    return n;
}

static int mixed(int P, int S, uint64_t t, int rank, int *members)
{
    grid_t g;
    grid_of(P, S, &g);
    int k = (int)(t % (uint64_t)g.D);
    long long w[MAX_DIGITS] = {0}, wk;
    for (int i = 0, acc = 1; i < g.D; i++) {
        w[i] = acc;
        acc *= g.s[i];
    }
    wk = w[k];
    long long lines = g.Q / g.s[k];
    long long line;
    if (rank < g.Q) { /* the other digits, as a number of their own */
        line = 0;
        long long lw = 1, rest = rank;
        for (int i = 0; i < g.D; i++) {
            int d = (int)(rest % g.s[i]);
            rest /= g.s[i];
            if (i == k) continue;
            line += d * lw;
            lw *= g.s[i];
        }
    } else {
        line = (rank - g.Q) % lines;
    }
    long long base = 0, rest = line;
    for (int i = 0; i < g.D; i++) {
        if (i == k) continue;
        base += (rest % g.s[i]) * w[i];
        rest /= g.s[i];
    }
    int n = 0;
    for (int v = 0; v < g.s[k]; v++) members[n++] = (int)(base + v * wk);
    for (long long e = g.Q + line; e < P; e += lines) members[n++] = (int)e;
    return n;
}

int pc_rot_group(int P, int S, uint64_t t, int rank, int *members)
{
    if (S >= P || P <= 1) {
        for (int i = 0; i < P; i++) members[i] = i;
        return P;
    }
    if (is_pow2(P) && is_pow2(S)) return butterfly(P, S, t, rank, members);
    return mixed(P, S, t, rank, members);
}

int pc_rot_period(int P, int S)
{
    if (S >= P || P <= 1) return 1;
    if (is_pow2(P) && is_pow2(S)) {
        int p = log2i(P), s = log2i(S), a = p, c = s;
        while (c) { /* gcd(p, s) */
            int t = a % c;
            a = c;
            c = t;
        }
        return p / a;
    }
    grid_t g;
    grid_of(P, S, &g);
    return g.D;
}

int pc_rot_max_size(int P, int S)
{
    if (S >= P || P <= 1) return P;
    if (is_pow2(P) && is_pow2(S)) return S;
    grid_t g;
    grid_of(P, S, &g);
    int most = 0;
    for (int k = 0; k < g.D; k++) {
        long long lines = g.Q / g.s[k];
        long long extra = (P - g.Q + lines - 1) / lines;
        if (g.s[k] + extra > most) most = (int)(g.s[k] + extra);
    }
    return most;
}
