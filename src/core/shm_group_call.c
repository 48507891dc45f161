/*
 * Blocking group allreduces in node-shared memory (shm_group_call.h).
 *
 *   rank r's area (in its node-shared segment, mapped at pcoll_init):
 *     | control: sleeps | read[k]: r is done with node rank k's
 *     | publications up to this number | entry 0 | entry 1 | slot 0 | slot 1 |
 *     entry e: seq (r's publication number, 0 while rewritten), sum (the
 *     number whose slice sum is in the slot), tag (the member list's
 *     hash), bytes, dtype, op: the call, compared by every member
 *
 *   A publication: r waits until every reader of the entry's previous one
 *   has it in its read[r]; writes the piece into the slot; seq = 0, tag and
 *   call, seq = ++published.  A member finds r's next publication for its
 *   list as the lowest seq above the last it matched whose tag is the
 *   list's: r's publications for lists without that member never match,
 *   and those for the list come in the order the member takes them.
 *
 *   latency path (small), one piece:   slice path, per piece j:
 *     publish the vector                 publish piece j
 *     out = v[0] + v[1] + ...  read      add up own slice of every slot in
 *     from every member's slot;          member order; the sum into the
 *     read[...] = their numbers          own slot's slice; sum = seq
 *                                        copy every member's slice once
 *                                        its sum is there; read[...]
 *
 *   member:      0    1    2
 *   slot (j):  [a0 | b0 | c0]   member 1 adds up the b's of all three
 *              [a1 | b1 | c1]   slots into its own slot's b, then every
 *              [a2 | b2 | c2]   member copies b from member 1's slot
 *
 * Nothing is agreed per group: the areas are the ranks' own, the entries
 * name their list, and a member's last numbers (read[]) tell a writer when
 * it may reuse an entry.  Waiting spins, yields, then sleeps: the member
 * that publishes or reads last nudges a sleeper (store then load on both
 * sides, sequentially consistent, so one of them sees the other).
 */
#include "shm_group_call.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../engine/reduce.h"
#include "../util/error.h"
#include "groupmap.h"
#include "shm_allreduce.h"
#include "stall.h"

#define LINE 64

typedef struct entry {
    _Atomic uint64_t seq; /* the publication number; 0 while rewritten */
    _Atomic uint64_t sum; /* = seq once the slice sum is in the slot */
    _Atomic uint64_t tag; /* the member list's hash */
    uint64_t bytes;
    uint32_t dtype, op;
} entry_t;

struct pc_shm_group_calls {
    int me;                /* this rank's place among the ranks of its node */
    char **area;           /* [ranks of the node] node rank -> its area */
    size_t entry_off, slot_off, stride;
    uint64_t published;    /* this rank's publications so far */
    uint64_t *matched;     /* [local] the last publication of node rank k matched here */
    /* each entry's previous publication: its number and readers (node ranks) */
    uint64_t prev_seq[2];
    int *prev_readers[2], nprev[2];
    /* the call in progress: each member's matched entry and number */
    int *entry_of;         /* [local], by member */
    uint64_t *seq_of;      /* [local], by member */
    int holding;           /* the piece in progress holds matched publications */
    uint64_t *broken;      /* the tags of lists whose call failed midway here */
    int nbroken, all_broken;
    atomic_flag busy;
};

/* ---- the areas ---- */

static size_t up(size_t b) { return (b + LINE - 1) / LINE * LINE; }

static size_t read_bytes(int local) { return up(sizeof(uint64_t) * (size_t)local); }

size_t pc_shm_group_call_area_bytes(size_t slot_bytes, int local)
{
    return LINE + read_bytes(local) + 2 * LINE + 2 * up(slot_bytes);
}

static _Atomic uint64_t *sleeps_of(const pc_shm_group_calls_t *gc, int k) { return (_Atomic uint64_t *)gc->area[k]; }

static _Atomic uint64_t *read_of(const pc_shm_group_calls_t *gc, int reader, int writer)
{
    return (_Atomic uint64_t *)(gc->area[reader] + LINE) + writer;
}

static entry_t *entry_at(const pc_shm_group_calls_t *gc, int k, int e)
{
    return (entry_t *)(gc->area[k] + gc->entry_off + (size_t)e * LINE);
}

static char *slot_at(const pc_shm_group_calls_t *gc, int k, int e)
{
    return gc->area[k] + gc->slot_off + (size_t)e * gc->stride;
}

