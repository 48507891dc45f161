/*
 * The rules of partial rounds (partial/policy.c), no MPI: event sequences in,
 * decisions out.
 *   - initiator(r): every rank exactly once per block of P rounds, the same
 *     for the same seed, P = 1..64;
 *   - synchronous rounds, the call's step, what an arriving rank does;
 *   - without the leader: which ranks count and share arrivals, and what
 *     a rank's own counter decides (QUORUM's shared arrivals, MAJORITY's
 *     silent initiators, never a synchronous round; which silent MAJORITY
 *     initiator a waiting rank stands in for while the leader is alive);
 *   - the leader: QUORUM counts arrivals (and parked ranks, listed in the
 *     counted bitmap), MAJORITY stands in only for a parked initiator, a
 *     synchronous round waits for everyone, flush and free rounds need all
 *     P, stale and impossible WAITs, what a stalled rank is told it waits
 *     for;
 *   - random event sequences for every kind: a decision always names the
 *     next round, QUORUM never activates with fewer than q arrived, a
 *     synchronous round never without all P.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partial/policy.h"
#include "rng.h"
#include "unit_check.h"

static unsigned char parked_set[64];
static int parked_fn(void *arg, int rank)
{
    (void)arg;
    return parked_set[rank];
}

static pc_policy_t pol(pcoll_partial_kind_t kind, int P, int quorum, int sync_every, uint64_t seed)
{
    pc_policy_t p = {.kind = kind, .P = P, .quorum = quorum, .group_size = 2, .sync_every = sync_every, .seed = seed};
    return p;
}

static void test_initiator(void)
{
    int scratch[64], seen[64];
    for (int P = 1; P <= 64; P++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            pc_policy_t p = pol(PCOLL_PARTIAL_MAJORITY, P, 1, 0, seed);
            for (uint64_t block = 0; block < 5; block++) {
                memset(seen, 0, sizeof seen);
                for (int k = 0; k < P; k++) {
                    int who = pc_policy_initiator(&p, block * (uint64_t)P + (uint64_t)k, scratch);
                    CHECK(who >= 0 && who < P);
                    seen[who]++;
                    /* the same value again (every rank computes it) */
                    CHECK(pc_policy_initiator(&p, block * (uint64_t)P + (uint64_t)k, scratch) == who);
                }
                for (int r = 0; r < P; r++) CHECK(seen[r] == 1);
            }
        }
    /* different seeds order a block differently (P = 16: almost surely) */
    pc_policy_t a = pol(PCOLL_PARTIAL_MAJORITY, 16, 1, 0, 1), b = pol(PCOLL_PARTIAL_MAJORITY, 16, 1, 0, 2);
    int differ = 0;
    for (uint64_t r = 0; r < 16; r++) differ += pc_policy_initiator(&a, r, scratch) != pc_policy_initiator(&b, r, scratch);
    CHECK(differ > 0);
}

static void test_rules(void)
{
    pc_policy_t p = pol(PCOLL_PARTIAL_SOLO, 4, 1, 0, 1);
    for (uint64_t r = 0; r < 20; r++) CHECK(!pc_policy_is_sync(&p, r));
    p.sync_every = 4;
    for (uint64_t r = 0; r < 20; r++) CHECK(pc_policy_is_sync(&p, r) == (r % 4 == 3));

    CHECK(pc_policy_call_step(1, 5, 9) == PC_STEP_RESULTS);
    CHECK(pc_policy_call_step(0, 5, 6) == PC_STEP_RUNNING); /* round 5 took pending before the add */
    CHECK(pc_policy_call_step(0, 5, 5) == PC_STEP_NEXT);

    int scratch[8];
    p = pol(PCOLL_PARTIAL_SOLO, 4, 1, 3, 1);
    CHECK(pc_policy_arrival(&p, 1, 0, scratch) == PC_ARRIVE_START);
    CHECK(pc_policy_arrival(&p, 1, 2, scratch) == PC_ARRIVE_LEADER); /* synchronous */
    p = pol(PCOLL_PARTIAL_QUORUM, 4, 2, 0, 1);
    CHECK(pc_policy_arrival(&p, 0, 7, scratch) == PC_ARRIVE_LEADER);
    p = pol(PCOLL_PARTIAL_MAJORITY, 4, 1, 0, 9);
    for (uint64_t r = 0; r < 8; r++) {
        int init = pc_policy_initiator(&p, r, scratch);
        for (int me = 0; me < 4; me++)
            CHECK(pc_policy_arrival(&p, me, r, scratch) == (me == init ? PC_ARRIVE_START : PC_ARRIVE_LEADER));
    }
}

