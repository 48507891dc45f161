/* The rules of partial rounds: see policy.h. */
#include "policy.h"

#include <stdlib.h>
#include <string.h>

#include "../groups/rotation.h"
#include "../util/bits.h"

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Every rank computes the same value, and over each block of P rounds every
 * rank initiates exactly once: the expected number of active ranks under
 * linear skew, (P + 1) / 2, then holds per block instead of only on average
 * over many rounds. */
int pc_policy_initiator(const pc_policy_t *pol, uint64_t round, int *perm)
{
    int P = pol->P;
    uint64_t block = round / (uint64_t)P, pos = round % (uint64_t)P;
    uint64_t state = mix64(pol->seed ^ mix64(block));
    for (int i = 0; i < P; i++) perm[i] = i;
    for (int i = P - 1; i > 0; i--) { /* Fisher-Yates */
        state = mix64(state);
        int j = (int)(state % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return perm[pos];
}

int pc_policy_is_sync(const pc_policy_t *pol, uint64_t round)
{
    return pol->sync_every > 0 && (round + 1) % (uint64_t)pol->sync_every == 0;
}

int pc_policy_in_groups(const pc_policy_t *pol, uint64_t round, uint32_t flags)
{
    return pol->kind == PCOLL_PARTIAL_GROUP && pol->group_size < pol->P && !(flags & PC_ROUND_SYNC) &&
           !pc_policy_is_sync(pol, round);
}

int pc_policy_members(const pc_policy_t *pol, uint64_t round, uint32_t flags, int me, int *members)
{
    if (!pc_policy_in_groups(pol, round, flags)) {
        for (int r = 0; r < pol->P; r++) members[r] = r;
        return pol->P;
    }
    return pc_rot_group(pol->P, pol->group_size, round, me, members);
}

const char *pc_policy_kind_name(int kind)
{
    static const char *const names[] = {"solo", "majority", "quorum", "group"};
    return kind >= 0 && kind < (int)(sizeof names / sizeof names[0]) ? names[kind] : "?";
}

int pc_policy_window(const pc_policy_t *pol)
{
    return pol->kind == PCOLL_PARTIAL_GROUP ? pc_rot_depth(pol->P, pol->group_size) + 2 : 2;
}

pc_call_step_t pc_policy_call_step(int results, uint64_t completed, uint64_t taken)
{
    if (results) return PC_STEP_RESULTS;
    if (taken > completed) return PC_STEP_RUNNING;
    return PC_STEP_NEXT;
}

pc_arrival_t pc_policy_arrival(const pc_policy_t *pol, int me, uint64_t round, int *scratch)
{
    if (pc_policy_is_sync(pol, round)) return PC_ARRIVE_LEADER;
    switch (pol->kind) {
    case PCOLL_PARTIAL_SOLO:
    case PCOLL_PARTIAL_GROUP: return PC_ARRIVE_START;
    case PCOLL_PARTIAL_MAJORITY:
        return pc_policy_initiator(pol, round, scratch) == me ? PC_ARRIVE_START : PC_ARRIVE_LEADER;
    default: return PC_ARRIVE_LEADER;
    }
}

int pc_policy_counts_without_leader(const pc_policy_t *pol, int me, uint64_t round)
{
    return (pol->kind == PCOLL_PARTIAL_MAJORITY || pol->kind == PCOLL_PARTIAL_QUORUM) && me != PC_LEADER &&
           !pc_policy_is_sync(pol, round);
}

int pc_policy_initiator_to_cover(const pc_policy_t *pol, int me, uint64_t round, int *scratch)
{
    if (pol->kind != PCOLL_PARTIAL_MAJORITY || pc_policy_is_sync(pol, round)) return -1;
    int init = pc_policy_initiator(pol, round, scratch);
    return init == me || init == PC_LEADER ? -1 : init;
}

int pc_policy_finisher_step(int role, int holder, int holder_writing, int leader_silent, int holder_silent)
{
    if (holder == role) return PC_FINISH_GO_ON;
    if (holder < 0) return role == 0 || leader_silent ? PC_FINISH_CLAIM : PC_FINISH_WAIT;
    return !holder_writing && holder_silent ? PC_FINISH_TAKE_OVER : PC_FINISH_WAIT;
}

int pc_policy_shares_arrivals(const pc_policy_t *pol) { return pol->kind == PCOLL_PARTIAL_QUORUM; }

/* ---- the leader ---- */

int pc_leader_init(pc_leader_t *l, const pc_policy_t *pol)
{
    memset(l, 0, sizeof *l);
    l->pol = *pol;
    size_t P = (size_t)pol->P;
    l->wait_for = calloc(P, sizeof(uint64_t));
    l->waiting = calloc(P, 1);
    l->flushing = calloc(P, 1);
    l->freeing = calloc(P, 1);
    l->counted = calloc((P + 7) / 8, 1);
    l->scratch = malloc(sizeof(int) * P);
    if (!l->wait_for || !l->waiting || !l->flushing || !l->freeing || !l->counted || !l->scratch) {
        pc_leader_destroy(l);
        return PCOLL_ERR_NOMEM;
    }
    return PCOLL_SUCCESS;
}

void pc_leader_destroy(pc_leader_t *l)
{
    free(l->wait_for);
    free(l->waiting);
    free(l->flushing);
    free(l->freeing);
    free(l->counted);
    free(l->scratch);
    memset(l, 0, sizeof *l);
}

static void set(unsigned char *flag, int *count, int on)
{
    *count += (on != 0) - (*flag != 0);
    *flag = (unsigned char)(on != 0);
}

int pc_leader_arrival(pc_leader_t *l, int type, int rank, uint64_t round)
{
    if (rank < 0 || rank >= l->pol.P) return PCOLL_ERR_INTERNAL;
    switch (type) {
    case PC_ARR_WAIT:
        /* a rank waits for round n after completing n - 1: rounds < n are
         * activated.  A WAIT for a round before `next` is stale (that round
         * is activated); one after it waits until `next` gets there (GROUP:
         * the leader has not heard of n - 1 yet) */
        if (round < l->next) return PCOLL_SUCCESS;
        if (round > l->seen) l->seen = round;
        l->wait_for[rank] = round + 1;
        if (round == l->next) set(&l->waiting[rank], &l->nwaiting, 1);
        return PCOLL_SUCCESS;
    case PC_ARR_FLUSH:
        if (round > l->seen) l->seen = round;
        set(&l->flushing[rank], &l->nflushing, 1);
        return PCOLL_SUCCESS;
    case PC_ARR_FREE:
        if (round > l->seen) l->seen = round;
        set(&l->flushing[rank], &l->nflushing, 0);
        set(&l->freeing[rank], &l->nfreeing, 1);
        return PCOLL_SUCCESS;
    default: return PCOLL_ERR_INTERNAL;
    }
}

void pc_leader_withdraw(pc_leader_t *l, int rank)
{
    if (rank < 0 || rank >= l->pol.P) return;
    l->wait_for[rank] = 0;
    set(&l->waiting[rank], &l->nwaiting, 0);
}

void pc_leader_activated(pc_leader_t *l, uint64_t round, uint32_t flags)
{
    if (round < l->next) return;
    l->next = round + 1;
    /* the ranks waiting for the new `next` (WAITs that came early) */
    l->nwaiting = 0;
    for (int r = 0; r < l->pol.P; r++) {
        if (l->wait_for[r] != 0 && l->wait_for[r] <= l->next) l->wait_for[r] = 0; /* served */
        l->waiting[r] = l->wait_for[r] == l->next + 1;
        l->nwaiting += l->waiting[r];
    }
    if (flags & (PC_ROUND_FLUSH | PC_ROUND_FREE)) {
        /* the flush round serves every flusher; the free round is the last */
        memset(l->flushing, 0, (size_t)l->pol.P);
        memset(l->freeing, 0, (size_t)l->pol.P);
        l->nflushing = l->nfreeing = 0;
    }
}

int pc_leader_has_waiters(const pc_leader_t *l) { return l->nwaiting > 0; }

static int parked(const pc_leader_t *l, int r, pc_elsewhere_fn elsewhere, void *arg)
{
    return l->flushing[r] || l->freeing[r] || (elsewhere && elsewhere(arg, r));
}

/* Ranks arrived for `next`; the bitmap of those counted only as parked
 * elsewhere into l->counted.  Returns how many arrived. */
static int count_arrived(pc_leader_t *l, pc_elsewhere_fn elsewhere, void *arg, int *parked_only)
{
    int P = l->pol.P, arrived = 0;
    *parked_only = 0;
    memset(l->counted, 0, ((size_t)P + 7) / 8);
    for (int r = 0; r < P; r++) {
        if (l->waiting[r] || l->flushing[r] || l->freeing[r]) {
            arrived++;
        } else if (elsewhere && elsewhere(arg, r)) {
            arrived++;
            pc_bit_set(l->counted, r);
            (*parked_only)++;
        }
    }
    return arrived;
}

int pc_leader_decide(pc_leader_t *l, int me, pc_elsewhere_fn elsewhere, void *arg, pc_decision_t *d)
{
    return pc_leader_decide_silent(l, me, elsewhere, NULL, arg, d);
}

int pc_leader_decide_silent(pc_leader_t *l, int me, pc_elsewhere_fn elsewhere, pc_elsewhere_fn silent, void *arg,
                            pc_decision_t *d)
{
    int P = l->pol.P;
    uint64_t n = l->next;
    d->round = n;
    d->root = me;
    d->counted = NULL;
    d->flags = 0;
    if (n < l->seen) return 0; /* `next` is activated somewhere: its activation comes */
    if (l->nfreeing == P) {
        d->flags = PC_ROUND_FREE | PC_ROUND_SYNC;
        return 1;
    }
    if (l->nflushing == P) {
        d->flags = PC_ROUND_FLUSH | PC_ROUND_SYNC;
        return 1;
    }
    if (l->nwaiting < 1) return 0; /* nobody waits for a round of this object */
    int parked_only = 0;
    if (pc_policy_is_sync(&l->pol, n)) {
        if (count_arrived(l, elsewhere, arg, &parked_only) < P) return 0; /* waits for everyone */
        d->flags = PC_ROUND_SYNC;
    } else if (l->pol.kind == PCOLL_PARTIAL_QUORUM) {
        if (count_arrived(l, elsewhere, arg, &parked_only) < l->pol.quorum) return 0;
    } else if (l->pol.kind == PCOLL_PARTIAL_MAJORITY) {
        int init = pc_policy_initiator(&l->pol, n, l->scratch);
        if (!parked(l, init, elsewhere, arg) && !(silent && silent(arg, init))) return 0;
        /* on the initiator's behalf: it may start n itself at the same time
         * (just back from its other call), so the round names it either way */
        count_arrived(l, elsewhere, arg, &parked_only);
        d->flags = PC_ROUND_STANDIN;
        d->root = init;
    } else {
        return 0; /* SOLO, GROUP: the ranks start their rounds themselves */
    }
    if (parked_only) d->counted = l->counted;
    return 1;
}

int pc_leader_decide_stand_in(pc_leader_t *l, pc_elsewhere_fn silent, void *arg, pc_decision_t *d)
{
    if (pc_policy_is_sync(&l->pol, l->next) || !pc_leader_decide_silent(l, PC_LEADER, NULL, silent, arg, d) ||
        (d->flags & (PC_ROUND_SYNC | PC_ROUND_FLUSH | PC_ROUND_FREE)))
        return 0;
    d->flags |= PC_ROUND_STANDIN;
    return 1;
}

void pc_leader_missing(const pc_leader_t *l, int type, uint64_t round, pc_elsewhere_fn elsewhere, void *arg,
                       unsigned char *missing)
{
    int P = l->pol.P;
    for (int r = 0; r < P; r++) {
        int miss;
        if (type == PC_ARR_FLUSH)
            miss = !l->flushing[r] && !l->freeing[r];
        else if (type == PC_ARR_FREE)
            miss = !l->freeing[r];
        else if (round < l->next)
            miss = 0; /* activated: the data phase is what waits */
        else if (!pc_policy_is_sync(&l->pol, round) && l->pol.kind == PCOLL_PARTIAL_MAJORITY)
            miss = r == pc_policy_initiator(&l->pol, round, l->scratch) && !parked(l, r, elsewhere, arg);
        else
            miss = (round == l->next ? !l->waiting[r] : l->wait_for[r] != round + 1) && !parked(l, r, elsewhere, arg);
        if (miss) pc_bit_set(missing, r);
    }
}

pc_policy_t pc_policy_of(const pcoll_partial_config_t *cfg, int P)
{
    int group_size = 0;
    if (cfg->kind == PCOLL_PARTIAL_GROUP) group_size = cfg->group_size > 0 ? cfg->group_size : pc_rot_default_size(P);
    return (pc_policy_t){.kind = cfg->kind,
                         .P = P,
                         .quorum = cfg->quorum,
                         .group_size = group_size,
                         .sync_every = cfg->sync_every,
                         .seed = cfg->seed};
}
