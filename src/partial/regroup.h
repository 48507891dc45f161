/*
 * Where rounds by messages go on after a view change (a rank left out, or
 * taken back): pure rules over the ranks' snapshots, for rounds that sum
 * over every rank of the view (SOLO, MAJORITY, QUORUM).
 *
 *   each rank of the old view froze: done (rounds completed), running
 *   (round `done` was under way and was given up)
 *
 *   rounds strictly in order, each needing every member's part:
 *     D = max done; every rank has done D - 1 or D
 *     done = D - 1  it was in round D - 1, which a rank with D completed:
 *                   its parts are in that result: it receives the result
 *                   from the donor (the first rank with done = D that
 *                   holds it: not one whose last delivery was a catch-up)
 *     done = D      round D, if it was running, is given up everywhere
 *                   (nobody can have completed it): its parts go back
 *   every rank of the new view goes on at round D
 *
 *   a rank left out at D (its rounds froze with the view's, unknown then)
 *   that comes back with done_x:
 *     done_x = D - 1   its round D - 1 was completed by the others: it is
 *                      owed D - 1 and every round after it
 *     done_x = D       it is owed the rounds from D; its running round's
 *                      parts go back
 *     done_x = D + 1   it completed round D, which the others gave up: its
 *                      parts of D go back, and it is owed the rounds from D
 *                      less the result of D it already has
 *
 *   rounds summed inside groups (GROUP objects): ranks may be up to the
 *   policy's window apart, and a round's result is its group's alone, so
 *   no rank holds what another missed.  The plan skips:
 *     D = max done over every snapshot (ranks coming back included)
 *     every rank goes on at D; the rounds [done, D) are over for it and
 *     nobody is owed: backend_msg_view.c completes them as a group of one
 *     (REPLACE, AVERAGE: its latest contribution, still pending;
 *     ACCUMULATE: its parts of the running round given up).  With
 *     ACCUMULATE parts never go back into pending (a member of the group
 *     may have completed the round with them): a rank that gave up round D
 *     itself holds them as D's input when D runs again
 */
#ifndef PC_PARTIAL_REGROUP_H
#define PC_PARTIAL_REGROUP_H

#include <stdint.h>

typedef struct pc_regroup_snap {
    uint64_t done;      /* rounds completed */
    uint64_t activated; /* rounds activated */
    int32_t running;    /* round `done` was under way and was given up */
    int32_t left_out;   /* not in the old view's rounds (its own rules) */
    int32_t has_last;   /* it holds round done - 1's result (it can give it) */
    int32_t unused_;
} pc_regroup_snap_t;

typedef struct pc_regroup {
    uint64_t resume;    /* D: the new view's first round */
    uint64_t activated; /* rounds [D, activated) were activated somewhere */
    int donor;          /* index of the rank that has round D - 1's result, or -1 */
} pc_regroup_t;

/* What a rank of the old view does with its round. */
typedef enum pc_regroup_action {
    PC_REGROUP_NOTHING,  /* done = D, no round running */
    PC_REGROUP_RECEIVE,  /* done = D - 1: gets round D - 1's result from the donor */
    PC_REGROUP_PUT_BACK, /* done = D, round D given up: its parts go back */
    /* rounds in groups (pc_regroup_skip_action): */
    PC_REGROUP_SKIP,     /* done < D: rounds [done, D) complete as a group of one */
    PC_REGROUP_HOLD,     /* done = D, round D given up, ACCUMULATE: its parts are
                            D's input when D runs again (never put back) */
} pc_regroup_action_t;

/* The plan over n snapshots (the ranks not left out).  0, or -1 if they
 * cannot come from rounds over every rank (a rank more than one round
 * behind, or none in the old view). */
static inline int pc_regroup_plan(const pc_regroup_snap_t *s, int n, pc_regroup_t *out)
{
    uint64_t D = 0, act = 0;
    int any = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].left_out) continue;
        if (!any || s[i].done > D) D = s[i].done;
        if (s[i].activated > act) act = s[i].activated;
        any = 1;
    }
    if (!any) return -1;
    out->resume = D;
    out->activated = act > D ? act : D;
    out->donor = -1;
    for (int i = 0; i < n; i++) {
        if (s[i].left_out) continue;
        if (s[i].done + 1 < D) return -1;
        if (s[i].done + 1 == D && !s[i].running) return -1; /* it must have sent its parts of D - 1 */
    }
    int behind = 0;
    for (int i = 0; i < n; i++) behind |= !s[i].left_out && s[i].done + 1 == D;
    for (int i = 0; i < n && behind && out->donor < 0; i++)
        if (!s[i].left_out && s[i].done == D && s[i].has_last) out->donor = i;
    return behind && out->donor < 0 ? -1 : 0; /* nobody can give round D - 1 */
}

static inline pc_regroup_action_t pc_regroup_action(const pc_regroup_t *g, const pc_regroup_snap_t *s)
{
    if (s->done + 1 == g->resume) return PC_REGROUP_RECEIVE;
    return s->running ? PC_REGROUP_PUT_BACK : PC_REGROUP_NOTHING;
}

/* The skipping plan over n snapshots (rounds summed inside groups): resume
 * at the most any rank completed, no donor.  0, or -1 if n is 0. */
static inline int pc_regroup_plan_skip(const pc_regroup_snap_t *s, int n, pc_regroup_t *out)
{
    if (n <= 0) return -1;
    uint64_t D = 0, act = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].done > D) D = s[i].done;
        if (s[i].activated > act) act = s[i].activated;
    }
    out->resume = D;
    out->activated = act > D ? act : D;
    out->donor = -1;
    return 0;
}

/* What a rank does with its rounds at a view change of rounds in groups
 * that goes on from D (a rank coming back too): SKIP, HOLD (accumulate:
 * ACCUMULATE mode) or NOTHING. */
static inline pc_regroup_action_t pc_regroup_skip_action(uint64_t D, const pc_regroup_snap_t *s, int accumulate)
{
    if (s->done < D) return PC_REGROUP_SKIP;
    return accumulate && s->running ? PC_REGROUP_HOLD : PC_REGROUP_NOTHING;
}

/* A left-out rank coming back (done_x) to a view whose others left it out
 * at round D: 1 if it is owed round D - 1's result too, 0 if only the
 * rounds from D, -1 if it completed round D (its parts of D go back and its
 * result of D comes off what it is owed), -2 if impossible. */
static inline int pc_regroup_return(uint64_t D, uint64_t done_x)
{
    if (done_x + 1 == D) return 1;
    if (done_x == D) return 0;
    if (done_x == D + 1) return -1;
    return -2;
}

#endif