/* GROUP: arrivals that know of rounds the leader has not heard activated */
static void test_early_arrivals(void)
{
    pc_leader_t l;
    pc_decision_t d;
    pc_policy_t p = pol(PCOLL_PARTIAL_GROUP, 4, 1, 3, 1); /* round 2 is synchronous */
    p.group_size = 2;
    CHECK(pc_policy_window(&p) == 4);
    CHECK(pc_leader_init(&l, &p) == 0);
    memset(parked_set, 0, sizeof parked_set);
    CHECK(pc_policy_arrival(&p, 1, 0, l.scratch) == PC_ARRIVE_START);
    CHECK(pc_policy_arrival(&p, 1, 2, l.scratch) == PC_ARRIVE_LEADER);
    /* rank 1 completed rounds 0 and 1 with its groups and waits for 2 */
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 1, 2) == 0);
    CHECK(!pc_leader_has_waiters(&l));
    unsigned char miss[1] = {0};
    pc_leader_missing(&l, PC_ARR_WAIT, 2, parked_fn, NULL, miss);
    CHECK(miss[0] == ((1 << 0) | (1 << 2) | (1 << 3)));
    for (int r = 0; r < 4; r++)
        if (r != 1) CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, r, 2) == 0);
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d)); /* rounds 0, 1 are not known here */
    pc_leader_activated(&l, 0, 0);
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    pc_leader_activated(&l, 1, 0);
    CHECK(pc_leader_has_waiters(&l));
    CHECK(pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(d.round == 2 && (d.flags & PC_ROUND_SYNC));
    pc_leader_activated(&l, 2, d.flags);
    CHECK(!pc_leader_has_waiters(&l));
    /* every rank flushes; rank 3 had started round 3, the leader has not heard */
    CHECK(pc_leader_arrival(&l, PC_ARR_FLUSH, 0, 3) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_FLUSH, 1, 3) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_FLUSH, 2, 3) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_FLUSH, 3, 4) == 0);
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d)); /* round 3 is not the flush round */
    pc_leader_activated(&l, 3, 0);
    CHECK(pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(d.round == 4 && (d.flags & PC_ROUND_FLUSH));
    /* the data of a GROUP round: the rotation's group; a synchronous one: all */
    int members[8];
    CHECK(pc_policy_members(&p, 0, 0, 3, members) == 2 && members[0] == 2 && members[1] == 3);
    CHECK(pc_policy_members(&p, 1, 0, 3, members) == 2 && members[0] == 1 && members[1] == 3);
    CHECK(pc_policy_members(&p, 2, 0, 3, members) == 4);
    CHECK(pc_policy_members(&p, 4, PC_ROUND_SYNC, 3, members) == 4);
    pc_leader_destroy(&l);
}

static void test_quorum(void)
{
    pc_leader_t l;
    pc_decision_t d;
    pc_policy_t p = pol(PCOLL_PARTIAL_QUORUM, 5, 3, 0, 1);
    CHECK(pc_leader_init(&l, &p) == 0);
    memset(parked_set, 0, sizeof parked_set);
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d)); /* nobody waits */
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 1, 0) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 4, 0) == 0);
    CHECK(pc_leader_has_waiters(&l));
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    unsigned char miss[1] = {0};
    pc_leader_missing(&l, PC_ARR_WAIT, 0, parked_fn, NULL, miss);
    CHECK(miss[0] == ((1 << 0) | (1 << 2) | (1 << 3))); /* not arrived */
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 1, 0) == 0); /* the same rank again: still 2 */
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 2, 0) == 0);
    CHECK(pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(d.round == 0 && d.root == 0 && d.flags == 0 && d.counted == NULL);
    pc_leader_activated(&l, 0, d.flags);
    CHECK(!pc_leader_has_waiters(&l));
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 3, 0) == 0); /* stale: round 0 runs */
    CHECK(!pc_leader_has_waiters(&l));
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 5, 1) == PCOLL_ERR_INTERNAL); /* no such rank */
    CHECK(pc_leader_arrival(&l, 99, 3, 1) == PCOLL_ERR_INTERNAL);          /* no such arrival */
    /* round 1: two wait, one is parked elsewhere: counted, and listed */
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 0, 1) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 2, 1) == 0);
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    parked_set[4] = 1;
    CHECK(pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(d.round == 1 && d.counted && d.counted[0] == (1 << 4));
    pc_leader_activated(&l, 1, 0);
    /* an activation the leader hears of later (node-shared memory) moves it on */
    pc_leader_activated(&l, 3, 0);
    CHECK(l.next == 4);
    pc_leader_destroy(&l);
}

