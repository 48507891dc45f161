/*
 * Node-shared allreduce: blocking calls of every rank, through node-shared
 * memory inside each node and, when there are several nodes, one part
 * across nodes per column (the ranks with the same place on every node).
 *
 *   rank r's segment (MPI_Win_allocate_shared, mapped once at pcoll_init):
 *     | control: arrived sleeps | slot 0: header | data | slot 1: ... |
 *     | gather 0 | gather 1 | counter | group calls' area |
 *     (each part 64 B aligned; a slot's header of 32 B, its data after it,
 *     PCOLL_SHM_CHUNK_BYTES of data; a gather slot holds a member's slice
 *     of a piece; member 0's counter counts the node's barrier arrivals;
 *     the area serves blocking group calls: shm_group_call.c)
 *
 *   Barrier phase p (numbered alike at every member of a node): arrived =
 *   p, then counter += 1; the member that makes it n * p (the last to come)
 *   nudges the doorbell of every member whose control line says sleeps = p;
 *   every member waits until counter >= n * p (spin, yield, then pc_block:
 *   stall report and timeout name the ranks whose `arrived` is short of p).
 *
 *   latency path (small: one node, (n - 1) x bytes up to
 *   PCOLL_SHM_SLICE_BYTES; several, n x bytes up to 8 KiB), one slot use u:
 *     1. write the vector into own slot u % 2, its header (bytes, dtype, op)
 *     2. barrier; compare every member's header (one that differs fails all)
 *     3. out = ((v0 + v1) + v2) + ... + v(n-1), read from the slots in place
 *     4. several nodes: every member allreduces out with its column (all n
 *        columns carry the same node sums: no second barrier)
 *
 *   slice path (larger), per piece j of at most a slot:
 *     reduce:  write the piece into own slot        member:  0   1   2
 *              barrier (piece 0: compare headers)   slot0  [a0| b0| c0]
 *              member i adds up slice i of every    slot1  [a1| b1| c1]
 *              slot in member order into out        slot2  [a2| b2| c2]
 *              several nodes: start slice i's part   member 0 sums the a's
 *              across nodes with its column (the      then its column sums
 *              progress thread runs it)               the nodes' a sums
 *     gather:  wait for the part; own slice into own gather slot; barrier;
 *              copy every other member's slice from its gather slot
 *     On one node the gather of piece j follows its reduce; across nodes it
 *     lags PC_SHM_PIPELINE_DEPTH - 1 pieces behind, so that the links carry the
 *     parts of several pieces while the node adds up the next ones.
 *
 *   node 0: r0 r1 --+-- column 0: r0, r2, r4, r6 (slices 0 of every piece)
 *   node 1: r2 r3   |
 *   node 2: r4 r5   +-- column 1: r1, r3, r5, r7 (slices 1)
 *   node 3: r6 r7
 *
 * Order of the sums: on one node every element is added up in rank order,
 * v0 + v1 + ... (then / n for AVG): the direct algorithm's sums, bit for
 * bit.  Across nodes each node adds its members in order, then the column
 * combines the node sums with the message algorithm its size picks (the
 * same at every member of every column); the same bits at every rank.
 *
 * Slot reuse: a member writes input slot use u only after it passed the
 * first barrier of use u - 1, which every member reaches only after it read
 * the last of use u - 2; it writes gather slot g only after the barrier of
 * gather g - 1, which every member reaches only after it copied gather
 * g - 2.  After a timeout that no longer holds: as for the message
 * algorithms, every later operation on all ranks fails at this rank
 * (PCOLL_ERR_STATE: the ranks are out of step).
 *
 * A call reserves one operation number on channel 0 per piece when it
 * begins (every rank of every node as many), and each column's part of
 * piece j takes the j-th: the parts of different pieces, calls and columns
 * never share a tag, and a rank that has begun the call counts as having
 * started its parts in stall reports.
 */
#include "shm_allreduce.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/nodebar.h"
#include "../engine/nodemem.h"
#include "../engine/reduce.h"
#include "../util/error.h"
#include "op.h"
#include "plan.h"
#include "shm_group_call.h"
#include "stall.h"