static void free_calls(pc_shm_group_calls_t *gc)
{
    if (!gc) return;
    free(gc->area);
    free(gc->matched);
    free(gc->prev_readers[0]);
    free(gc->prev_readers[1]);
    free(gc->entry_of);
    free(gc->seq_of);
    free(gc->broken);
    free(gc);
}

int pc_shm_group_call_open(pcoll_t *ctx)
{
    size_t slot_bytes;
    if (!pc_shm_group_areas(ctx, NULL, &slot_bytes)) return PCOLL_SUCCESS; /* no segments: messages */
    int local = pc_nodes_size(&ctx->nodes, ctx->nodes.node_of[ctx->rank]);
    pc_shm_group_calls_t *gc = calloc(1, sizeof *gc);
    if (gc) {
        gc->area = calloc((size_t)local, sizeof *gc->area);
        gc->matched = calloc((size_t)local, sizeof *gc->matched);
        gc->prev_readers[0] = malloc(sizeof(int) * (size_t)local);
        gc->prev_readers[1] = malloc(sizeof(int) * (size_t)local);
        gc->entry_of = malloc(sizeof(int) * (size_t)local);
        gc->seq_of = malloc(sizeof(uint64_t) * (size_t)local);
    }
    if (!gc || !gc->area || !gc->matched || !gc->prev_readers[0] || !gc->prev_readers[1] || !gc->entry_of ||
        !gc->seq_of) {
        free_calls(gc);
        return PCOLL_ERR_NOMEM;
    }
    pc_shm_group_areas(ctx, gc->area, &slot_bytes);
    gc->me = ctx->nodes.local_of[ctx->rank];
    gc->stride = up(slot_bytes);
    gc->entry_off = LINE + read_bytes(local);
    gc->slot_off = gc->entry_off + 2 * LINE;
    atomic_flag_clear(&gc->busy);
    ctx->shm_calls = gc;
    return PCOLL_SUCCESS;
}

void pc_shm_group_call_close(pcoll_t *ctx)
{
    free_calls(ctx->shm_calls);
    ctx->shm_calls = NULL;
}

int pc_shm_group_call_takes(const pcoll_t *ctx, const int *group, int n, size_t count, pcoll_dtype_t dtype,
                            int any_algo)
{
    size_t es = pcoll_dtype_size(dtype);
    if (count > ctx->shm_sizes.max_bytes / es) return 0;
    if (!(any_algo ? pc_shm_allowed_any_algo : pc_shm_allowed)(ctx, n, count * es, 1)) return 0;
    int node = ctx->nodes.node_of[group[0]];
    for (int i = 1; i < n; i++)
        if (ctx->nodes.node_of[group[i]] != node) return 0;
    return 1;
}

/* ---- one call ---- */

enum stage { FREE, INPUTS, SUMS };

typedef struct call {
    pcoll_t *ctx;
    pc_shm_group_calls_t *gc;
    const int *group; /* member -> rank */
    int n, me;
    uint64_t tag;
    size_t bytes, es; /* the whole message (compared, reported); element size */
    pcoll_dtype_t dtype;
    pcoll_op_t op;
    size_t piece;     /* the piece in progress, from 0 (reports) */
    enum stage stage; /* what the wait in progress waits for */
    int entry;        /* this rank's entry for the piece */
    uint64_t first;   /* this rank's first publication number in the call */
    const char *fn;
} call_t;

static int node_rank(const call_t *c, int i) { return c->ctx->nodes.local_of[c->group[i]]; }

static void nudge_if_asleep(const call_t *c, int i)
{
    if (atomic_load(sleeps_of(c->gc, node_rank(c, i)))) pc_engine_nudge(c->ctx->engine, c->group[i]);
}

static void nudge_members(const call_t *c)
{
    for (int i = 0; i < c->n; i++)
        if (i != c->me) nudge_if_asleep(c, i);
}

/* Reader k of entry e's previous publication is done with it. */
static int reader_done(const call_t *c, int e, int k)
{
    const pc_shm_group_calls_t *gc = c->gc;
    return atomic_load(read_of(gc, k, gc->me)) >= gc->prev_seq[e];
}

/* Member i's next publication for this list, if it is there: of the two
 * entries, read as one snapshot (both numbers and tags, then both numbers
 * again, unchanged), the one with the lowest number above the last one
 * matched.  One entry at a time would not do: the writer may publish the
 * next one into the entry already looked at, then a later one into the
 * other, before this member looks there. */