static void test_majority(void)
{
    pc_leader_t l;
    pc_decision_t d;
    int scratch[6];
    pc_policy_t p = pol(PCOLL_PARTIAL_MAJORITY, 6, 1, 0, 77);
    CHECK(pc_leader_init(&l, &p) == 0);
    memset(parked_set, 0, sizeof parked_set);
    int init = pc_policy_initiator(&p, 0, scratch);
    for (int r = 0; r < 6; r++)
        if (r != init) CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, r, 0) == 0);
    /* everybody else waits: still the initiator's round */
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    unsigned char miss[1] = {0};
    pc_leader_missing(&l, PC_ARR_WAIT, 0, parked_fn, NULL, miss);
    CHECK(miss[0] == (1 << init));
    /* the initiator is blocked in another call: the leader stands in */
    parked_set[init] = 1;
    CHECK(pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(d.round == 0 && d.root == init && (d.flags & PC_ROUND_STANDIN));
    CHECK(d.counted && (d.counted[0] >> init & 1));
    pc_leader_destroy(&l);
}

static unsigned char silent_set[64];
static int silent_fn(void *arg, int rank)
{
    (void)arg;
    return silent_set[rank];
}

/* a rank silent for PCOLL_EXCLUDE_MS: the leader stands in for it as a
 * MAJORITY initiator, but it never counts as arrived */
static void test_silent(void)
{
    pc_leader_t l;
    pc_decision_t d;
    int scratch[6];
    memset(parked_set, 0, sizeof parked_set);
    memset(silent_set, 0, sizeof silent_set);
    pc_policy_t p = pol(PCOLL_PARTIAL_MAJORITY, 6, 1, 0, 77);
    CHECK(pc_leader_init(&l, &p) == 0);
    int init = pc_policy_initiator(&p, 0, scratch);
    for (int r = 0; r < 6; r++)
        if (r != init) CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, r, 0) == 0);
    CHECK(!pc_leader_decide_silent(&l, 0, parked_fn, silent_fn, NULL, &d)); /* alive: its round */
    silent_set[init] = 1;
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d)); /* without the question: waits still */
    CHECK(pc_leader_decide_silent(&l, 0, parked_fn, silent_fn, NULL, &d));
    CHECK(d.round == 0 && d.root == init && (d.flags & PC_ROUND_STANDIN));
    CHECK(!d.counted); /* not counted as arrived: it is not parked */
    pc_leader_destroy(&l);

    /* a synchronous round (tau = 2: round 1) waits for a silent rank */
    memset(silent_set, 0, sizeof silent_set);
    p = pol(PCOLL_PARTIAL_MAJORITY, 4, 1, 2, 5);
    CHECK(pc_leader_init(&l, &p) == 0);
    pc_leader_activated(&l, 0, 0);
    silent_set[2] = 1;
    for (int r = 0; r < 4; r++)
        if (r != 2) CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, r, 1) == 0);
    CHECK(!pc_leader_decide_silent(&l, 0, parked_fn, silent_fn, NULL, &d));
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 2, 1) == 0);
    CHECK(pc_leader_decide_silent(&l, 0, parked_fn, silent_fn, NULL, &d) && (d.flags & PC_ROUND_SYNC));
    pc_leader_destroy(&l);

    /* QUORUM(3) counts only the ranks that arrived */
    p = pol(PCOLL_PARTIAL_QUORUM, 5, 3, 0, 1);
    CHECK(pc_leader_init(&l, &p) == 0);
    memset(silent_set, 1, 5);
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 1, 0) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 4, 0) == 0);
    CHECK(!pc_leader_decide_silent(&l, 0, parked_fn, silent_fn, NULL, &d));
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 0, 0) == 0);
    CHECK(pc_leader_decide_silent(&l, 0, parked_fn, silent_fn, NULL, &d) && d.round == 0);
    pc_leader_destroy(&l);
}

