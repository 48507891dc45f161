/*
 * Public synchronous allreduce: argument checks, the operation's identity
 * (op.h), a cache of built schedules, requests.
 *
 *   app thread                                 token holder (progress.h)
 *   pcoll_iallreduce: check, identity (world: seq = next_seq++; group:
 *     its record and a receive id), schedule
 *     from the cache or built      --post-->   start: world slot / HELLOs,
 *                                              run the schedule
 *   pcoll_wait: until done         <--notify-- done: identity released
 *     (stall report, timeout)
 *     schedule back to the cache, request recycled
 *
 * A blocking pcoll_allreduce posts quietly and then, in pcoll_wait's place,
 * normally takes the token and runs the operation on its own thread.
 * Schedules are cached by shape (group size, own index, count, type, op,
 * algorithm, in place), not by group: one serves every group of that shape.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../engine/reduce.h"
#include "../util/error.h"
#include "../util/log.h"
#include "agree.h"
#include "groupmap.h"
#include "op.h"
#include "plan.h"
#include "shm_allreduce.h"
#include "shm_group.h"
#include "shm_group_call.h"
#include "stall.h"
#include "timeline.h"

/* Built schedules are kept for reuse while they fit in these bounds. */
#define PC_CACHE_ENTRIES 32
#define PC_CACHE_SCRATCH_BYTES ((size_t)512 << 20)

struct pc_cache_entry {
    pc_op_args_t key;
    pc_built_t b;
    uint64_t used;
};

static int same_key(const pc_op_args_t *a, const pc_op_args_t *b)
{
    return a->n == b->n && a->me == b->me && a->count == b->count && a->dtype == b->dtype && a->op == b->op &&
           a->algo == b->algo && a->inplace == b->inplace;
}

/* Takes a cached schedule for key (ctx->lock held): 1 and *out, or 0. */
static int cache_take(pcoll_t *ctx, const pc_op_args_t *key, pc_built_t *out)
{
    for (int i = 0; i < ctx->ncache; i++)
        if (same_key(&ctx->cache[i].key, key)) {
            *out = ctx->cache[i].b;
            ctx->cache[i] = ctx->cache[--ctx->ncache];
            return 1;
        }
    return 0;
}

/* Returns a schedule to the cache, evicting the least recently used ones. */
static void cache_put(pcoll_t *ctx, const pc_op_args_t *key, pc_built_t *b)
{
    pc_built_t evicted[PC_CACHE_ENTRIES + 1];
    int nev = 0;
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->cache) ctx->cache = calloc(PC_CACHE_ENTRIES, sizeof *ctx->cache);
    if (!ctx->cache) {
        pthread_mutex_unlock(&ctx->lock);
        pc_built_free(b);
        return;
    }
    size_t total = pc_sched_scratch_bytes(b->sched);
    for (int i = 0; i < ctx->ncache; i++) total += pc_sched_scratch_bytes(ctx->cache[i].b.sched);
    while (ctx->ncache > 0 && (ctx->ncache >= PC_CACHE_ENTRIES || total > PC_CACHE_SCRATCH_BYTES)) {
        int lru = 0;
        for (int i = 1; i < ctx->ncache; i++)
            if (ctx->cache[i].used < ctx->cache[lru].used) lru = i;
        total -= pc_sched_scratch_bytes(ctx->cache[lru].b.sched);
        evicted[nev++] = ctx->cache[lru].b;
        ctx->cache[lru] = ctx->cache[--ctx->ncache];
    }
    if (total <= PC_CACHE_SCRATCH_BYTES) {
        ctx->cache[ctx->ncache].key = *key;
        ctx->cache[ctx->ncache].b = *b;
        ctx->cache[ctx->ncache].used = ++ctx->cache_clock;
        ctx->ncache++;
    } else {
        evicted[nev++] = *b;
    }
    pthread_mutex_unlock(&ctx->lock);
    memset(b, 0, sizeof *b);
    for (int i = 0; i < nev; i++) pc_built_free(&evicted[i]);
}

