/*
 * The limit of rounds by messages under churn (partial/backoff.h), for
 * every PCOLL_EXCLUDE_MS from 1 ms to the largest (3,600,000):
 *   - it starts at the base and doubles with each raise, up to 5 s or the
 *     base if that is larger; a raise at the cap changes nothing and says
 *     so; the shift never passes PC_BACKOFF_MAX_SHIFT and never overflows;
 *   - "soon" is less than PC_BACKOFF_SOON limits away, at the limit in use;
 *   - PC_BACKOFF_CALM_ROUNDS rounds halve it, one round less does not, and
 *     a view (pc_backoff_set) starts the count again;
 *   - a shift from a FREEZE beyond the maximum is clamped;
 *   - a rank stopped 5 s at the default (500 ms) is not "soon".
 */
#include <stdint.h>
#include <stdio.h>

#include "partial/backoff.h"
#include "unit_check.h"

static void doubling(uint32_t base)
{
    pc_backoff_t b = {0, 0};
    uint32_t cap = base > PC_BACKOFF_CAP_MS ? base : PC_BACKOFF_CAP_MS;
    CHECK(pc_backoff_limit(base, &b) == base);
    uint32_t prev = base;
    int raised = 0;
    while (pc_backoff_raise(base, &b)) {
        uint32_t now = pc_backoff_limit(base, &b);
        CHECK(now == (prev * 2 < cap ? prev * 2 : cap));
        CHECK(now > prev);
        prev = now;
        raised++;
        CHECK(raised <= PC_BACKOFF_MAX_SHIFT);
    }
    /* stopped: at the cap, or at the largest shift */
    CHECK(prev == cap || b.shift == PC_BACKOFF_MAX_SHIFT);
    uint32_t shift = b.shift;
    CHECK(!pc_backoff_raise(base, &b));
    CHECK(b.shift == shift && pc_backoff_limit(base, &b) == prev);
    if (base > PC_BACKOFF_CAP_MS) CHECK(raised == 0);
    /* soon: under PC_BACKOFF_SOON limits */
    uint64_t soon = (uint64_t)PC_BACKOFF_SOON * prev;
    if (soon <= UINT32_MAX) {
        CHECK(pc_backoff_soon(base, &b, (uint32_t)soon - 1));
        CHECK(!pc_backoff_soon(base, &b, (uint32_t)soon));
    } else {
        CHECK(pc_backoff_soon(base, &b, UINT32_MAX));
    }
    /* calm rounds halve it, one step per PC_BACKOFF_CALM_ROUNDS */
    while (b.shift > 0) {
        uint32_t before = b.shift;
        for (int r = 0; r < PC_BACKOFF_CALM_ROUNDS - 1; r++) pc_backoff_round(&b);
        CHECK(b.shift == before);
        pc_backoff_round(&b);
        CHECK(b.shift == before - 1);
    }
    pc_backoff_round(&b);
    CHECK(b.shift == 0 && pc_backoff_limit(base, &b) == base);
}

int main(void)
{
    uint32_t bases[] = {1, 2, 3, 5, 10, 100, 500, 2500, 4999, 5000, 5001, 60000, 3600000};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) doubling(bases[i]);

    /* a view resets the calm count; a FREEZE's shift is clamped */
    pc_backoff_t b = {0, 0};
    CHECK(pc_backoff_raise(3, &b) && pc_backoff_raise(3, &b));
    for (int r = 0; r < PC_BACKOFF_CALM_ROUNDS - 1; r++) pc_backoff_round(&b);
    pc_backoff_set(&b, 2);
    pc_backoff_round(&b);
    CHECK(b.shift == 2);
    pc_backoff_set(&b, 1000);
    CHECK(b.shift == PC_BACKOFF_MAX_SHIFT && pc_backoff_limit(1, &b) == PC_BACKOFF_CAP_MS);
    CHECK(pc_backoff_limit(3600000, &b) == 3600000);

    /* the default: a 5 s stop is not soon, a 100 ms absence is */
    pc_backoff_t d = {0, 0};
    CHECK(!pc_backoff_soon(500, &d, 5000));
    CHECK(pc_backoff_soon(500, &d, 100));
    printf("test_backoff: %ld checks passed\n", checks);
    return 0;
}