static int match(const call_t *c, int i)
{
    pc_shm_group_calls_t *gc = c->gc;
    int k = node_rank(c, i);
    entry_t *en[2] = {entry_at(gc, k, 0), entry_at(gc, k, 1)};
    uint64_t seq[2], tag[2];
    do {
        for (int e = 0; e < 2; e++) {
            seq[e] = atomic_load(&en[e]->seq);
            tag[e] = atomic_load(&en[e]->tag);
        }
    } while (atomic_load(&en[0]->seq) != seq[0] || atomic_load(&en[1]->seq) != seq[1]);
    int best = -1;
    for (int e = 0; e < 2; e++)
        if (seq[e] > gc->matched[k] && tag[e] == c->tag && (best < 0 || seq[e] < seq[best])) best = e;
    if (best < 0) return 0;
    gc->entry_of[i] = best;
    gc->seq_of[i] = seq[best];
    gc->matched[k] = seq[best];
    return 1;
}

static int member_ready(const call_t *c, int i)
{
    const pc_shm_group_calls_t *gc = c->gc;
    switch (c->stage) {
    case INPUTS: return gc->entry_of[i] >= 0 || match(c, i);
    default: /* SUMS */
        return i == c->me || atomic_load(&entry_at(gc, node_rank(c, i), gc->entry_of[i])->sum) == gc->seq_of[i];
    }
}

static int all_ready(void *arg)
{
    const call_t *c = arg;
    if (c->stage == FREE) { /* the readers of the entry's previous publication */
        const pc_shm_group_calls_t *gc = c->gc;
        for (int j = 0; j < gc->nprev[c->entry]; j++)
            if (!reader_done(c, c->entry, gc->prev_readers[c->entry][j])) return 0;
        return 1;
    }
    int ready = 1;
    for (int i = 0; i < c->n; i++) ready &= member_ready(c, i); /* every one looked at: matches found early */
    return ready;
}

static void describe(void *arg, pc_stall_probe_t *p)
{
    const call_t *c = arg;
    const pc_shm_group_calls_t *gc = c->gc;
    static const char *const waits[] = {"its previous readers to finish", "the members' pieces",
                                        "the members' slice sums"};
    char list[160];
    pc_group_text(c->group, c->n, list, sizeof list);
    pc_probe_what(p, "allreduce of %zu B over %s in node-shared memory (piece %zu: waiting for %s)", c->bytes, list,
                  c->piece, waits[c->stage]);
    if (c->stage == FREE) {
        for (int j = 0; j < gc->nprev[c->entry]; j++) {
            int k = gc->prev_readers[c->entry][j];
            if (!reader_done(c, c->entry, k))
                pc_probe_suspect(p, pc_nodes_rank(&c->ctx->nodes, c->ctx->nodes.node_of[c->ctx->rank], k),
                                 "has not finished reading this rank's previous piece", PC_WHY_CAUSE);
        }
        return;
    }
    for (int i = 0; i < c->n; i++) {
        if (i == c->me) continue;
        int missing = c->stage == INPUTS ? gc->entry_of[i] < 0
                                         : atomic_load(&entry_at(gc, node_rank(c, i), gc->entry_of[i])->sum) !=
                                               gc->seq_of[i];
        if (missing)
            pc_probe_suspect(p, c->group[i],
                             c->stage == SUMS        ? "has not added up its slice"
                             : c->piece == 0 ? "has not started it"
                                             : "has not put its piece",
                             PC_WHY_CAUSE);
    }
}

/* Until the stage's condition holds (pc_shm_wait: spin, yield, sleep
 * until a member's nudge; stall reports and the timeout as any blocking
 * call). */
static int wait_stage(call_t *c, enum stage stage)
{
    c->stage = stage;
    if (stage == INPUTS) {
        for (int i = 0; i < c->n; i++) c->gc->entry_of[i] = i == c->me ? c->entry : -1;
        c->gc->holding = 1;
    }
    return pc_shm_wait(c->ctx, all_ready, c, describe, sleeps_of(c->gc, c->gc->me), 1, c->fn);
}

/* This rank's piece into its next entry, once the entry's previous
 * readers are done with it; the members asleep are nudged. */