void pc_cache_clear(pcoll_t *ctx)
{
    for (int i = 0; i < ctx->ncache; i++) pc_built_free(&ctx->cache[i].b);
    free(ctx->cache);
    ctx->cache = NULL;
    ctx->ncache = 0;
}

/* ---- request memory: recycled, so a blocking call allocates nothing ---- */

static pcoll_request_t *req_alloc(pcoll_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    pcoll_request_t *req = ctx->free_requests;
    if (req) ctx->free_requests = req->next;
    pthread_mutex_unlock(&ctx->lock);
    if (!req && !(req = malloc(sizeof *req))) return NULL;
    memset(req, 0, sizeof *req);
    req->ctx = ctx;
    pc_fault_clear(&req->fault);
    return req;
}

static void req_recycle(pcoll_request_t *req)
{
    pcoll_t *ctx = req->ctx;
    free(req->send_bases);
    req->send_bases = NULL;
    pthread_mutex_lock(&ctx->lock);
    req->next = ctx->free_requests;
    ctx->free_requests = req;
    pthread_mutex_unlock(&ctx->lock);
}

void pc_op_zombie(pcoll_request_t *req)
{
    pcoll_t *ctx = req->ctx;
    pthread_mutex_lock(&ctx->lock);
    req->next = ctx->zombies;
    ctx->zombies = req;
    pthread_mutex_unlock(&ctx->lock);
}

void pc_requests_clear(pcoll_t *ctx)
{
    while (ctx->free_requests) {
        pcoll_request_t *r = ctx->free_requests;
        ctx->free_requests = r->next;
        free(r);
    }
    while (ctx->zombies) {
        pcoll_request_t *r = ctx->zombies;
        ctx->zombies = r->next;
        /* a schedule whose messages are still out (a send to a rank that
         * never received it) is left alone: MPI may still read it */
        if (r->b.sched && !pc_sched_running(r->b.sched)) {
            pc_built_free(&r->b);
            pc_shm_group_close(r->shm); /* nothing of the schedule runs any more */
        }
        free(r->send_bases);
        free(r);
    }
}

/* ---- application thread ---- */

