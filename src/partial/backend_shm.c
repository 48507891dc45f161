/*
 * The node-shared backend of partial rounds (backend.h): on each node,
 * pending contributions, activations and results live in node-shared
 * memory, so a round needs no message inside a node and wakes only the
 * ranks that wait for it.  When the ranks span several nodes, each node
 * sums its own ranks' parts this way and the node leaders (the smallest
 * rank of each node) add the node sums up by messages (internode.h); on
 * one node that step is empty.
 *
 *   rank j's segment                      the node leader's, in addition
 *   ----------------                      ------------------------------
 *   state: taken | WAITING | ADDING |     activated, done: rounds so far
 *          TAKING | cur                   record[r % 2]: root, flags, the
 *   pending[0], pending[1]  (cur: the       leader's bitmap of parked ranks
 *     one the application adds into)      parts[r % 2]: parts taken
 *   want: kick me once done >= want       result[r % 2]: record (+ the sum,
 *   consumed: results copied here           unless GROUP)
 *   GROUP objects: sum[0], sum[1]: the
 *     sum of the group j leads (its
 *     smallest member) in that slot's round
 *     (a second pair after the owed
 *     buffer, for a sum taken over)
 *
 *   activate r (initiator / leader):  write record[r % 2], activated = r + 1
 *   take j's part of r (anyone, while j's application is not adding):
 *     flip j's cur, write the trailer (active = WAITING or counted as parked,
 *     contributions) into the old pending buffer: it is j's deposit for r
 *     (REPLACE, AVERAGE: the buffer holding j's latest contribution is the
 *     deposit; cur flips only if that is cur, else the last deposit is
 *     taken again, unchanged: no copy, or left out if j is known silent;
 *     an empty deposit is flagged, not zeroed); j stopped in the middle of
 *     an add (its part held for PCOLL_EXCLUDE_MS): its other buffer is
 *     taken around the add, without what cur holds (ACCUMULATE: an empty
 *     part)
 *   the node's last part (or whoever finds the sum blocked and can do it):
 *     claims it, then result[r % 2] = the record and the sum of the
 *     deposits, in the slot's buffer that pub[r % 2] then names (a sum
 *     claimed and not published for PCOLL_EXCLUDE_MS: summed again into
 *     the slot's other buffer, try_sum; the first published counts) (GROUP: each
 *     group's sum into its leader's sum[r % 2]), summed = r + 1; on one
 *     node done = r + 1 at once, else the node leader adds the node sums
 *     up in place (internode.h) and then sets done = r + 1; kick every j
 *     whose want is due; round r + 1 next if activated
 *   rank j, when kicked: copy its round's sum (its group's) for each round
 *     c < done it has not completed, env.completed, then consumed = c + 1
 *   across nodes, the node leader passes this node's activations on to
 *     the other leaders, and writes theirs into this node's record
 *
 * GROUP objects whose rounds sum inside groups use this backend only when
 * every rank is on one node (a group may span nodes).
 *
 * Group rounds (WAGMA) run here like the others, one after the other: a
 * round's parts are taken by whoever comes, so nobody waits for a rank
 * whose application is late, and the summer adds each group's parts apart.
 *
 * Only one round is taken at a time (round r's parts only once r - 1 is
 * done), and at most two are activated and not done (a flush or free round
 * may follow a running one), hence two records, deposits and results.  A
 * result slot is summed into only when every rank of the node has consumed
 * the round it held before; a sum that finds a rank behind kicks it and is
 * done by the first helper that finds the way clear.  An application that
 * is adding when its part is taken is skipped; it gives its part itself
 * when done.
 *
 * A rank learns of rounds through kicks on the object's key (a keyed poller,
 * engine/progress.h): it costs nothing while nobody kicks, however many
 * objects a rank has.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/stall.h"
#include "../engine/nodemem.h"
#include "../engine/reduce.h"
#include "../util/log.h"
#include "backend.h"
#include "internode.h"
#include "nodesums.h"
#include "policy.h"
#include "silence.h"

/* Test builds may define it to yield or spin at the protocol's steps
 * (tests/unit/test_shm_protocol.c): forced interleavings. */
#ifndef PC_SHM_INTERLEAVE
#define PC_SHM_INTERLEAVE(where) ((void)0)
#endif
/* ... and this to say which silent ranks' results may be kept (the test:
 * only those it froze, whatever a slow machine makes of the others) */
#ifndef PC_SHM_MAY_KEEP
#define PC_SHM_MAY_KEEP(rank) 1
#endif

#define LINE 64
#define ROUND_UP(x) (((x) + LINE - 1) / LINE * LINE)

/* a rank's state word: taken << ST_SHIFT | flags */
enum { ST_CUR = 1, ST_ADDING = 2, ST_TAKING = 4, ST_WAITING = 8, ST_SHIFT = 4 };
/* a deposit's flag: its buffer's data is stale, the part is zero */
enum { DEP_EMPTY = 2 };

/* the head of every rank's segment */
typedef struct rank_ctl {
    atomic_ullong state;
    uint64_t held[2]; /* ACCUMULATE: contributions pending buffer b holds
                         (0: it is zero); REPLACE: the number of the
                         contribution it holds (0: none; the larger is the
                         latest) -- written by whoever has ADDING or TAKING */
    uint32_t deposit[2]; /* the buffer taken for the slot's round, | DEP_EMPTY
                            if it holds nothing (its data is not zeroed:
                            summers add its trailer only) */
    char pad1[LINE - sizeof(atomic_ullong) - 2 * sizeof(uint64_t) - 2 * sizeof(uint32_t)];
    atomic_ullong want;     /* kick once done >= want (0: never) */
    atomic_ullong consumed; /* rounds whose result this rank copied, or that
                               were kept for it (CONS_*) */
    char pad2[LINE - 2 * sizeof(atomic_ullong)];
    /* the rounds kept for this rank while it was silent, whose data is its
     * owed buffer: written under CONS_STEAL, read under CONS_BUSY */
    uint64_t owed_parked;
    int32_t owed_root;
    uint32_t owed_flags;    /* the last round's, and FLUSH if any was one */
    int64_t owed_active_last, owed_active_min, owed_active_total, owed_contributions, owed_contributions_last;
    char pad3[LINE - sizeof(uint64_t) - 2 * sizeof(int32_t) - 5 * sizeof(int64_t)];
    /* is its progress engine alive: others add to ping and kick it, its
     * holder copies ping into pong */
    atomic_ullong ping, pong;
    char pad4[LINE - 2 * sizeof(atomic_ullong)];
} rank_ctl_t;

/* consumed = a round count | flags: who handles the next round's result */
#define CONS_BUSY ((uint64_t)1 << 62)  /* the rank copies it */
#define CONS_STEAL ((uint64_t)1 << 61) /* another rank keeps it for the rank */
#define CONS_OWED ((uint64_t)1 << 60)  /* rounds are kept in its owed buffer */
#define CONS_DELIVERING ((uint64_t)1 << 59) /* it copied the rounds < count and
                                              delivers them (observer, application) */
