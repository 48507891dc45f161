/*
 * The node-shared backend's lock-free protocol (partial/backend_shm.c) with
 * the ranks of one node as threads of this process, so that a thread
 * sanitizer sees every access (across processes it sees none):
 *
 *   rank j = an application thread   contribute (random pauses, WAITING
 *                                     on or off), want
 *          + a holder thread          answers kicks (ops->kick), activates
 *                                     rounds (several holders race for the
 *                                     same round), completes them
 *
 * The protocol's steps yield, spin or sleep at random (PC_SHM_INTERLEAVE,
 * defined here before the backend's source is compiled into this test):
 * interleavings that a quiet machine rarely shows.
 *
 * Contribution k of rank j puts j * K + k + 1 into the elements that
 * belong to rank j (i % P == j) and 0 elsewhere, so a round's result says
 * what it took from each rank:
 *   ACCUMULATE  over all rounds, rank j's elements add up to all of j's
 *               contributions: nothing lost, nothing counted twice; the
 *               trailer counts every contribution once;
 *   REPLACE     a round holds one whole contribution of each rank that has
 *               contributed (never a torn one), and never an older one
 *               than the round before, except that a frozen rank's last
 *               one is left out once it is known silent (then nothing);
 *               the trailer counts the parts that hold one;
 *   GROUP       (WAGMA's rotating groups of 2) each rank receives its
 *               group's sum; over the groups and rounds, conservation as
 *               ACCUMULATE;
 * and every rank completes every round, in order, with the same result.
 *
 * Frozen ranks (the runs with PCOLL_EXCLUDE_MS's mechanism on): now and
 * then both threads of one rank stop at their next step for a while, as a
 * SIGSTOPped process would; the others' rounds go on without it (its
 * results kept), and it catches up at once when it goes on: a catch-up
 * must equal the sum (REPLACE: the last) of what the others completed for
 * those rounds, and conservation must hold as above.
 *
 * Nothing may hang: a watchdog fails the test when all the runs together
 * take longer than their budget (argv[2] seconds, 300 by default).
 *
 * usage: test_shm_protocol [contributions per rank (default 3000)]
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void interleave(const char *where);
static int may_keep(int rank);
#define PC_SHM_INTERLEAVE(where) interleave(where)
#define PC_SHM_MAY_KEEP(rank) may_keep(rank)
#include "partial/backend_shm.c"

#include "unit_check.h"

/* CHECK for the ranks' threads (CHECK's counter is the main thread's) */
#define TCHECK(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #c);                         \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

#define MAXP 8
#define COUNT (MAXP * 40)

static _Thread_local unsigned rng_state;

static unsigned rnd(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return rng_state >> 8;
}

static _Thread_local int my_rank = -1;
static atomic_int frozen = -1; /* the rank whose threads stop at their next step */
static atomic_int thawing = -1; /* the rank frozen last, until it took what was kept */

/* only a frozen rank is silent here, however slowly a sanitizer runs the
 * others (then one rank at a time has results kept) */
static int may_keep(int rank) { return atomic_load(&frozen) == rank || atomic_load(&thawing) == rank; }

static atomic_int frozen_mid_step; /* 1: at any step of the protocol; 0: only between
                                       them (a process stopped in its own work) */

/* A step a thread of the frozen rank stops in (its other thread between
 * steps), and the others must go on without it: its holder 1 delivering a
 * result it copied (as a process whose application thread, woken by the
 * delivery, raises SIGSTOP), 2 summing a round it claimed (taken over), 3
 * copying a result it claimed (kept for it); its application 4 adding its
 * contribution (its part taken around the add); 0: none */
enum { STEPS = 5, APP_STEP = 4 };
static atomic_int frozen_delivering;
static const char *const frozen_step[STEPS] = {"", "copied", "sum claimed", "copying", "contribution written"};
static const char *const frozen_doing[STEPS] = {"", "delivering", "summing", "copying", "adding"};
static atomic_int parked_delivering = -1; /* the rank whose holder stopped there */
static _Thread_local int is_holder;

/* a frozen rank's threads wait here until it is let go (mid_step: a point
 * inside a step of the protocol, `where`) */