int pc_op_check_args(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
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

/* Under ctx->lock: the operation's identity, a sequence number on channel
 * 0 (world) or a receive id (group, plan). */
static int claim_identity(pcoll_t *ctx, int world, int plan, pc_group_t *g, pcoll_request_t *req, const char *fn)
{
    if (world) {
        if (ctx->world.next_seq >= ctx->world.broken_seq)
            return pc_error(PCOLL_ERR_STATE, fn,
                            "an earlier operation on all ranks timed out at this rank: the ranks are out of step");
        req->seq = ctx->world.next_seq++;
        return PCOLL_SUCCESS;
    }
    if (pc_idpool_get(&ctx->ids, &req->my_id) != 0)
        return pc_error(PCOLL_ERR_LIMIT, fn,
                        "%u group operations and plans are in flight or alive at this rank: complete some first",
                        pc_idpool_in_use(&ctx->ids));
    if (!plan) g->active++;
    return PCOLL_SUCCESS;
}

/* Under ctx->lock: the group's record (one more user) and this rank's
 * place in it. */
static int take_group(pcoll_t *ctx, const int *group, int group_size, const char *fn, pc_group_t **out,
                      pc_op_args_t *a)
{
    pc_group_t *g;
    int rc = pc_groups_get(&ctx->groups, group, group_size, fn, &g);
    if (rc != PCOLL_SUCCESS) return rc;
    if (g->broken) {
        pc_groups_put(&ctx->groups, g);
        return pc_error(PCOLL_ERR_STATE, fn,
                        "an earlier operation on this group timed out at this rank: its members are out of step");
    }
    a->n = g->n;
    a->me = g->me;
    *out = g;
    return PCOLL_SUCCESS;
}

/* What a failed prepare took, given back: the group's record, the
 * schedule (to the cache if it may go there), the members' bases. */
static void give_back(pcoll_t *ctx, pc_group_t *g, const pc_op_args_t *a, pc_built_t *b, int cacheable, int *bases)
{
    free(bases);
    if (b && cacheable)
        cache_put(ctx, a, b);
    else if (b)
        pc_built_free(b);
    if (g) {
        pthread_mutex_lock(&ctx->lock);
        pc_groups_put(&ctx->groups, g);
        pthread_mutex_unlock(&ctx->lock);
    }
}

int pc_op_prepare(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                  const int *group, int group_size, int plan, const pc_world_part_t *part,
                  pcoll_allreduce_algo_t algo, const char *fn, pcoll_request_t *req)
{
    int rc = pc_op_check_args(ctx, sendbuf, recvbuf, count, dtype, op, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    int world = group == NULL && !plan;
    if (!world) part = NULL;
    pc_op_args_t a = {part ? part->n : ctx->size, part ? part->me : ctx->rank, count, dtype, op, PCOLL_ALGO_AUTO,
                      sendbuf == PCOLL_IN_PLACE || sendbuf == recvbuf, 0, 0};
    pc_group_t *g = NULL;
    pc_built_t b;
    int have = 0, claimed = 0; /* a schedule; the identity */
    /* 1, under the lock: the group, the algorithm, a cached schedule; a
     * world operation whose schedule was cached (the common case) claims
     * its identity too and takes the lock only once */
    pthread_mutex_lock(&ctx->lock);
    if (!world) rc = take_group(ctx, group, group_size, fn, &g, &a);
    if (rc == PCOLL_SUCCESS) {
        a.algo = algo != PCOLL_ALGO_AUTO ? algo : pc_ctx_algo(ctx, PC_USE_CALL, count * pcoll_dtype_size(dtype), a.n);
        if (a.algo == PCOLL_ALGO_SHM) pc_shm_shape(ctx, count, dtype, a.n, 1, &a.shm_piece, &a.shm_slice);
        have = !plan && cache_take(ctx, &a, &b);
        claimed = (have && world) || part; /* a part's number was reserved */
        if (part)
            req->seq = part->seq;
        else if (claimed)
            rc = claim_identity(ctx, world, plan, g, req, fn);
    }
    pthread_mutex_unlock(&ctx->lock);
    /* 2, outside it: a schedule built, the members' bases */
    if (rc == PCOLL_SUCCESS && !have) {
        rc = pc_built_make(&a, &b);
        if (rc == PCOLL_SUCCESS)
            have = 1;
        else
            rc = pc_error(rc, fn, "cannot build the %s schedule", pcoll_allreduce_algo_name(a.algo));
    }
    int *bases = NULL;
    if (rc == PCOLL_SUCCESS && !world) {
        if ((bases = malloc(sizeof(int) * (size_t)a.n)) != NULL)
            for (int i = 0; i < a.n; i++) bases[i] = -1;
        else
            rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the operation");
    }
    /* 3, under the lock: the identity */
    if (rc == PCOLL_SUCCESS && !claimed) {
        pthread_mutex_lock(&ctx->lock);
        rc = claim_identity(ctx, world, plan, g, req, fn);
        pthread_mutex_unlock(&ctx->lock);
    }
    if (rc != PCOLL_SUCCESS) {
        give_back(ctx, g, &a, have ? &b : NULL, !plan, bases);
        return rc;
    }
    pc_sched_bind(b.sched, PC_SLOT_IN, a.inplace ? NULL : (void *)sendbuf);
    pc_sched_bind(b.sched, PC_SLOT_OUT, recvbuf);
    req->kind = world ? PC_OP_WORLD : plan ? PC_OP_PLAN_INIT : PC_OP_GROUP;
    req->fn = fn;
    req->args = a;
    req->b = b;
    req->group = g;
    req->ranks = part ? part->ranks : NULL;
    req->send_bases = bases;
    atomic_init(&req->done, 0);
    pc_fault_clear(&req->fault);
    return PCOLL_SUCCESS;
}

static int is_done(void *arg) { return atomic_load(&((pcoll_request_t *)arg)->done); }

int pc_op_wait(pcoll_request_t *req, const char *fn)
{
    pc_wait_t w = {.fn = fn, .done = is_done, .arg = req, .describe = pc_op_describe, .describe_arg = req};
    int rc = pc_block(req->ctx, &w);
    if (rc == PCOLL_ERR_TIMEOUT && !pc_op_abandon(req)) rc = PCOLL_SUCCESS; /* it completed just then */
    return rc;
}

/* After completion: the status (raised under fn's name), the schedule back
 * to the cache, the request recycled.  After a timeout: kept. */
static int finish(pcoll_request_t *req, int waited, const char *fn)
{
    if (waited == PCOLL_ERR_TIMEOUT) {
        pc_op_zombie(req);
        return waited;
    }
    int status = pc_fault_raise(&req->fault, fn);
    cache_put(req->ctx, &req->args, &req->b);
    req_recycle(req);
    return status;
}

/* A prepared request for an allreduce call (fn), or an error. */
static const char *dtype_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return pcoll_dtype_name((pcoll_dtype_t)v);
}

/* PCOLL_CHECK: before an operation on all ranks (which has no handshake
 * that could compare them), the ranks agree on its count, type and op, so
 * that a rank calling otherwise fails every rank, naming the difference,
 * instead of wrong sums or a hang.  Its own local checks are agreed on too:
 * the operation's sequence number is taken only once every rank goes on. */
static int check_call(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                      pcoll_op_t op, const char *fn)
{
    int rc = pc_op_check_args(ctx, sendbuf, recvbuf, count, dtype, op, fn);
    /* the path follows from the size and this rank's forced algorithm */
    int shm = rc == PCOLL_SUCCESS && pc_shm_allreduce_takes(ctx, count, dtype);
    pc_agree_field_t fields[4] = {{"count", (int64_t)count, 1, NULL},
                                  {"dtype", (int64_t)dtype, 1, dtype_text},
                                  {"op", (int64_t)op, 1, NULL},
                                  {"node-shared path (a forced algorithm differs)", shm, 1, NULL}};
    pc_agree_over_t all = pc_agree_group(ctx, NULL, 0);
    return pc_agree(&all, fn, rc, -1, fields, 4, PCOLL_ERR_ARG);
}

static int new_request(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                       pcoll_op_t op, const int *group, int group_size, const char *fn, pcoll_request_t **out)
{
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (ctx->check && !group && (rc = check_call(ctx, sendbuf, recvbuf, count, dtype, op, fn)) != PCOLL_SUCCESS)
        return rc;
    pcoll_request_t *req = req_alloc(ctx);
    if (!req) return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for a request");
    rc = pc_op_prepare(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, 0, NULL, PCOLL_ALGO_AUTO, fn, req);
    if (rc != PCOLL_SUCCESS) {
        req_recycle(req);
        return rc;
    }
    *out = req;
    return PCOLL_SUCCESS;
}

/* A blocking call of every rank on one node, small: node-shared memory
 * (shm_allreduce.h), after the same checks as any call. */
static int shm_call(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                    pcoll_op_t op, const char *fn)
{
    int rc = ctx->check ? check_call(ctx, sendbuf, recvbuf, count, dtype, op, fn)
                        : pc_op_check_args(ctx, sendbuf, recvbuf, count, dtype, op, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    return pc_shm_allreduce(ctx, sendbuf, recvbuf, count, dtype, op, fn);
}

/* A blocking call by the message algorithms: posted quietly, then, in
 * pcoll_wait's place, normally run on this thread (it takes the token).
 * *algo: the algorithm it used (if it got that far). */
static int message_call(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                        pcoll_op_t op, const int *group, int group_size, const char *fn,
                        pcoll_allreduce_algo_t *algo)
{
    pcoll_request_t *req = NULL; /* set by new_request on success */
    int rc = new_request(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, fn, &req);
    if (rc != PCOLL_SUCCESS) return rc;
    *algo = req->args.algo;
    pc_op_post(req, 1);
    return finish(req, pc_op_wait(req, fn), fn);
}

/* A blocking call of a group whose members share a node: node-shared
 * memory (shm_group_call.h) when the path takes it: 1 and *rc (a bad
 * list's error too); 0 and nothing done otherwise (the message
 * algorithms serve it). */
static int shm_group_call(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                          pcoll_op_t op, const int *group, int group_size, int any_algo, const char *fn, int *rc)
{
    int me;
    if (!ctx->shm_calls || group_size < 2 || !pc_dtype_valid(dtype)) return 0;
    if ((*rc = pc_group_validate(group, group_size, ctx->size, ctx->rank, fn, &me)) != PCOLL_SUCCESS) return 1;
    if (!pc_shm_group_call_takes(ctx, group, group_size, count, dtype, any_algo)) return 0;
    *rc = pc_op_check_args(ctx, sendbuf, recvbuf, count, dtype, op, fn);
    if (*rc == PCOLL_SUCCESS) *rc = pc_shm_group_call(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, me, fn);
    return 1;
}

/* pcoll_allreduce's paths; *algo: the one it took */
static int allreduce_call(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                          pcoll_op_t op, const int *group, int group_size, pcoll_allreduce_algo_t *algo)
{
    static const char *fn = "pcoll_allreduce";
    int rc;
    *algo = PCOLL_ALGO_SHM;
    if (!group && pc_shm_allreduce_takes(ctx, count, dtype))
        return shm_call(ctx, sendbuf, recvbuf, count, dtype, op, fn);
    if (group && shm_group_call(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, 0, fn, &rc)) return rc;
    *algo = PCOLL_ALGO_AUTO; /* "auto" in the timeline if it fails before one is chosen */
    return message_call(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, fn, algo);
}

int pcoll_allreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                    pcoll_op_t op, const int *group, int group_size)
{
    pcoll_allreduce_algo_t algo;
    if (!ctx || pc_ctx_check(ctx, __func__) != PCOLL_SUCCESS)
        return message_call(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, __func__, &algo);
    uint64_t t0 = pc_tl_now(ctx);
    int rc = allreduce_call(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, &algo);
    pc_tl_allreduce(ctx, t0, 0, "allreduce", algo, count, dtype, group, group_size, rc);
    return rc;
}

int pc_allreduce_agreed(pcoll_t *ctx, int64_t *buf, size_t count, const int *group, int group_size)
{
    int rc;
    pcoll_allreduce_algo_t algo;
    if (shm_group_call(ctx, PCOLL_IN_PLACE, buf, count, PCOLL_INT64, PCOLL_SUM, group, group_size, 1,
                       "pcoll_allreduce", &rc))
        return rc;
    return message_call(ctx, PCOLL_IN_PLACE, buf, count, PCOLL_INT64, PCOLL_SUM, group, group_size, "pcoll_allreduce",
                        &algo);
}

/* A nonblocking operation goes to the holder and into the application's
 * hands (a live request until it is waited for). */
static void post_live(pcoll_request_t *req, pcoll_request_t **out)
{
    pcoll_t *ctx = req->ctx;
    pc_op_post(req, 0);
    pthread_mutex_lock(&ctx->lock);
    ctx->live_requests++;
    pthread_mutex_unlock(&ctx->lock);
    *out = req;
}

int pcoll_iallreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                     pcoll_op_t op, const int *group, int group_size, pcoll_request_t **out)
{
    if (!out) return PC_ERR(PCOLL_ERR_NULL, "req (the output request pointer) is NULL");
    *out = NULL;
    pcoll_request_t *req = NULL; /* set by new_request on success */
    int rc = new_request(ctx, sendbuf, recvbuf, count, dtype, op, group, group_size, __func__, &req);
    if (rc != PCOLL_SUCCESS) return rc;
    req->tl_t0 = pc_tl_now(ctx);
    req->tl_call = "iallreduce";
    post_live(req, out);
    return PCOLL_SUCCESS;
}

