/* Partial rounds on one node, in node-shared memory: see node_rounds.h. */
#include "node_rounds.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../engine/nodemem.h"
#include "../engine/reduce.h"
#include "partial_internal.h"

#define LINE 64
#define ROUND_UP(x) (((x) + LINE - 1) / LINE * LINE)

/* a rank's state word: taken << ST_SHIFT | flags */
enum { ST_CUR = 1, ST_ADDING = 2, ST_TAKING = 4, ST_WAITING = 8, ST_SHIFT = 4 };

/* the head of every rank's segment */
typedef struct rank_ctl {
    atomic_ullong state;
    uint64_t held[2]; /* contributions pending buffer b holds (0: it is zero)
                         -- written by whoever has ADDING or TAKING set */
    uint32_t deposit[2]; /* the buffer taken for the slot's round */
    char pad1[LINE - sizeof(atomic_ullong) - 2 * sizeof(uint64_t) - 2 * sizeof(uint32_t)];
    atomic_ullong want;     /* nudge once done >= want (0: never) */
    atomic_ullong consumed; /* rounds whose result this rank copied */
    char pad2[LINE - 2 * sizeof(atomic_ullong)];
} rank_ctl_t;

/* what a round is: written at activation, copied with the result */
typedef struct record {
    uint64_t round;
    int32_t root;
    uint32_t flags;
    int32_t has_counted;
    int32_t unused;
    /* followed by the bitmap of ranks counted as parked */
} record_t;

/* the rounds' shared state, in rank 0's segment */
typedef struct node_ctl {
    atomic_ullong activated; /* rounds activated */
    char pad1[LINE - sizeof(atomic_ullong)];
    atomic_ullong done;        /* rounds summed */
    atomic_ullong sum_claimed; /* rounds whose sum someone took on */
    atomic_uint parts[2];      /* parts taken for the slot's round */
    atomic_ullong owner[2];    /* the slot's record is (being) written for owner - 1 */
    atomic_ullong blocked;     /* rounds whose blocked sum woke the ranks behind */
    char pad2[LINE - 5 * sizeof(atomic_ullong) - 2 * sizeof(atomic_uint)];
} node_ctl_t;

struct pc_node_rounds {
    pc_nodemem_t mem; /* mem.seg[rank]: that rank's segment */
    pcoll_partial_t *p;
    int P, me;
    size_t data_bytes; /* count elements */
    size_t bytes;      /* count + 2 (the trailer) */
    size_t stride, rec_bytes;
    node_ctl_t *nc;
    unsigned char *record[2], *result[2]; /* result: a record, then the sum */
};

static rank_ctl_t *ctl_of(const pc_node_rounds_t *s, int rank) { return s->mem.seg[rank]; }

static unsigned char *pending_of(const pc_node_rounds_t *s, int rank, int b)
{
    return (unsigned char *)s->mem.seg[rank] + sizeof(rank_ctl_t) + (size_t)b * s->stride;
}

static int bit_of(const unsigned char *rec, int rank)
{
    const record_t *h = (const record_t *)rec;
    const unsigned char *bits = rec + sizeof(record_t);
    return h->has_counted && ((bits[rank / 8] >> (rank % 8)) & 1);
}

int pc_nr_create(pcoll_partial_t *p, MPI_Comm comm, int use, pc_node_rounds_t **out)
{
    *out = NULL;
    pc_node_rounds_t *s = calloc(1, sizeof *s);
    int P, me;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &me);
    size_t bytes = p->bytes, stride = ROUND_UP(bytes), rec_bytes = ROUND_UP(sizeof(record_t) + p->bitmap_bytes);
    /* rank 0's segment also holds the rounds' state, records and results (zeroed: nothing activated) */
    size_t mine = sizeof(rank_ctl_t) + 2 * stride + (me == 0 ? sizeof(node_ctl_t) + 4 * rec_bytes + 2 * stride : 0);
    pc_nodemem_t mem; /* collective: taken part in even without memory for s */
    /* rounds here rely on nudges: only with every rank's doorbell at hand */
    use = use && pc_engine_can_nudge_all(p->engine);
    int made = pc_nodemem_create(comm, mine, use && s && P >= 2, &mem) == 0;
    /* every rank takes the same path: all of comm on one node, everywhere */
    int ok = made && mem.local_size == P, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        if (made) pc_nodemem_destroy(&mem);
        free(s);
        return PCOLL_SUCCESS;
    }
    s->mem = mem;
    s->p = p;
    s->P = P;
    s->me = me;
    s->data_bytes = p->count * p->esize;
    s->bytes = bytes;
    s->stride = stride;
    s->rec_bytes = rec_bytes;
    s->nc = (node_ctl_t *)pending_of(s, 0, 2);
    s->record[0] = (unsigned char *)(s->nc + 1);
    s->record[1] = s->record[0] + rec_bytes;
    s->result[0] = s->record[1] + rec_bytes;
    s->result[1] = s->result[0] + rec_bytes + stride;
    *out = s;
    return PCOLL_SUCCESS;
}