static void stop_if_frozen(int mid_step, const char *where)
{
    /* the step's thread alone runs on to that step (the other stopped
     * between steps: it takes nothing on meanwhile) */
    int step = atomic_load(&frozen_delivering), steps_thread = step == APP_STEP ? !is_holder : is_holder;
    int at_delivery = steps_thread && where && strcmp(where, frozen_step[step]) == 0;
    if (!mid_step && step && steps_thread) return;
    if (mid_step && (step ? !at_delivery : !atomic_load(&frozen_mid_step))) return;
    if (my_rank < 0 || atomic_load(&frozen) != my_rank) return;
    if (at_delivery) atomic_store(&parked_delivering, my_rank);
    while (atomic_load(&frozen) == my_rank) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* takes around an add of a rank known silent (not after the limit again) */
static atomic_int known_arounds;

static void interleave(const char *where)
{
    if (strcmp(where, "taking around a known silent add") == 0) atomic_fetch_add(&known_arounds, 1);
    stop_if_frozen(1, where);
    unsigned r = rnd() % 64;
    if (r < 16)
        sched_yield();
    else if (r < 20)
        for (volatile int i = (int)(rnd() % 2000); i > 0; i--) {
        }
    else if (r == 20) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* ---- one rank ---- */

/* a completed round as one rank saw it */
typedef struct round {
    double part[MAXP]; /* what it took from each rank (its elements) */
    int64_t contributions, active;
    int root;
    int64_t kept_from; /* -1, or a catch-up: the rounds kept_from..this one,
                          whose sum (REPLACE: the last) part[] etc. hold;
                          its earlier rounds say kept_from too, and hold 0 */
} round_t;

typedef struct rank {
    int me;
    pc_backend_t *b;
    pc_backend_env_t env;
    atomic_int kicked, listening;
    /* what it completed, round by round (the holder's; read after it ended) */
    round_t *rounds;
    size_t cap;
    atomic_ullong completed;
    /* the application */
    int64_t given;   /* contributions made */
    double total;    /* of its values */
    uint64_t *taken; /* per contribution: the round contribute said takes it */
    atomic_int app_done;
    pthread_t app, holder;
} rank_t;

static rank_t ranks[MAXP];
static int P, K;
static pcoll_contrib_mode_t mode;
static pc_policy_t policy;
static atomic_int finishing, stop_holders;
static atomic_ullong final_round; /* rounds to complete: set once finishing */
static void *segs[MAXP];
static pc_object_t object;

static void sig_kick(void *arg, int rank)
{
    (void)arg;
    atomic_store(&ranks[rank].kicked, 1);
}
static void sig_mark(void *arg) { atomic_store(&((rank_t *)arg)->kicked, 1); }
static void sig_listen(void *arg, int on) { atomic_store(&((rank_t *)arg)->listening, on); }

static void *env_buffer(void *owner) { return malloc(((rank_t *)owner)->env.bytes); }
static void env_release(void *owner, void *buf)
{
    (void)owner;
    free(buf);
}
static void env_activated(void *owner, uint64_t round, int root, uint32_t flags)
{
    (void)owner;
    (void)round;
    (void)root;
    (void)flags;
}
static atomic_llong catch_ups, left_outs;
static int stopped_in_step[STEPS]; /* freezes in such a step that were checked */
static int holder_steps;           /* freezes of a holder in a step so far */
static atomic_int freezes, freezes_wanted; /* an application ends only after that many */

static void env_completed(void *owner, const pc_round_done_t *d, void *buf)
{
    rank_t *rk = owner;
    uint64_t c = atomic_load(&rk->completed);
    TCHECK(d->first == c && d->round >= c); /* in order, once */
    TCHECK(d->catch_up || d->first == d->round);
    TCHECK(d->root >= 0 && d->root < P);
    while (d->round >= rk->cap) {
        rk->cap = rk->cap ? 2 * rk->cap : 1024;
        rk->rounds = realloc(rk->rounds, sizeof(round_t) * rk->cap);
        TCHECK(rk->rounds != NULL);
    }
    for (uint64_t r = c; r <= d->round; r++) {
        memset(&rk->rounds[r], 0, sizeof(round_t));
        rk->rounds[r].kept_from = d->catch_up ? (int64_t)c : -1;
    }
    round_t *x = &rk->rounds[d->round];
    const double *res = buf;
    for (int o = 0; o < P; o++) x->part[o] = res[o];
    for (int i = P; i < COUNT; i++) TCHECK(res[i] == res[i % P]); /* whole contributions, never torn */
    pc_trailer_get(&rk->env, buf, &x->active, &x->contributions);
    x->root = d->root;
    if (d->catch_up) { /* the round-by-round figures agree with the trailer's sum (REPLACE: the last round's) */
        int acc = rk->env.mode == PCOLL_ACCUMULATE;
        TCHECK((acc ? d->active_total : d->active_last) == x->active);
        TCHECK((acc ? d->contributions : d->contributions_last) == x->contributions);
        TCHECK(d->active_min <= d->active_last && d->active_total >= d->active_last);
    }
    if (d->catch_up) atomic_fetch_add(&catch_ups, 1);
    TCHECK(!d->left_out || rk->env.exclude_ns); /* only rounds that may go on without a rank leave one out */
    if (d->left_out) atomic_fetch_add(&left_outs, 1);
    free(buf);
    atomic_store(&rk->completed, d->round + 1);
}
static void env_drained(void *owner) { (void)owner; }
static void env_failed(void *owner, int status, const char *what)
{
    fprintf(stderr, "rank %d failed: %d %s\n", ((rank_t *)owner)->me, status, what);
    TCHECK(0);
}
static int env_send(void *owner, int peer, void *msg, size_t bytes)
{
    (void)owner, (void)peer, (void)msg, (void)bytes;
    TCHECK(0); /* one node: the protocol sends nothing */
    return PCOLL_ERR_INTERNAL;
}

static int choose_waiting(void *arg, uint64_t taken)
{
    (void)arg;
    (void)taken;
    return (int)(rnd() % 2);
}

static void *app_thread(void *arg)
{
    rank_t *rk = arg;
    my_rank = rk->me;
    rng_state = 1000u + (unsigned)rk->me;
    double *v = calloc(COUNT, sizeof(double));
    for (int k = 0; k < K; k++) {
        stop_if_frozen(0, NULL);
        double x = (double)(rk->me * K + k + 1);
        for (int i = rk->me; i < COUNT; i += P) v[i] = x;
        rk->taken[k] = rk->b->ops->contribute(rk->b, v, choose_waiting, NULL);
        rk->given++;
        rk->total += x;
        if (rnd() % 8 == 0) rk->b->ops->want(rk->b, rk->b->ops->done(rk->b) + 1);
        if (rnd() % 4 == 0) sched_yield();
    }
    rk->b->ops->want(rk->b, 0);
    free(v);
    while (atomic_load(&freezes) < atomic_load(&freezes_wanted)) { /* the holders' rounds go on meanwhile */
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&rk->app_done, 1);
    /* like a flush: wait for the last round, asking to be kicked for it
     * (a rank that asks for nothing learns of rounds only when it looks) */
    uint64_t f;
    while ((f = atomic_load(&final_round)) == 0) sched_yield();
    rk->b->ops->want(rk->b, f);
    while (atomic_load(&rk->completed) < f) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    rk->b->ops->want(rk->b, 0);
    return NULL;
}

static void *holder_thread(void *arg)
{
    rank_t *rk = arg;
    my_rank = rk->me;
    rng_state = 2000u + (unsigned)rk->me;
    is_holder = 1;
    pc_backend_t *b = rk->b;
    b->ops->open(b);
    TCHECK(atomic_load(&rk->listening));
    int final_mine = 0;
    while (!atomic_load(&stop_holders)) {
        stop_if_frozen(0, "holder");
        if (atomic_exchange(&rk->kicked, 0)) b->ops->kick(b);
        /* as a waiting application would, every so often */
        if (rk->env.exclude_ns && rnd() % 16 == 0) b->ops->nudge(b);
        uint64_t a = b->ops->activated(b), d = b->ops->done(b);
        int fin = atomic_load(&finishing);
        /* at most two rounds activated and not done (the driver's window) */
        if (a < d + 2) {
            if (!fin) {
                (void)b->ops->activate(b, a, rk->me, 0, NULL, -1);
            } else if (fin && rk->me == 0 && !final_mine) {
                /* after every application finished: a last round takes
                 * what is left */
                if (b->ops->activate(b, a, rk->me, 0, NULL, -1) == 1) {
                    atomic_store(&final_round, a + 1);
                    final_mine = 1;
                }
            }
        }
        if (!atomic_load(&rk->kicked)) {
            struct timespec ts = {0, 5000};
            nanosleep(&ts, NULL);
        }
    }
    b->ops->close(b);
    TCHECK(!atomic_load(&rk->listening));
    return NULL;
}

/* where it stands (for a hang: not signal-safe, but the process ends) */
static void dump(void)
{
    if (!ranks[0].b) return;
    const shm_backend_t *s = (const shm_backend_t *)ranks[0].b;
    const node_ctl_t *nc = s->nc;
    fprintf(stderr, "activated %llu done %llu summed %llu claimed %llu parts %u %u blocked %llu final %llu\n",
            (unsigned long long)nc->activated, (unsigned long long)nc->done, (unsigned long long)nc->summed,
            (unsigned long long)nc->sum_claimed, nc->parts[0], nc->parts[1], (unsigned long long)nc->blocked,
            (unsigned long long)final_round);
    for (int j = 0; j < P; j++) {
        const rank_ctl_t *c = ctl_of(s, j);
        uint64_t st = c->state;
        fprintf(stderr, "  rank %d: taken %llu flags %llx want %llu consumed %llu completed %llu kicked %d app %s\n",
                j, (unsigned long long)(st >> ST_SHIFT), (unsigned long long)(st & 15), (unsigned long long)c->want,
                (unsigned long long)c->consumed, (unsigned long long)ranks[j].completed, (int)ranks[j].kicked,
                ranks[j].app_done ? "done" : "running");
    }
}

static unsigned budget_s = 300;

static void watchdog(int sig)
{
    (void)sig;
    fprintf(stderr, "test_shm_protocol: the runs took longer than their %u s budget (a hang?)\n", budget_s);
    dump();
    _exit(2);
}

/* whether ranks[j] completed round r itself, not in a catch-up */
static int saw(int j, uint64_t r) { return ranks[j].rounds[r].kept_from < 0; }

/* freeze: ranks stop now and then for freeze_ms, and rounds go on without a
 * rank silent for 2 ms */
static void run(int nranks, pcoll_contrib_mode_t m, pcoll_partial_kind_t kind, int freeze_ms)
{
    P = nranks;
    mode = m;
    memset(&policy, 0, sizeof policy);
    policy.kind = kind;
    policy.P = P;
    policy.quorum = 1;
    policy.group_size = kind == PCOLL_PARTIAL_GROUP ? 2 : 0;
    atomic_store(&finishing, 0);
    atomic_store(&stop_holders, 0);
    atomic_store(&final_round, 0);
    atomic_store(&freezes, 0);
    atomic_store(&freezes_wanted, freeze_ms ? 12 : 0);
    memset(&object, 0, sizeof object);
    object.kind = "partial";
    int local[MAXP];
    for (int j = 0; j < P; j++) local[j] = j;
    for (int j = 0; j < P; j++) {
        rank_t *rk = &ranks[j];
        memset(rk, 0, sizeof *rk);
        rk->me = j;
        rk->taken = calloc((size_t)K, sizeof(uint64_t));
        CHECK(rk->taken != NULL);
        pc_backend_env_t *e = &rk->env;
        e->P = P;
        e->me = j;
        e->count = COUNT;
        e->dtype = PCOLL_FLOAT64;
        e->esize = sizeof(double);
        e->bytes = (COUNT + PC_TRAILER) * sizeof(double);
        e->mode = mode;
        e->policy = policy;
        e->obj = &object;
        e->bitmap_bytes = (size_t)(P + 7) / 8;
        e->exclude_ns = freeze_ms ? 2000000 : 0;
        e->owner = rk;
        e->activated = env_activated;
        e->completed = env_completed;
        e->drained = env_drained;
        e->failed = env_failed;
        e->send = env_send;
        e->buffer = env_buffer;
        e->release = env_release;
    }
    for (int j = 0; j < P; j++) {
        size_t bytes = (pc_backend_shm_segment_bytes(&ranks[j].env, j == 0) + 63) / 64 * 64;
        segs[j] = aligned_alloc(64, bytes);
        CHECK(segs[j] != NULL);
        memset(segs[j], 0, bytes);
    }
    for (int j = 0; j < P; j++) {
        pc_shm_signals_t sig = {&ranks[j], sig_kick, sig_mark, sig_listen};
        CHECK(pc_backend_shm_attach(&ranks[j].env, segs, local, P, &sig, &ranks[j].b) == PCOLL_SUCCESS);
    }
    for (int j = 0; j < P; j++) {
        CHECK(pthread_create(&ranks[j].holder, NULL, holder_thread, &ranks[j]) == 0);
        CHECK(pthread_create(&ranks[j].app, NULL, app_thread, &ranks[j]) == 0);
    }
    atomic_store(&catch_ups, 0);
    atomic_store(&left_outs, 0);
    for (int j = 0; j < P; j++)
        while (!atomic_load(&ranks[j].app_done)) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            if (freeze_ms && rnd() % 3 == 0) { /* one rank stops for freeze_ms */
                int x = (int)(rnd() % (unsigned)P);
                atomic_store(&thawing, x);
                atomic_store(&frozen_mid_step, atomic_load(&freezes) % 2); /* half of them between steps */
                /* stopped while it adds its contribution (the first
                 * freeze), delivers a result, copies one or sums a round
                 * (every third) */
                int k = atomic_load(&freezes), step = 0;
                static const int holder_step[3] = {1, 3, 2};
                if (k == 0)
                    step = APP_STEP; /* the first: while the applications still add */
                else if (k % 3 == 2)
                    step = holder_step[holder_steps++ % 3];
                atomic_store(&frozen_delivering, step);
                atomic_store(&parked_delivering, -1);
                atomic_store(&frozen, x);
                struct timespec f = {0, freeze_ms * 1000000L};
                nanosleep(&f, NULL);
                if (atomic_load(&frozen_delivering)) {
                    /* once it is there, the others' rounds go on without it
                     * (its slot is not held for a silent rank's delivery) */
                    for (int w = 0; w < 200 && atomic_load(&parked_delivering) != x; w++) nanosleep(&f, NULL);
                    if (atomic_load(&parked_delivering) == x) {
                        unsigned long long before[MAXP], grew = 0;
                        int arounds = atomic_load(&known_arounds);
                        for (int o = 0; o < P; o++) before[o] = atomic_load(&ranks[o].completed);
                        /* (an add: until a later round is taken around it at
                         * once, the rank known silent; not a limit a round) */
                        for (int w = 0;
                             w < 400 && (grew < 3 || (step == APP_STEP && atomic_load(&known_arounds) == arounds));
                             w++) {
                            nanosleep(&f, NULL);
                            for (int o = 0; o < P; o++)
                                if (o != x && atomic_load(&ranks[o].completed) - before[o] > grew)
                                    grew = atomic_load(&ranks[o].completed) - before[o];
                            if (atomic_load(&ranks[(x + 1) % P].app_done)) break;
                        }
                        if (!atomic_load(&ranks[(x + 1) % P].app_done)) {
                            if (grew < 3)
                                fprintf(stderr, "test_shm_protocol: rank %d stopped %s for %d ms: the others completed %llu "
                                        "rounds meanwhile\n",
                                        x, frozen_doing[atomic_load(&frozen_delivering)], 400 * freeze_ms,
                                        grew);
                            CHECK(grew >= 3);
                            CHECK(step != APP_STEP || atomic_load(&known_arounds) > arounds);
                            stopped_in_step[atomic_load(&frozen_delivering)]++;
                        }
                    }
                    atomic_store(&frozen_delivering, 0);
                }
                atomic_store(&frozen, -1);
                /* one silent rank at a time: the next freeze waits until
                 * this one took what was kept for it */
                const shm_backend_t *s = (const shm_backend_t *)ranks[x].b;
                while ((atomic_load(&ctl_of(s, x)->consumed) & CONS_OWED) && !atomic_load(&ranks[x].app_done))
                    sched_yield();
                atomic_store(&thawing, -1);
                atomic_fetch_add(&freezes, 1);
            }
        }
    atomic_store(&finishing, 1);
    /* every rank completes every round up to the last */
    for (int j = 0; j < P; j++) pthread_join(ranks[j].app, NULL);
    atomic_store(&stop_holders, 1);
    for (int j = 0; j < P; j++) pthread_join(ranks[j].holder, NULL);

    uint64_t rounds = atomic_load(&final_round);
    double per_rank[MAXP] = {0}, last_seen[MAXP] = {0};
    /* ACCUMULATE: round r holds rank o's contributions that contribute
     * said round r takes.  A rank stopped in the middle of an add may have
     * its part taken around it: then what it held goes into a later round
     * (never an earlier one), the round said for the contribution it was
     * adding (contribute reads it once the add is over) */
    double *said = calloc((size_t)P * rounds, sizeof(double)), said_so_far[MAXP] = {0}, had_so_far[MAXP] = {0};
    CHECK(said != NULL);
    for (int o = 0; o < P; o++)
        for (int k = 0; k < K; k++) {
            CHECK(ranks[o].taken[k] < rounds);
            said[(size_t)o * rounds + ranks[o].taken[k]] += (double)(o * K + k + 1);
        }
    int64_t counted = 0, given = 0, left_out_parts = 0;
    for (int j = 0; j < P; j++) {
        CHECK(atomic_load(&ranks[j].completed) == rounds);
        given += ranks[j].given;
    }
    round_t kept[MAXP]; /* per rank: what its catch-up in progress should hold */
    memset(kept, 0, sizeof kept);
    for (uint64_t r = 0; r < rounds; r++) {
        for (int j = 0; j < P; j++) {
            /* the rank's group in round r sums its members' parts; every
             * member got the same, or has it in a catch-up */
            int members[MAXP], n = P;
            if (kind == PCOLL_PARTIAL_GROUP)
                n = pc_policy_members(&policy, r, 0, j, members);
            else
                for (int i = 0; i < P; i++) members[i] = i;
            int ref = -1; /* a member that completed round r itself */
            for (int i = 0; i < n && ref < 0; i++)
                if (saw(members[i], r)) ref = members[i];
            CHECK(ref >= 0); /* one rank is frozen at a time */
            const round_t *x = &ranks[j].rounds[r], *lead = &ranks[ref].rounds[r];
            CHECK(lead->root >= 0);
            if (!saw(j, r)) {
                round_t *k = &kept[j];
                if ((int64_t)r == x->kept_from) memset(k, 0, sizeof *k);
                int last = r + 1 == rounds || ranks[j].rounds[r + 1].kept_from != x->kept_from;
                if (mode == PCOLL_ACCUMULATE) {
                    for (int o = 0; o < P; o++) k->part[o] += lead->part[o];
                    k->contributions += lead->contributions;
                    k->active += lead->active;
                } else {
                    *k = *lead;
                }
                if (last) {
                    CHECK(memcmp(x->part, k->part, sizeof k->part) == 0);
                    CHECK(x->contributions == k->contributions && x->active == k->active);
                }
            } else {
                CHECK(memcmp(x, lead, sizeof *x) == 0);
            }
            CHECK(lead->active >= 0 && lead->active <= n);
            x = lead;
            int in_group[MAXP] = {0};
            for (int i = 0; i < n; i++) in_group[members[i]] = 1;
            for (int o = 0; o < P; o++)
                if (!in_group[o]) CHECK(x->part[o] == 0);
            if (j != ref) continue; /* one look per group */
            counted += x->contributions;
            int64_t with_data = 0;
            for (int i = 0; i < n; i++) {
                int o = members[i];
                double v = x->part[o];
                per_rank[o] += v;
                if (mode == PCOLL_ACCUMULATE) {
                    double here = said[(size_t)o * rounds + r];
                    said_so_far[o] += here;
                    had_so_far[o] += v;
                    if (freeze_ms)
                        CHECK(had_so_far[o] <= said_so_far[o] && (v == 0 || here > 0));
                    else
                        CHECK(v == here);
                }
                if (mode == PCOLL_REPLACE) {
                    /* one contribution of o, or nothing: before its first,
                     * or (freezes) its last left out while it is known
                     * silent */
                    CHECK(v == 0 || (v >= o * K + 1 && v <= o * K + K));
                    with_data += v > 0;
                    if (v == 0 && last_seen[o] > 0) {
                        /* o was known silent at the take: a catch-up of
                         * o holds a round before r, and one of the last
                         * three (when o came back, up to two rounds after
                         * its catch-up may have been done and not kept,
                         * and r taken after them) */
                        int near = 0;
                        for (uint64_t b = r >= 3 ? r - 3 : 0; b < r; b++) near |= !saw(o, b);
                        CHECK(freeze_ms > 0 && near);
                        left_out_parts++;
                    } else {
                        CHECK(v >= last_seen[o]); /* never an older one */
                        last_seen[o] = v;
                    }
                }
            }
            /* the trailer counts the parts with data (AVERAGE divides by it) */
            if (mode == PCOLL_REPLACE) CHECK(x->contributions == with_data);
        }
    }
    if (mode == PCOLL_ACCUMULATE) {
        for (int j = 0; j < P; j++) CHECK(per_rank[j] == ranks[j].total);
        CHECK(counted == given);
    } else {
        for (int j = 0; j < P; j++) CHECK(last_seen[j] == j * K + K); /* the last round holds the last */
        if (freeze_ms) CHECK(left_out_parts > 0); /* a frozen rank's last model was left out */
    }
    printf("  P=%d %-10s %-7s %llu rounds, %lld contributions: every one accounted for", P,
           mode == PCOLL_ACCUMULATE ? "accumulate" : "replace", pc_policy_kind_name(kind), (unsigned long long)rounds,
           (long long)given);
    if (freeze_ms) {
        printf("; %d freezes of %d ms, %lld catch-ups, %lld rounds completed with a rank left out",
               atomic_load(&freezes), freeze_ms, (long long)atomic_load(&catch_ups),
               (long long)atomic_load(&left_outs));
        if (mode == PCOLL_REPLACE) printf(", %lld parts of a known silent rank left out", (long long)left_out_parts);
        CHECK(atomic_load(&catch_ups) > 0 && atomic_load(&left_outs) > 0); /* rounds went on without a frozen rank */
    }
    printf("\n");
    for (int j = 0; j < P; j++) {
        free(ranks[j].rounds);
        free(ranks[j].taken);
        ranks[j].b->ops->destroy(ranks[j].b);
    }
    for (int j = 0; j < P; j++) free(segs[j]);
    free(said);
}

int main(int argc, char **argv)
{
    K = argc > 1 ? atoi(argv[1]) : 3000;
    if (K < 1) K = 1;
    signal(SIGALRM, watchdog);
    if (argc > 2 && atoi(argv[2]) > 0) budget_s = (unsigned)atoi(argv[2]);
    alarm(budget_s);
    rng_state = 1;
    run(4, PCOLL_ACCUMULATE, PCOLL_PARTIAL_QUORUM, 0);
    run(5, PCOLL_ACCUMULATE, PCOLL_PARTIAL_QUORUM, 0);
    run(4, PCOLL_REPLACE, PCOLL_PARTIAL_QUORUM, 0);
    run(4, PCOLL_ACCUMULATE, PCOLL_PARTIAL_GROUP, 0);
    run(2, PCOLL_ACCUMULATE, PCOLL_PARTIAL_SOLO, 0);
    run(4, PCOLL_ACCUMULATE, PCOLL_PARTIAL_SOLO, 10);
    run(4, PCOLL_REPLACE, PCOLL_PARTIAL_QUORUM, 10);
    run(4, PCOLL_ACCUMULATE, PCOLL_PARTIAL_GROUP, 10);
    for (int k = 1; k < STEPS; k++) CHECK(stopped_in_step[k] > 0); /* the cases came up */
    printf("test_shm_protocol: %ld checks passed; ranks stopped while delivering %d times, while summing %d times, "
           "while copying %d times, while adding %d times: the others went on\n",
           checks, stopped_in_step[1], stopped_in_step[2], stopped_in_step[3], stopped_in_step[APP_STEP]);
    return 0;
}
