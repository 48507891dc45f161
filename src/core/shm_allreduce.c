/*
 * Node-shared allreduce: every rank of the context on one node, blocking
 * calls, through node-shared memory instead of messages.
 *
 *   rank r's segment (MPI_Win_allocate_shared, mapped once at pcoll_init):
 *     | control: arrived sleeps |  slot 0: header | data ... |  slot 1: ... |
 *     (each part 64 B aligned; a slot's header of 32 B, its data after it,
 *     PCOLL_SHM_CHUNK_BYTES of data; rank 0's segment ends with `arrivals`,
 *     a counter on a line of its own)
 *
 *   Barrier phase p (numbered alike at every rank): arrived = p, then
 *   arrivals += 1; the rank that makes it n * p (the last to come) nudges
 *   the doorbell of every rank whose control line says sleeps = p; every
 *   rank waits until arrivals >= n * p (spin, yield, then pc_block: stall
 *   report and timeout name the ranks whose `arrived` is short of p).
 *
 *   Slot use u (one per piece of a message; slot u % 2):
 *
 *   latency path ((n - 1) x bytes up to PCOLL_SHM_SLICE_BYTES): one piece
 *     1. write the vector into own slot, its header (bytes, dtype, op)
 *     2. barrier; compare every rank's header (a call that differs fails all)
 *     3. out = ((v0 + v1) + v2) + ... + v(n-1), read from the slots in place
 *
 *   slice path (larger messages), per piece of at most a slot's size:
 *     1. write the piece into own slot                 rank:  0   1   2
 *     2. barrier (first piece: compare headers)        slot0 [a0| b0| c0]
 *     3. rank r adds up slice r of every slot in        slot1 [a1| b1| c1]
 *        rank order into out, then writes it over       slot2 [a2| b2| c2]
 *        slice r of its own slot (only r reads it)       rank 0 sums the a's ...
 *     4. barrier
 *     5. copy every other rank's slice from its slot into out
 *
 * Either way each element is added up in rank order, v0 + v1 + ... (then
 * / n for AVG): the direct algorithm's sums, bit for bit, whatever the
 * size, the piece or the slice it falls in.  The latency path writes a
 * rank's own line(s) and the counter once, and reads every other rank's;
 * only the last to arrive wakes anyone.  The slice path moves about 3x the
 * message per rank through memory whatever n is (write it in, read n
 * slices of 1/n, read the others' results), against n x for the latency
 * path, at the cost of a second barrier per piece.
 *
 * Two slots suffice: a rank writes slot use u only after it passed the
 * first barrier of use u - 1, which every rank reaches only after it read
 * the last of use u - 2.  After a timeout that no longer holds: as for the
 * message algorithms, every later operation on all ranks fails at this rank
 * (PCOLL_ERR_STATE: the ranks are out of step).
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
#include "stall.h"

#define LINE 64
#define HEAD 32 /* a slot's header: a small message's data shares its line (one line written per call) */

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
    size_t stride;      /* bytes per slot */
    uint64_t use;       /* slot uses so far (the application thread, one
                           call at a time, as for any collective) */
    uint64_t phase;     /* barrier phases so far */
    uint64_t call_phase; /* the first barrier of the call in progress */
    pc_nodebar_t bar;           /* counter: `arrivals` in rank 0's segment */
    _Atomic uint64_t **arrived; /* each rank's control line */
    int spin;                   /* a CPU per rank: waiting may spin first */
    atomic_flag busy;           /* a call in progress (one thread at a time) */
};

typedef struct shm_wait {
    pcoll_t *ctx;
    uint64_t phase; /* done when arrivals reach size x phase */
    size_t bytes;
} shm_wait_t;

static control_t *control_of(const struct pc_shm_allreduce *sh, int rank)
{
    return (control_t *)sh->mem.seg[rank];
}

static slot_t *slot_of(const struct pc_shm_allreduce *sh, int rank, uint64_t use)
{
    return (slot_t *)((char *)sh->mem.seg[rank] + LINE + (use & 1) * sh->stride);
}

static char *data_of(slot_t *s) { return (char *)s + HEAD; }

/* A slot's data bytes: the latency path's largest message and a piece of
 * the slice path's, within the largest message. */