void pc_nr_destroy(pc_node_rounds_t *s)
{
    if (!s) return;
    pc_nodemem_destroy(&s->mem);
    free(s);
}

/* ---- this rank's application ---- */

/* Sets `bit` in this rank's state once no taker holds it (takers are short). */
static uint64_t acquire_own(pc_node_rounds_t *s, uint64_t bit)
{
    rank_ctl_t *c = ctl_of(s, s->me);
    uint64_t st = atomic_load(&c->state);
    for (;;) {
        if (st & ST_TAKING) {
            sched_yield();
            st = atomic_load(&c->state);
        } else if (atomic_compare_exchange_weak(&c->state, &st, st | bit)) {
            return st;
        }
    }
}

uint64_t pc_nr_contribute(pc_node_rounds_t *s, const void *contribution, int (*choose)(void *arg, uint64_t taken),
                          void *arg)
{
    pcoll_partial_t *p = s->p;
    rank_ctl_t *c = ctl_of(s, s->me);
    uint64_t st = acquire_own(s, ST_ADDING); /* no take of our part from here ... */
    /* the buffer was last read by the sum of an earlier round, which `done`
     * published before a take made it current again: acquire that too (the
     * take may have run in another process, out of a sanitizer's sight) */
    (void)atomic_load(&s->nc->done);
    if (contribution) {
        int b = (int)(st & ST_CUR);
        unsigned char *dst = pending_of(s, s->me, b);
        if (p->cfg.mode == PCOLL_ACCUMULATE && c->held[b] > 0)
            pc_reduce_sum(dst, dst, contribution, p->count, p->dtype);
        else
            memcpy(dst, contribution, s->data_bytes);
        c->held[b]++;
    }
    uint64_t taken = st >> ST_SHIFT;
    uint64_t set = choose(arg, taken) ? ST_WAITING : 0;
    /* ... to here */
    st = atomic_load(&c->state);
    while (!atomic_compare_exchange_weak(&c->state, &st, (st & ~(uint64_t)ST_ADDING) | set)) {
    }
    return taken;
}

void pc_nr_set_waiting(pc_node_rounds_t *s) { (void)acquire_own(s, ST_WAITING); }

void pc_nr_clear_waiting(pc_node_rounds_t *s) { atomic_fetch_and(&ctl_of(s, s->me)->state, ~(uint64_t)ST_WAITING); }

void pc_nr_set_want(pc_node_rounds_t *s, uint64_t want) { atomic_store(&ctl_of(s, s->me)->want, want); }

/* ---- any thread ---- */

uint64_t pc_nr_done(const pc_node_rounds_t *s) { return atomic_load(&s->nc->done); }
uint64_t pc_nr_activated(const pc_node_rounds_t *s) { return atomic_load(&s->nc->activated); }

int pc_nr_activate(pc_node_rounds_t *s, uint64_t r, int root, uint32_t flags, const unsigned char *counted)
{
    node_ctl_t *nc = s->nc;
    uint64_t a = atomic_load(&nc->activated);
    if (r < a) return 0;
    if (r > a || atomic_load(&nc->done) + 1 < r) {
        pc_log(PCOLL_LOG_ERROR, "partial: activation of round %llu with %llu activated and %llu done (bug)",
               (unsigned long long)r, (unsigned long long)a, (unsigned long long)atomic_load(&nc->done));
        return -1;
    }
    int slot = (int)(r % 2);
    uint64_t own = atomic_load(&nc->owner[slot]);
    /* simultaneous initiators: the first to claim the record activates */
    if (own > r || !atomic_compare_exchange_strong(&nc->owner[slot], &own, r + 1)) return 0;
    record_t *h = (record_t *)s->record[slot];
    h->round = r;
    h->root = root;
    h->flags = flags;
    h->has_counted = counted != NULL;
    if (counted) memcpy(h + 1, counted, s->p->bitmap_bytes);
    atomic_store(&nc->activated, r + 1); /* publishes the record */
    return 1;
}

/* Takes rank j's part of round r unless it is taken or its application is
 * adding (it gives the part itself then). */
