/*
 * Public synchronous allreduce: argument checks, the group's channel and
 * sequence number, a cache of built schedules, and requests.
 *
 *   app thread                                token holder (progress.h)
 *   pcoll_iallreduce: check, seq = g->next_seq++,
 *     schedule from cache or built  --post-->  start_op: wait for the seq
 *                                              slot, run the schedule
 *   pcoll_wait: until done        <--notify--  op_done: free the slot,
 *     return schedule to the cache             start the ops that waited
 *
 * A blocking pcoll_allreduce posts quietly and then, in pcoll_wait's place,
 * normally takes the token and runs the operation on its own thread.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../engine/reduce.h"
#include "context.h"
#include "error.h"

/* Built schedules are kept for reuse while they fit in these bounds. */
#define PC_CACHE_ENTRIES 32
#define PC_CACHE_SCRATCH_BYTES ((size_t)512 << 20)

typedef struct pc_cache_key {
    pc_group_t *group;
    size_t count;
    pcoll_dtype_t dtype;
    pcoll_op_t op;
    pcoll_allreduce_algo_t algo;
    int inplace;
} pc_cache_key_t;

struct pc_cache_entry {
    pc_cache_key_t key;
    pc_sched_t *sched;
    uint64_t used;
};

struct pcoll_request {
    pcoll_t *ctx;
    pc_group_t *group;
    uint64_t seq;
    pc_cache_key_t key;
    pc_sched_t *sched;
    int status;
    atomic_int done;
    pcoll_request_t *next_waiting;
};

static int same_key(const pc_cache_key_t *a, const pc_cache_key_t *b)
{
    return a->group == b->group && a->count == b->count && a->dtype == b->dtype && a->op == b->op &&
           a->algo == b->algo && a->inplace == b->inplace;
}

/* Takes a cached schedule for key (ctx->lock held), or returns NULL. */
static pc_sched_t *cache_take(pcoll_t *ctx, const pc_cache_key_t *key)
{
    for (int i = 0; i < ctx->ncache; i++)
        if (same_key(&ctx->cache[i].key, key)) {
            pc_sched_t *s = ctx->cache[i].sched;
            ctx->cache[i] = ctx->cache[--ctx->ncache];
            return s;
        }
    return NULL;
}

/* Returns a schedule to the cache, evicting the least recently used ones. */
static void cache_put(pcoll_t *ctx, const pc_cache_key_t *key, pc_sched_t *s)
{
    pc_sched_t *evicted[PC_CACHE_ENTRIES + 1];
    int nev = 0;
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->cache) ctx->cache = calloc(PC_CACHE_ENTRIES, sizeof *ctx->cache);
    if (!ctx->cache) {
        pthread_mutex_unlock(&ctx->lock);
        pc_sched_free(s);
        return;
    }
    size_t total = pc_sched_scratch_bytes(s);
    for (int i = 0; i < ctx->ncache; i++) total += pc_sched_scratch_bytes(ctx->cache[i].sched);
    while (ctx->ncache > 0 && (ctx->ncache >= PC_CACHE_ENTRIES || total > PC_CACHE_SCRATCH_BYTES)) {
        int lru = 0;
        for (int i = 1; i < ctx->ncache; i++)
            if (ctx->cache[i].used < ctx->cache[lru].used) lru = i;
        total -= pc_sched_scratch_bytes(ctx->cache[lru].sched);
        evicted[nev++] = ctx->cache[lru].sched;
        ctx->cache[lru] = ctx->cache[--ctx->ncache];
    }
    if (total <= PC_CACHE_SCRATCH_BYTES) {
        ctx->cache[ctx->ncache].key = *key;
        ctx->cache[ctx->ncache].sched = s;
        ctx->cache[ctx->ncache].used = ++ctx->cache_clock;
        ctx->ncache++;
    } else {
        evicted[nev++] = s;
    }
    pthread_mutex_unlock(&ctx->lock);
    for (int i = 0; i < nev; i++) pc_sched_free(evicted[i]);
}

void pc_cache_clear(pcoll_t *ctx)
{
    for (int i = 0; i < ctx->ncache; i++) pc_sched_free(ctx->cache[i].sched);
    free(ctx->cache);
    ctx->cache = NULL;
    ctx->ncache = 0;
}

/* ---- token holder ---- */

static void start_op(pc_engine_t *e, void *arg);

