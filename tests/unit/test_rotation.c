/*
 * Rotating groups (groups/rotation.c), no MPI.  For every P <= 200 and every
 * group size S (2..P+1), from every starting round of the rule's period:
 *   - the groups of a round partition the ranks (each rank is in its own
 *     group, listed in increasing order; every member computes the same
 *     group);
 *   - no group has more than S + 2 ranks, nor more than pc_rot_max_size,
 *     nor fewer than 2 (P >= 2: nobody sits a round out);
 *   - within pc_rot_depth(P, S) consecutive rounds every rank's value
 *     reaches every other rank (bit sets OR-ed through the groups), and
 *     pc_rot_depth is ceil(log_S P);
 *   - the groups repeat with the rule's period (pc_rot_period: the
 *     butterfly's bit positions after log2 P / gcd(log2 P, log2 S), the
 *     grid's digits after their number).
 * And the paper's butterfly at P = 8, S = 4, the default sizes, a mixed
 * radix example.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups/rotation.h"
#include "unit_check.h"

#define PMAX 200
#define WORDS ((PMAX + 63) / 64)

static int members[PMAX], other[PMAX];
static uint64_t know[PMAX][WORDS], next_know[PMAX][WORDS];

static int same_group(const int *a, int na, const int *b, int nb)
{
    return na == nb && memcmp(a, b, sizeof(int) * (size_t)na) == 0;
}

/* one round: check the partition, propagate the bit sets */
static void round_check(int P, int S, uint64_t t)
{
    int most = pc_rot_max_size(P, S);
    CHECK(most <= S + 2 || most == P);
    for (int r = 0; r < P; r++) {
        int n = pc_rot_group(P, S, t, r, members);
        CHECK(n >= (P >= 2 ? 2 : 1) && n <= most); /* no rank alone */
        int self = 0;
        for (int i = 0; i < n; i++) {
            CHECK(members[i] >= 0 && members[i] < P);
            if (i > 0) CHECK(members[i] > members[i - 1]);
            if (members[i] == r) self = 1;
        }
        CHECK(self);
        /* the group's smallest member computes the same group (enough: it
         * computes it for all of its members alike, by this same loop) */
        int m = pc_rot_group(P, S, t, members[0], other);
        CHECK(same_group(members, n, other, m));
        uint64_t u[WORDS] = {0};
        for (int i = 0; i < n; i++)
            for (int w = 0; w < WORDS; w++) u[w] |= know[members[i]][w];
        memcpy(next_know[r], u, sizeof u);
    }
    memcpy(know, next_know, sizeof know);
}

static void check_pair(int P, int S)
{
    int D = pc_rot_depth(P, S);
    long long v = 1;
    int ceil_log = 0;
    while (v < P) {
        v *= S;
        ceil_log++;
    }
    CHECK(D == (ceil_log > 0 ? ceil_log : 1));
    int period = pc_rot_period(P, S);
    for (int t0 = 0; t0 < period; t0++) {
        memset(know, 0, sizeof know);
        for (int r = 0; r < P; r++) know[r][r / 64] |= 1ULL << (r % 64);
        for (int k = 0; k < D; k++) round_check(P, S, (uint64_t)(t0 + k));
        for (int r = 0; r < P; r++)
            for (int q = 0; q < P; q++) CHECK((know[r][q / 64] >> (q % 64)) & 1);
    }
    /* periodicity: round t and t + period form the same groups */
    for (int t = 0; t < 3; t++)
        for (int r = 0; r < P; r += 1 + P / 16) {
            int n = pc_rot_group(P, S, (uint64_t)t, r, members);
            int m = pc_rot_group(P, S, (uint64_t)(t + period), r, other);
            CHECK(same_group(members, n, other, m));
        }
}

int main(void)
{
    /* the paper's example: P = 8, S = 4 */
    int n = pc_rot_group(8, 4, 0, 5, members);
    CHECK(n == 4 && members[0] == 4 && members[3] == 7);
    n = pc_rot_group(8, 4, 1, 5, members);
    CHECK(n == 4 && members[0] == 0 && members[1] == 1 && members[2] == 4 && members[3] == 5);
    n = pc_rot_group(8, 4, 1, 2, members);
    CHECK(n == 4 && members[0] == 2 && members[1] == 3 && members[2] == 6 && members[3] == 7);
    /* P = 6, S = 2: radices 2, 2 over ranks 0..3 (the radix-1 digit left
     * out), then 4, 5 */
    n = pc_rot_group(6, 2, 0, 4, members);
    CHECK(n == 3 && members[0] == 0 && members[1] == 1 && members[2] == 4);
    n = pc_rot_group(6, 2, 1, 3, members);
    CHECK(n == 3 && members[0] == 1 && members[1] == 3 && members[2] == 5);
    n = pc_rot_group(6, 2, 2, 3, members);
    CHECK(n == 3 && members[0] == 2 && members[1] == 3 && members[2] == 5);
    CHECK(pc_rot_period(6, 2) == 2 && pc_rot_depth(6, 2) == 3);
    /* P = 12, S = 3: radices 3, 2, 2 */
    n = pc_rot_group(12, 3, 0, 4, members);
    CHECK(n == 3 && members[0] == 3 && members[1] == 4 && members[2] == 5);
    n = pc_rot_group(12, 3, 1, 4, members);
    CHECK(n == 2 && members[0] == 1 && members[1] == 4);
    n = pc_rot_group(12, 3, 2, 4, members);
    CHECK(n == 2 && members[0] == 4 && members[1] == 10);
    CHECK(pc_rot_period(12, 3) == 3 && pc_rot_period(8, 4) == 3 && pc_rot_period(16, 4) == 2);
    /* defaults: max(2, round(sqrt(P))) */
    CHECK(pc_rot_default_size(1) == 1 && pc_rot_default_size(2) == 2 && pc_rot_default_size(8) == 3);
    CHECK(pc_rot_default_size(16) == 4 && pc_rot_default_size(32) == 6 && pc_rot_default_size(64) == 8);
    /* one group when S >= P */
    n = pc_rot_group(5, 5, 7, 3, members);
    CHECK(n == 5);

    long pairs = 0;
    for (int P = 1; P <= PMAX; P++)
        for (int S = 2; S <= P + 1; S++) {
            check_pair(P, S);
            pairs++;
        }
    printf("rotation: %ld (P, S) pairs, %ld checks passed\n", pairs, checks);
    return 0;
}