/* Which silent MAJORITY initiator a waiting rank other than the leader
 * covers: the round's initiator, unless it is that rank itself or the
 * leader, or the round is synchronous; never for another kind. */
static void test_initiator_to_cover(void)
{
    int scratch[8];
    pc_policy_t p = pol(PCOLL_PARTIAL_MAJORITY, 8, 1, 4, 11); /* tau = 4: rounds 3, 7, ... synchronous */
    int covered = 0;
    for (uint64_t r = 0; r < 64; r++) {
        int init = pc_policy_initiator(&p, r, scratch);
        for (int me = 0; me < 8; me++) {
            int c = pc_policy_initiator_to_cover(&p, me, r, scratch);
            if (pc_policy_is_sync(&p, r) || init == me || init == PC_LEADER)
                CHECK(c == -1);
            else
                CHECK(c == init);
            covered += c >= 0;
        }
    }
    CHECK(covered > 0);
    for (int kind = 0; kind < 4; kind++) {
        if (kind == PCOLL_PARTIAL_MAJORITY) continue;
        pc_policy_t o = pol((pcoll_partial_kind_t)kind, 8, 3, 0, 11);
        for (uint64_t r = 0; r < 16; r++) CHECK(pc_policy_initiator_to_cover(&o, 1, r, scratch) == -1);
    }
}

/* Without the leader: who counts (any other rank, MAJORITY and QUORUM,
 * not synchronous rounds), who shares its arrival (QUORUM), and what a
 * rank's counter decides. */