static void op_done(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    pcoll_request_t *req = arg;
    pcoll_t *ctx = req->ctx;
    pc_group_t *g = req->group;
    if (g->busy) g->busy[req->seq % ctx->tags.seq_mod] = 0;
    req->status = status;
    atomic_store(&req->done, 1);
    atomic_fetch_sub(&ctx->inflight, 1);
    pc_engine_notify(ctx->engine);
    /* req may be gone now; start the operations that waited for their slot */
    while (g->wait_head && !g->busy[g->wait_head->seq % ctx->tags.seq_mod]) {
        pcoll_request_t *next = g->wait_head;
        g->wait_head = next->next_waiting;
        if (!g->wait_head) g->wait_tail = NULL;
        start_op(ctx->engine, next);
    }
}

static void start_op(pc_engine_t *e, void *arg)
{
    pcoll_request_t *req = arg;
    pcoll_t *ctx = req->ctx;
    pc_group_t *g = req->group;
    uint32_t slot = (uint32_t)(req->seq % ctx->tags.seq_mod);
    if (!g->busy && !(g->busy = calloc(ctx->tags.seq_mod, 1))) {
        op_done(req->sched, PCOLL_ERR_NOMEM, req);
        return;
    }
    if (g->busy[slot] || g->wait_head) {
        /* operation seq - seq_mod still runs here: same tag, so wait (tags.h) */
        req->next_waiting = NULL;
        if (g->wait_tail)
            g->wait_tail->next_waiting = req;
        else
            g->wait_head = req;
        g->wait_tail = req;
        return;
    }
    g->busy[slot] = 1;
    pc_sched_on_done(req->sched, op_done, req);
    int rc = pc_engine_run(e, req->sched, pc_tag_base(&ctx->tags, g->channel, req->seq));
    if (rc != PCOLL_SUCCESS) op_done(req->sched, rc, req);
}

/* ---- application thread ---- */

static int check_args(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                      pcoll_op_t op, const char *fn)
{
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!pc_dtype_valid(dtype))
        return pc_error(PCOLL_ERR_DTYPE, fn, "dtype %d is not one of PCOLL_FLOAT32/FLOAT64/INT32/INT64", (int)dtype);
    if (op != PCOLL_SUM && op != PCOLL_AVG)
        return pc_error(PCOLL_ERR_OP, fn, "op %d is not PCOLL_SUM or PCOLL_AVG", (int)op);
    size_t es = pcoll_dtype_size(dtype);
    if (count > (size_t)PTRDIFF_MAX / es)
        return pc_error(PCOLL_ERR_COUNT, fn, "count %zu of %s overflows the addressable byte size", count,
                        pcoll_dtype_name(dtype));
    if (count > 0 && !recvbuf) return pc_error(PCOLL_ERR_NULL, fn, "recvbuf is NULL with count %zu", count);
    if (count > 0 && !sendbuf)
        return pc_error(PCOLL_ERR_NULL, fn, "sendbuf is NULL with count %zu (use PCOLL_IN_PLACE for in place)",
                        count);
    return PCOLL_SUCCESS;
}