/* A completed (or given up) request leaves the application's hands. */
static int release(pcoll_request_t **preq, int waited, const char *fn)
{
    pcoll_request_t *req = *preq;
    *preq = NULL;
    if (req->persistent) { /* a plan's: the plan keeps it, and may start again */
        req->outstanding = 0;
        if (waited == PCOLL_ERR_TIMEOUT) return waited;
        return pc_fault_raise(&req->fault, fn);
    }
    pcoll_t *ctx = req->ctx;
    pthread_mutex_lock(&ctx->lock);
    ctx->live_requests--;
    pthread_mutex_unlock(&ctx->lock);
    return finish(req, waited, fn);
}

int pc_request_give_up(pcoll_request_t **preq, const char *fn)
{
    if (!preq || !*preq) return PCOLL_SUCCESS;
    int rc = PCOLL_SUCCESS;
    if (!atomic_load(&(*preq)->done) && pc_op_abandon(*preq)) rc = PCOLL_ERR_TIMEOUT; /* the caller says why */
    return release(preq, rc, fn);
}

int pcoll_test(pcoll_request_t **preq, int *flag)
{
    if (!preq || !flag) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !preq ? "req" : "flag");
    if (!*preq) {
        *flag = 1; /* like MPI_REQUEST_NULL: nothing to wait for */
        return PCOLL_SUCCESS;
    }
    int rc = pc_ctx_replaced((*preq)->ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    *flag = atomic_load(&(*preq)->done);
    return *flag ? release(preq, PCOLL_SUCCESS, __func__) : PCOLL_SUCCESS;
}