#define LINE 64
#define HEAD 32 /* a slot's header: a small message's data shares its line (one line written per call) */
/* Several nodes: the latency path while (ranks per node) x bytes is within
 * this, since every rank of a node then sends the whole message across
 * the link (in parallel: no second barrier). */
#define HIER_LATENCY_BYTES ((size_t)8 << 10)

typedef struct control {
    _Atomic uint64_t arrived; /* the last barrier phase this rank reached */
    _Atomic uint64_t sleeps;  /* p: this rank may sleep waiting for phase p */
} control_t;

typedef struct slot {
    uint64_t bytes; /* the call's size, dtype and op: compared by all */
    uint32_t dtype, op;
    /* data follows, from HEAD */
} slot_t;

struct pc_shm_allreduce {
    pc_nodemem_t mem;
    int n, me;          /* members: the ranks of this node; this rank's place */
    int *member;        /* [n] member -> rank */
    int *column_ranks;  /* [nodes] node -> the rank with this rank's place there */
    pc_world_part_t column; /* this rank's column: the parts across nodes */
    size_t stride;      /* bytes per input slot */
    size_t gstride;     /* bytes per gather slot (a member's slice of a piece) */
    uint64_t use;       /* input slot uses so far (the application thread, one
                           call at a time, as for any collective) */
    uint64_t guse;      /* gather slot uses so far */
    uint64_t phase;     /* barrier phases so far */
    uint64_t call_phase; /* the first barrier of the call in progress */
    uint64_t first_part; /* the operation number of its first part across nodes */
    pc_nodebar_t bar;           /* counter: at the end of member 0's segment */
    _Atomic uint64_t **arrived; /* each member's control line */
    int spin;                   /* a CPU per member: waiting may spin first */
    atomic_flag busy;           /* a call in progress (one thread at a time) */
};

typedef struct shm_wait {
    pcoll_t *ctx;
    uint64_t phase; /* done when arrivals reach n x phase */
    size_t bytes;
} shm_wait_t;

static char *seg_of(const struct pc_shm_allreduce *sh, int i) { return sh->mem.seg[sh->member[i]]; }

static control_t *control_of(const struct pc_shm_allreduce *sh, int i) { return (control_t *)seg_of(sh, i); }

static slot_t *slot_of(const struct pc_shm_allreduce *sh, int i, uint64_t use)
{
    return (slot_t *)(seg_of(sh, i) + LINE + (use & 1) * sh->stride);
}

static char *gather_of(const struct pc_shm_allreduce *sh, int i, uint64_t guse)
{
    return seg_of(sh, i) + LINE + 2 * sh->stride + (guse & 1) * sh->gstride;
}

static char *data_of(slot_t *s) { return (char *)s + HEAD; }

/* Where a segment's counter line and group calls' area begin (after the
 * control line, two input slots and two gather slots). */
static size_t counter_at(size_t stride, size_t gstride) { return LINE + 2 * stride + 2 * gstride; }
static size_t area_at(size_t stride, size_t gstride) { return counter_at(stride, gstride) + LINE; }

/* A slot's data bytes: the latency path's largest message and a piece of
 * the slice path's, within the largest message. */
size_t pc_shm_slot_bytes(const pc_shm_sizes_t *z)
{
    size_t slot = z->chunk_bytes > z->slice_bytes ? z->chunk_bytes : z->slice_bytes;
    return slot < z->max_bytes ? slot : z->max_bytes;
}

/* 1 for the slice path: the message is larger than a slot, or too large
 * for the latency path.  The latency path reads n x the message at every
 * rank, the slice path about 3.5 x plus a second barrier: on one node the
 * latency path while the bytes the slice path would save, (n - 1) x bytes
 * roughly, stay within PCOLL_SHM_SLICE_BYTES (measured: the crossing lies
 * near 64 KiB at 4 ranks and near 4 KiB at 16).  Across nodes the latency
 * path sends n copies over each node's link, the slice path one. */
int pc_shm_slice_shape(const pc_shm_sizes_t *z, size_t bytes, int n, int nodes)
{
    if (bytes > pc_shm_slot_bytes(z)) return 1;
    if (nodes > 1) return bytes > HIER_LATENCY_BYTES / (size_t)n;
    return n > 1 && bytes > z->slice_bytes / (size_t)(n - 1);
}