#define CONS_CATCHING ((uint64_t)1 << 58) /* with BUSY: it copies its owed
                                            buffer (not a slot's result) */
#define CONS_COUNT(v) ((v) & (CONS_CATCHING - 1))

/* sum_claimed: rounds claimed, the rank that claimed the last, its buffer */
#define CLAIM(rounds, rank, buf) ((uint64_t)(rounds) << 20 | (uint64_t)(rank) << 1 | (uint64_t)(buf))
#define CLAIM_ROUNDS(v) ((v) >> 20)
#define CLAIM_RANK(v) ((int)(((v) >> 1) & 0x7FFFF))
#define CLAIM_BUF(v) ((int)((v)&1))

/* what a round is: written at activation, copied with the result */
typedef struct record {
    uint64_t round;
    int32_t root;
    uint32_t flags;
    int32_t has_counted;
    int32_t left_out; /* results: the ranks the round went on without */
    /* followed by the bitmap of ranks counted as parked, and in results
     * the bitmap of the ranks left out (when rounds may go on without one) */
} record_t;

/* the rounds' shared state, in the node leader's segment */
typedef struct node_ctl {
    atomic_ullong activated; /* rounds activated */
    char pad1[LINE - sizeof(atomic_ullong)];
    atomic_ullong done;        /* rounds whose result is complete */
    atomic_ullong summed;      /* rounds whose node sum is complete (= done on one node) */
    atomic_ullong sum_claimed; /* rounds whose sum someone took on, its summer and buffer: CLAIM */
    atomic_uint parts[2];      /* parts taken for the slot's round */
    atomic_ullong owner[2];    /* the slot's record is (being) written for owner - 1 */
    atomic_ullong blocked;     /* rounds whose blocked sum woke the ranks behind */
    char pad2[LINE - 6 * sizeof(atomic_ullong) - 2 * sizeof(atomic_uint)];
    atomic_ullong blocked_for; /* how long a round has been blocked (silence.h; what: round + 1) */
    char pad3[LINE - sizeof(atomic_ullong)];
    /* a sum whose summer stopped is summed again (try_sum): two result
     * buffers per slot, when `spare` */
    atomic_ullong pub[2];      /* (round + 1) << 1 | the buffer that holds the slot's result */
    atomic_ullong stolen;      /* rounds whose stopped sum was taken over */
    atomic_ullong sum_stuck;   /* how long a claimed sum has not come (silence.h; what: round + 1) */
    atomic_ullong stealing;    /* round + 1 whose deposits a take-over reads (0: none):
                                  no part of a later round is taken meanwhile */
    atomic_uint taint[2];      /* the slot's buffers a stopped summer may still write (bits) */
    atomic_ullong part_stuck;  /* how long a part has been held by its application's
                                  add (silence.h; what: round + 1): try_take around it */
    char pad4[LINE - 6 * sizeof(atomic_ullong) - 2 * sizeof(atomic_uint)];
    /* across nodes, when rounds go on without a silent rank (nodesums.h) */
    atomic_ullong finisher[2]; /* who finishes the slot's round: FINISHER */
    atomic_ullong deputy_on;   /* the deputy finishes rounds for a silent
                                  leader: kick it too when one is summed */
    atomic_ullong finish_stuck; /* how long a claimed round has not been
                                   finished (silence.h; what: round + 1) */
    atomic_ullong direct;        /* round + 1 from which the node sums go node to
                                    node (nodesums.h), not by the leaders'
                                    allreduce (0: never): direct_for */
    atomic_ullong back_at;       /* the round from which they go back (0: none) */
    atomic_ullong allreduced[2]; /* round + 1 if the slot's round was finished by
                                    the leaders' allreduce (its total answers a
                                    node that sends its sum: shm_heard) */
    char pad5[2 * LINE - 8 * sizeof(atomic_ullong)];
} node_ctl_t;

/* finisher: rounds claimed, the rank that claimed the last, 1 once it
 * writes the total */
#define FINISHER(rounds, rank, writing) ((uint64_t)(rounds) << 21 | (uint64_t)(rank) << 1 | (uint64_t)(writing))
#define FINISHER_ROUNDS(v) ((v) >> 21)
#define FINISHER_RANK(v) ((int)(((v) >> 1) & 0xFFFFF))
#define FINISHER_WRITING(v) ((int)((v)&1))

typedef struct shm_backend {
    pc_backend_t base;
    void **seg;       /* seg[rank]: that rank's segment (ranks of this node) */
    pc_shm_signals_t sig;
    pc_nodemem_t mem; /* made by pc_backend_shm_create (else mem.seg NULL) */
    int P, me;
    int *local, nlocal; /* this node's ranks, increasing; local[0] leads it */
    int *leaders, nnodes; /* every node's leader, in node order */
    pc_internode_t *net; /* at a node leader when the ranks span nodes */
    pc_nodesums_t *ns;   /* at a candidate (leader, deputy) when the ranks span
                            nodes and rounds go on without a silent rank: the
                            node sums node to node, once `direct` */
    void *exch_out;      /* node leader with a deputy: the total of net's
                            allreduce when the slot's other buffer is tainted */
    int exch_buf;        /* the result buffer the running allreduce writes
                            (-1: exch_out; the slot's other one, tainted meanwhile) */
    void *exch_to;       /* ... that buffer */
    int gave_up;         /* node leader: net's allreduce given up (direct) */
    int healthy;         /* node 0's leader: rounds in a row it finished node to
                            node with every node sum from a leader (decide_back) */
    uint64_t healthy_next; /* ... the round that continues the run */
    int backs;           /* ... times it sent the node sums back */
    int role;            /* 0: this node's leader, 1: its deputy, -1: neither */
    int deputy;          /* the node's deputy, local[1] (-1: none) */
    uint64_t sent_for;   /* round + 1 whose node sum this rank sent */
    uint64_t direct_after; /* round + 2 of the last round this rank finished node to node */
    atomic_int probe_due; /* a waiting thread asks the holder to probe (nudge) */
    int to_drain;        /* at close: net and ns, until each has drained */
    int key;          /* the engine's kick key (the same at every rank; -1: none) */
    size_t data_bytes; /* count elements */
    size_t stride, rec_bytes;
    node_ctl_t *nc;
    unsigned char *record[2];
    unsigned char *result[2][2]; /* [slot][buffer]: a record, then the sum (not
                                    GROUP); buffer 1 only when `spare` */
    int spare;        /* a second result buffer per slot (PCOLL_EXCLUDE_MS;
                         GROUP: and a second pair of sums in each rank's
                         segment): a stopped summer's round is summed again
                         into the other */
    int grouped;      /* GROUP: sums per group, in the leaders' segments */
    int owing;        /* rounds go on without a silent rank (PCOLL_EXCLUDE_MS):
                         each rank has an owed buffer after its pending ones */
    uint32_t exclude_ms;
    uint64_t *pinged;    /* per rank: the ping this rank asked it (0: none) */
    uint64_t *ping_wait; /* and how long it has waited for the answer (silence.h) */
    uint64_t *ponged;    /* ranks of other nodes: the last ping they answered
                            (PING and PONG messages; this node's: node-shared) */
    uint64_t ping_seq;   /* the pings sent to other nodes' ranks */
    int *sum_members; /* the summer's (one at a time: rounds are summed in order) */
    int *own_members; /* the token holder's */
    unsigned char *left_out_copy; /* the token holder's: a round's left-out
                                     ranks, copied with its result */
    /* token holder */
    uint64_t completed; /* rounds handed to the driver */
    uint64_t forwarded; /* node leader: activations passed to the other nodes */
    int closed;
} shm_backend_t;

static shm_backend_t *S(pc_backend_t *b) { return (shm_backend_t *)b; }
static const shm_backend_t *CS(const pc_backend_t *b) { return (const shm_backend_t *)b; }

static rank_ctl_t *ctl_of(const shm_backend_t *s, int rank) { return s->seg[rank]; }

static unsigned char *pending_of(const shm_backend_t *s, int rank, int b)
{
    return (unsigned char *)s->seg[rank] + sizeof(rank_ctl_t) + (size_t)b * s->stride;
}

/* The result buffer that holds the slot's round (its record, then, unless
 * GROUP, its sum). */
static unsigned char *result_of(const shm_backend_t *s, int slot)
{
    return s->result[slot][atomic_load(&s->nc->pub[slot]) & 1];
}

/* Where the sum of the round in `slot` that `leader`'s group shares is
 * written in result buffer buf (the result's sum when rounds are not in
 * groups; GROUP: in the leader's segment, buffer 1 after its owed one). */
static unsigned char *sum_in(const shm_backend_t *s, int leader, int slot, int buf)
{
    if (!s->grouped) return s->result[slot][buf] + s->rec_bytes;
    return pending_of(s, leader, buf ? 4 + s->owing + slot : 2 + slot);
}

/* ... and where it is read: the buffer that holds the slot's round */
static unsigned char *sum_of(const shm_backend_t *s, int leader, int slot)
{
    return sum_in(s, leader, slot, (int)(atomic_load(&s->nc->pub[slot]) & 1));
}

/* Where the results kept for rank j while it was silent add up. */
static unsigned char *owed_of(const shm_backend_t *s, int j) { return pending_of(s, j, s->grouped ? 4 : 2); }

static const unsigned char *left_out_bits(const shm_backend_t *s, const unsigned char *res)
{
    return ((const record_t *)res)->left_out ? res + sizeof(record_t) + s->base.env.bitmap_bytes : NULL;
}

/* The smallest member of rank j's group in round r (activated with flags),
 * members: room for P; the node's leader when the round sums every rank. */
static int leader_of(const shm_backend_t *s, uint64_t r, uint32_t flags, int j, int *members)
{
    const pc_policy_t *pol = &s->base.env.policy;
    if (!s->grouped || !pc_policy_in_groups(pol, r, flags)) return s->local[0];
    (void)pc_policy_members(pol, r, flags, j, members);
    return members[0];
}

/* A round record's bitmap of the ranks counted as parked, or NULL */
static const unsigned char *record_counted(const unsigned char *rec)
{
    return ((const record_t *)rec)->has_counted ? rec + sizeof(record_t) : NULL;
}

static int bit_of(const shm_backend_t *s, const unsigned char *rec, int rank)
{
    (void)s;
    const unsigned char *bits = record_counted(rec);
    return bits && pc_bit_get(bits, rank);
}

static void kick(shm_backend_t *s, int rank) { s->sig.kick(s->sig.arg, rank); }
static int help(shm_backend_t *s);

/* ---- the application thread ---- */

/* Sets `bit` in this rank's state once no taker holds it (takers are short). */
static uint64_t acquire_own(shm_backend_t *s, uint64_t bit)
{
    rank_ctl_t *c = ctl_of(s, s->me);
    uint64_t st = atomic_load(&c->state);
    for (;;) {
        if (st & ST_TAKING) {
            sched_yield();
            st = atomic_load(&c->state);
        } else if (atomic_compare_exchange_weak(&c->state, &st, st | bit)) {
            PC_SHM_INTERLEAVE("own acquired");
            return st;
        }
    }
}

static uint64_t shm_contribute(pc_backend_t *b, const void *contribution, int (*choose)(void *, uint64_t), void *arg)
{
    shm_backend_t *s = S(b);
    const pc_backend_env_t *env = &b->env;
    rank_ctl_t *c = ctl_of(s, s->me);
    uint64_t st = acquire_own(s, ST_ADDING); /* no take of our part from here ... */
    /* the buffer was last read by the sum of an earlier round, which
     * `summed` published before a take made it current again: acquire that
     * too (the take, and across nodes the exchange that let it happen, may
     * have run in another process, out of a sanitizer's sight) */
    (void)atomic_load(&s->nc->summed);
    if (contribution) {
        int bi = (int)(st & ST_CUR);
        unsigned char *dst = pending_of(s, s->me, bi);
        if (env->mode == PCOLL_ACCUMULATE && c->held[bi] > 0)
            pc_reduce_sum(dst, dst, contribution, env->count, env->dtype);
        else
            memcpy(dst, contribution, s->data_bytes);
        if (env->mode == PCOLL_ACCUMULATE)
            c->held[bi]++;
        else
            c->held[bi] = (c->held[0] > c->held[1] ? c->held[0] : c->held[1]) + 1;
    }
    PC_SHM_INTERLEAVE("contribution written");
    /* ... to here; the round that takes the contribution is the one the
     * release finds (this rank's part may have been taken around the add
     * meanwhile, if it was silent: try_take) */
    uint64_t taken;
    st = atomic_load(&c->state);
    for (;;) {
        if (st & ST_TAKING) { /* a take around the add, a few stores */
            sched_yield();
            st = atomic_load(&c->state);
            continue;
        }
        taken = st >> ST_SHIFT;
        uint64_t set = choose(arg, taken) ? ST_WAITING : 0;
        if (atomic_compare_exchange_strong(&c->state, &st, (st & ~(uint64_t)ST_ADDING) | set)) break;
    }
    PC_SHM_INTERLEAVE("adding released");
    /* a round may have skipped our part while we added: give it now (any
     * thread may); a round summed here is completed at this rank's next look
     * (the caller waits or calls again: nobody is woken for it) */
    if (help(s)) s->sig.mark(s->sig.arg);
    return taken;
}

static void shm_waiting(pc_backend_t *b, int on)
{
    shm_backend_t *s = S(b);
    if (on)
        (void)acquire_own(s, ST_WAITING);
    else
        atomic_fetch_and(&ctl_of(s, s->me)->state, ~(uint64_t)ST_WAITING);
}

static void shm_want(pc_backend_t *b, uint64_t round)
{
    shm_backend_t *s = S(b);
    atomic_store(&ctl_of(s, s->me)->want, round);
    PC_SHM_INTERLEAVE("want stored");
    /* the round may be done already: the wait that follows looks at once */
    if (round) s->sig.mark(s->sig.arg);
}

/* ---- any thread ---- */

static uint64_t shm_done(const pc_backend_t *b) { return atomic_load(&CS(b)->nc->done); }
static uint64_t shm_activated(const pc_backend_t *b) { return atomic_load(&CS(b)->nc->activated); }

/* try_take's `around`: the part may be taken around an add, as its rank
 * held it for the limit, or is known silent (its results are kept) */
enum { AROUND_NOT, AROUND_TIMED, AROUND_KNOWN };

/* Takes rank j's part of round r unless it is taken or its application is
 * adding (it gives the part itself then).  around: also while it adds (j
 * silent for the limit: stopped in the middle of its add): the part is
 * then its other buffer, which the add does not touch (ACCUMULATE: empty;
 * REPLACE, AVERAGE: its last deposit again, as when nothing new came, left
 * out if the rank is known silent), and
 * what it adds goes into a later round. */
static int try_take(shm_backend_t *s, int j, uint64_t r, int around)
{
    const pc_backend_env_t *env = &s->base.env;
    rank_ctl_t *c = ctl_of(s, j);
    uint64_t st = atomic_load(&c->state), stealing = atomic_load(&s->nc->stealing);
    if (stealing && r >= stealing) return 0; /* a take-over reads the deposits (take_over_sum) */
    do {
        if ((st >> ST_SHIFT) != r || (st & ST_TAKING) || ((st & ST_ADDING) && !around)) return 0;
    } while (!atomic_compare_exchange_weak(&c->state, &st, st | ST_TAKING));
    PC_SHM_INTERLEAVE("taking");
    int now = (int)(st & ST_CUR), bi = now, next = !now, adding = (st & ST_ADDING) != 0;
    if (adding) PC_SHM_INTERLEAVE(around == AROUND_KNOWN ? "taking around a known silent add" : "taking around an add");
    int64_t contributions;
    if (adding) { /* the application writes `now`, and keeps it */
        bi = !now;
        next = now;
        contributions = env->mode != PCOLL_ACCUMULATE && c->held[bi] > 0;
    } else if (env->mode != PCOLL_ACCUMULATE) {
        /* the latest contribution stays pending, without a copy: the
         * current buffer if one was made since the last take (the
         * application writes the other from now on), else the last deposit
         * again, as it is (its round was summed before this round's parts
         * are taken) and the application keeps its buffer */
        if (c->held[!now] > c->held[now]) {
            bi = !now;
            next = now;
        }
        contributions = c->held[bi] > 0; /* a rank that never contributed adds zeros */
    } else {
        contributions = (int64_t)c->held[bi];
        c->held[!bi] = 0;
    }
    /* REPLACE, AVERAGE: the last deposit of a rank known silent (its
     * results kept), taken again, is left out (an empty part): its model of
     * the moment it stopped would weigh in every round until it is back (a
     * partner of WAGMA's groups of two pulled half-way back to it each
     * time).  It stays in its buffer, for the rounds after it is back. */
    if (env->mode != PCOLL_ACCUMULATE && bi != now && (atomic_load(&c->consumed) & CONS_OWED)) contributions = 0;
    unsigned char *dep = pending_of(s, j, bi);
    int active = (st & ST_WAITING) || bit_of(s, s->record[r % 2], j);
    pc_trailer_set(env, dep, active, contributions);
    /* an empty part is not zeroed here: a take stays a few stores, however
     * large the object (a rank stopped in the middle of one holds the
     * round up) */
    c->deposit[r % 2] = (uint32_t)bi | (contributions == 0 ? DEP_EMPTY : 0);
    PC_SHM_INTERLEAVE("deposit written");
    /* release: taken + 1, `next` is the application's; WAITING (and the
     * add a take around it leaves alone) as it is now */
    uint64_t cur = st | ST_TAKING;
    while (!atomic_compare_exchange_weak(&c->state, &cur,
                                         ((r + 1) << ST_SHIFT) | (cur & (ST_WAITING | ST_ADDING)) | (uint64_t)next)) {
    }
    PC_SHM_INTERLEAVE("taken");
    atomic_fetch_add(&s->nc->parts[r % 2], 1);
    return 1;
}

/* Round r's result is complete: done = r + 1, and every rank of the node
 * whose want is due is kicked (this one too if kick_self; else it
 * completes the round at its next look anyway). */
static void publish_done(shm_backend_t *s, uint64_t r, int kick_self)
{
    /* seq_cst store, then seq_cst loads of want: a rank either sees done or
     * is seen here (it stores want before it looks at done) */
    atomic_store(&s->nc->done, r + 1);
    PC_SHM_INTERLEAVE("done stored");
    for (int i = 0; i < s->nlocal; i++) {
        int j = s->local[i];
        uint64_t w = atomic_load(&ctl_of(s, j)->want);
        if ((j != s->me || kick_self) && w != 0 && w <= r + 1) kick(s, j);
    }
}

/* 1 if round r's sum was taken over: its first summer reads no more
 * deposits (they may be reused once the round is published). */
static int taken_over(const shm_backend_t *s, uint64_t r) { return atomic_load(&s->nc->stolen) >= r + 1; }

/* sum = the deposits of slot's round r of the n ranks m[]: the data of
 * those that are not empty (zeros if none is), and every trailer; 0 if it
 * stopped (claimed: once r is taken over) */
static int sum_deposits(shm_backend_t *s, unsigned char *sum, const int *m, int n, uint64_t r, int claimed)
{
    const pc_backend_env_t *env = &s->base.env;
    int slot = (int)(r % 2), written = 0;
    size_t db = s->data_bytes;
    const unsigned char *data = NULL; /* the first part with data */
    for (int i = 0; i < n; i++) {
        if (i > 0 && claimed && s->spare && taken_over(s, r)) return 0;
        uint32_t d = ctl_of(s, m[i])->deposit[slot];
        const unsigned char *dep = pending_of(s, m[i], (int)(d & 1));
        if (i == 0)
            memcpy(sum + db, dep + db, env->bytes - db);
        else
            pc_reduce_sum(sum + db, sum + db, dep + db, PC_TRAILER, env->dtype);
        if (d & DEP_EMPTY) continue;
        if (!data) {
            data = dep;
        } else {
            pc_reduce_sum(sum, written ? sum : data, dep, env->count, env->dtype);
            written = 1;
        }
    }
    if (!written) {
        if (data && claimed && s->spare && taken_over(s, r)) return 0;
        if (data)
            memcpy(sum, data, db);
        else
            memset(sum, 0, db);
    }
    return 1;
}

/* ---- going on without a silent rank ----
 *
 *   round r's slot still holds r - 2, which rank j has not copied:
 *     j has had results kept (CONS_OWED), or round r has been blocked on
 *     it for PCOLL_EXCLUDE_MS (summed over the looks of the ranks here:
 *     silence.h): j is silent, and whoever looks keeps the
 *     result for it: consumed[j] c -> c | STEAL, add (REPLACE: copy) j's
 *     result of c into its owed buffer, consumed[j] = (c + 1) | OWED
 *   j copying a result itself: consumed[j] c -> c | BUSY first (a CAS:
 *     exactly one of them handles round c), or, finding OWED, takes the
 *     owed buffer as one catch-up delivery of the rounds kept; copied,
 *     consumed[j] = (c + 1) | DELIVERING while it delivers (observer,
 *     application), then the flag goes: a slot waits for a live rank's
 *     delivery, not for a silent one's (it has its copy), and a later
 *     round can be kept for it meanwhile
 *   j silent in the middle of its copy (c | BUSY): round c is kept for it
 *     all the same (c | BUSY | STEAL, then (c + 1) | OWED); its copy, once
 *     it goes on, fails its CAS from c | BUSY and is dropped: the round
 *     comes with the kept ones.  Not while it copies its owed buffer
 *     (c | BUSY | CATCHING): that is the buffer a keeper writes.
 *
 * A rank's published part is taken as it stands meanwhile (its pending
 * contribution, or nothing), as for any late rank, and around its add if
 * it stopped in the middle of one (try_take); a sum it claimed is summed
 * again (take_over_sum).  A rank stopped in the middle of another step
 * (taking a part: a few stores, an empty part is not zeroed; claiming a
 * round's record; keeping a result for a silent rank, copying its owed
 * buffer) still holds its round up until it goes on: nothing is lost
 * either way. */

static uint32_t clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

/* A look at round r held up, in a node-shared silence word (silence.h:
 * summed over the looks of every rank here, a pause of everyone counting a
 * quarter); 1 once it has been held up for PCOLL_EXCLUDE_MS. */
static int look_shared(const shm_backend_t *s, atomic_ullong *word, uint64_t r)
{
    uint32_t what = (uint32_t)(r + 1), now = clock_ms();
    uint64_t w = atomic_load(word), next;
    while ((next = pc_silence_look(w, what, now, s->exclude_ms)) != w && !atomic_compare_exchange_weak(word, &w, next))
        ;
    return pc_silence_reached(next, what, s->exclude_ms);
}

/* Keeps rank j's result of round c (still in its slot) in j's owed buffer,
 * unless j (or another rank) handles it meanwhile; 1 if kept. */
static int keep_for(shm_backend_t *s, int j, uint64_t c)
{
    const pc_backend_env_t *env = &s->base.env;
    rank_ctl_t *cj = ctl_of(s, j);
    uint64_t v = atomic_load(&cj->consumed);
    /* (BUSY: j, silent, is stopped in the middle of its copy of round c:
     * kept all the same, its copy is void; not while it copies its owed
     * buffer, the one a keeper writes) */
    if (CONS_COUNT(v) != c || (v & (CONS_CATCHING | CONS_STEAL)) ||
        !atomic_compare_exchange_strong(&cj->consumed, &v, v | CONS_STEAL))
        return 0;
    PC_SHM_INTERLEAVE("keeping");
    const unsigned char *res = result_of(s, (int)(c % 2));
    const record_t *h = (const record_t *)res;
    int *members = NULL;
    if (s->grouped && pc_policy_in_groups(&env->policy, c, h->flags)) {
        members = malloc(sizeof(int) * (size_t)s->P); /* rare: once per round kept */
        if (!members) {
            atomic_store(&cj->consumed, v);
            return 0;
        }
    }
    int lead = members ? leader_of(s, c, h->flags, j, members) : s->local[0];
    free(members);
    const unsigned char *src = sum_of(s, lead, (int)(c % 2));
    unsigned char *owed = owed_of(s, j);
    int more = (v & CONS_OWED) != 0;
    if (more && env->mode == PCOLL_ACCUMULATE)
        pc_reduce_sum(owed, owed, src, env->count + PC_TRAILER, env->dtype);
    else
        memcpy(owed, src, env->bytes);
    int64_t active, contributions;
    pc_trailer_get(env, src, &active, &contributions);
    cj->owed_root = h->root;
    cj->owed_flags = h->flags | (more ? cj->owed_flags & PC_ROUND_FLUSH : 0);
    cj->owed_parked = (more ? cj->owed_parked : 0) + (uint64_t)bit_of(s, res, j);
    cj->owed_active_last = active;
    cj->owed_active_min = more && cj->owed_active_min < active ? cj->owed_active_min : active;
    cj->owed_active_total = (more ? cj->owed_active_total : 0) + active;
    cj->owed_contributions = (more ? cj->owed_contributions : 0) + contributions;
    cj->owed_contributions_last = contributions;
    atomic_store(&cj->consumed, (c + 1) | CONS_OWED);
    kick(s, j); /* if it is back, and found this under way, it looks again */
    return 1;
}

/* Round r is blocked on the ranks that have not copied round r - 2: keeps
 * it for those that are silent; 1 if none is behind now. */
static int go_without(shm_backend_t *s, uint64_t r)
{
    /* how long round r has been blocked, summed over the looks of every
     * rank here (silence.h: a pause of everyone counts a quarter) */
    int timed = look_shared(s, &s->nc->blocked_for, r);
    int clear = 1;
    for (int i = 0; i < s->nlocal; i++) {
        int j = s->local[i];
        uint64_t v = atomic_load(&ctl_of(s, j)->consumed);
        if (CONS_COUNT(v) >= r - 1) { /* copied: its delivery waits no longer once it is silent */
            if (v & CONS_DELIVERING) clear &= j != s->me && timed && PC_SHM_MAY_KEEP(j);
            continue;
        }
        /* this rank is alive: its poller copies the result (it was kicked) */
        clear &= j != s->me && ((v & CONS_OWED) || timed) && PC_SHM_MAY_KEEP(j) && keep_for(s, j, r - 2);
    }
    return clear;
}

/* Round r's result into the slot's buffer buf: its record, the ranks whose
 * results are kept, and the sum of the node's deposits (GROUP: each
 * group's sum, in its leader's segment); 0 if it stopped: a claimed sum
 * that another rank took over meanwhile (take_over_sum). */
static int write_result(shm_backend_t *s, uint64_t r, int slot, int buf, int claimed)
{
    const pc_backend_env_t *env = &s->base.env;
    unsigned char *res = s->result[slot][buf];
    if (claimed && s->spare && taken_over(s, r)) return 0;
    /* acquire every rank's state: each deposit was written under an ADDING
     * or TAKING bit that a release on the state cleared (the takes since are
     * read-modify-writes: the release sequence goes on) */
    for (int i = 0; i < s->nlocal; i++) (void)atomic_load(&ctl_of(s, s->local[i])->state);
    memcpy(res, s->record[slot], s->rec_bytes);
    if (s->owing) { /* the ranks whose results are kept: silent still */
        record_t *h = (record_t *)res;
        unsigned char *bits = res + sizeof(record_t) + env->bitmap_bytes;
        memset(bits, 0, env->bitmap_bytes);
        h->left_out = 0;
        for (int i = 0; i < s->nlocal; i++)
            if (atomic_load(&ctl_of(s, s->local[i])->consumed) & CONS_OWED) {
                pc_bit_set(bits, s->local[i]);
                h->left_out++;
            }
    }
    uint32_t flags = ((const record_t *)s->record[slot])->flags;
    if (s->grouped && pc_policy_in_groups(&env->policy, r, flags)) {
        /* one sum per group, kept by its smallest member (GROUP objects
         * use this backend with every rank on this node) */
        int *m = s->sum_members;
        for (int lead = 0; lead < s->P; lead++) {
            int n = pc_policy_members(&env->policy, r, flags, lead, m);
            if (m[0] == lead && !sum_deposits(s, sum_in(s, lead, slot, buf), m, n, r, claimed)) return 0;
        }
        return 1;
    } /* else (GROUP's synchronous rounds: in the node leader's group sum) */
    return sum_deposits(s, sum_in(s, s->local[0], slot, buf), s->local, s->nlocal, r, claimed);
}

/* Round r's result in buffer buf becomes the slot's and r is summed,
 * unless another summer's was first (a stopped summer's round summed
 * again: both are the same sum of the same deposits). */
static void publish_sum(shm_backend_t *s, uint64_t r, int slot, int buf)
{
    node_ctl_t *nc = s->nc;
    uint64_t cur = atomic_load(&nc->pub[slot]);
    do {
        if ((cur >> 1) >= r + 1) return;
    } while (!atomic_compare_exchange_weak(&nc->pub[slot], &cur, (r + 1) << 1 | (uint64_t)buf));
    PC_SHM_INTERLEAVE("summed");
    atomic_store(&nc->parts[slot], 0); /* for round r + 2 */
    atomic_store(&nc->summed, r + 1);
    if (s->nnodes > 1) {
        kick(s, s->local[0]); /* the node leader adds the node sums up: it must look, even when it is this rank */
        if (s->deputy >= 0 && atomic_load(&nc->deputy_on)) kick(s, s->deputy); /* ... or its deputy */
    } else
        publish_done(s, r, 0);
}

/* Round r's sum was claimed (into buffer buf) and has not come for
 * PCOLL_EXCLUDE_MS (summed over the looks of the ranks here: silence.h):
 * its summer is taken for stopped in the middle of it, and this rank sums
 * the round again into the slot's other buffer.  The stopped summer's
 * buffer stays tainted until it has finished writing it (it clears the
 * taint; its late publish finds the round published, and it reads no
 * deposit once it sees that: a summer stopped in the middle of reading one
 * may still read it while its rank reuses it, for a sum nobody reads).  One
 * take-over per round. */
static int take_over_sum(shm_backend_t *s, uint64_t r, int slot, int buf, int summer)
{
    node_ctl_t *nc = s->nc;
    if (!s->spare || atomic_load(&nc->summed) > r) return 0;
    int timed = look_shared(s, &nc->sum_stuck, r);
    int other = 1 - buf;
    uint64_t st = atomic_load(&nc->stolen);
    if (!timed || summer == s->me || !PC_SHM_MAY_KEEP(summer) || st >= r + 1 ||
        (atomic_load(&nc->taint[slot]) & (1u << other)) || !atomic_compare_exchange_strong(&nc->stolen, &st, r + 1))
        return 0;
    atomic_store(&nc->stealing, r + 1);
    atomic_fetch_or(&nc->taint[slot], 1u << buf);
    if ((atomic_load(&nc->pub[slot]) >> 1) >= r + 1) { /* its summer was only slow, and done */
        atomic_fetch_and(&nc->taint[slot], ~(1u << buf));
        atomic_store(&nc->stealing, 0);
        return 0;
    }
    pc_log(PCOLL_LOG_DEBUG, "partial ch%u: the sum of round %llu has not come for %u ms: summed again here",
           s->base.env.obj->channel, (unsigned long long)r, s->exclude_ms);
    PC_SHM_INTERLEAVE("sum taken over");
    write_result(s, r, slot, other, 0);
    atomic_store(&nc->stealing, 0); /* read: later rounds' parts may be taken */
    publish_sum(s, r, slot, other);
    return 1;
}

/* Sums round r if all this node's parts are in and its result slot is
 * free. */
static int try_sum(shm_backend_t *s, uint64_t r)
{
    node_ctl_t *nc = s->nc;
    int slot = (int)(r % 2);
    if (atomic_load(&nc->parts[slot]) < (unsigned)s->nlocal) return 0;
    if (r >= 2) { /* the slot holds round r - 2 until every rank has copied it */
        int clear = 1;
        for (int i = 0; i < s->nlocal; i++) {
            uint64_t v = atomic_load(&ctl_of(s, s->local[i])->consumed);
            clear &= CONS_COUNT(v) >= r - 1 && !(v & CONS_DELIVERING);
        }
        if (!clear) {
            /* the first to find round r blocked wakes those behind (once:
             * each then copies, helps, and the last of them sums) */
            uint64_t seen = atomic_load(&nc->blocked);
            if (seen <= r && atomic_compare_exchange_strong(&nc->blocked, &seen, r + 1)) {
                for (int i = 0; i < s->nlocal; i++)
                    if (CONS_COUNT(atomic_load(&ctl_of(s, s->local[i])->consumed)) < r - 1) kick(s, s->local[i]);
            }
            if (!s->owing || !go_without(s, r)) return 0;
        }
    }
    uint64_t v = atomic_load(&nc->sum_claimed);
    if (CLAIM_ROUNDS(v) == r + 1) return take_over_sum(s, r, slot, CLAIM_BUF(v), CLAIM_RANK(v));
    unsigned taint = atomic_load(&nc->taint[slot]);
    int buf = !(taint & 1) ? 0 : s->spare && !(taint & 2) ? 1 : -1;
    if (CLAIM_ROUNDS(v) != r || buf < 0 || !atomic_compare_exchange_strong(&nc->sum_claimed, &v, CLAIM(r + 1, s->me, buf)))
        return 0;
    PC_SHM_INTERLEAVE("sum claimed");
    if (write_result(s, r, slot, buf, 1)) publish_sum(s, r, slot, buf);
    if (s->spare) atomic_fetch_and(&nc->taint[slot], ~(1u << buf)); /* taken over meanwhile: done with it */
    return 1;
}

/* Takes the parts and sums what can be taken and summed now; returns how
 * many things it did. */
static int help(shm_backend_t *s)
{
    int did = 0;
    for (;;) {
        uint64_t r = atomic_load(&s->nc->done);
        if (atomic_load(&s->nc->activated) <= r) return did;
        if (atomic_load(&s->nc->parts[r % 2]) < (unsigned)s->nlocal) {
            for (int i = 0; i < s->nlocal; i++) did += try_take(s, s->local[i], r, AROUND_NOT);
            /* a part held by an add (or a take) for PCOLL_EXCLUDE_MS, or
             * by a rank known silent (its results are kept): the rank is
             * taken for stopped in the middle of its add (at once for the
             * rounds after the first: each would wait the limit again) */
            if (s->owing && atomic_load(&s->nc->parts[r % 2]) < (unsigned)s->nlocal) {
                int timed = look_shared(s, &s->nc->part_stuck, r);
                for (int i = 0; i < s->nlocal; i++) {
                    int j = s->local[i];
                    if (j != s->me && PC_SHM_MAY_KEEP(j) &&
                        (timed || (atomic_load(&ctl_of(s, j)->consumed) & CONS_OWED)))
                        did += try_take(s, j, r, timed ? AROUND_TIMED : AROUND_KNOWN);
                }
            }
        }
        if (!try_sum(s, r)) return did;
        did++;
    }
}

/* ---- the token holder ---- */

/* Round c's result into buf, and what env.completed says of it; 0 if the
 * round was kept for this rank before it copied (it was stopped at the
 * start of its copy: claimed, its claim now; the round comes with the
 * kept ones). */
static int consume(shm_backend_t *s, uint64_t c, uint64_t claimed, void *buf, pc_round_done_t *d)
{
    /* Round c was summed before it was done.  Across nodes `done` is
     * published by the node leader, after the exchange: when this rank's
     * application thread summed round c, its release of `summed` comes
     * before the copy below through another process, which ThreadSanitizer
     * cannot follow (it reported a race here once, in cluster_tsan_partial_2x2);
     * acquiring `summed` here makes the order visible to it, and costs one
     * load a round. */
    (void)atomic_load(&s->nc->summed);
    PC_SHM_INTERLEAVE("copying");
    if (s->owing && atomic_load(&ctl_of(s, s->me)->consumed) != claimed) return 0;
    const unsigned char *res = result_of(s, (int)(c % 2));
    const record_t *h = (const record_t *)res;
    uint64_t holds = h->round;
    memcpy(buf, sum_of(s, leader_of(s, c, h->flags, s->me, s->own_members), (int)(c % 2)), s->base.env.bytes);
    /* (what it read is round c's unless it was kept meanwhile) */
    if (holds != c && (!s->owing || atomic_load(&ctl_of(s, s->me)->consumed) == claimed))
        pc_log(PCOLL_LOG_ERROR, "partial: the result of round %llu holds round %llu (bug)", (unsigned long long)c,
               (unsigned long long)holds);
    /* the slot may be summed into again while the round is delivered here
     * (this rank silent meanwhile: poll_rounds), so nothing points into it */
    const unsigned char *bits = left_out_bits(s, res);
    if (bits) memcpy(s->left_out_copy, bits, s->base.env.bitmap_bytes);
    *d = (pc_round_done_t){.first = c, .round = c, .root = h->root, .flags = h->flags, .parked = bit_of(s, res, s->me),
                           .left_out = bits ? s->left_out_copy : NULL};
    return 1;
}

/* Claims the next round's result for this rank to copy (0), or finds that
 * rounds were kept for it while it was silent: then the rounds up to
 * *upto, whose sum (REPLACE: the last) the owed buffer holds (1); -1 while
 * another rank keeps a result for it (it kicks this one when done: a
 * keeper stopped there holds this rank up, as any stopped step does).
 * *claim: consumed as claimed (a claim of a slot's result may be
 * overtaken by a keeper: keep_for). */
static int claim_next(shm_backend_t *s, uint64_t *upto, uint64_t *claim)
{
    rank_ctl_t *c = ctl_of(s, s->me);
    uint64_t v = atomic_load(&c->consumed);
    for (;;) {
        if (v & CONS_STEAL) return -1;
        *claim = CONS_COUNT(v) | CONS_BUSY | (v & CONS_OWED ? CONS_CATCHING : 0);
        if (atomic_compare_exchange_weak(&c->consumed, &v, *claim)) {
            *upto = CONS_COUNT(v);
            return (v & CONS_OWED) != 0;
        }
    }
}

static int shm_activate(pc_backend_t *b, uint64_t r, int root, uint32_t flags, const unsigned char *counted,
                        int from_link);
static int shm_silent(pc_backend_t *b, int rank, int probe);

/* Across nodes with a deputy (nodesums.h): whether round d's node sums go
 * node to node.  They do from round direct - 1 on, until back_at if that
 * was decided since (else back_at ended an earlier stretch). */
static int direct_for(const shm_backend_t *s, uint64_t d)
{
    if (s->base.env.node_deputy == 2) return 1;
    uint64_t from = atomic_load(&s->nc->direct), back = atomic_load(&s->nc->back_at);
    if (from-- == 0) return 0;
    return back > from ? d >= from && d < back : d >= from || d < back;
}

/* From round r (at least the running one) on, the node sums go node to
 * node; the leader's allreduce is given up (lead). */
static void enter_direct(shm_backend_t *s, uint64_t r, const char *why, int rank)
{
    uint64_t d = atomic_load(&s->nc->done), was = atomic_load(&s->nc->direct);
    if (r < d) r = d;
    do
        if (direct_for(s, r)) return;
    while (!atomic_compare_exchange_weak(&s->nc->direct, &was, r + 1));
    pc_log(PCOLL_LOG_INFO, "partial ch%u: the node sums go node to node from round %llu on (%s %d)",
           s->base.env.obj->channel, (unsigned long long)r, why, rank);
    kick(s, s->local[0]);
}

/* ... and back to the leaders' allreduce from round b on (nodesums.h) */
static void go_back(shm_backend_t *s, uint64_t b)
{
    uint64_t was = atomic_load(&s->nc->back_at);
    do
        if (was >= b) return;
    while (!atomic_compare_exchange_weak(&s->nc->back_at, &was, b));
    pc_log(PCOLL_LOG_INFO, "partial ch%u: the node sums go back to the leaders' allreduce from round %llu on",
           s->base.env.obj->channel, (unsigned long long)b);
    kick(s, s->local[0]);
}

/* Node 0's leader has finished round d node to node: after BACK_AFTER
 * rounds in a row (twice as many after each time back, up to 64 times)
 * whose every node sum came from a leader, the node sums go back to the
 * leaders' allreduce from round d + 2 on; its sums of d + 1 say so. */
#define BACK_AFTER 2
static void decide_back(shm_backend_t *s, uint64_t d)
{
    if (s->base.env.node_deputy != 1 || s->me != s->leaders[0] || atomic_load(&s->nc->back_at) > d) return;
    if (!pc_nodesums_by_leaders(s->ns, d)) {
        s->healthy = 0;
        return;
    }
    s->healthy = s->healthy_next == d ? s->healthy + 1 : 1;
    s->healthy_next = d + 1;
    if (s->healthy < BACK_AFTER << (s->backs < 6 ? s->backs : 6)) return;
    s->healthy = 0;
    s->backs++;
    go_back(s, d + 2);
}

/* The node leader gives its allreduce up from round d on (a run that
 * writes exch_out takes it along; a slot's buffer stays tainted until the
 * run has finished: released). */
static void give_up(shm_backend_t *s, uint64_t d)
{
    s->gave_up = 1;
    if (pc_internode_give_up(s->net, d, s->exch_to, s->exch_buf < 0) && s->exch_buf < 0) s->exch_out = NULL;
}

/* internode.h: a run given up has finished: the slot's buffer it wrote may
 * be summed into again */
static void released(void *arg, void *out)
{
    shm_backend_t *s = arg;
    for (int slot = 0; slot < 2; slot++)
        for (int b = 0; b < 2; b++)
            if (s->result[slot][b] && sum_in(s, s->me, slot, b) == out) {
                atomic_fetch_and(&s->nc->taint[slot], ~(1u << b));
                pc_log(PCOLL_LOG_DEBUG, "partial ch%u: the leaders' run given up has finished: result buffer %d of "
                       "slot %d is free again", s->base.env.obj->channel, b, slot);
            }
}

/* ... and goes back to it from round d on (exch_out anew if the run given
 * up took it). */
static int resume(shm_backend_t *s, uint64_t d)
{
    if (!s->exch_out) s->exch_out = malloc(s->base.env.bytes);
    if (!s->exch_out || pc_internode_resume(s->net, d) != PCOLL_SUCCESS) {
        s->base.env.failed(s->base.env.owner, PCOLL_ERR_NOMEM, "no memory to go back to the exchange between nodes");
        return 0;
    }
    s->gave_up = 0;
    return 1;
}

/* The node leader's part when the ranks span nodes: pass the rounds this
 * node activated on to the other nodes, then add the node sums of the
 * round in progress up with theirs (one round at a time, in order).  A
 * round's record is still in place when it is passed on: round r + 2 is
 * activated only after r was exchanged, which comes after this. */
static int lead(shm_backend_t *s)
{
    int did = 0;
    uint64_t a = atomic_load(&s->nc->activated);
    for (; s->forwarded < a; s->forwarded++, did++) {
        const unsigned char *rec = s->record[s->forwarded % 2];
        const record_t *h = (const record_t *)rec;
        if (pc_internode_initiated(s->net, s->forwarded, h->root, h->flags, record_counted(rec)) < 0)
            return did;
    }
    uint64_t d = atomic_load(&s->nc->done);
    int slot = (int)(d % 2);
    if (s->ns && direct_for(s, d)) { /* the node sums go node to node (finish_across) */
        if (!s->gave_up) give_up(s, d);
        return did;
    }
    /* a run of a round done here without it (node to node, while this
     * leader was stopped) waits for leaders that gave that round up: it
     * goes too (not seen: a leader gives up before it finishes a round
     * node to node, which going back needs) */
    if (s->ns && pc_internode_running(s->net) && pc_internode_running_round(s->net) < d) give_up(s, d);
    if (s->gave_up && !resume(s, d)) return did;
    if (atomic_load(&s->nc->summed) <= d) return did;
    if (pc_internode_running(s->net)) {
        /* a waiting rank's nudge: is a leader it waits for silent?  Its
         * deputy may not know: the rounds it did not initiate reach its
         * node through it (then the node sums go node to node, with the
         * rounds' records) */
        if (s->ns && atomic_exchange(&s->probe_due, 0)) {
            int k = pc_internode_waiting_on(s->net, s->own_members, s->P);
            for (int i = 0; i < k; i++)
                if (shm_silent(&s->base, s->own_members[i], 1)) {
                    enter_direct(s, d, "the leaders' exchange waits for silent rank", s->own_members[i]);
                    break;
                }
        }
        return did;
    }
    if (s->ns) { /* the round is this leader's to finish, unless its deputy took it */
        uint64_t v = atomic_load(&s->nc->finisher[slot]);
        if (FINISHER_ROUNDS(v) == d + 1 ? FINISHER_RANK(v) != s->me
                                         : !atomic_compare_exchange_strong(&s->nc->finisher[slot], &v,
                                                                           FINISHER(d + 1, s->me, 0)))
            return did;
        if (atomic_load(&s->nc->deputy_on)) atomic_store(&s->nc->deputy_on, 0);
    }
    /* with a deputy, the total goes into the slot's other result buffer
     * (the node sum stays for the deputy; no copy), out of the summers'
     * way meanwhile (tainted), or if a stopped summer may still write
     * that, into the leader's own (copied in) */
    unsigned char *sum = sum_of(s, s->me, slot), *out = sum;
    if (s->ns) {
        int other = 1 - (int)(atomic_load(&s->nc->pub[slot]) & 1);
        unsigned tainted = atomic_fetch_or(&s->nc->taint[slot], 1u << other);
        s->exch_buf = tainted & (1u << other) ? -1 : other;
        out = s->exch_buf < 0 ? s->exch_out : sum_in(s, s->me, slot, other);
    }
    s->exch_to = out;
    if (pc_internode_exchange(s->net, d, sum, out) == 1) did++;
    return did;
}


/* A candidate's part when the node sums travel directly (nodesums.h):
 * activates the rounds whose record came with another node's sum, then
 * finishes the node's running round if the rule gives it this rank
 * (pc_policy_finisher_step): claim, send the node sum, and once every
 * other node's is here, write the total and publish the round done. */
static int finish_across(shm_backend_t *s)
{
    node_ctl_t *nc = s->nc;
    int did = 0, root;
    uint32_t flags;
    const unsigned char *counted;
    for (;;) {
        uint64_t a = atomic_load(&nc->activated);
        if (atomic_load(&nc->done) + 1 < a || !pc_nodesums_record(s->ns, a, &root, &flags, &counted) ||
            shm_activate(&s->base, a, root, flags, counted, 0) != 1)
            break;
        did++;
    }
    uint64_t d = atomic_load(&nc->done);
    pc_nodesums_forget(s->ns, d);
    int direct = direct_for(s, d);
    /* by the leaders' allreduce, the leader's (lead); the deputy looks
     * whether the leader is silent */
    if (atomic_load(&nc->summed) <= d || (!direct && s->role == 0)) return did;
    int slot = (int)(d % 2);
    uint64_t v = atomic_load(&nc->finisher[slot]);
    int holder = -1, probe = atomic_exchange(&s->probe_due, 0);
    if (FINISHER_ROUNDS(v) == d + 1) holder = FINISHER_RANK(v) == s->local[0] ? 0 : 1;
    int leader_silent = s->role == 1 && shm_silent(&s->base, s->local[0], probe);
    /* a holder silent, or that has not finished for the limit (it lacks a
     * sum that was not sent to it: nodesums.c's backlog) */
    int holder_silent = holder >= 0 && holder != s->role &&
                        (shm_silent(&s->base, FINISHER_RANK(v), probe) ||
                         (direct && look_shared(s, &nc->finish_stuck, d)));
    uint64_t mine = FINISHER(d + 1, s->me, 0);
    switch (pc_policy_finisher_step(s->role, holder, FINISHER_WRITING(v), leader_silent, holder_silent)) {
    case PC_FINISH_CLAIM:
    case PC_FINISH_TAKE_OVER:
        if (!atomic_compare_exchange_strong(&nc->finisher[slot], &v, mine)) return did;
        if (!direct) enter_direct(s, d, "its leader is silent: rank", s->local[0]);
        if (holder >= 0) {
            pc_log(PCOLL_LOG_DEBUG, "partial ch%u: rank %d, silent, finished round %llu here: taken over",
                   s->base.env.obj->channel, FINISHER_RANK(v), (unsigned long long)d);
            /* its own limit before it is taken over in turn; and its part
             * (again, if it held the round before): the other nodes answer
             * with what it lacks (nodesums.h) */
            atomic_store(&nc->finish_stuck, 0);
            s->sent_for = s->direct_after = 0;
        }
        /* the deputy is kicked for each round while it stands in */
        if (atomic_load(&nc->deputy_on) != (uint64_t)s->role) atomic_store(&nc->deputy_on, (uint64_t)s->role);
        break;
    case PC_FINISH_GO_ON:
        break;
    default:
        return did;
    }
    if (s->sent_for != d + 1) { /* once per round, whoever held it before */
        const record_t *h = (const record_t *)s->record[slot];
        if (pc_nodesums_send(s->ns, d, s->direct_after != d + 1, h->root, h->flags, record_counted(s->record[slot]),
                             sum_of(s, s->me, slot), atomic_load(&nc->back_at)) != PCOLL_SUCCESS)
            return did;
        s->sent_for = d + 1;
        did++;
    }
    if (pc_nodesums_reduce(s->ns, d, sum_of(s, s->me, slot), atomic_load(&nc->back_at)) != 1 ||
        !pc_nodesums_ready(s->ns, d))
        return did;
    /* writing: nobody takes the round over from here (a short step) */
    if (!atomic_compare_exchange_strong(&nc->finisher[slot], &mine, mine | 1)) return did;
    PC_SHM_INTERLEAVE("writing the total");
    pc_nodesums_add(s->ns, d, sum_of(s, s->me, slot));
    s->direct_after = d + 2;
    decide_back(s, d);
    publish_done(s, d, 1);
    return did + 1;
}

/* internode.h: round r's exchange between the nodes is over (the token
 * holder, from the engine): complete it here, this rank included -- unless
 * its deputy took the round over, or the node sums go node to node now
 * (the nodes that had the total answer the others' sums with it) */
static void exchanged(void *arg, uint64_t r)
{
    shm_backend_t *s = arg;
    node_ctl_t *nc = s->nc;
    int slot = (int)(r % 2);
    if (s->ns) {
        uint64_t mine = FINISHER(r + 1, s->me, 0);
        int mine_still = !direct_for(s, r) && atomic_compare_exchange_strong(&nc->finisher[slot], &mine, mine | 1);
        if (mine_still && s->exch_buf >= 0) { /* the other buffer becomes the slot's: record, then total */
            int b = 1 - s->exch_buf;
            memcpy(s->result[slot][s->exch_buf], s->result[slot][b], s->rec_bytes);
            atomic_store(&nc->pub[slot], (r + 1) << 1 | (uint64_t)s->exch_buf);
        } else if (mine_still) {
            memcpy(sum_of(s, s->me, slot), s->exch_out, s->base.env.bytes);
        }
        if (s->exch_buf >= 0) atomic_fetch_and(&nc->taint[slot], ~(1u << s->exch_buf)); /* written: done with it */
        if (!mine_still) return; /* its deputy took it over, or the node sums go node to node now */
        atomic_store(&nc->allreduced[slot], r + 1);
    }
    publish_done(s, r, 1);
}

/* The poller: completes here the rounds done in shared memory, in order,
 * then helps the running one along (and at a node leader, its exchange). */
static int poll_rounds(shm_backend_t *s)
{
    const pc_backend_env_t *env = &s->base.env;
    int did = 0, helped;
    if (s->owing) { /* alive: answer whoever asked */
        rank_ctl_t *mine = ctl_of(s, s->me);
        uint64_t asked = atomic_load(&mine->ping);
        if (asked != atomic_load(&mine->pong)) atomic_store(&mine->pong, asked);
    }
    do {
        while (!s->closed && atomic_load(&s->nc->done) > s->completed) {
            void *buf = env->buffer(env->owner);
            if (!buf) {
                env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory for the result of a round");
                return did;
            }
            pc_round_done_t d;
            uint64_t upto, claim = 0, c = s->completed;
            int kept = s->owing ? claim_next(s, &upto, &claim) : 0;
            if (kept < 0) { /* another rank is keeping a result for this one: it kicks us */
                env->release(env->owner, buf);
                break;
            }
            if (kept) { /* back from silence: what was kept, at once */
                const rank_ctl_t *mine = ctl_of(s, s->me);
                memcpy(buf, owed_of(s, s->me), env->bytes);
                d = (pc_round_done_t){.first = c, .round = upto - 1, .root = mine->owed_root, .flags = mine->owed_flags,
                                      .parked = (int)mine->owed_parked, .catch_up = 1,
                                      .active_last = mine->owed_active_last, .active_min = mine->owed_active_min,
                                      .active_total = mine->owed_active_total,
                                      .contributions = mine->owed_contributions,
                                      .contributions_last = mine->owed_contributions_last};
            } else if (!consume(s, c, claim, buf, &d)) {
                env->release(env->owner, buf); /* kept meanwhile: it comes with the kept rounds */
                continue;
            }
            rank_ctl_t *mine = ctl_of(s, s->me);
            /* copied: a rank stopped while it delivers (its application
             * woken by the delivery raises SIGSTOP just then, as a
             * debugger's or a scheduler's stop lands at a system call's
             * end) no longer holds the slot from the others once it is
             * silent (go_without); a live one still does (below).  A copy
             * the round was kept for meanwhile (this rank stopped in the
             * middle of it) is void. */
            if (s->owing && !atomic_compare_exchange_strong(&mine->consumed, &claim,
                                                            (d.round + 1) | CONS_DELIVERING)) {
                env->release(env->owner, buf);
                continue;
            }
            s->completed = d.round + 1;
            PC_SHM_INTERLEAVE("copied");
            env->completed(env->owner, &d, buf); /* may close us (the last round) */
            PC_SHM_INTERLEAVE("completed");
            /* the slot may be summed into again: after the round's observer
             * and delivery, so that whatever another rank sees of a later
             * round comes after them (a rank that kept a later round for
             * this one meanwhile cleared the flag with its own count) */
            if (s->owing) atomic_fetch_and(&mine->consumed, ~CONS_DELIVERING);
            else atomic_store(&mine->consumed, d.round + 1);
            did++;
        }
        /* returns at once unless a round runs; a round it summed is
         * completed here at once (nobody kicks the rank that summed) */
        helped = s->closed ? 0 : help(s);
        if (s->net && !s->closed) helped += lead(s);
        if (s->ns && !s->closed) helped += finish_across(s);
        did += helped;
    } while (helped);
    return did;
}

static void shm_open(pc_backend_t *b)
{
    shm_backend_t *s = S(b);
    s->sig.listen(s->sig.arg, 1);
    kick(s, s->me); /* rounds may have run before this rank opened */
}

/* from_link >= 0: the activation came from another node's leader (through
 * internode.h, which passes it on); else a rank of this node decided it,
 * and the node leader passes it on. */
static int shm_activate(pc_backend_t *b, uint64_t r, int root, uint32_t flags, const unsigned char *counted,
                        int from_link)
{
    shm_backend_t *s = S(b);
    const pc_backend_env_t *env = &b->env;
    node_ctl_t *nc = s->nc;
    uint64_t a = atomic_load(&nc->activated);
    int rc = 1;
    if (s->closed) return 0;
    if (r < a) {
        rc = 0;
    } else if (r > a || atomic_load(&nc->done) + 1 < r) {
        pc_log(PCOLL_LOG_ERROR, "partial: activation of round %llu with %llu activated and %llu done (bug)",
               (unsigned long long)r, (unsigned long long)a, (unsigned long long)atomic_load(&nc->done));
        return -1;
    } else {
        int slot = (int)(r % 2);
        uint64_t own = atomic_load(&nc->owner[slot]);
        /* simultaneous initiators: the first to claim the record activates */
        if (own > r || !atomic_compare_exchange_strong(&nc->owner[slot], &own, r + 1)) {
            rc = 0;
        } else {
            PC_SHM_INTERLEAVE("record claimed");
            record_t *h = (record_t *)s->record[slot];
            h->round = r;
            h->root = root;
            h->flags = flags;
            h->has_counted = counted != NULL;
            if (counted) memcpy(h + 1, counted, env->bitmap_bytes);
            atomic_store(&nc->activated, r + 1); /* publishes the record */
        }
    }
    PC_DEBUG("partial ch%u: activate round %llu root %d flags %u in shared memory: %d", env->obj->channel,
             (unsigned long long)r, root, flags, rc);
    if (rc == 1) env->activated(env->owner, r, root, flags);
    if (rc == 1 && s->nnodes > 1 && s->me != s->local[0]) kick(s, s->local[0]); /* to pass it on */
    if (from_link < 0)
        poll_rounds(s); /* take, sum, and complete what it can */
    else
        kick(s, s->me); /* the same once internode.h is done with the message */
    return rc;
}

static int activate_hook(void *arg, uint64_t r, int root, uint32_t flags, const unsigned char *counted, int h)
{
    shm_backend_t *s = arg;
    return shm_activate(&s->base, r, root, flags, counted, h);
}

static void shm_kick(pc_backend_t *b) { poll_rounds(S(b)); }

/* A rank of another node: asked by a PING message, which its holder
 * answers (shm_message); as shm_silent. */
static int silent_elsewhere(shm_backend_t *s, int rank, int probe)
{
    if (!probe) return pc_ping_silent(s->ping_wait[rank], s->pinged[rank], s->ponged[rank], s->exclude_ms);
    if (pc_ping_due(s->pinged[rank], s->ponged[rank])) {
        s->pinged[rank] = ++s->ping_seq;
        pc_obj_msg_t m = pc_obj_msg(PC_MSG_PING, s->pinged[rank], s->me);
        s->base.env.send(s->base.env.owner, rank, &m, sizeof m);
    }
    return pc_ping_look(&s->ping_wait[rank], s->pinged[rank], clock_ms(), s->exclude_ms);
}

/* The token holder (backend.h): whether rank's progress engine is silent:
 * results are being kept for it, or it has left a ping unanswered for
 * PCOLL_EXCLUDE_MS (probe: asks it again once it answered, and looks;
 * else the verdict of the last look, while that ping is unanswered).
 * Ranks of other nodes are asked by messages (silent_elsewhere). */
static int shm_silent(pc_backend_t *b, int rank, int probe)
{
    shm_backend_t *s = S(b);
    int here = 0;
    for (int i = 0; i < s->nlocal; i++) here |= s->local[i] == rank;
    if (!s->owing || rank == s->me || rank < 0 || rank >= s->P) return 0;
    if (!here) return silent_elsewhere(s, rank, probe);
    rank_ctl_t *c = ctl_of(s, rank);
    if (atomic_load(&c->consumed) & CONS_OWED) return 1;
    if (!probe) return pc_ping_silent(s->ping_wait[rank], s->pinged[rank], atomic_load(&c->pong), s->exclude_ms);
    if (pc_ping_due(s->pinged[rank], atomic_load(&c->pong))) {
        s->pinged[rank] = atomic_fetch_add(&c->ping, 1) + 1;
        kick(s, rank);
    }
    return pc_ping_look(&s->ping_wait[rank], s->pinged[rank], clock_ms(), s->exclude_ms);
}

/* A waiting thread's look (backend.h): a round blocked on a silent rank
 * goes on without it from here; this rank's holder completes it, and any
 * round done that it has not copied: the rank that published it kicks the
 * ranks one by one, and a SIGSTOP lands at the end of a system call, so it
 * may stop between two kicks (this rank's wake-up lost until it goes on). */
static void shm_nudge(pc_backend_t *b)
{
    shm_backend_t *s = S(b);
    uint64_t copied = CONS_COUNT(atomic_load(&ctl_of(s, s->me)->consumed));
    int probe = 0;
    if (s->ns && atomic_load(&s->nc->summed) > atomic_load(&s->nc->done)) { /* is the finisher silent? */
        atomic_store(&s->probe_due, 1);
        probe = 1;
    }
    if (help(s) || atomic_load(&s->nc->done) > copied || probe) s->sig.mark(s->sig.arg);
}

static void shm_message(pc_backend_t *b, int src, const void *msg, size_t bytes)
{
    shm_backend_t *s = S(b);
    const pc_obj_msg_t *h = msg;
    uint32_t type = h->type;
    if (type == PC_MSG_PING) { /* from a rank of another node (silent_elsewhere) */
        pc_obj_msg_t m = pc_obj_msg(PC_MSG_PONG, h->round, s->me);
        b->env.send(b->env.owner, src, &m, sizeof m);
    } else if (type == PC_MSG_PONG) {
        if (src >= 0 && src < s->P && h->round > s->ponged[src]) s->ponged[src] = h->round;
    } else if (s->ns && (type == PC_MSG_NODESUM || type == PC_MSG_XFIN))
        pc_nodesums_message(s->ns, src, msg, bytes);
    else if (s->net)
        pc_internode_message(s->net, src, msg, bytes, atomic_load(&s->nc->done));
    else
        pc_log(PCOLL_LOG_ERROR, "partial: a data-phase message from rank %d at a rank that leads no node (dropped)",
               src);
}

/* internode.h, nodesums.h: one of them has no traffic left */
static void part_drained(void *arg)
{
    shm_backend_t *s = arg;
    if (--s->to_drain == 0) s->base.env.drained(s->base.env.owner);
}

static void shm_close(pc_backend_t *b)
{
    shm_backend_t *s = S(b);
    s->closed = 1;
    s->sig.listen(s->sig.arg, 0);
    /* nothing of this object travels in messages here but arrivals at the
     * leader, which end with FREE (QUORUM's, sent to every rank while the
     * leader is silent, may come later: the object's service drops them
     * once it is gone, and the counter ignores them before), and at a node
     * leader the other leaders' activations, which end with their FIN, and
     * at a candidate the other nodes' sums, which end with their XFIN */
    s->to_drain = (s->net != NULL) + (s->ns != NULL);
    if (!s->to_drain) {
        b->env.drained(b->env.owner);
        return;
    }
    if (s->net) pc_internode_close(s->net);
    if (s->ns && pc_nodesums_close(s->ns)) part_drained(s);
}

static void shm_stop(pc_backend_t *b)
{
    shm_backend_t *s = S(b);
    if (s->closed) return;
    s->closed = 1;
    s->sig.listen(s->sig.arg, 0);
}

static void shm_describe(pc_backend_t *b, uint64_t r, pc_stall_probe_t *p)
{
    shm_backend_t *s = S(b);
    if (atomic_load(&s->nc->activated) <= r || atomic_load(&s->nc->done) > r) return;
    if (atomic_load(&s->nc->summed) > r) { /* this node's part is summed: the exchange between nodes waits */
        if (s->ns && direct_for(s, r))
            pc_nodesums_describe(s->ns, r, p);
        else if (s->net)
            pc_internode_describe(s->net, r, p);
        else
            pc_probe_fallback(p, s->local[0],
                              "it leads this node and has not finished the round's exchange with the other nodes");
        return;
    }
    for (int i = 0; i < s->nlocal; i++) {
        int j = s->local[i];
        uint64_t st = atomic_load(&ctl_of(s, j)->state);
        if ((st >> ST_SHIFT) == r && (st & ST_ADDING))
            pc_probe_fallback(p, j, "it is adding its contribution to the round (its process may be stopped)");
        else if (r >= 2 && CONS_COUNT(atomic_load(&ctl_of(s, j)->consumed)) < r - 1)
            pc_probe_fallback(p, j, "it has not copied an earlier round's result (its process may be stopped)");
    }
}

static int shm_gave(pc_backend_t *b, uint64_t r)
{
    shm_backend_t *s = S(b);
    return (atomic_load(&ctl_of(s, s->me)->state) >> ST_SHIFT) > r || atomic_load(&s->nc->done) > r;
}

/* frees what create made, the node-shared memory aside */
static void release(shm_backend_t *s)
{
    if (!s) return;
    pc_internode_destroy(s->net);
    pc_nodesums_destroy(s->ns);
    free(s->exch_out);
    free(s->sum_members);
    free(s->own_members);
    free(s->left_out_copy);
    free(s->pinged);
    free(s->ping_wait);
    free(s->ponged);
    free(s->local);
    free(s->leaders);
    free(s);
}

static void shm_destroy(pc_backend_t *b)
{
    shm_backend_t *s = S(b);
    if (s->mem.seg) pc_nodemem_destroy(&s->mem);
    if (s->key >= 0) pc_engine_key_free(b->env.engine, s->key);
    release(s);
}

/* Data phases are named after where the data moves: inside one node, or
 * inside each node and between their leaders. */
#define SHM_OPS(label)                                                                                                 \
    {                                                                                                                  \
        .name = label, .contribute = shm_contribute, .waiting = shm_waiting, .want = shm_want, .done = shm_done,       \
        .activated = shm_activated, .open = shm_open, .activate = shm_activate, .kick = shm_kick,                      \
        .message = shm_message, .close = shm_close, .stop = shm_stop, .describe = shm_describe, .gave = shm_gave,      \
        .destroy = shm_destroy, .nudge = shm_nudge, .silent = shm_silent,                                              \
    }
static const pc_backend_ops_t shm_ops = SHM_OPS("shared-memory");
static const pc_backend_ops_t hier_ops = SHM_OPS("hierarchical");

/* This node's ranks and every node's leader (its smallest rank) from the
 * context's node map, the same at every rank; the most ranks any node has. */
static int layout(shm_backend_t *s, const pc_nodes_t *nodes)
{
    int most = 0, mine = nodes->node_of[s->me];
    s->nlocal = pc_nodes_size(nodes, mine);
    for (int i = 0; i < s->nlocal; i++) s->local[i] = pc_nodes_rank(nodes, mine, i);
    s->nnodes = nodes->count;
    for (int n = 0; n < nodes->count; n++) {
        s->leaders[n] = pc_nodes_leader(nodes, n);
        if (pc_nodes_size(nodes, n) > most) most = pc_nodes_size(nodes, n);
    }
    return most;
}

/* GROUP objects whose groups are smaller than P: a sum per group, kept by
 * the group's leader */
static int is_grouped(const pc_backend_env_t *env)
{
    return env->policy.kind == PCOLL_PARTIAL_GROUP && env->policy.group_size < env->P;
}

/* results also list the ranks left out when rounds may go without one */
static size_t record_bytes(const pc_backend_env_t *env)
{
    return ROUND_UP(sizeof(record_t) + (env->exclude_ns ? 2 : 1) * env->bitmap_bytes);
}

/* Whether the node leader's segment holds a second result buffer per slot
 * (try_sum: a stopped summer's round summed again), and a GROUP object's
 * ranks a second pair of group sums: when rounds go on without a silent
 * rank.  Across nodes the node leader exchanges the node sum in place, in
 * the buffer published. */
static int has_spare(const pc_backend_env_t *env) { return env->exclude_ns > 0; }

size_t pc_backend_shm_segment_bytes(const pc_backend_env_t *env, int leads)
{
    int grouped = is_grouped(env);
    size_t stride = ROUND_UP(env->bytes), rec_bytes = record_bytes(env);
    /* the node leader's segment also holds the rounds' state, records and
     * results (zeroed: nothing activated); a GROUP object's ranks hold the
     * sums of the groups they lead; every rank an owed buffer when rounds
     * may go on without it */
    size_t sums = grouped ? 2 * stride * (has_spare(env) ? 2 : 1) : 0, owed = env->exclude_ns ? stride : 0;
    size_t results = 2 * (rec_bytes + (grouped ? 0 : stride)) * (has_spare(env) ? 2 : 1);
    return sizeof(rank_ctl_t) + 2 * stride + sums + owed + (leads ? sizeof(node_ctl_t) + 2 * rec_bytes + results : 0);
}

/* s (its node layout made) over the segments seg[rank] */
static void place(shm_backend_t *s, const pc_backend_env_t *env, void **seg, const pc_shm_signals_t *sig)
{
    s->base.ops = s->nnodes > 1 ? &hier_ops : &shm_ops;
    s->base.env = *env;
    s->seg = seg;
    s->sig = *sig;
    s->data_bytes = env->count * env->esize;
    s->stride = ROUND_UP(env->bytes);
    s->rec_bytes = record_bytes(env);
    s->grouped = is_grouped(env);
    s->owing = env->exclude_ns > 0;
    s->exclude_ms = (uint32_t)(env->exclude_ns / 1000000u);
    /* after the pending buffers, the group sums, the owed buffer and the
     * spare group sums */
    s->nc = (node_ctl_t *)pending_of(s, s->local[0], (s->grouped ? 4 + 2 * has_spare(env) : 2) + s->owing);
    s->record[0] = (unsigned char *)(s->nc + 1);
    s->record[1] = s->record[0] + s->rec_bytes;
    s->spare = has_spare(env);
    size_t one = s->rec_bytes + (s->grouped ? 0 : s->stride);
    s->result[0][0] = s->record[1] + s->rec_bytes;
    s->result[1][0] = s->result[0][0] + one;
    s->result[0][1] = s->spare ? s->result[1][0] + one : s->result[0][0];
    s->result[1][1] = s->spare ? s->result[0][1] + one : s->result[1][0];
}

static shm_backend_t *new_backend(const pc_backend_env_t *env)
{
    shm_backend_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->P = env->P;
    s->me = env->me;
    s->key = -1;
    s->role = -1;
    s->deputy = -1;
    s->sum_members = malloc(sizeof(int) * (size_t)env->P);
    s->own_members = malloc(sizeof(int) * (size_t)env->P);
    s->local = malloc(sizeof(int) * (size_t)env->P);
    s->leaders = malloc(sizeof(int) * (size_t)env->P);
    s->pinged = calloc((size_t)env->P, sizeof(uint64_t));
    s->ping_wait = calloc((size_t)env->P, sizeof(uint64_t));
    s->ponged = calloc((size_t)env->P, sizeof(uint64_t));
    s->left_out_copy = malloc(env->bitmap_bytes);
    if (!s->sum_members || !s->own_members || !s->local || !s->leaders || !s->pinged || !s->ping_wait || !s->ponged ||
        !s->left_out_copy) {
        release(s);
        return NULL;
    }
    return s;
}

int pc_backend_shm_attach(const pc_backend_env_t *env, void **seg, const int *local, int nlocal,
                          const pc_shm_signals_t *sig, pc_backend_t **out)
{
    *out = NULL;
    shm_backend_t *s = new_backend(env);
    if (!s) return PCOLL_ERR_NOMEM;
    memcpy(s->local, local, sizeof(int) * (size_t)nlocal);
    s->nlocal = nlocal;
    s->leaders[0] = local[0];
    s->nnodes = 1;
    place(s, env, seg, sig);
    *out = &s->base;
    return PCOLL_SUCCESS;
}

/* The engine's signals: kicks on the object's key, and its poller. */
static void engine_kick(void *arg, int rank)
{
    shm_backend_t *s = arg;
    pc_engine_kick(s->base.env.engine, rank, s->key);
}

static void engine_mark(void *arg)
{
    shm_backend_t *s = arg;
    pc_engine_mark(s->base.env.engine, s->key);
}

/* nodesums.h: rank src (another node's) sent its node's sum of round r:
 * if this node has not done r, its node sums go node to node from r on,
 * and if this rank sent its own sum of r to src's node's other candidate
 * alone, src (which finishes r there now) gets it too; if this node has
 * done r but src may lack its sum (this node had r by the leaders'
 * allreduce, or src took r over from the one it went to), src gets the
 * total.  The slot still holds the sum or the total: this node cannot
 * sum round r + 2 before src's node is done with r + 1 (and once done
 * with r + 1 here, src's node has done r: nothing to answer). */
static void shm_heard(void *arg, int src, uint64_t r)
{
    shm_backend_t *s = arg;
    int slot = (int)(r % 2);
    uint64_t d = atomic_load(&s->nc->done), back = atomic_load(&s->nc->back_at);
    if (d <= r) {
        enter_direct(s, r, "a node sum came from rank", src);
        if (d == r && s->sent_for == r + 1) {
            const record_t *h = (const record_t *)s->record[slot];
            pc_nodesums_resend(s->ns, r, src, h->root, h->flags, record_counted(s->record[slot]),
                               sum_of(s, s->me, slot), back);
        }
    } else if (d == r + 1 &&
               (atomic_load(&s->nc->allreduced[slot]) == r + 1 || pc_nodesums_lacks(s->ns, r, src))) {
        pc_nodesums_send_total(s->ns, r, src, sum_of(s, s->me, slot), back);
    }
}

/* nodesums.h: back to the leaders' allreduce from round b on */
static void shm_back(void *arg, uint64_t b) { go_back(arg, b); }

/* nodesums.h: another node's sum or record came: look again */
static void arrived(void *arg)
{
    shm_backend_t *s = arg;
    kick(s, s->me);
}

static int engine_poll(pc_engine_t *e, void *arg)
{
    (void)e;
    return poll_rounds(arg);
}

static void engine_listen(void *arg, int on)
{
    shm_backend_t *s = arg;
    pc_engine_set_poller(s->base.env.engine, s->key, on ? engine_poll : NULL, on ? s : NULL);
}

int pc_backend_shm_create(const pc_backend_env_t *env, MPI_Comm comm, int use, pcoll_allreduce_algo_t forced,
                          size_t small_bytes, pc_backend_t **out)
{
    *out = NULL;
    int me = env->me, most = 0;
    shm_backend_t *s = new_backend(env); /* NULL: the collective steps below still run, saying no */
    if (s) most = layout(s, &env->ctx->nodes);
    int leads = s && s->local[0] == me;
    size_t mine = pc_backend_shm_segment_bytes(env, leads);
    /* worth it where some node has two ranks or more (else every part would
     * travel by messages anyway); a GROUP object's groups may span nodes:
     * one node only */
    use = use && s && most >= 2 && !(is_grouped(env) && s->nnodes > 1);
    /* rounds here rely on kicks: only with the doorbell of every rank of the
     * node at hand, and with a key that every rank allocates alike (checked
     * below) */
    for (int i = 0; use && i < s->nlocal; i++) use = pc_engine_can_kick(env->engine, s->local[i]);
    int key = use ? pc_engine_key_alloc(env->engine) : -1;
    use = use && key >= 0;
    /* a node leader of ranks that span nodes: the exchange between nodes */
    if (use && leads && s->nnodes > 1) {
        int node = 0;
        while (s->leaders[node] != me) node++;
        pc_internode_hooks_t hooks = {s, activate_hook, exchanged, part_drained, released};
        int deputy = env->exclude_ns > 0 && env->node_deputy > 0; /* then the node sum stays (nodesums.h) */
        use = pc_internode_create(env, s->leaders, s->nnodes, node, forced, small_bytes, !deputy, &hooks, &s->net) ==
              PCOLL_SUCCESS;
    }
    /* rounds that go on without a silent rank: the node sums travel
     * directly, and the deputy finishes them for a stopped leader */
    if (s) {
        s->deputy = s->nlocal > 1 ? s->local[1] : -1;
        s->role = me == s->local[0] ? 0 : me == s->deputy ? 1 : -1;
    }
    if (use && s->role >= 0 && s->nnodes > 1 && env->exclude_ns > 0 && env->node_deputy > 0) {
        pc_nodesums_hooks_t hooks = {s, arrived, shm_heard, shm_back, part_drained};
        use = pc_nodesums_create(env, &env->ctx->nodes, &hooks, &s->ns) == PCOLL_SUCCESS;
    }
    if (use && s->net && s->ns) use = (s->exch_out = malloc(env->bytes)) != NULL;
    pc_nodemem_t mem; /* collective: taken part in even without memory for s */
    int made = pc_nodemem_create(comm, env->ctx->node_comm, mine, use, &mem) == 0;
    /* every rank takes the same path: every node's memory (as the node map
     * says), the same key */
    int ok = made && s && mem.local_size == s->nlocal;
    int in[2] = {ok ? key : -1, ok ? -key : 1}, agreed[2] = {0, 0};
    int mrc = MPI_Allreduce(in, agreed, 2, MPI_INT, MPI_MIN, comm);
    int all = mrc == MPI_SUCCESS && agreed[0] >= 0 && agreed[0] == -agreed[1];
    if (!all) {
        if (made) pc_nodemem_destroy(&mem);
        if (key >= 0) pc_engine_key_free(env->engine, key);
        release(s);
        return mrc == MPI_SUCCESS ? PCOLL_SUCCESS : PCOLL_ERR_MPI;
    }
    s->mem = mem;
    s->key = key;
    pc_shm_signals_t engine = {s, engine_kick, engine_mark, engine_listen};
    place(s, env, mem.seg, &engine);
    *out = &s->base;
    return PCOLL_SUCCESS;
}
