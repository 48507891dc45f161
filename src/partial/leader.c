/*
 * The leader (rank PC_LEADER) of a partial object: it counts arrivals and
 * activates the rounds no single rank may start on its own.
 *
 *   rank x --WAIT(r)--> leader      x's application waits for round r here
 *   rank x --FLUSH(e)-> leader      x is in flush number e of this object
 *   rank x --FREE-----> leader      x is freeing this object
 *   rank x --PARK(1/0)> leader      x's application is blocked in (or has left)
 *                                   a pcoll call on something else
 *
 * A rank is *arrived* for the leader's next round n when it waits for n, or is
 * parked (flushing, freeing, or blocked elsewhere): a parked rank contributes
 * nothing newer until it returns, and without counting it a rank waiting here
 * while the others are blocked in another object's call (a flush, a majority
 * round waiting for this rank...) would wait forever.  With W ranks waiting
 * and A arrived, the leader activates n itself when
 *   - all P ranks are freeing:        the last round (PC_ROUND_FREE);
 *   - all P ranks are flushing:       a flush round (synchronous);
 *   - n is synchronous (sync_every):  W >= 1 and A == P;
 *   - QUORUM(q):                      W >= 1 and A >= q;
 *   - MAJORITY:                       W >= 1 and initiator(n) is parked
 *                                     (on its behalf: the round names it).
 * Ranks counted only because they are blocked elsewhere are listed in the
 * activation (a bitmap) and report themselves active in that round, so the
 * leader's count and the round's active count agree.
 *
 * A rank waits for round n only after completing n - 1, which needed the
 * leader's part of n - 1: so a WAIT(n) never reaches the leader before n - 1
 * is activated here, and WAITs for rounds before `next` are simply stale.
 * In node-shared memory the leader's part may be taken without it, so the
 * leader first catches up with the rounds activated there.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "partial_internal.h"

struct pc_leader {
    uint64_t next;          /* first round not activated here */
    unsigned char *waiting; /* rank waits for round `next` */
    unsigned char *flushing, *freeing;
    int *elsewhere;         /* calls the rank is blocked in on other objects */
    unsigned char *counted; /* scratch bitmap for activations */
    int free_msgs;          /* FREE messages received from other ranks */
    pc_ctrl_msg_t in;
};

static void evaluate(pcoll_partial_t *p);
static void on_arrival(pc_engine_t *e, void *arg, int status, const MPI_Status *st);

static void post_listener(pcoll_partial_t *p)
{
    int rc = pc_engine_irecv(p->engine, &p->leader->in, sizeof p->leader->in, MPI_ANY_SOURCE, p->tag_arrival, 1,
                             on_arrival, p);
    if (rc != PCOLL_SUCCESS) pc_log(PCOLL_LOG_ERROR, "partial: cannot post the leader's receive: %s", pcoll_strerror(rc));
}

int pc_leader_alloc(pcoll_partial_t *p)
{
    pc_leader_t *l = calloc(1, sizeof *l);
    if (!l) return PCOLL_ERR_NOMEM;
    size_t P = (size_t)p->P;
    l->waiting = calloc(P, 1);
    l->flushing = calloc(P, 1);
    l->freeing = calloc(P, 1);
    l->elsewhere = calloc(P, sizeof(int));
    l->counted = calloc(p->bitmap_bytes, 1);
    p->leader = l;
    if (!l->waiting || !l->flushing || !l->freeing || !l->elsewhere || !l->counted) {
        pc_leader_destroy(p);
        return PCOLL_ERR_NOMEM;
    }
    return PCOLL_SUCCESS;
}

void pc_leader_listen(pcoll_partial_t *p)
{
    if (p->P > 1) post_listener(p);
}

void pc_leader_destroy(pcoll_partial_t *p)
{
    pc_leader_t *l = p->leader;
    if (!l) return;
    free(l->waiting);
    free(l->flushing);
    free(l->freeing);
    free(l->elsewhere);
    free(l->counted);
    free(l);
    p->leader = NULL;
}

static void on_arrival(pc_engine_t *e, void *arg, int status, const MPI_Status *st)
{
    (void)e;
    (void)st;
    pcoll_partial_t *p = arg;
    pc_leader_t *l = p->leader;
    if (status != PCOLL_SUCCESS) {
        pc_log(PCOLL_LOG_ERROR, "partial: receiving an arrival failed");
    } else {
        pc_ctrl_msg_t m = l->in;
        if (m.type == PC_MSG_FREE) l->free_msgs++;
        pc_leader_arrival(p, &m);
    }
    /* a FREE is the last message a rank sends to the leader */
    if (l->free_msgs < p->P - 1) post_listener(p);
}