/* Prepares req (everything but posting it). */
static int prepare(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                   pcoll_op_t op, const int *group, int group_size, pcoll_request_t *req, const char *fn)
{
    int rc = check_args(ctx, sendbuf, recvbuf, count, dtype, op, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    int inplace = sendbuf == PCOLL_IN_PLACE || sendbuf == recvbuf;
    pc_group_t *g;
    pthread_mutex_lock(&ctx->lock);
    rc = pc_groups_lookup(&ctx->groups, &ctx->tags, ctx->size, ctx->rank, group, group_size, fn, &g);
    if (rc != PCOLL_SUCCESS) {
        pthread_mutex_unlock(&ctx->lock);
        return rc;
    }
    size_t bytes = count * pcoll_dtype_size(dtype);
    pc_cache_key_t key = {g, count, dtype, op,
                          pc_allreduce_choose((pcoll_allreduce_algo_t)atomic_load(&ctx->algo),
                                              atomic_load(&ctx->direct_bytes), atomic_load(&ctx->small_bytes), bytes,
                                              g->n),
                          inplace};
    pc_sched_t *s = cache_take(ctx, &key);
    req->seq = g->next_seq++;
    pthread_mutex_unlock(&ctx->lock);
    if (!s) {
        pc_allreduce_spec_t spec = {g->n, g->ranks, g->me, count, dtype, op, inplace};
        rc = pc_allreduce_build(&spec, key.algo, &s);
        if (rc != PCOLL_SUCCESS) {
            /* the sequence number is spent: later operations on this group
             * would be out of step with the other members */
            return pc_error(rc, fn, "cannot build the %s schedule; group operations are now out of step",
                            pcoll_allreduce_algo_name(key.algo));
        }
    }
    pc_sched_bind(s, PC_SLOT_IN, inplace ? NULL : (void *)sendbuf);
    pc_sched_bind(s, PC_SLOT_OUT, recvbuf);
    req->ctx = ctx;
    req->group = g;
    req->key = key;
    req->sched = s;
    req->status = PCOLL_SUCCESS;
    atomic_init(&req->done, 0);
    req->next_waiting = NULL;
    return PCOLL_SUCCESS;
}

/* waits: the caller calls pc_engine_wait next (no ring needed) */
static int post(pcoll_request_t *req, int waits)
{
    atomic_fetch_add(&req->ctx->inflight, 1);
    int rc = waits ? pc_engine_post_quiet(req->ctx->engine, start_op, req)
                   : pc_engine_post(req->ctx->engine, start_op, req);
    if (rc != PCOLL_SUCCESS) atomic_fetch_sub(&req->ctx->inflight, 1);
    return rc;
}

static int is_done(void *arg) { return atomic_load(&((pcoll_request_t *)arg)->done); }

/* After completion: recycle the schedule, return the status. */
static int finish(pcoll_request_t *req)
{
    int status = req->status;
    cache_put(req->ctx, &req->key, req->sched);
    req->sched = NULL;
    return status;
}

int pcoll_allreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                    pcoll_op_t op, const int *group, int group_size)
{
    pcoll_request_t req;
    memset(&req, 0, sizeof req);
    int rc = prepare(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, &req, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if ((rc = post(&req, 1)) != PCOLL_SUCCESS) {
        pc_sched_free(req.sched);
        return PC_ERR(rc, "cannot queue the operation");
    }
    pc_ctx_park(ctx, NULL, 1);
    pc_engine_wait(ctx->engine, is_done, &req); /* runs the operation itself */
    pc_ctx_park(ctx, NULL, 0);
    return finish(&req);
}

int pcoll_iallreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                     pcoll_op_t op, const int *group, int group_size, pcoll_request_t **out)
{
    if (!out) return PC_ERR(PCOLL_ERR_NULL, "req (the output request pointer) is NULL");
    *out = NULL;
    pcoll_request_t *req = calloc(1, sizeof *req);
    if (!req) return PC_ERR(PCOLL_ERR_NOMEM, "no memory for a request");
    int rc = prepare(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, req, __func__);
    if (rc != PCOLL_SUCCESS) {
        free(req);
        return rc;
    }
    if ((rc = post(req, 0)) != PCOLL_SUCCESS) {
        pc_sched_free(req->sched);
        free(req);
        return PC_ERR(rc, "cannot queue the operation");
    }
    pthread_mutex_lock(&ctx->lock);
    ctx->live_requests++;
    pthread_mutex_unlock(&ctx->lock);
    *out = req;
    return PCOLL_SUCCESS;
}

static int release(pcoll_request_t **preq)
{
    pcoll_request_t *req = *preq;
    pcoll_t *ctx = req->ctx;
    int status = finish(req);
    pthread_mutex_lock(&ctx->lock);
    ctx->live_requests--;
    pthread_mutex_unlock(&ctx->lock);
    free(req);
    *preq = NULL;
    return status;
}

int pcoll_test(pcoll_request_t **preq, int *flag)
{
    if (!preq || !flag) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !preq ? "req" : "flag");
    if (!*preq) {
        *flag = 1; /* like MPI_REQUEST_NULL: nothing to wait for */
        return PCOLL_SUCCESS;
    }
    *flag = atomic_load(&(*preq)->done);
    return *flag ? release(preq) : PCOLL_SUCCESS;
}

int pcoll_wait(pcoll_request_t **preq)
{
    if (!preq) return PC_ERR(PCOLL_ERR_NULL, "req is NULL");
    if (!*preq) return PCOLL_SUCCESS;
    pcoll_request_t *req = *preq;
    if (!is_done(req)) {
        pc_ctx_park(req->ctx, NULL, 1);
        pc_engine_wait(req->ctx->engine, is_done, req);
        pc_ctx_park(req->ctx, NULL, 0);
    }
    return release(preq);
}

pcoll_allreduce_algo_t pcoll_allreduce_algo_for(const pcoll_t *ctx, size_t bytes, int group_size)
{
    if (!ctx) return PCOLL_ALGO_AUTO;
    return pc_allreduce_choose((pcoll_allreduce_algo_t)atomic_load(&ctx->algo), atomic_load(&ctx->direct_bytes),
                               atomic_load(&ctx->small_bytes), bytes, group_size);
}
