/*
 * The rules of views by messages (partial/view_rules.h), case by case:
 *   - coordinator and deputy: the view's lowest two ranks, for every set of
 *     left-out ranks of 1 to 9 ranks (none when nobody is in the view);
 *   - the order of views: epoch first, then maker;
 *   - a view keeps two ranks at least, but of two;
 *   - a FREEZE at a rank, in the interleavings of a deputy's takeover: the
 *     plain cases (newer: followed, older: dropped, a helper running:
 *     held); a rank awaiting another rank's view holds a third's FREEZE
 *     (that view's GO may be out) but follows its maker's next one; a
 *     coordinator's own view not begun gives way to its deputy's that
 *     leaves it out, even of a lower epoch, and to nothing else older; a
 *     rank that agreed to the takeover holds the coordinator's FREEZEs, not
 *     the deputy's; FREEZEs of a rank its view left out are dropped (held
 *     at a left-out rank); once the coordinator is back they are followed;
 *   - the answer to DEPOSE: yes only in that view, from its deputy, about
 *     its coordinator, and frozen for nothing.
 */
#include <stdio.h>
#include <string.h>

#include "partial/view_rules.h"
#include "unit_check.h"

static unsigned char bits(unsigned mask) { return (unsigned char)mask; } /* ranks 0..7 */

/* coordinator and deputy against a plain scan */
static void roles(void)
{
    for (int P = 1; P <= 9; P++)
        for (unsigned mask = 0; mask < (1u << P); mask++) {
            unsigned char left[2] = {(unsigned char)(mask & 0xff), (unsigned char)(mask >> 8)};
            int in[9], n = 0;
            for (int r = 0; r < P; r++)
                if (!((mask >> r) & 1)) in[n++] = r;
            CHECK(pc_view_coordinator(left, P) == (n > 0 ? in[0] : -1));
            CHECK(pc_view_deputy(left, P) == (n > 1 ? in[1] : -1));
            CHECK(pc_view_allowed(left, P) == (n >= (P >= 3 ? 2 : 1)));
        }
}

static pc_view_state_t at(int me, uint32_t epoch, int maker, const unsigned char *left_out)
{
    return (pc_view_state_t){.me = me, .epoch = epoch, .maker = maker, .left_out = left_out, .await_maker = -1};
}