void pc_leader_arrival(pcoll_partial_t *p, const pc_ctrl_msg_t *m)
{
    pc_leader_t *l = p->leader;
    int from = m->root;
    PC_DEBUG("partial ch%u leader: arrival type %u value %llu from %d (next %llu)", p->channel, m->type,
             (unsigned long long)m->round, from, (unsigned long long)l->next);
    if (from < 0 || from >= p->P) {
        pc_log(PCOLL_LOG_ERROR, "partial: arrival from an invalid rank %d", from);
        return;
    }
    pc_leader_catch_up(p);
    switch (m->type) {
    case PC_MSG_WAIT:
        if (m->round < l->next) return; /* stale: that round is already activated */
        if (m->round > l->next) {
            pc_log(PCOLL_LOG_ERROR, "partial: rank %d waits for round %llu but round %llu is next (bug)", from,
                   (unsigned long long)m->round, (unsigned long long)l->next);
            return;
        }
        l->waiting[from] = 1;
        break;
    case PC_MSG_FLUSH: l->flushing[from] = 1; break;
    case PC_MSG_FREE:
        l->flushing[from] = 0;
        l->freeing[from] = 1;
        break;
    case PC_MSG_PARK:
        if (m->round)
            l->elsewhere[from]++;
        else if (l->elsewhere[from] > 0)
            l->elsewhere[from]--;
        break;
    default: pc_log(PCOLL_LOG_ERROR, "partial: unknown arrival type %u", m->type); return;
    }
    evaluate(p);
}

void pc_leader_round_activated(pcoll_partial_t *p, uint64_t round, uint32_t flags)
{
    pc_leader_t *l = p->leader;
    if (round < l->next) return;
    l->next = round + 1;
    memset(l->waiting, 0, (size_t)p->P);
    if (flags & (PC_ROUND_FLUSH | PC_ROUND_FREE)) {
        /* the flush round serves every flusher; the free round is the last */
        memset(l->flushing, 0, (size_t)p->P);
        memset(l->freeing, 0, (size_t)p->P);
    }
    evaluate(p);
}

/* Rounds activated in node-shared memory by other ranks carry no FLUSH or
 * FREE: only the leader activates those, and it learns them at once. */
void pc_leader_catch_up(pcoll_partial_t *p)
{
    if (!p->shm) return;
    uint64_t a = pc_nr_activated(p->shm);
    if (a > p->leader->next) pc_leader_round_activated(p, a - 1, 0);
}

static void evaluate(pcoll_partial_t *p)
{
    pc_leader_t *l = p->leader;
    uint64_t n = l->next;
    int P = p->P, W = 0, arrived = 0, flushing = 0, freeing = 0, parked_only = 0;
    memset(l->counted, 0, p->bitmap_bytes);
    for (int r = 0; r < P; r++) {
        int parked = l->flushing[r] || l->freeing[r] || l->elsewhere[r] > 0;
        W += l->waiting[r];
        flushing += l->flushing[r];
        freeing += l->freeing[r];
        arrived += l->waiting[r] || parked;
        if (!l->waiting[r] && !l->flushing[r] && !l->freeing[r] && l->elsewhere[r] > 0) {
            l->counted[r / 8] |= (unsigned char)(1u << (r % 8));
            parked_only++;
        }
    }
    int sync = pc_round_is_sync(p, n);
    uint32_t flags = sync ? PC_ROUND_SYNC : 0;
    int uses_counted = 0, root = p->me;
    if (freeing == P) {
        flags = PC_ROUND_FREE | PC_ROUND_SYNC;
    } else if (flushing == P) {
        flags = PC_ROUND_FLUSH | PC_ROUND_SYNC;
    } else if (W < 1) {
        return; /* nobody waits for a round of this object */
    } else if (sync) {
        if (arrived < P) return; /* a synchronous round waits for everyone */
        uses_counted = 1;
    } else if (p->cfg.kind == PCOLL_PARTIAL_QUORUM) {
        if (arrived < p->cfg.quorum) return;
        uses_counted = 1;
    } else if (p->cfg.kind == PCOLL_PARTIAL_MAJORITY) {
        int init = pc_partial_initiator_of(p, n);
        if (!(l->flushing[init] || l->freeing[init] || l->elsewhere[init] > 0)) return;
        /* on the initiator's behalf: it may start n itself at the same time
         * (just back from its other call), so the round names it either way */
        flags |= PC_ROUND_STANDIN;
        root = init;
        uses_counted = 1;
    } else {
        return; /* SOLO: the ranks start their rounds themselves */
    }
    /* comes back through pc_leader_round_activated */
    pc_round_activate(p, n, root, flags, uses_counted && parked_only ? l->counted : NULL, -1);
}

void pc_leader_notify(pcoll_partial_t *p, uint32_t type, uint64_t round)
{
    pc_ctrl_msg_t m = {type, 0, round, p->me, 0};
    if (p->leader)
        pc_leader_arrival(p, &m);
    else
        pc_round_send_ctrl(p, PC_LEADER, p->tag_arrival, &m);
}

void pc_partial_park(void *object, int parked)
{
    pcoll_partial_t *p = object;
    if (p->closing) return; /* being freed here: its leader hears nothing more from us */
    pc_leader_notify(p, PC_MSG_PARK, (uint64_t)parked);
}