static size_t slot_bytes(const pc_shm_sizes_t *z)
{
    size_t slot = z->chunk_bytes > z->slice_bytes ? z->chunk_bytes : z->slice_bytes;
    return slot < z->max_bytes ? slot : z->max_bytes;
}

void pc_shm_shape(const pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, int n, size_t *piece, int *slice)
{
    const pc_shm_sizes_t *z = &ctx->shm_sizes;
    size_t es = pcoll_dtype_size(dtype), bytes = count * es, slot = slot_bytes(z);
    /* the latency path reads n x the message at every rank, the slice path
     * about 3.5 x plus a second barrier: the latency path while the bytes
     * the slice path would save, (n - 1) x bytes roughly, stay within
     * PCOLL_SHM_SLICE_BYTES (measured: the crossing lies near 64 KiB at 4
     * ranks and near 4 KiB at 16) */
    *slice = bytes > slot || bytes > z->slice_bytes / (size_t)(n - 1);
    *piece = *slice ? slot / es : count > 0 ? count : 1;
}

int pc_shm_allreduce_open(pcoll_t *ctx)
{
    const pc_shm_sizes_t *sizes = &ctx->shm_sizes;
    /* the same at every rank: the node map, the settings (agreed), the
     * doorbells' reach (checked by the nodemem agreement below) */
    int use = sizes->max_bytes > 0 && ctx->size >= 2 && ctx->nodes.count == 1;
    for (int r = 0; use && r < ctx->size; r++) use = pc_engine_can_kick(ctx->engine, r);
    struct pc_shm_allreduce *sh = use ? calloc(1, sizeof *sh) : NULL;
    if (sh && !(sh->arrived = calloc((size_t)ctx->size, sizeof *sh->arrived))) {
        free(sh);
        sh = NULL;
    }
    use = use && sh;
    /* a slot holds the latency path's largest message and a piece of the
     * slice path's */
    size_t chunk = slot_bytes(sizes);
    size_t stride = (HEAD + chunk + LINE - 1) / LINE * LINE;
    pc_nodemem_t mem;
    /* collective over every rank: none gets a segment unless all ask */
    int rc = pc_nodemem_create(ctx->comm, ctx->node_comm, use ? LINE + 2 * stride + LINE : LINE, use, &mem);
    if (rc != PCOLL_SUCCESS || !use) {
        if (rc == PCOLL_SUCCESS) pc_nodemem_destroy(&mem);
        if (sh) free(sh->arrived);
        free(sh);
        return PCOLL_SUCCESS; /* no path: the message algorithms serve every call */
    }
    sh->mem = mem;
    sh->stride = stride;
    for (int r = 0; r < ctx->size; r++) sh->arrived[r] = &((control_t *)mem.seg[r])->arrived;
    sh->bar = (pc_nodebar_t){(_Atomic uint64_t *)((char *)mem.seg[0] + LINE + 2 * stride), sh->arrived, NULL,
                             ctx->size, ctx->rank, 0};
    atomic_flag_clear(&sh->busy);
    sh->spin = (long)ctx->size <= sysconf(_SC_NPROCESSORS_ONLN); /* the progress threads sleep meanwhile */
    ctx->shm = sh;
    return PCOLL_SUCCESS;
}

void pc_shm_allreduce_close(pcoll_t *ctx)
{
    if (!ctx->shm) return;
    pc_nodemem_destroy(&ctx->shm->mem);
    free(ctx->shm->arrived);
    free(ctx->shm);
    ctx->shm = NULL;
}

int pc_shm_allowed(const pcoll_t *ctx, int n, size_t bytes, int tuned)
{
    if (n < 2 || bytes > ctx->shm_sizes.max_bytes || atomic_load(&ctx->algo) != PCOLL_ALGO_AUTO) return 0;
    /* a tuning table that measured a message algorithm faster at this size */
    pcoll_allreduce_algo_t pick = tuned ? pc_tuning_lookup(ctx->tuning, n, ctx->nodes.count, bytes) : PCOLL_ALGO_AUTO;
    return pick == PCOLL_ALGO_AUTO || pick == PCOLL_ALGO_SHM;
}