static void freezes(void)
{
    unsigned char none = bits(0), out0 = bits(1), out3 = bits(8), out03 = bits(9);

    /* plain: view 3 of rank 0 installed at rank 2 */
    pc_view_state_t s = at(2, 3, 0, &none);
    CHECK(pc_view_on_freeze(&s, 4, 0, &out3) == PC_FREEZE_FOLLOW);
    CHECK(pc_view_on_freeze(&s, 3, 0, &out3) == PC_FREEZE_DROP);
    CHECK(pc_view_on_freeze(&s, 2, 0, &out3) == PC_FREEZE_DROP);
    s.frozen = 1; /* its helper runs (GO came) */
    CHECK(pc_view_on_freeze(&s, 5, 0, &out3) == PC_FREEZE_HOLD);
    CHECK(pc_view_on_freeze(&s, 3, 0, &out3) == PC_FREEZE_DROP);

    /* awaiting view 4 of rank 0 (READY sent, no GO yet) */
    s = at(2, 3, 0, &none);
    s.frozen = s.awaiting = 1;
    s.await_epoch = 4, s.await_maker = 0;
    CHECK(pc_view_on_freeze(&s, 5, 0, &out3) == PC_FREEZE_FOLLOW); /* its maker replaces it */
    CHECK(pc_view_on_freeze(&s, 4, 0, &out3) == PC_FREEZE_DROP);
    CHECK(pc_view_on_freeze(&s, 4, 1, &out0) == PC_FREEZE_HOLD); /* another's: GO of 4 may be out */
    CHECK(pc_view_on_freeze(&s, 6, 1, &out0) == PC_FREEZE_HOLD);

    /* the coordinator, awaiting its own view 5 (no GO out) */
    s = at(0, 3, 0, &none);
    s.frozen = s.awaiting = 1;
    s.await_epoch = 5, s.await_maker = 0;
    CHECK(pc_view_on_freeze(&s, 4, 1, &out0) == PC_FREEZE_FOLLOW); /* its deputy's, leaving it out */
    CHECK(pc_view_on_freeze(&s, 4, 1, &out3) == PC_FREEZE_DROP);   /* older, and it stays in */
    CHECK(pc_view_on_freeze(&s, 6, 1, &out3) == PC_FREEZE_FOLLOW);
    CHECK(pc_view_on_freeze(&s, 2, 1, &out0) == PC_FREEZE_DROP); /* not newer than its view */

    /* a rank that agreed to the takeover from rank 0 */
    s = at(2, 3, 0, &none);
    s.deposed = 1;
    CHECK(pc_view_on_freeze(&s, 4, 0, &out3) == PC_FREEZE_HOLD);
    CHECK(pc_view_on_freeze(&s, 9, 0, &out3) == PC_FREEZE_HOLD);
    CHECK(pc_view_on_freeze(&s, 4, 1, &out0) == PC_FREEZE_FOLLOW);
    /* ... which it then awaits: the held one stays held */
    s.frozen = s.awaiting = 1;
    s.await_epoch = 4, s.await_maker = 1;
    CHECK(pc_view_on_freeze(&s, 5, 0, &out3) == PC_FREEZE_HOLD);
    CHECK(pc_view_on_freeze(&s, 5, 1, &out03) == PC_FREEZE_FOLLOW);

    /* installed: view 4 of rank 1, rank 0 left out; rank 0's late FREEZEs */
    s = at(2, 4, 1, &out0);
    CHECK(pc_view_on_freeze(&s, 4, 0, &out3) == PC_FREEZE_DROP);
    CHECK(pc_view_on_freeze(&s, 5, 0, &out3) == PC_FREEZE_DROP);
    CHECK(pc_view_on_freeze(&s, 5, 1, &out03) == PC_FREEZE_FOLLOW);
    pc_view_state_t x = at(3, 5, 1, &out03); /* left out itself: rank 0 may be back already */
    x.left_me = 1;
    CHECK(pc_view_on_freeze(&x, 6, 0, &out3) == PC_FREEZE_HOLD);
    CHECK(pc_view_on_freeze(&x, 6, 1, &out3) == PC_FREEZE_FOLLOW);
    /* rank 0 back (view 6 of rank 1): its views are followed again */
    s = at(2, 6, 1, &none);
    CHECK(pc_view_on_freeze(&s, 7, 0, &out3) == PC_FREEZE_FOLLOW);
    CHECK(pc_view_on_freeze(&s, 6, 0, &out3) == PC_FREEZE_DROP);
}

static void depose(void)
{
    unsigned char none = bits(0), out1 = bits(2);
    pc_view_state_t s = at(2, 3, 0, &none);
    CHECK(pc_view_agrees(&s, 4, 3, 1, 0));
    CHECK(!pc_view_agrees(&s, 4, 2, 1, 0)); /* another view */
    CHECK(!pc_view_agrees(&s, 4, 3, 3, 0)); /* not its deputy */
    CHECK(!pc_view_agrees(&s, 4, 3, 1, 1)); /* not its coordinator */
    s.frozen = 1;
    CHECK(!pc_view_agrees(&s, 4, 3, 1, 0));
    s.awaiting = 1;
    CHECK(!pc_view_agrees(&s, 4, 3, 1, 0));
    s = at(3, 3, 0, &out1); /* rank 1 left out: the deputy is rank 2 */
    CHECK(pc_view_agrees(&s, 4, 3, 2, 0));
    CHECK(!pc_view_agrees(&s, 4, 3, 1, 0));
    s.left_me = 1;
    CHECK(!pc_view_agrees(&s, 4, 3, 2, 0));
}

int main(void)
{
    roles();
    CHECK(pc_view_newer(2, 0, 1, 5) && pc_view_newer(1, 1, 1, 0));
    CHECK(!pc_view_newer(1, 0, 1, 0) && !pc_view_newer(1, 0, 1, 1) && !pc_view_newer(1, 9, 2, 0));
    freezes();
    depose();
    printf("test_view_rules: %ld checks passed\n", checks);
    return 0;
}