int pc_request_wait(pcoll_request_t **preq, const char *fn)
{
    int rc = pc_ctx_replaced((*preq)->ctx, fn);
    return rc != PCOLL_SUCCESS ? rc : release(preq, pc_op_wait(*preq, fn), fn);
}

int pcoll_wait(pcoll_request_t **preq)
{
    if (!preq) return PC_ERR(PCOLL_ERR_NULL, "req is NULL");
    if (!*preq) return PCOLL_SUCCESS;
    return pc_request_wait(preq, __func__);
}

int pc_world_part_start(pcoll_t *ctx, void *buf, size_t count, pcoll_dtype_t dtype, const pc_world_part_t *part,
                        const char *fn, pcoll_request_t **out)
{
    pcoll_request_t *req = req_alloc(ctx);
    if (!req) return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for a request");
    int rc = pc_op_prepare(ctx, PCOLL_IN_PLACE, buf, count, dtype, PCOLL_SUM, NULL, 0, 0, part, PCOLL_ALGO_AUTO, fn,
                           req);
    if (rc != PCOLL_SUCCESS) {
        req_recycle(req);
        return rc;
    }
    post_live(req, out);
    return PCOLL_SUCCESS;
}

int pc_world_reserve(pcoll_t *ctx, uint64_t n, uint64_t *first, const char *fn)
{
    pthread_mutex_lock(&ctx->lock);
    int broken = ctx->world.next_seq >= ctx->world.broken_seq;
    *first = ctx->world.next_seq;
    if (!broken) ctx->world.next_seq += n;
    pthread_mutex_unlock(&ctx->lock);
    return broken ? pc_error(PCOLL_ERR_STATE, fn,
                             "an earlier operation on all ranks timed out at this rank: the ranks are out of step")
                  : PCOLL_SUCCESS;
}

int pcoll_node_count(const pcoll_t *ctx) { return ctx ? ctx->nodes.count : 0; }

pcoll_allreduce_algo_t pcoll_allreduce_algo_for(const pcoll_t *ctx, size_t bytes, int group_size)
{
    if (!ctx) return PCOLL_ALGO_AUTO;
    if (group_size == ctx->size && pc_shm_allreduce_fits(ctx, bytes)) return PCOLL_ALGO_SHM;
    /* a group: on one node every member list shares it */
    if (group_size < ctx->size && ctx->shm_calls && ctx->nodes.count == 1 && pc_shm_allowed(ctx, group_size, bytes, 1))
        return PCOLL_ALGO_SHM;
    return pc_ctx_algo(ctx, PC_USE_CALL, bytes, group_size);
}