void pc_shm_shape(const pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, int n, int nodes, size_t *piece,
                  int *slice)
{
    size_t es = pcoll_dtype_size(dtype);
    *slice = pc_shm_slice_shape(&ctx->shm_sizes, count * es, n, nodes);
    *piece = *slice ? pc_shm_slot_bytes(&ctx->shm_sizes) / es : count > 0 ? count : 1;
}

int pc_shm_blocking_shape(const pc_shm_sizes_t *z, size_t bytes, int n, int nodes)
{
    /* one rank per node: its latency path would be the message algorithm
     * and a copy; the slice path pipelines the parts across nodes */
    return n > 1 || pc_shm_slice_shape(z, bytes, n, nodes);
}

/* Every node has the same number of ranks (the columns across nodes need
 * it); that number, or 0. */
static int ranks_per_node(const pc_nodes_t *nodes)
{
    int k = pc_nodes_size(nodes, 0);
    for (int v = 1; v < nodes->count; v++)
        if (pc_nodes_size(nodes, v) != k) return 0;
    return k;
}

static void free_shm(struct pc_shm_allreduce *sh)
{
    if (!sh) return;
    free(sh->arrived);
    free(sh->member);
    free(sh->column_ranks);
    free(sh);
}

/* The members and the column of this rank, or NULL (no memory, or no path
 * by the settings or the node map). */
static struct pc_shm_allreduce *shm_new(const pcoll_t *ctx)
{
    const pc_nodes_t *nodes = &ctx->nodes;
    int k = ranks_per_node(nodes), node = nodes->node_of[ctx->rank];
    if (ctx->shm_sizes.max_bytes == 0 || ctx->size < 2 || k == 0) return NULL;
    struct pc_shm_allreduce *sh = calloc(1, sizeof *sh);
    if (!sh) return NULL;
    sh->n = k;
    sh->me = nodes->local_of[ctx->rank];
    sh->arrived = calloc((size_t)k, sizeof *sh->arrived);
    sh->member = malloc(sizeof(int) * (size_t)k);
    sh->column_ranks = malloc(sizeof(int) * (size_t)nodes->count);
    if (!sh->arrived || !sh->member || !sh->column_ranks) {
        free_shm(sh);
        return NULL;
    }
    for (int i = 0; i < k; i++) sh->member[i] = pc_nodes_rank(nodes, node, i);
    for (int v = 0; v < nodes->count; v++) sh->column_ranks[v] = pc_nodes_rank(nodes, v, sh->me);
    sh->column = (pc_world_part_t){sh->column_ranks, nodes->count, node, 0};
    /* the doorbells reach the members (checked by the nodemem agreement) */
    for (int i = 0; i < k; i++)
        if (!pc_engine_can_kick(ctx->engine, sh->member[i])) {
            free_shm(sh);
            return NULL;
        }
    return sh;
}

int pc_shm_allreduce_open(pcoll_t *ctx)
{
    const pc_shm_sizes_t *sizes = &ctx->shm_sizes;
    struct pc_shm_allreduce *sh = shm_new(ctx);
    /* a slot holds the latency path's largest message and a piece of the
     * slice path's; a gather slot a member's slice of a piece (whole lines,
     * and the last slice's few elements beyond them) */
    size_t chunk = pc_shm_slot_bytes(sizes);
    size_t stride = (HEAD + chunk + LINE - 1) / LINE * LINE;
    size_t gstride = sh ? (chunk / LINE / (size_t)sh->n + 2) * LINE : 0;
    pc_nodemem_t mem;
    /* collective over every rank: none of a node gets a segment unless all
     * of it ask */
    size_t bytes = sh ? area_at(stride, gstride) + pc_shm_group_call_area_bytes(chunk, sh->n) : LINE;
    int rc = pc_nodemem_create(ctx->comm, ctx->node_comm, bytes, sh != NULL, &mem);
    /* and the nodes agree: a rank of every node takes its part in every call */
    int have = rc == PCOLL_SUCCESS && sh;
    if (MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS) have = 0;
    if (!have) {
        if (rc == PCOLL_SUCCESS) pc_nodemem_destroy(&mem);
        free_shm(sh);
        return PCOLL_SUCCESS; /* no path: the message algorithms serve every call */
    }
    sh->mem = mem;
    sh->stride = stride;
    sh->gstride = gstride;
    for (int i = 0; i < sh->n; i++) sh->arrived[i] = &control_of(sh, i)->arrived;
    sh->bar = (pc_nodebar_t){(_Atomic uint64_t *)(seg_of(sh, 0) + counter_at(stride, gstride)), sh->arrived,
                             sh->member, sh->n, sh->me, 0};
    atomic_flag_clear(&sh->busy);
    sh->spin = (long)sh->n <= sysconf(_SC_NPROCESSORS_ONLN); /* the progress threads sleep meanwhile */
    ctx->shm = sh;
    return PCOLL_SUCCESS;
}