static void test_without_leader(void)
{
    int scratch[8];
    pc_decision_t d;
    memset(silent_set, 0, sizeof silent_set);
    pcoll_partial_kind_t kinds[] = {PCOLL_PARTIAL_SOLO, PCOLL_PARTIAL_MAJORITY, PCOLL_PARTIAL_QUORUM,
                                    PCOLL_PARTIAL_GROUP};
    for (int k = 0; k < 4; k++) {
        pc_policy_t p = pol(kinds[k], 5, 2, 4, 3);
        int counts = kinds[k] == PCOLL_PARTIAL_MAJORITY || kinds[k] == PCOLL_PARTIAL_QUORUM;
        CHECK(pc_policy_shares_arrivals(&p) == (kinds[k] == PCOLL_PARTIAL_QUORUM));
        for (uint64_t r = 0; r < 12; r++)
            for (int me = 0; me < 5; me++)
                CHECK(pc_policy_counts_without_leader(&p, me, r) ==
                      (counts && me != PC_LEADER && !pc_policy_is_sync(&p, r)));
    }

    /* QUORUM(3) of 5, the leader silent: ranks 1, 2, 3 wait for round 0 and
     * share their arrivals; counter c[x] is rank x's */
    pc_policy_t p = pol(PCOLL_PARTIAL_QUORUM, 5, 3, 3, 1); /* round 2 synchronous */
    pc_leader_t c[5];
    for (int x = 1; x < 5; x++) CHECK(pc_leader_init(&c[x], &p) == 0);
    memset(silent_set, 0, sizeof silent_set);
    silent_set[PC_LEADER] = 1;
    CHECK(pc_leader_arrival(&c[1], PC_ARR_WAIT, 1, 0) == 0);
    CHECK(!pc_leader_decide_stand_in(&c[1], silent_fn, NULL, &d)); /* 1 of 3 */
    for (int x = 2; x < 5; x++) CHECK(pc_leader_arrival(&c[x], PC_ARR_WAIT, 1, 0) == 0);
    CHECK(pc_leader_arrival(&c[2], PC_ARR_WAIT, 2, 0) == 0);
    CHECK(!pc_leader_decide_stand_in(&c[2], silent_fn, NULL, &d)); /* 2 of 3 */
    for (int x = 1; x < 5; x++)
        if (x != 2) CHECK(pc_leader_arrival(&c[x], PC_ARR_WAIT, 2, 0) == 0);
    CHECK(!pc_leader_decide_stand_in(&c[4], silent_fn, NULL, &d)); /* rank 4 knows of 2 */
    CHECK(pc_leader_arrival(&c[3], PC_ARR_WAIT, 3, 0) == 0);
    CHECK(pc_leader_decide_stand_in(&c[3], silent_fn, NULL, &d));
    CHECK(d.round == 0 && d.root == PC_LEADER && d.flags == PC_ROUND_STANDIN && !d.counted);
    for (int x = 1; x < 5; x++)
        if (x != 3) CHECK(pc_leader_arrival(&c[x], PC_ARR_WAIT, 3, 0) == 0);
    /* rank 4, which does not wait itself, may start it too: the first counts */
    CHECK(pc_leader_decide_stand_in(&c[4], silent_fn, NULL, &d) && d.round == 0);
    for (int x = 1; x < 5; x++) {
        pc_leader_activated(&c[x], 0, PC_ROUND_STANDIN);
        CHECK(!pc_leader_decide_stand_in(&c[x], silent_fn, NULL, &d)); /* nobody waits for round 1 */
    }
    /* an arrival for round 1 shared before round 0 reached rank 4: kept */
    pc_leader_t late;
    CHECK(pc_leader_init(&late, &p) == 0);
    CHECK(pc_leader_arrival(&late, PC_ARR_WAIT, 1, 1) == 0);
    CHECK(pc_leader_arrival(&late, PC_ARR_WAIT, 2, 1) == 0);
    CHECK(pc_leader_arrival(&late, PC_ARR_WAIT, 3, 1) == 0);
    CHECK(!pc_leader_decide_stand_in(&late, silent_fn, NULL, &d)); /* round 0 not seen here */
    pc_leader_activated(&late, 0, 0);
    CHECK(pc_leader_decide_stand_in(&late, silent_fn, NULL, &d) && d.round == 1);
    pc_leader_activated(&late, 1, PC_ROUND_STANDIN);
    /* synchronous round 2: never started on the leader's behalf, even with
     * every rank's arrival known (the leader would start it: SYNC) */
    for (int x = 0; x < 5; x++) CHECK(pc_leader_arrival(&late, PC_ARR_WAIT, x, 2) == 0);
    CHECK(pc_leader_decide_silent(&late, PC_LEADER, NULL, silent_fn, NULL, &d) && (d.flags & PC_ROUND_SYNC));
    CHECK(!pc_leader_decide_stand_in(&late, silent_fn, NULL, &d));
    pc_leader_activated(&late, 2, PC_ROUND_SYNC);
    /* nor a flush round: every rank flushing (round 3 is not synchronous) */
    for (int x = 0; x < 5; x++) CHECK(pc_leader_arrival(&late, PC_ARR_FLUSH, x, 3) == 0);
    CHECK(pc_leader_decide_silent(&late, PC_LEADER, NULL, silent_fn, NULL, &d) && (d.flags & PC_ROUND_FLUSH));
    CHECK(!pc_leader_decide_stand_in(&late, silent_fn, NULL, &d));
    pc_leader_destroy(&late);
    /* a rank that flushes now withdraws its own WAIT: no quorum with it */
    CHECK(pc_leader_init(&late, &p) == 0);
    CHECK(pc_leader_arrival(&late, PC_ARR_WAIT, 1, 0) == 0);
    CHECK(pc_leader_arrival(&late, PC_ARR_WAIT, 2, 0) == 0);
    pc_leader_withdraw(&late, 2);
    CHECK(!pc_leader_has_waiters(&late) || late.nwaiting == 1);
    CHECK(pc_leader_arrival(&late, PC_ARR_WAIT, 3, 0) == 0);
    CHECK(!pc_leader_decide_stand_in(&late, silent_fn, NULL, &d)); /* 1 and 3: 2 of 3 */
    CHECK(pc_leader_arrival(&late, PC_ARR_WAIT, 4, 0) == 0);
    CHECK(pc_leader_decide_stand_in(&late, silent_fn, NULL, &d) && d.round == 0);
    pc_leader_withdraw(&late, 7); /* no such rank: ignored */
    pc_leader_destroy(&late);
    for (int x = 1; x < 5; x++) pc_leader_destroy(&c[x]);

    /* MAJORITY: a waiting rank's counter starts a round whose initiator is
     * silent, the leader or another; not one of a live initiator */
    p = pol(PCOLL_PARTIAL_MAJORITY, 5, 1, 0, 11);
    int seen_leader = 0, seen_other = 0;
    for (uint64_t r = 0; r < 20; r++) {
        int init = pc_policy_initiator(&p, r, scratch), me = init == 1 ? 2 : 1;
        pc_leader_t l;
        CHECK(pc_leader_init(&l, &p) == 0);
        if (r > 0) pc_leader_activated(&l, r - 1, 0);
        CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, me, r) == 0);
        memset(silent_set, 0, sizeof silent_set);
        silent_set[PC_LEADER] = 1;
        int expect = init == PC_LEADER;
        CHECK(pc_leader_decide_stand_in(&l, silent_fn, NULL, &d) == expect);
        if (expect) CHECK(d.round == r && d.root == PC_LEADER && d.flags == PC_ROUND_STANDIN);
        seen_leader += expect;
        if (init != PC_LEADER) {
            silent_set[init] = 1;
            CHECK(pc_leader_decide_stand_in(&l, silent_fn, NULL, &d) && d.root == init && d.round == r);
            seen_other++;
        }
        pc_leader_destroy(&l);
    }
    CHECK(seen_leader > 0 && seen_other > 0); /* both cases came up */
    memset(silent_set, 0, sizeof silent_set);
}