static int publish(call_t *c, const void *src, size_t len)
{
    pc_shm_group_calls_t *gc = c->gc;
    c->entry = (int)(gc->published & 1);
    int rc = wait_stage(c, FREE);
    if (rc != PCOLL_SUCCESS) return rc;
    entry_t *en = entry_at(gc, gc->me, c->entry);
    atomic_store(&en->seq, 0); /* before the slot: a reader still on it sees the change */
    if (len) memcpy(slot_at(gc, gc->me, c->entry), src, len);
    atomic_store(&en->tag, c->tag);
    en->bytes = c->bytes;
    en->dtype = (uint32_t)c->dtype;
    en->op = (uint32_t)c->op;
    uint64_t seq = ++gc->published;
    if (c->piece == 0) c->first = seq;
    gc->prev_seq[c->entry] = seq;
    gc->nprev[c->entry] = 0;
    for (int i = 0; i < c->n; i++)
        if (i != c->me) gc->prev_readers[c->entry][gc->nprev[c->entry]++] = node_rank(c, i);
    atomic_store(&en->seq, seq);
    gc->seq_of[c->me] = seq;
    nudge_members(c);
    return PCOLL_SUCCESS;
}

/* The members' publications of this piece were still theirs while this
 * rank read them (a writer that gave up withdrew its own: what was read
 * may be overwritten). */
static int still_published(const call_t *c)
{
    const pc_shm_group_calls_t *gc = c->gc;
    atomic_thread_fence(memory_order_acquire);
    for (int i = 0; i < c->n; i++)
        if (i != c->me && atomic_load(&entry_at(gc, node_rank(c, i), gc->entry_of[i])->seq) != gc->seq_of[i])
            return pc_error(PCOLL_ERR_STATE, c->fn,
                            "rank %d gave up on this allreduce over the group (it timed out there) while this rank "
                            "read its part",
                            c->group[i]);
    return PCOLL_SUCCESS;
}

/* Every member's calls compared (the first piece): each member compares
 * with every other, so every one sees a difference. */
static int same_call(const call_t *c)
{
    const pc_shm_group_calls_t *gc = c->gc;
    for (int i = 0; i < c->n; i++) {
        const entry_t *en = entry_at(gc, node_rank(c, i), gc->entry_of[i]);
        if (en->bytes == c->bytes && en->dtype == (uint32_t)c->dtype && en->op == (uint32_t)c->op) continue;
        int st = still_published(c); /* else what was read may be a later call's */
        if (st != PCOLL_SUCCESS) return st;
        return pc_error(PCOLL_ERR_ARG, c->fn,
                        "the group's members called it differently: %zu B of %s, op %d at rank %d; %llu B of "
                        "%s, op %u at rank %d",
                            c->bytes, pcoll_dtype_name(c->dtype), (int)c->op, c->group[c->me],
                            (unsigned long long)en->bytes, pcoll_dtype_name((pcoll_dtype_t)en->dtype), en->op,
                            c->group[i]);
    }
    return PCOLL_SUCCESS;
}

/* Done with the members' publications of this piece: their writers may
 * reuse the entries. */
static void done_reading(const call_t *c)
{
    pc_shm_group_calls_t *gc = c->gc;
    for (int i = 0; i < c->n; i++)
        if (i != c->me && gc->entry_of[i] >= 0) atomic_store(read_of(gc, gc->me, node_rank(c, i)), gc->seq_of[i]);
    gc->holding = 0;
    nudge_members(c);
}

/* The list of `tag` marked out of step at this rank (no memory to mark
 * it: every list, since a call on it could pair with a stale piece). */
static void mark_broken(pc_shm_group_calls_t *gc, uint64_t tag)
{
    uint64_t *more = realloc(gc->broken, sizeof *more * (size_t)(gc->nbroken + 1));
    if (!more) {
        gc->all_broken = 1;
        return;
    }
    gc->broken = more;
    gc->broken[gc->nbroken++] = tag;
}

/* After a failure past the first publication (or a timeout): the
 * publications matched so far released (their writers may go on), this
 * rank's own of this call withdrawn (no member takes them any more, and no
 * reader that never comes holds the entry; a member that took one is told
 * by its check after reading), and the list marked: its members are out
 * of step.  A timeout waiting for an entry's readers withdraws that
 * entry's publication too (its reader may never come) and marks its list. */
static void give_up(const call_t *c)
{
    pc_shm_group_calls_t *gc = c->gc;
    if (gc->holding) done_reading(c);
    for (int e = 0; e < 2; e++) {
        entry_t *en = entry_at(gc, gc->me, e);
        uint64_t seq = atomic_load(&en->seq);
        int blocking = c->stage == FREE && e == c->entry && gc->nprev[e];
        if (!blocking && !(c->first && seq >= c->first)) continue;
        if (blocking && atomic_load(&en->tag) != c->tag) mark_broken(gc, atomic_load(&en->tag));
        atomic_store(&en->seq, 0);
        gc->nprev[e] = 0;
    }
    mark_broken(gc, c->tag);
}