void pc_shm_allreduce_close(pcoll_t *ctx)
{
    if (!ctx->shm) return;
    pc_nodemem_destroy(&ctx->shm->mem);
    free_shm(ctx->shm);
    ctx->shm = NULL;
}

int pc_shm_group_areas(const pcoll_t *ctx, char **area, size_t *data_bytes)
{
    const struct pc_shm_allreduce *sh = ctx->shm;
    if (!sh) return 0;
    *data_bytes = pc_shm_slot_bytes(&ctx->shm_sizes);
    if (area)
        for (int k = 0; k < sh->n; k++) area[k] = seg_of(sh, k) + area_at(sh->stride, sh->gstride);
    return 1;
}

int pc_shm_allowed(const pcoll_t *ctx, int n, size_t bytes, int tuned)
{
    return atomic_load(&ctx->algo) == PCOLL_ALGO_AUTO && pc_shm_allowed_any_algo(ctx, n, bytes, tuned);
}

int pc_shm_allowed_any_algo(const pcoll_t *ctx, int n, size_t bytes, int tuned)
{
    if (n < 2 || bytes > ctx->shm_sizes.max_bytes) return 0;
    /* a tuning table that measured a message algorithm faster at this size */
    pcoll_allreduce_algo_t pick = tuned ? pc_tuning_lookup(ctx->tuning, n, ctx->nodes.count, bytes) : PCOLL_ALGO_AUTO;
    return pick == PCOLL_ALGO_AUTO || pick == PCOLL_ALGO_SHM;
}

int pc_shm_allreduce_fits(const pcoll_t *ctx, size_t bytes)
{
    if (!ctx->shm || !pc_shm_allowed(ctx, ctx->size, bytes, 1)) return 0;
    return pc_shm_blocking_shape(&ctx->shm_sizes, bytes, ctx->shm->n, ctx->shm->column.n);
}

int pc_shm_allreduce_takes(const pcoll_t *ctx, size_t count, pcoll_dtype_t dtype)
{
    if (!pc_dtype_valid(dtype)) return 0;
    size_t es = pcoll_dtype_size(dtype);
    return count <= ctx->shm_sizes.max_bytes / es && pc_shm_allreduce_fits(ctx, count * es);
}

static int all_arrived(void *arg)
{
    const shm_wait_t *w = arg;
    return pc_nodebar_reached(&w->ctx->shm->bar, w->phase);
}

static void describe(void *arg, pc_stall_probe_t *p)
{
    const shm_wait_t *w = arg;
    const struct pc_shm_allreduce *sh = w->ctx->shm;
    pc_probe_what(p, "allreduce of %zu B in node-shared memory (barrier %llu of it)", w->bytes,
                  (unsigned long long)(w->phase - sh->call_phase + 1));
    for (int i = 0; i < sh->n; i++) {
        if (pc_nodebar_missing(&sh->bar, i, w->phase))
            pc_probe_suspect(p, sh->member[i],
                             pc_nodebar_missing(&sh->bar, i, sh->call_phase) ? "has not started it"
                                                                               : "has not reached that barrier",
                             PC_WHY_CAUSE);
    }
}

/* A rank running at the same time as the others sees the last arrival
 * within a few hundred nanoseconds: a short spin before the engine's wait
 * (which looks at MPI, then sleeps on the doorbell). */