static int try_take(pc_node_rounds_t *s, int j, uint64_t r)
{
    pcoll_partial_t *p = s->p;
    rank_ctl_t *c = ctl_of(s, j);
    uint64_t st = atomic_load(&c->state);
    do {
        if ((st >> ST_SHIFT) != r || (st & (ST_ADDING | ST_TAKING))) return 0;
    } while (!atomic_compare_exchange_weak(&c->state, &st, st | ST_TAKING));
    int b = (int)(st & ST_CUR);
    unsigned char *dep = pending_of(s, j, b);
    uint64_t held = c->held[b];
    int64_t contributions = (int64_t)held;
    if (held == 0) memset(dep, 0, s->data_bytes);
    if (p->cfg.mode == PCOLL_REPLACE) { /* the latest contribution stays pending */
        memcpy(pending_of(s, j, !b), dep, s->data_bytes);
        c->held[!b] = held;
        contributions = 1;
    } else {
        c->held[!b] = 0;
    }
    int active = (st & ST_WAITING) || bit_of(s->record[r % 2], j);
    pc_trailer_set(p, dep, active, contributions);
    c->deposit[r % 2] = (uint32_t)b;
    /* release: taken + 1, the other buffer is pending; WAITING as it is now */
    uint64_t cur = st | ST_TAKING;
    while (!atomic_compare_exchange_weak(&c->state, &cur, ((r + 1) << ST_SHIFT) | (cur & ST_WAITING) | (uint64_t)!b)) {
    }
    atomic_fetch_add(&s->nc->parts[r % 2], 1);
    return 1;
}

/* Sums round r if all its parts are in and its result slot is free. */
static int try_sum(pc_node_rounds_t *s, uint64_t r)
{
    pcoll_partial_t *p = s->p;
    node_ctl_t *nc = s->nc;
    int slot = (int)(r % 2);
    if (atomic_load(&nc->parts[slot]) < (unsigned)s->P) return 0;
    if (r >= 2) { /* the slot holds round r - 2 until every rank has copied it */
        int clear = 1;
        for (int j = 0; j < s->P; j++) clear &= atomic_load(&ctl_of(s, j)->consumed) >= r - 1;
        if (!clear) {
            /* the first to find round r blocked wakes those behind (once:
             * each then copies, helps, and the last of them sums) */
            uint64_t seen = atomic_load(&nc->blocked);
            if (seen <= r && atomic_compare_exchange_strong(&nc->blocked, &seen, r + 1))
                for (int j = 0; j < s->P; j++)
                    if (atomic_load(&ctl_of(s, j)->consumed) < r - 1) pc_engine_nudge(p->engine, j);
            return 0;
        }
    }
    uint64_t expect = r;
    if (!atomic_compare_exchange_strong(&nc->sum_claimed, &expect, r + 1)) return 0;
    /* acquire every rank's state: each deposit was written under an ADDING
     * or TAKING bit that a release on the state cleared (the takes since are
     * read-modify-writes: the release sequence goes on) */
    for (int j = 0; j < s->P; j++) (void)atomic_load(&ctl_of(s, j)->state);
    unsigned char *res = s->result[slot], *sum = res + s->rec_bytes;
    memcpy(res, s->record[slot], s->rec_bytes);
    const void *first = pending_of(s, 0, (int)ctl_of(s, 0)->deposit[slot]);
    const void *second = pending_of(s, 1, (int)ctl_of(s, 1)->deposit[slot]);
    pc_reduce_sum(sum, first, second, p->count + 2, p->dtype);
    for (int j = 2; j < s->P; j++)
        pc_reduce_sum(sum, sum, pending_of(s, j, (int)ctl_of(s, j)->deposit[slot]), p->count + 2, p->dtype);
    atomic_store(&nc->parts[slot], 0); /* for round r + 2 */
    /* seq_cst store, then seq_cst loads of want: a rank either sees done or
     * is seen here (it stores want before it looks at done) */
    atomic_store(&nc->done, r + 1);
    for (int j = 0; j < s->P; j++) {
        uint64_t w = atomic_load(&ctl_of(s, j)->want);
        if (j != s->me && w != 0 && w <= r + 1) pc_engine_nudge(p->engine, j);
    }
    return 1;
}

int pc_nr_help(pc_node_rounds_t *s)
{
    int did = 0;
    for (;;) {
        uint64_t r = atomic_load(&s->nc->done);
        if (atomic_load(&s->nc->activated) <= r) return did;
        if (atomic_load(&s->nc->parts[r % 2]) < (unsigned)s->P)
            for (int j = 0; j < s->P; j++) did += try_take(s, j, r);
        if (!try_sum(s, r)) return did;
        did++;
    }
}

/* ---- the token holder ---- */

int pc_nr_consume(pc_node_rounds_t *s, uint64_t c, void *buf, int *root, uint32_t *flags, int *parked)
{
    if (atomic_load(&s->nc->done) <= c) return 0;
    const unsigned char *res = s->result[c % 2];
    const record_t *h = (const record_t *)res;
    if (h->round != c)
        pc_log(PCOLL_LOG_ERROR, "partial: the result of round %llu holds round %llu (bug)", (unsigned long long)c,
               (unsigned long long)h->round);
    memcpy(buf, res + s->rec_bytes, s->bytes);
    *root = h->root;
    *flags = h->flags;
    *parked = bit_of(res, s->me);
    atomic_store(&ctl_of(s, s->me)->consumed, c + 1); /* the slot may be summed into again */
    return 1;
}
