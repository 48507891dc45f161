/*
 * Node-shared allreduce, latency path: every rank of the context on one
 * node, small messages, blocking calls.
 *
 *   rank r's segment (MPI_Win_allocate_shared, mapped once at pcoll_init):
 *     slot 0 | seq sleeps bytes dtype op | data ... |   slot 1 | ... |
 *     (each slot 64 B aligned; a header of 32 B, the data after it)
 *
 *   rank 0's segment also holds `arrivals`, a counter on a line of its own
 *
 *   operation number k (the same count of such calls at every rank):
 *     1. write the vector into own slot k % 2, then its seq = k  (release),
 *        then arrivals += 1; the rank that makes it n * k (the last to
 *        come) nudges the doorbell of every rank that may sleep (its
 *        slot's `sleeps` says k: it spun and yielded long enough)
 *     2. wait until arrivals >= n * k  (pc_block: stall report and timeout
 *        name the ranks whose slot does not say k yet); every rank compares
 *        every header (bytes, dtype, op): a call that differs fails all
 *     3. out = ((v0 + v1) + v2) + ... + v(n-1)  read from the slots in
 *        place; / n for AVG: the direct algorithm's sums, bit for bit
 *
 * Per call a rank writes its own line(s) and the counter once, and reads
 * every other rank's line(s); only the last to arrive wakes the others (one
 * round of wake-ups, not n per operation); no message, no matching, no
 * progress thread.  Two slots suffice: a rank
 * overwrites slot k % 2 (which held k - 2) only after every rank has
 * written k - 1, and a rank writes k - 1 only after it finished reading
 * k - 2.  After a timeout that no longer holds: as for the message
 * algorithms, every later operation on all ranks fails at this rank
 * (PCOLL_ERR_STATE: the ranks are out of step).
 */
#include "shm_allreduce.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/nodemem.h"
#include "../engine/reduce.h"
#include "../util/error.h"
#include "stall.h"

#define LINE 64
#define HEAD 32 /* the slot's header: data starts in the same line */

typedef struct slot {
    _Atomic uint64_t seq;    /* the operation written here (stall reports) */
    _Atomic uint64_t sleeps; /* k: this rank may sleep waiting for operation k */
    uint64_t bytes;          /* what the rank called with: compared by all */
    uint32_t dtype, op;
    /* data follows */
} slot_t;

struct pc_shm_allreduce {
    pc_nodemem_t mem;
    size_t max_bytes; /* data per slot */
    size_t stride;    /* bytes per slot */
    uint64_t seq;     /* the last operation started here (application thread,
                         one call at a time, as for any collective) */
    _Atomic uint64_t *arrivals; /* in rank 0's segment */
    int spin;                   /* a CPU per rank: waiting may spin first */
    atomic_flag busy;           /* a call in progress (one thread at a time) */
};

typedef struct shm_wait {
    pcoll_t *ctx;
    uint64_t seq; /* the operation: done when arrivals reach size x seq */
    size_t bytes;
} shm_wait_t;

static slot_t *slot_of(const struct pc_shm_allreduce *sh, int rank, uint64_t seq)
{
    return (slot_t *)((char *)sh->mem.seg[rank] + (seq & 1) * sh->stride);
}

static void *data_of(slot_t *s) { return (char *)s + HEAD; }

int pc_shm_allreduce_open(pcoll_t *ctx, size_t max_bytes)
{
    /* the same at every rank: the node map, the setting (agreed), the
     * doorbells' reach (checked by the nodemem agreement below) */
    int use = max_bytes > 0 && ctx->size >= 2 && ctx->nodes.count == 1;
    for (int r = 0; use && r < ctx->size; r++) use = pc_engine_can_kick(ctx->engine, r);
    struct pc_shm_allreduce *sh = use ? calloc(1, sizeof *sh) : NULL;
    use = use && sh;
    size_t stride = (HEAD + max_bytes + LINE - 1) / LINE * LINE;
    pc_nodemem_t mem;
    /* collective over every rank: none gets a segment unless all ask */
    int rc = pc_nodemem_create(ctx->comm, ctx->node_comm, use ? 2 * stride + LINE : LINE, use, &mem);
    if (rc != PCOLL_SUCCESS || !use) {
        if (rc == PCOLL_SUCCESS) pc_nodemem_destroy(&mem);
        free(sh);
        return PCOLL_SUCCESS; /* no path: the message algorithms serve every call */
    }
    sh->mem = mem;
    sh->max_bytes = max_bytes;
    sh->stride = stride;
    sh->arrivals = (_Atomic uint64_t *)((char *)mem.seg[0] + 2 * stride);
    atomic_flag_clear(&sh->busy);
    sh->spin = (long)ctx->size <= sysconf(_SC_NPROCESSORS_ONLN); /* the progress threads sleep meanwhile */
    ctx->shm = sh;
    return PCOLL_SUCCESS;
}

void pc_shm_allreduce_close(pcoll_t *ctx)
{
    if (!ctx->shm) return;
    pc_nodemem_destroy(&ctx->shm->mem);
    free(ctx->shm);
    ctx->shm = NULL;
}

int pc_shm_allreduce_fits(const pcoll_t *ctx, size_t bytes)
{
    return ctx->shm && bytes <= ctx->shm->max_bytes && atomic_load(&ctx->algo) == PCOLL_ALGO_AUTO;
}

int pc_shm_allreduce_takes(const pcoll_t *ctx, size_t count, pcoll_dtype_t dtype)
{
    if (!ctx->shm || !pc_dtype_valid(dtype)) return 0;
    size_t es = pcoll_dtype_size(dtype);
    return count <= ctx->shm->max_bytes / es && pc_shm_allreduce_fits(ctx, count * es);
}

