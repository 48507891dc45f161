/*
 * Who makes the views of rounds by messages, and what a rank does with a
 * FREEZE (partial/backend_msg_view.c): pure rules on a view's left-out
 * ranks, unit-tested without MPI (tests/unit/test_view_rules.c).
 *
 *   coordinator: the view's lowest rank; it makes the views
 *   deputy: the next one; it takes over when the coordinator is silent,
 *     once every other rank of the view agreed (DEPOSE: pc_view_agrees)
 *   of two views, the later epoch wins; of one epoch, the higher maker's
 *     (a deputy that took over while its coordinator made a view)
 *   a view keeps two ranks at least, but of two (a coordinator alone needs
 *     nobody's READY, and could go on beside its deputy's view)
 *
 *   a FREEZE at a rank (pc_view_on_freeze):
 *     not newer than its view, or than the view it awaits   -> dropped
 *       (but a view of its own not begun gives way to one that leaves it out)
 *     a change under way here (its helper runs)              -> held
 *     from the coordinator a deputy takes over from          -> held
 *     awaiting another rank's view (its GO may be out: only
 *       that rank may replace it)                            -> held
 *     made by a rank its view left out (before it knew)      -> dropped
 *       (held at a left-out rank: its maker may be back in a view it has
 *       not seen yet)
 *     else                                                   -> followed
 */
#ifndef PC_PARTIAL_VIEW_RULES_H
#define PC_PARTIAL_VIEW_RULES_H

#include <stdint.h>

#include "../util/bits.h"

/* The view's coordinator (-1: nobody is in it). */
static inline int pc_view_coordinator(const unsigned char *left, int P)
{
    for (int r = 0; r < P; r++)
        if (!pc_bit_get(left, r)) return r;
    return -1;
}

/* Its deputy (-1: the coordinator is alone). */
static inline int pc_view_deputy(const unsigned char *left, int P)
{
    for (int r = pc_view_coordinator(left, P) + 1; r > 0 && r < P; r++)
        if (!pc_bit_get(left, r)) return r;
    return -1;
}

/* Whether view (e1, made by k1) replaces view (e2, made by k2). */
static inline int pc_view_newer(uint32_t e1, int k1, uint32_t e2, int k2)
{
    return e1 > e2 || (e1 == e2 && k1 > k2);
}

/* Whether a view of P ranks may leave these out. */
static inline int pc_view_allowed(const unsigned char *left, int P)
{
    int n = 0;
    for (int r = 0; r < P; r++) n += !pc_bit_get(left, r);
    return n >= (P >= 3 ? 2 : 1);
}

/* A rank's side of the views. */
typedef struct pc_view_state {
    int me;
    uint32_t epoch;                /* its view (or the one that left it out) */
    int maker;                     /* ... made by */
    const unsigned char *left_out; /* ... its left-out ranks */
    int left_me;                   /* this rank is left out */
    int frozen;                    /* a view change is under way here */
    int awaiting;                  /* frozen for a view, its GO not come: */
    uint32_t await_epoch;          /* ... that view's epoch */
    int await_maker;               /* ... and maker */
    int deposed;                   /* rank + 1 whose FREEZEs wait for its deputy's view (0: none) */
} pc_view_state_t;

typedef enum { PC_FREEZE_DROP, PC_FREEZE_HOLD, PC_FREEZE_FOLLOW } pc_freeze_action_t;

/* What rank s->me does with a FREEZE of (epoch, maker) that leaves `left` out. */
static inline pc_freeze_action_t pc_view_on_freeze(const pc_view_state_t *s, uint32_t epoch, int maker,
                                                   const unsigned char *left)
{
    int yields = s->awaiting && s->await_maker == s->me && pc_bit_get(left, s->me);
    if (!pc_view_newer(epoch, maker, s->epoch, s->maker) ||
        (s->awaiting && !yields && !pc_view_newer(epoch, maker, s->await_epoch, s->await_maker)))
        return PC_FREEZE_DROP;
    if ((s->frozen && !s->awaiting) || (s->deposed && maker == s->deposed - 1) ||
        (s->awaiting && s->await_maker != s->me && s->await_maker != maker))
        return PC_FREEZE_HOLD;
    if (pc_bit_get(s->left_out, maker)) return s->left_me ? PC_FREEZE_HOLD : PC_FREEZE_DROP;
    return PC_FREEZE_FOLLOW;
}

/* Whether rank s->me agrees to the takeover (DEPOSE of its view `epoch`,
 * from rank `from`, of coordinator `coord`): it is in that view, the two
 * are its deputy and coordinator, and it is frozen for no view (one of the
 * coordinator's may have begun). */
static inline int pc_view_agrees(const pc_view_state_t *s, int P, uint32_t epoch, int from, int coord)
{
    return epoch == s->epoch && !s->left_me && !s->frozen && !s->awaiting &&
           from == pc_view_deputy(s->left_out, P) && coord == pc_view_coordinator(s->left_out, P);
}

#endif