#define SPIN_LOOKS 256
#define YIELD_LOOKS 2000

int pc_shm_wait(pcoll_t *ctx, pc_pred_fn ready, void *arg, pc_describe_fn report, _Atomic uint64_t *sleeps,
                uint64_t mark, const char *fn)
{
    /* more ranks on the node than CPUs: the CPU spun away here is the one
     * a rank still to come needs, so no spin at all */
    for (int i = ctx->shm->spin ? 0 : SPIN_LOOKS; i < SPIN_LOOKS; i++) {
        if (ready(arg)) return PCOLL_SUCCESS;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    /* then yield the CPU for a while (as MPI does) rather than sleep at
     * once, which would cost a wake-up per rank and operation */
    for (int i = 0; i < YIELD_LOOKS; i++) {
        if (ready(arg)) return PCOLL_SUCCESS;
        sched_yield();
    }
    /* from here this rank may sleep: whoever makes it ready wakes it.
     * Either it sees this mark or this rank sees its write: a store then a
     * load (ready) here, a write then a load there, all seq_cst, so they
     * fall in one order and one of the two loads sees the other's store */
    atomic_store(sleeps, mark);
    pc_wait_t how = {.fn = fn, .done = ready, .arg = arg, .describe = report, .describe_arg = arg};
    int rc = pc_block(ctx, &how);
    atomic_store(sleeps, 0);
    return rc;
}

static int wait_arrived(pcoll_t *ctx, uint64_t phase, size_t bytes, const char *fn)
{
    shm_wait_t w = {ctx, phase, bytes};
    return pc_shm_wait(ctx, all_arrived, &w, describe, &control_of(ctx->shm, ctx->shm->me)->sleeps, phase, fn);
}

/* After a failure midway: the ranks are out of step for good (see the
 * top); later operations on all ranks fail at this rank. */
static void mark_broken(pcoll_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    if (ctx->world.next_seq < ctx->world.broken_seq) ctx->world.broken_seq = ctx->world.next_seq;
    pthread_mutex_unlock(&ctx->lock);
}

/* The next barrier phase: PCOLL_SUCCESS once every member reached it. */
static int barrier(pcoll_t *ctx, size_t bytes, const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    uint64_t p = ++sh->phase;
    if (pc_nodebar_arrive(&sh->bar, p)) /* the last: wake those that sleep */
        for (int i = 0; i < sh->n; i++)
            if (i != sh->me && atomic_load(&control_of(sh, i)->sleeps) == p)
                pc_engine_nudge(ctx->engine, sh->member[i]);
    int rc = wait_arrived(ctx, p, bytes, fn);
    if (rc != PCOLL_SUCCESS) mark_broken(ctx);
    return rc;
}

/* Writes a piece into this rank's slot of use u, with the call's header. */
static void put(struct pc_shm_allreduce *sh, uint64_t u, const void *src, size_t piece, size_t bytes,
                pcoll_dtype_t dtype, pcoll_op_t op)
{
    slot_t *mine = slot_of(sh, sh->me, u);
    if (piece) memcpy(data_of(mine), src, piece);
    mine->bytes = bytes;
    mine->dtype = (uint32_t)dtype;
    mine->op = (uint32_t)op;
}

/* Every member compares every member's header: the same verdict on the
 * node.  (Across nodes, as for any operation on all ranks, PCOLL_CHECK
 * compares the calls.) */
static int same_call(pcoll_t *ctx, uint64_t u, const char *fn)
{
    const struct pc_shm_allreduce *sh = ctx->shm;
    const slot_t *first = slot_of(sh, 0, u);
    for (int i = 1; i < sh->n; i++) {
        const slot_t *o = slot_of(sh, i, u);
        if (o->bytes != first->bytes || o->dtype != first->dtype || o->op != first->op)
            return pc_error(PCOLL_ERR_ARG, fn,
                            "the ranks called it differently: %llu B of %s, op %u at rank %d; %llu B of %s, op %u "
                            "at rank %d",
                            (unsigned long long)first->bytes, pcoll_dtype_name((pcoll_dtype_t)first->dtype),
                            first->op, sh->member[0], (unsigned long long)o->bytes,
                            pcoll_dtype_name((pcoll_dtype_t)o->dtype), o->op, sh->member[i]);
    }
    return PCOLL_SUCCESS;
}

/* out[0, count) = the member-order sum of elements [off, off + count) of
 * every member's slot of use u (a node of one rank: a copy). */
static void add_up(const struct pc_shm_allreduce *sh, uint64_t u, size_t off, void *out, size_t count,
                   pcoll_dtype_t dtype)
{
    if (!count) return;
    size_t es = pcoll_dtype_size(dtype);
    if (sh->n == 1) {
        memcpy(out, data_of(slot_of(sh, 0, u)) + off, count * es);
        return;
    }
    pc_reduce_sum(out, data_of(slot_of(sh, 0, u)) + off, data_of(slot_of(sh, 1, u)) + off, count, dtype);
    for (int i = 2; i < sh->n; i++) pc_reduce_sum(out, out, data_of(slot_of(sh, i, u)) + off, count, dtype);
}

/* The sum of the node sums in buf, across nodes: this rank's column (part
 * `part` of the call, whose number was reserved), started now; *req stays
 * NULL on one node or when the column has nothing here. */
static int across_start(pcoll_t *ctx, void *buf, size_t count, pcoll_dtype_t dtype, uint64_t part,
                        pcoll_request_t **req, const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    *req = NULL;
    if (sh->column.n == 1 || count == 0) return PCOLL_SUCCESS;
    pc_world_part_t column = sh->column;
    column.seq = sh->first_part + part;
    return pc_world_part_start(ctx, buf, count, dtype, &column, fn, req);
}

static int across_wait(pcoll_request_t **req, const char *fn)
{
    return *req ? pc_request_wait(req, fn) : PCOLL_SUCCESS;
}

static void finish_avg(const pcoll_t *ctx, void *buf, size_t count, pcoll_dtype_t dtype, pcoll_op_t op)
{
    if (op == PCOLL_AVG && count) pc_reduce_div(buf, count, dtype, ctx->size);
}

static int latency_path(pcoll_t *ctx, const void *in, void *out, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                        const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    size_t bytes = count * pcoll_dtype_size(dtype);
    uint64_t u = ++sh->use;
    put(sh, u, in, bytes, bytes, dtype, op);
    int rc = barrier(ctx, bytes, fn);
    if (rc == PCOLL_SUCCESS) rc = same_call(ctx, u, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    add_up(sh, u, 0, out, count, dtype);
    /* every member sums the whole message with its column: no second
     * barrier, the same bits in every column */
    pcoll_request_t *req;
    if ((rc = across_start(ctx, out, count, dtype, 0, &req, fn)) == PCOLL_SUCCESS) rc = across_wait(&req, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    finish_avg(ctx, out, count, dtype, op);
    return PCOLL_SUCCESS;
}

/* The slice path's state during one call. */
typedef struct slices {
    const char *in;
    char *out;
    size_t count, per_piece, es, bytes;
    pcoll_dtype_t dtype;
    pcoll_op_t op;
    pcoll_request_t *across[PC_SHM_PIPELINE_DEPTH]; /* piece j's part across nodes: [j % depth] */
    int depth;
} slices_t;

static size_t piece_len(const slices_t *c, size_t j)
{
    size_t first = j * c->per_piece;
    return c->count - first < c->per_piece ? c->count - first : c->per_piece;
}

/* Member i's slice [*lo, *hi) of a piece of `piece` elements. */
static void slice_of(const struct pc_shm_allreduce *sh, size_t piece, size_t es, int i, size_t *lo, size_t *hi)
{
    *lo = pc_shm_slice_start(piece, es, i, sh->n);
    *hi = pc_shm_slice_start(piece, es, i + 1, sh->n);
}

/* Piece j, first half: every member's piece into its slot, this rank's
 * slice of the node sum into out, then that slice across nodes. */
static int reduce_piece(pcoll_t *ctx, slices_t *c, size_t j, const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    size_t piece = piece_len(c, j), first = j * c->per_piece;
    uint64_t u = ++sh->use;
    put(sh, u, c->in + first * c->es, piece * c->es, c->bytes, c->dtype, c->op);
    int rc = barrier(ctx, c->bytes, fn);
    if (rc == PCOLL_SUCCESS && j == 0) rc = same_call(ctx, u, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    size_t lo, hi;
    slice_of(sh, piece, c->es, sh->me, &lo, &hi);
    char *mine = c->out + (first + lo) * c->es;
    add_up(sh, u, lo * c->es, mine, hi - lo, c->dtype);
    return across_start(ctx, mine, hi - lo, c->dtype, j, &c->across[j % (size_t)c->depth], fn);
}

/* Piece j, second half: this rank's finished slice into its gather slot,
 * and every other member's from theirs. */
static int gather_piece(pcoll_t *ctx, slices_t *c, size_t j, const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    size_t piece = piece_len(c, j), first = j * c->per_piece;
    size_t lo, hi;
    slice_of(sh, piece, c->es, sh->me, &lo, &hi);
    char *dst = c->out + first * c->es;
    int rc = across_wait(&c->across[j % (size_t)c->depth], fn);
    if (rc != PCOLL_SUCCESS) return rc;
    finish_avg(ctx, dst + lo * c->es, hi - lo, c->dtype, c->op);
    uint64_t g = ++sh->guse;
    memcpy(gather_of(sh, sh->me, g), dst + lo * c->es, (hi - lo) * c->es);
    if ((rc = barrier(ctx, c->bytes, fn)) != PCOLL_SUCCESS) return rc;
    for (int i = 0; i < sh->n; i++) {
        if (i == sh->me) continue;
        size_t a, b;
        slice_of(sh, piece, c->es, i, &a, &b);
        memcpy(dst + a * c->es, gather_of(sh, i, g), (b - a) * c->es);
    }
    return PCOLL_SUCCESS;
}

static int slice_path(pcoll_t *ctx, const void *in, void *out, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                      size_t per_piece, const char *fn)
{
    size_t es = pcoll_dtype_size(dtype);
    slices_t c = {in, out, count, per_piece, es, count * es, dtype, op, {NULL},
                  ctx->shm->column.n > 1 ? PC_SHM_PIPELINE_DEPTH : 1};
    size_t pieces = (count + per_piece - 1) / per_piece, gathered = 0;
    int rc = PCOLL_SUCCESS;
    for (size_t j = 0; j < pieces && rc == PCOLL_SUCCESS; j++) {
        rc = reduce_piece(ctx, &c, j, fn);
        while (rc == PCOLL_SUCCESS && j + 1 - gathered >= (size_t)c.depth) rc = gather_piece(ctx, &c, gathered++, fn);
    }
    while (rc == PCOLL_SUCCESS && gathered < pieces) rc = gather_piece(ctx, &c, gathered++, fn);
    if (rc != PCOLL_SUCCESS) /* the parts still in flight are given up (MPI may still use them: kept) */
        for (int d = 0; d < c.depth; d++) pc_request_give_up(&c.across[d], fn);
    return rc;
}

int pc_shm_allreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                     pcoll_op_t op, const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    if (atomic_flag_test_and_set(&sh->busy))
        return pc_error(PCOLL_ERR_STATE, fn,
                        "another thread of this rank is in a pcoll_allreduce on all ranks of this context: "
                        "collectives on one context are called one at a time");
    const void *in = sendbuf == PCOLL_IN_PLACE ? recvbuf : sendbuf;
    sh->call_phase = sh->phase + 1;
    size_t piece;
    int slice;
    pc_shm_shape(ctx, count, dtype, sh->n, sh->column.n, &piece, &slice);
    /* the numbers of its parts across nodes (none on one node) */
    uint64_t parts = sh->column.n == 1 ? 0 : slice ? (count + piece - 1) / piece : 1;
    int rc = pc_world_reserve(ctx, parts, &sh->first_part, fn);
    if (rc == PCOLL_SUCCESS)
        rc = slice ? slice_path(ctx, in, recvbuf, count, dtype, op, piece, fn)
                   : latency_path(ctx, in, recvbuf, count, dtype, op, fn);
    atomic_flag_clear(&sh->busy);
    return rc;
}