static void test_sync_flush_free(void)
{
    pc_leader_t l;
    pc_decision_t d;
    pc_policy_t p = pol(PCOLL_PARTIAL_SOLO, 3, 1, 2, 1); /* round 1, 3, ... synchronous */
    CHECK(pc_leader_init(&l, &p) == 0);
    memset(parked_set, 0, sizeof parked_set);
    pc_leader_activated(&l, 0, 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 0, 1) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, 1, 1) == 0);
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d)); /* rank 2 missing */
    unsigned char miss[1] = {0};
    pc_leader_missing(&l, PC_ARR_WAIT, 1, parked_fn, NULL, miss);
    CHECK(miss[0] == (1 << 2));
    CHECK(pc_leader_arrival(&l, PC_ARR_FLUSH, 2, 0) == 0); /* flushing counts as arrived */
    CHECK(pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(d.round == 1 && d.flags == PC_ROUND_SYNC);
    pc_leader_activated(&l, 1, d.flags);
    /* a flush needs every rank flushing, waiting or not */
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    memset(miss, 0, sizeof miss);
    pc_leader_missing(&l, PC_ARR_FLUSH, 0, parked_fn, NULL, miss);
    CHECK(miss[0] == ((1 << 0) | (1 << 1)));
    CHECK(pc_leader_arrival(&l, PC_ARR_FLUSH, 0, 0) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_FLUSH, 1, 0) == 0);
    CHECK(pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(d.round == 2 && d.flags == (PC_ROUND_FLUSH | PC_ROUND_SYNC));
    pc_leader_activated(&l, 2, d.flags);
    CHECK(l.nflushing == 0);
    /* free: a rank that flushes and then frees counts as freeing only */
    CHECK(pc_leader_arrival(&l, PC_ARR_FLUSH, 2, 0) == 0);
    CHECK(pc_leader_arrival(&l, PC_ARR_FREE, 2, 0) == 0);
    CHECK(l.nflushing == 0 && l.nfreeing == 1);
    CHECK(pc_leader_arrival(&l, PC_ARR_FREE, 0, 0) == 0);
    CHECK(!pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    memset(miss, 0, sizeof miss);
    pc_leader_missing(&l, PC_ARR_FREE, 0, parked_fn, NULL, miss);
    CHECK(miss[0] == (1 << 1));
    CHECK(pc_leader_arrival(&l, PC_ARR_FREE, 1, 0) == 0);
    CHECK(pc_leader_decide(&l, 0, parked_fn, NULL, &d));
    CHECK(d.round == 3 && d.flags == (PC_ROUND_FREE | PC_ROUND_SYNC));
    pc_leader_destroy(&l);
}

/* Random arrivals, parks and activations for every kind: the leader's
 * decisions keep their promises. */
static long decisions;
static void test_random(void)
{
    rng_t r;
    rng_seed(&r, 4711);
    int scratch[16];
    for (int trial = 0; trial < 400; trial++) {
        int P = 1 + (int)rng_below(&r, 12);
        pcoll_partial_kind_t kind = (pcoll_partial_kind_t)rng_below(&r, 3);
        int q = 1 + (int)rng_below(&r, (uint64_t)P);
        int tau = (int)rng_below(&r, 4);
        pc_policy_t p = pol(kind, P, q, tau, (uint64_t)trial);
        pc_leader_t l;
        CHECK(pc_leader_init(&l, &p) == 0);
        memset(parked_set, 0, sizeof parked_set);
        for (int ev = 0; ev < 300; ev++) {
            int x = (int)rng_below(&r, (uint64_t)P);
            switch (rng_below(&r, 6)) {
            case 0:
            case 1:
            case 2: CHECK(pc_leader_arrival(&l, PC_ARR_WAIT, x, l.next) == 0); break;
            case 3: parked_set[x] = !parked_set[x]; break;
            case 4: /* another rank started the next round itself (SOLO, MAJORITY's initiator) */
                if (kind != PCOLL_PARTIAL_QUORUM && !pc_policy_is_sync(&p, l.next) &&
                    (kind == PCOLL_PARTIAL_SOLO || pc_policy_initiator(&p, l.next, scratch) == x))
                    pc_leader_activated(&l, l.next, 0);
                break;
            default: break;
            }
            pc_decision_t d;
            uint64_t next = l.next;
            int waiting[16], arrived = 0;
            for (int k = 0; k < P; k++) {
                waiting[k] = l.waiting[k];
                arrived += l.waiting[k] || parked_set[k];
            }
            if (!pc_leader_decide(&l, 0, parked_fn, NULL, &d)) continue;
            decisions++;
            CHECK(d.round == next);
            CHECK(arrived >= 1);
            if (pc_policy_is_sync(&p, next)) CHECK(arrived == P && (d.flags & PC_ROUND_SYNC));
            else if (kind == PCOLL_PARTIAL_QUORUM) CHECK(arrived >= q);
            else if (kind == PCOLL_PARTIAL_MAJORITY) CHECK(d.root == pc_policy_initiator(&p, next, scratch) && parked_set[d.root]);
            else CHECK(0); /* SOLO decides only synchronous rounds */
            if (d.counted)
                for (int k = 0; k < P; k++) CHECK(((d.counted[k / 8] >> (k % 8)) & 1) == (parked_set[k] && !waiting[k]));
            pc_leader_activated(&l, d.round, d.flags);
            CHECK(l.next == next + 1 && l.nwaiting == 0);
        }
        pc_leader_destroy(&l);
    }
    CHECK(decisions > 1000);
}

/* One finisher per node and round: the leader claims, the deputy only
 * for a silent leader; a silent holder's claim is taken over unless it
 * writes the total. */
static void test_finisher_step(void)
{
    for (int role = 0; role < 2; role++)
        for (int holder = -1; holder < 2; holder++)
            for (int writing = 0; writing < 2; writing++)
                for (int ls = 0; ls < 2; ls++)
                    for (int hs = 0; hs < 2; hs++) {
                        int step = pc_policy_finisher_step(role, holder, writing, ls, hs);
                        if (holder == role)
                            CHECK(step == PC_FINISH_GO_ON);
                        else if (holder < 0)
                            CHECK(step == ((role == 0 || ls) ? PC_FINISH_CLAIM : PC_FINISH_WAIT));
                        else
                            CHECK(step == ((!writing && hs) ? PC_FINISH_TAKE_OVER : PC_FINISH_WAIT));
                    }
    /* the cases that matter, spelled out */
    CHECK(pc_policy_finisher_step(0, -1, 0, 0, 0) == PC_FINISH_CLAIM); /* a healthy leader */
    CHECK(pc_policy_finisher_step(1, -1, 0, 0, 0) == PC_FINISH_WAIT);  /* its deputy leaves it */
    CHECK(pc_policy_finisher_step(1, -1, 0, 1, 0) == PC_FINISH_CLAIM); /* a silent leader */
    CHECK(pc_policy_finisher_step(1, 0, 0, 1, 1) == PC_FINISH_TAKE_OVER); /* stopped after its claim */
    CHECK(pc_policy_finisher_step(1, 0, 1, 1, 1) == PC_FINISH_WAIT);   /* stopped writing: a short step */
    CHECK(pc_policy_finisher_step(0, 1, 0, 0, 0) == PC_FINISH_WAIT);   /* back: the deputy's round stays its */
}

int main(void)
{
    test_initiator();
    test_rules();
    test_quorum();
    test_early_arrivals();
    test_majority();
    test_silent();
    test_initiator_to_cover();
    test_finisher_step();
    test_without_leader();
    test_sync_flush_free();
    test_random();
    printf("test_policy: %ld checks passed (%ld random decisions)\n", checks, decisions);
    return 0;
}