static int all_written(void *arg)
{
    const shm_wait_t *w = arg;
    return atomic_load(w->ctx->shm->arrivals) >= w->seq * (uint64_t)w->ctx->size;
}

static void describe(void *arg, pc_stall_probe_t *p)
{
    const shm_wait_t *w = arg;
    const struct pc_shm_allreduce *sh = w->ctx->shm;
    pc_probe_what(p, "allreduce of %zu B in node-shared memory (operation %llu)", w->bytes,
                  (unsigned long long)w->seq);
    for (int r = 0; r < w->ctx->size; r++)
        if (atomic_load_explicit(&slot_of(sh, r, w->seq)->seq, memory_order_acquire) < w->seq)
            pc_probe_suspect(p, r, "has not started it", PC_WHY_CAUSE);
}

/* A rank running at the same time as the others sees the last arrival
 * within a few hundred nanoseconds: a short spin before the engine's wait
 * (which looks at MPI, then sleeps on the doorbell). */
#define SPIN_LOOKS 256
#define YIELD_LOOKS 2000

static int wait_written(pcoll_t *ctx, uint64_t seq, size_t bytes, const char *fn)
{
    shm_wait_t w = {ctx, seq, bytes};
    /* more ranks than CPUs: the CPU spun away here is the one a rank still
     * to arrive needs, so no spin at all */
    for (int i = ctx->shm->spin ? 0 : SPIN_LOOKS; i < SPIN_LOOKS; i++) {
        if (all_written(&w)) return PCOLL_SUCCESS;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    /* more ranks than CPUs: the others need this CPU to arrive; yield it
     * for a while (as MPI does) rather than sleep at once, which would
     * cost a wake-up per rank and operation */
    for (int i = 0; i < YIELD_LOOKS; i++) {
        if (all_written(&w)) return PCOLL_SUCCESS;
        sched_yield();
    }
    /* from here this rank may sleep: the last to arrive wakes it.  Either
     * it sees this mark or this rank sees its arrival: a store then a load
     * (all_written) here, an RMW then a load there, all four seq_cst, so
     * they fall in one order and one of the two loads sees the other's
     * write */
    atomic_store(&slot_of(ctx->shm, ctx->rank, seq)->sleeps, seq);
    pc_wait_t how = {fn, all_written, &w, describe, &w, 0, 0, 0};
    return pc_block(ctx, &how);
}

/* Every rank compares every rank's header: the same verdict everywhere. */
static int same_call(pcoll_t *ctx, uint64_t k, const char *fn)
{
    const slot_t *first = slot_of(ctx->shm, 0, k);
    for (int r = 1; r < ctx->size; r++) {
        const slot_t *o = slot_of(ctx->shm, r, k);
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

static int run(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
               const char *fn)
{
    struct pc_shm_allreduce *sh = ctx->shm;
    size_t bytes = count * pcoll_dtype_size(dtype);
    pthread_mutex_lock(&ctx->lock);
    int broken = ctx->world.next_seq >= ctx->world.broken_seq;
    pthread_mutex_unlock(&ctx->lock);
    if (broken)
        return pc_error(PCOLL_ERR_STATE, fn,
                        "an earlier operation on all ranks timed out at this rank: the ranks are out of step");
    uint64_t k = ++sh->seq;
    int rc;
    slot_t *mine = slot_of(sh, ctx->rank, k);
    if (bytes) memcpy(data_of(mine), sendbuf == PCOLL_IN_PLACE ? recvbuf : sendbuf, bytes);
    mine->bytes = bytes;
    mine->dtype = (uint32_t)dtype;
    mine->op = (uint32_t)op;
    atomic_store_explicit(&mine->seq, k, memory_order_release);
    if (atomic_fetch_add(sh->arrivals, 1) + 1 == k * (uint64_t)ctx->size)
        for (int r = 0; r < ctx->size; r++)
            if (r != ctx->rank && atomic_load(&slot_of(sh, r, k)->sleeps) == k) pc_engine_nudge(ctx->engine, r);
    if ((rc = wait_written(ctx, k, bytes, fn)) != PCOLL_SUCCESS) {
        pthread_mutex_lock(&ctx->lock);
        if (ctx->world.next_seq < ctx->world.broken_seq) ctx->world.broken_seq = ctx->world.next_seq;
        pthread_mutex_unlock(&ctx->lock);
        return rc;
    }
    if ((rc = same_call(ctx, k, fn)) != PCOLL_SUCCESS) return rc;
    if (!bytes) return PCOLL_SUCCESS;
    pc_reduce_sum(recvbuf, data_of(slot_of(sh, 0, k)), data_of(slot_of(sh, 1, k)), count, dtype);
    for (int r = 2; r < ctx->size; r++) pc_reduce_sum(recvbuf, recvbuf, data_of(slot_of(sh, r, k)), count, dtype);
    if (op == PCOLL_AVG) pc_reduce_div(recvbuf, count, dtype, ctx->size);
    return PCOLL_SUCCESS;
}

int pc_shm_allreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                     pcoll_op_t op, const char *fn)
{
    if (atomic_flag_test_and_set(&ctx->shm->busy))
        return pc_error(PCOLL_ERR_STATE, fn,
                        "another thread of this rank is in a pcoll_allreduce on all ranks of this context: "
                        "collectives on one context are called one at a time");
    int rc = run(ctx, sendbuf, recvbuf, count, dtype, op, fn);
    atomic_flag_clear(&ctx->shm->busy);
    return rc;
}