int pc_shm_allreduce_fits(const pcoll_t *ctx, size_t bytes)
{
    return ctx->shm && pc_shm_allowed(ctx, ctx->size, bytes, 1);
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
    for (int r = 0; r < w->ctx->size; r++) {
        if (pc_nodebar_missing(&sh->bar, r, w->phase))
            pc_probe_suspect(p, r,
                             pc_nodebar_missing(&sh->bar, r, sh->call_phase) ? "has not started it"
                                                                               : "has not reached that barrier",
                             PC_WHY_CAUSE);
    }
}

/* A rank running at the same time as the others sees the last arrival
 * within a few hundred nanoseconds: a short spin before the engine's wait
 * (which looks at MPI, then sleeps on the doorbell). */
#define SPIN_LOOKS 256
#define YIELD_LOOKS 2000

static int wait_arrived(pcoll_t *ctx, uint64_t phase, size_t bytes, const char *fn)
{
    shm_wait_t w = {ctx, phase, bytes};
    /* more ranks than CPUs: the CPU spun away here is the one a rank still
     * to arrive needs, so no spin at all */
    for (int i = ctx->shm->spin ? 0 : SPIN_LOOKS; i < SPIN_LOOKS; i++) {
        if (all_arrived(&w)) return PCOLL_SUCCESS;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    /* more ranks than CPUs: the others need this CPU to arrive; yield it
     * for a while (as MPI does) rather than sleep at once, which would
     * cost a wake-up per rank and operation */
    for (int i = 0; i < YIELD_LOOKS; i++) {
        if (all_arrived(&w)) return PCOLL_SUCCESS;
        sched_yield();
    }
    /* from here this rank may sleep: the last to arrive wakes it.  Either
     * it sees this mark or this rank sees its arrival: a store then a load
     * (all_arrived) here, an RMW then a load there, all four seq_cst, so
     * they fall in one order and one of the two loads sees the other's
     * write */
    atomic_store(&control_of(ctx->shm, ctx->rank)->sleeps, phase);
    pc_wait_t how = {fn, all_arrived, &w, describe, &w, 0, 0, 0};
    return pc_block(ctx, &how);
}

/* The next barrier phase: PCOLL_SUCCESS once every rank reached it.  A
 * timeout leaves the ranks out of step for good (see the top). */
static int barrier(pcoll_t *ctx, size_t bytes, const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    uint64_t p = ++sh->phase;
    if (pc_nodebar_arrive(&sh->bar, p)) /* the last: wake those that sleep */
        for (int r = 0; r < ctx->size; r++)
            if (r != ctx->rank && atomic_load(&control_of(sh, r)->sleeps) == p) pc_engine_nudge(ctx->engine, r);
    int rc = wait_arrived(ctx, p, bytes, fn);
    if (rc != PCOLL_SUCCESS) {
        pthread_mutex_lock(&ctx->lock);
        if (ctx->world.next_seq < ctx->world.broken_seq) ctx->world.broken_seq = ctx->world.next_seq;
        pthread_mutex_unlock(&ctx->lock);
    }
    return rc;
}

/* Writes a piece into this rank's slot of use u, with the call's header. */
static void put(struct pc_shm_allreduce *sh, int rank, uint64_t u, const void *src, size_t piece, size_t bytes,
                pcoll_dtype_t dtype, pcoll_op_t op)
{
    slot_t *mine = slot_of(sh, rank, u);
    if (piece) memcpy(data_of(mine), src, piece);
    mine->bytes = bytes;
    mine->dtype = (uint32_t)dtype;
    mine->op = (uint32_t)op;
}

/* Every rank compares every rank's header: the same verdict everywhere. */
static int same_call(pcoll_t *ctx, uint64_t u, const char *fn)
{
    const slot_t *first = slot_of(ctx->shm, 0, u);
    for (int r = 1; r < ctx->size; r++) {
        const slot_t *o = slot_of(ctx->shm, r, u);
        if (o->bytes != first->bytes || o->dtype != first->dtype || o->op != first->op)
            return pc_error(PCOLL_ERR_ARG, fn,
                            "the ranks called it differently: %llu B of %s, op %u at rank 0; %llu B of %s, op %u "
                            "at rank %d",
                            (unsigned long long)first->bytes, pcoll_dtype_name((pcoll_dtype_t)first->dtype),
                            first->op, (unsigned long long)o->bytes, pcoll_dtype_name((pcoll_dtype_t)o->dtype),
                            o->op, r);
    }
    return PCOLL_SUCCESS;
}

/* out[0, count) = the rank-order sum of elements [off, off + count) of
 * every rank's slot of use u (/ n for AVG). */
static void add_up(const pcoll_t *ctx, uint64_t u, size_t off, void *out, size_t count, pcoll_dtype_t dtype,
                   pcoll_op_t op)
{
    const struct pc_shm_allreduce *sh = ctx->shm;
    if (!count) return;
    pc_reduce_sum(out, data_of(slot_of(sh, 0, u)) + off, data_of(slot_of(sh, 1, u)) + off, count, dtype);
    for (int r = 2; r < ctx->size; r++) pc_reduce_sum(out, out, data_of(slot_of(sh, r, u)) + off, count, dtype);
    if (op == PCOLL_AVG) pc_reduce_div(out, count, dtype, ctx->size);
}

static int latency_path(pcoll_t *ctx, const void *in, void *out, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                        const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    size_t bytes = count * pcoll_dtype_size(dtype);
    uint64_t u = ++sh->use;
    put(sh, ctx->rank, u, in, bytes, bytes, dtype, op);
    int rc = barrier(ctx, bytes, fn);
    if (rc == PCOLL_SUCCESS) rc = same_call(ctx, u, fn);
    if (rc == PCOLL_SUCCESS) add_up(ctx, u, 0, out, count, dtype, op);
    return rc;
}

static int slice_path(pcoll_t *ctx, const void *in, void *out, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                      size_t per_piece, const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    size_t es = pcoll_dtype_size(dtype), bytes = count * es;
    int n = ctx->size, me = ctx->rank, rc;
    for (size_t first = 0; first < count; first += per_piece) {
        size_t piece = count - first < per_piece ? count - first : per_piece;
        char *dst = (char *)out + first * es;
        uint64_t u = ++sh->use;
        put(sh, me, u, (const char *)in + first * es, piece * es, bytes, dtype, op);
        if ((rc = barrier(ctx, bytes, fn)) != PCOLL_SUCCESS) return rc;
        if (first == 0 && (rc = same_call(ctx, u, fn)) != PCOLL_SUCCESS) return rc;
        size_t lo = pc_shm_slice_start(piece, es, me, n), hi = pc_shm_slice_start(piece, es, me + 1, n);
        add_up(ctx, u, lo * es, dst + lo * es, hi - lo, dtype, op);
        memcpy(data_of(slot_of(sh, me, u)) + lo * es, dst + lo * es, (hi - lo) * es);
        if ((rc = barrier(ctx, bytes, fn)) != PCOLL_SUCCESS) return rc;
        for (int r = 0; r < n; r++) {
            if (r == me) continue;
            size_t a = pc_shm_slice_start(piece, es, r, n), b = pc_shm_slice_start(piece, es, r + 1, n);
            memcpy(dst + a * es, data_of(slot_of(sh, r, u)) + a * es, (b - a) * es);
        }
    }
    return PCOLL_SUCCESS;
}

int pc_shm_allreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                     pcoll_op_t op, const char *fn)
{
    if (atomic_flag_test_and_set(&ctx->shm->busy))
        return pc_error(PCOLL_ERR_STATE, fn,
                        "another thread of this rank is in a pcoll_allreduce on all ranks of this context: "
                        "collectives on one context are called one at a time");
    pthread_mutex_lock(&ctx->lock);
    int broken = ctx->world.next_seq >= ctx->world.broken_seq;
    pthread_mutex_unlock(&ctx->lock);
    const void *in = sendbuf == PCOLL_IN_PLACE ? recvbuf : sendbuf;
    ctx->shm->call_phase = ctx->shm->phase + 1;
    size_t piece;
    int slice, rc;
    pc_shm_shape(ctx, count, dtype, ctx->size, &piece, &slice);
    if (broken)
        rc = pc_error(PCOLL_ERR_STATE, fn,
                      "an earlier operation on all ranks timed out at this rank: the ranks are out of step");
    else if (!slice)
        rc = latency_path(ctx, in, recvbuf, count, dtype, op, fn);
    else
        rc = slice_path(ctx, in, recvbuf, count, dtype, op, piece, fn);
    atomic_flag_clear(&ctx->shm->busy);
    return rc;
}
