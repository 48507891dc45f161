/*
 * Which ranks are left: the survivors' agreement of pcoll_shrink, as pure
 * rules (no MPI; shrink.c moves the messages, test_survivors checks them).
 *
 *   round k at every rank that takes part:
 *     send its view (a bitmap of the ranks it believes alive) to every
 *     other rank of the view
 *     hear the views of round k from the others of its view, until all
 *     came or the round's time is up
 *     end the round:
 *       k >= 1, every other rank of the view was heard, and every view
 *       heard equals this one               -> decided: the view is agreed
 *       else: the next view is this one minus the ranks not heard, and
 *       minus every rank some view heard left out          -> round k + 1
 *
 * A rank that is dead or stopped is not heard in round 0 and is left out
 * of every view after it.  When a rank decides, every other rank of its
 * view sent it the same view, and heard the same views from the same
 * ranks (every rank sends one view per round to all of its view), so it
 * decides the same in that round: no two ranks that decide agree on
 * different views.  Round 0 never decides: a rank that comes late hears
 * round 0's views of everyone (sent before the others left it out), and
 * only round 1 shows it that the others went on without it (then it ends
 * with a view of its own, which pcoll_shrink refuses as it holds no
 * majority).  What this needs: no rank of the view fails or falls silent
 * while the agreement runs, and every live rank takes part within a
 * round's time.
 */
#ifndef PC_CORE_SURVIVORS_H
#define PC_CORE_SURVIVORS_H

#include <stddef.h>
#include <stdint.h>

typedef struct pc_survivors {
    int P, me;
    uint32_t round;
    unsigned char *view;  /* this round's view, P bits */
    unsigned char *heard; /* the ranks heard in this round */
    unsigned char *left;  /* ranks some view heard left out */
    int differ;           /* a view heard differs from ours */
    int nheard, nothers;  /* heard, and the others of the view */
} pc_survivors_t;

/* Round 0's view: every rank.  -1 without memory. */
int pc_survivors_init(pc_survivors_t *s, int P, int me);
void pc_survivors_destroy(pc_survivors_t *s);
size_t pc_survivors_bytes(int P); /* a view's bitmap */
/* src's view for the current round (a view of another round, a src outside
 * ours or heard already: ignored).  Returns 1 if it counted. */
int pc_survivors_hear(pc_survivors_t *s, int src, const unsigned char *view);
/* Every other rank of the view was heard. */
int pc_survivors_complete(const pc_survivors_t *s);
/* Ends the round: 1 decided (s->view is the agreement), 0 the next round
 * begins with a smaller view. */
int pc_survivors_end_round(pc_survivors_t *s);
/* The view's ranks in increasing order into out (room for P); returns how
 * many. */
int pc_survivors_list(const pc_survivors_t *s, int *out);

#endif