static const char *data_of(const call_t *c, int i) { return slot_at(c->gc, node_rank(c, i), c->gc->entry_of[i]); }

/* out[0, count) = the member-order sum of elements [off, off + count) of
 * every member's published piece. */
static void add_up(const call_t *c, size_t off, void *out, size_t count)
{
    if (!count) return;
    size_t at = off * c->es;
    pc_reduce_sum(out, data_of(c, 0) + at, data_of(c, 1) + at, count, c->dtype);
    for (int i = 2; i < c->n; i++) pc_reduce_sum(out, out, data_of(c, i) + at, count, c->dtype);
    if (c->op == PCOLL_AVG) pc_reduce_div(out, count, c->dtype, c->n);
}

/* One piece of `count` elements from in to out: published, the inputs
 * matched (and compared on the first piece), then added up whole
 * (latency) or by slices. */
static int run_piece(call_t *c, const char *in, char *out, size_t count, int slice)
{
    int rc = publish(c, in, count * c->es);
    if (rc == PCOLL_SUCCESS) rc = wait_stage(c, INPUTS);
    if (rc != PCOLL_SUCCESS) return rc;
    if (c->piece == 0 && (rc = same_call(c)) != PCOLL_SUCCESS) {
        done_reading(c); /* every member stops here: nobody waits for sums */
        return rc;
    }
    if (!slice) {
        add_up(c, 0, out, count);
        rc = still_published(c);
        done_reading(c);
        return rc;
    }
    pc_shm_group_calls_t *gc = c->gc;
    size_t lo = pc_shm_slice_start(count, c->es, c->me, c->n), hi = pc_shm_slice_start(count, c->es, c->me + 1, c->n);
    add_up(c, lo, out + lo * c->es, hi - lo);
    entry_t *mine = entry_at(gc, gc->me, c->entry);
    memcpy(slot_at(gc, gc->me, c->entry) + lo * c->es, out + lo * c->es, (hi - lo) * c->es);
    atomic_store(&mine->sum, gc->seq_of[c->me]);
    nudge_members(c);
    if ((rc = wait_stage(c, SUMS)) != PCOLL_SUCCESS) return rc;
    for (int i = 0; i < c->n; i++) {
        if (i == c->me) continue;
        size_t a = pc_shm_slice_start(count, c->es, i, c->n), b = pc_shm_slice_start(count, c->es, i + 1, c->n);
        memcpy(out + a * c->es, data_of(c, i) + a * c->es, (b - a) * c->es);
    }
    rc = still_published(c);
    done_reading(c);
    return rc;
}

int pc_shm_group_call(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                      pcoll_op_t op, const int *group, int n, int me, const char *fn)
{
    pc_shm_group_calls_t *gc = ctx->shm_calls;
    uint64_t tag = pc_group_hash(0, group, n);
    int broken = gc->all_broken;
    for (int b = 0; b < gc->nbroken && !broken; b++) broken = gc->broken[b] == tag;
    if (broken)
        return pc_error(PCOLL_ERR_STATE, fn,
                        "an earlier operation on this group timed out at this rank: its members are out of step");
    if (atomic_flag_test_and_set(&gc->busy))
        return pc_error(PCOLL_ERR_STATE, fn,
                        "another thread of this rank is in a pcoll_allreduce on this context: collectives on one "
                        "context are called one at a time");
    size_t es = pcoll_dtype_size(dtype), per_piece;
    int slice;
    pc_shm_shape(ctx, count, dtype, n, 1, &per_piece, &slice);
    call_t c = {ctx, gc, group, n, me, tag, count * es, es, dtype, op, 0, FREE, 0, 0, fn};
    const char *in = sendbuf == PCOLL_IN_PLACE ? recvbuf : sendbuf;
    int rc = PCOLL_SUCCESS;
    size_t pieces = count ? (count + per_piece - 1) / per_piece : 1; /* count 0: still compared and met */
    for (size_t j = 0; j < pieces && rc == PCOLL_SUCCESS; j++) {
        size_t first = j * per_piece, len = count - first < per_piece ? count - first : per_piece;
        c.piece = j;
        rc = count ? run_piece(&c, in + first * es, (char *)recvbuf + first * es, len, slice)
                   : run_piece(&c, NULL, NULL, 0, 0);
    }
    /* a call that failed after it published, but for calls that differ
     * (every member stops at the same point, nothing left behind) */
    if (rc != PCOLL_SUCCESS && rc != PCOLL_ERR_ARG) give_up(&c);
    atomic_flag_clear(&gc->busy);
    return rc;
}
