/* Allreduce operations on the token holder: identity, run, completion (op.h). */
#include "op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../util/error.h"
#include "../util/log.h"
#include "service.h"
#include "shm_group.h"
#include "stall.h"
#include "timeline.h"

/* ---- schedules and their peers ---- */

int pc_built_make(const pc_op_args_t *a, pc_built_t *b)
{
    memset(b, 0, sizeof *b);
    pc_allreduce_spec_t spec = {a->n, a->me, a->count, a->dtype, a->op, a->inplace, a->shm_piece, a->shm_slice, 0};
    int rc = pc_allreduce_build(&spec, a->algo, &b->sched);
    if (rc != PCOLL_SUCCESS) return rc;
    b->send_peers = malloc(sizeof(int) * (size_t)a->n);
    b->recv_peers = malloc(sizeof(int) * (size_t)a->n);
    if (!b->send_peers || !b->recv_peers) {
        pc_built_free(b);
        return PCOLL_ERR_NOMEM;
    }
    b->nsend = pc_sched_peers(b->sched, PC_STEP_SEND, b->send_peers, a->n);
    b->nrecv = pc_sched_peers(b->sched, PC_STEP_RECV, b->recv_peers, a->n);
    return PCOLL_SUCCESS;
}

void pc_built_free(pc_built_t *b)
{
    pc_sched_free(b->sched);
    free(b->send_peers);
    free(b->recv_peers);
    memset(b, 0, sizeof *b);
}

/* ---- HELLO ---- */

typedef struct hello_msg {
    pc_svc_head_t head; /* PC_SVC_HELLO */
    pc_hello_t h;
    int32_t world, n;   /* the list follows (none when world) */
} hello_msg_t;

static void op_failed_send(pcoll_t *ctx, void *arg, int status, const char *why);
static void run(pcoll_request_t *req);
static void complete(pcoll_request_t *req);

static int send_hello(pcoll_request_t *req, const int *to, int nto)
{
    pcoll_t *ctx = req->ctx;
    pc_group_t *g = req->group;
    int world = g->world, n = world ? 0 : g->n;
    size_t bytes = sizeof(hello_msg_t) + sizeof(int32_t) * (size_t)n;
    hello_msg_t *m = malloc(bytes);
    if (!m) return pc_fault_set(&req->fault, PCOLL_ERR_NOMEM, "no memory for the group's handshake");
    memset(m, 0, sizeof *m);
    m->head.type = PC_SVC_HELLO;
    m->h.id = req->my_id;
    m->h.kind = req->kind == PC_OP_GROUP ? PC_HELLO_OP : PC_HELLO_PLAN;
    m->h.count = req->args.count;
    m->h.dtype = req->args.dtype;
    m->h.op = req->args.op;
    m->h.algo = req->args.algo;
    m->world = world;
    m->n = n;
    int32_t *l = (int32_t *)(m + 1);
    for (int i = 0; i < n; i++) l[i] = g->ranks[i];
    int rc = PCOLL_SUCCESS;
    for (int k = 0; k < nto && rc == PCOLL_SUCCESS; k++) {
        rc = pc_service_send(ctx, g->ranks[to[k]], m, bytes, op_failed_send, req);
        if (rc != PCOLL_SUCCESS)
            pc_fault_set(&req->fault, rc, "the handshake with rank %d could not be sent: %s", g->ranks[to[k]],
                         pc_engine_msg_error(ctx->engine));
    }
    free(m);
    return rc;
}

static const char *op_name(int op) { return op == PCOLL_AVG ? "PCOLL_AVG" : op == PCOLL_SUM ? "PCOLL_SUM" : "?"; }

/* What member j said about this operation (holder). */
static void deliver(pcoll_request_t *req, int j, const pc_hello_t *h)
{
    if (req->abandoned) return; /* a zombie takes what it is owed, and nothing more */
    int rank = req->group->ranks[j];
    uint32_t kind = req->kind == PC_OP_GROUP ? PC_HELLO_OP : PC_HELLO_PLAN;
    const pc_op_args_t *a = &req->args;
    if (h->kind != kind)
        pc_fault_set(&req->fault, PCOLL_ERR_ARG,
                     "rank %d calls %s on this group where this rank calls %s: every member must call the same "
                     "operations in the same order",
                     rank, h->kind == PC_HELLO_PLAN ? "pcoll_allreduce_init" : "pcoll_allreduce/pcoll_iallreduce",
                     kind == PC_HELLO_PLAN ? "pcoll_allreduce_init" : "pcoll_allreduce/pcoll_iallreduce");
    else if (h->count != a->count || h->dtype != (int32_t)a->dtype || h->op != (int32_t)a->op)
        pc_fault_set(&req->fault, PCOLL_ERR_ARG,
                     "members disagree: rank %d calls with count %llu, %s, %s; this rank with count %zu, %s, %s",
                     rank, (unsigned long long)h->count, pcoll_dtype_name((pcoll_dtype_t)h->dtype), op_name(h->op),
                     a->count, pcoll_dtype_name(a->dtype), op_name(a->op));
    else if (h->algo != (int32_t)a->algo)
        pc_fault_set(&req->fault, PCOLL_ERR_ARG,
                     "members disagree on the algorithm: rank %d uses %s, this rank %s (PCOLL_ALLREDUCE_* settings "
                     "or pcoll_set_allreduce_* calls differ)",
                     rank, pcoll_allreduce_algo_name((pcoll_allreduce_algo_t)h->algo),
                     pcoll_allreduce_algo_name(a->algo));
    req->send_bases[j] = pc_tag_id_base(&req->ctx->tags, h->id);
    if (--req->missing > 0) return;
    if (pc_fault_status(&req->fault) != PCOLL_SUCCESS || req->kind == PC_OP_PLAN_INIT)
        complete(req);
    else
        run(req);
}

static void on_hello(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    (void)arg;
    const hello_msg_t *m = msg;
    if (bytes < sizeof *m || m->n < 0 || bytes < sizeof *m + sizeof(int32_t) * (size_t)m->n) {
        pc_log(PCOLL_LOG_ERROR, "group handshake from rank %d: malformed (%zu bytes)", src, bytes);
        return;
    }
    pc_group_t *g = NULL;
    void *waiter = NULL;
    int j = -1;
    pthread_mutex_lock(&ctx->lock);
    int r = pc_groups_hello_in(&ctx->groups, m->world, (const int *)(m + 1), m->n, src, &m->h, &g, &j, &waiter);
    pthread_mutex_unlock(&ctx->lock);
    if (r == 1)
        deliver(waiter, j, &m->h);
    else if (r < 0)
        pc_log(PCOLL_LOG_ERROR, "group handshake from rank %d: %s", src,
               r == -1 ? "not a group this rank belongs to (dropped)" : "no memory (lost)");
}

/* ---- world operations: channel 0 and a window of sequence numbers ---- */

static void run_world(pcoll_request_t *req)
{
    pcoll_t *ctx = req->ctx;
    ctx->world.busy[req->seq % ctx->tags.seq_mod] = 1;
    int base = pc_tag_base(&ctx->tags, 0, req->seq);
    pc_sched_bind_ranks(req->b.sched, req->ranks);
    pc_sched_set_tags(req->b.sched, base, NULL);
    run(req);
}

static void start_world(pcoll_request_t *req)
{
    pcoll_t *ctx = req->ctx;
    pc_world_ops_t *w = &ctx->world;
    if (!w->busy && !(w->busy = calloc(ctx->tags.seq_mod, 1))) {
        pc_fault_set(&req->fault, PCOLL_ERR_NOMEM, "no memory for the operation window");
        complete(req);
        return;
    }
    if (w->busy[req->seq % ctx->tags.seq_mod] || w->wait_head) {
        /* operation seq - seq_mod still runs here (same tags: wait, tags.h),
         * or earlier ones wait for theirs: keep the order */
        req->queued = 1;
        req->next = NULL;
        if (w->wait_tail)
            w->wait_tail->next = req;
        else
            w->wait_head = req;
        w->wait_tail = req;
        return;
    }
    run_world(req);
}

/* A slot was freed: start the operations in line whose slot is free, in
 * order (each one directly: the line is not consulted again). */
static void world_slot_freed(pcoll_t *ctx)
{
    pc_world_ops_t *w = &ctx->world;
    while (w->wait_head && !w->busy[w->wait_head->seq % ctx->tags.seq_mod]) {
        pcoll_request_t *next = w->wait_head;
        w->wait_head = next->next;
        if (!w->wait_head) w->wait_tail = NULL;
        next->queued = 0;
        run_world(next);
    }
}

/* ---- group operations and plans ---- */

static void start_group(pcoll_request_t *req)
{
    pcoll_t *ctx = req->ctx;
    pc_group_t *g = req->group;
    const int *need, *tell;
    int nneed, ntell;
    int *all = NULL;
    if (req->kind == PC_OP_PLAN_INIT) {
        /* a plan's members all exchange numbers and arguments once: each
         * sees every other's, so a disagreement fails at every member */
        all = malloc(sizeof(int) * (size_t)g->n);
        if (!all) {
            pc_fault_set(&req->fault, PCOLL_ERR_NOMEM, "no memory for the plan's handshake");
            complete(req);
            return;
        }
        int k = 0;
        for (int j = 0; j < g->n; j++)
            if (j != g->me) all[k++] = j;
        need = tell = all;
        nneed = ntell = k;
    } else {
        need = req->b.send_peers;
        nneed = req->b.nsend;
        tell = req->b.recv_peers;
        ntell = req->b.nrecv;
    }
    send_hello(req, tell, ntell);
    req->missing = nneed + 1; /* + 1: not done before every take below */
    for (int k = 0; k < nneed; k++) {
        pc_hello_t h;
        pthread_mutex_lock(&ctx->lock);
        int r = pc_group_hello_take(&ctx->groups, g, need[k], req, &h);
        if (r < 0) g->broken = 1; /* lost its place in line */
        pthread_mutex_unlock(&ctx->lock);
        if (r == 1) {
            deliver(req, need[k], &h);
        } else if (r < 0) {
            /* the operation fails (it cannot learn that member's number) */
            pc_fault_set(&req->fault, PCOLL_ERR_NOMEM, "no memory for the group's handshake");
            req->missing--;
        }
    }
    free(all);
    /* the + 1 */
    if (--req->missing == 0) {
        if (pc_fault_status(&req->fault) != PCOLL_SUCCESS || req->kind == PC_OP_PLAN_INIT)
            complete(req);
        else
            run(req);
    }
}

static void start_task(pc_engine_t *e, void *arg)
{
    (void)e;
    pcoll_request_t *req = arg;
    switch (req->kind) {
    case PC_OP_WORLD: start_world(req); break;
    case PC_OP_GROUP:
    case PC_OP_PLAN_INIT: start_group(req); break;
    case PC_OP_PLAN_START: run(req); break;
    }
}

void pc_op_post(pcoll_request_t *req, int quiet)
{
    atomic_fetch_add(&req->ctx->inflight, 1);
    req->task.fn = start_task;
    req->task.arg = req;
    pc_engine_post_task(req->ctx->engine, &req->task, quiet);
}

/* ---- running and completing ---- */

static void op_done(pc_sched_t *s, int status, void *arg);

/* A public call's end in the timeline: completed, or given up (status) */
static void trace_end(pcoll_request_t *req, int status)
{
    if (!req->tl_t0) return;
    req->tl_end = pc_rec_now();
    const pc_group_t *g = req->kind == PC_OP_WORLD || req->group->world ? NULL : req->group;
    pc_tl_allreduce(req->ctx, req->tl_t0, req->tl_end, req->tl_call, req->args.algo, req->args.count, req->args.dtype,
                    g ? g->ranks : NULL, g ? g->n : 0, status);
    req->tl_t0 = 0;
}

static void run(pcoll_request_t *req)
{
    pc_sched_t *s = req->b.sched;
    if (req->kind != PC_OP_WORLD) {
        pc_sched_bind_ranks(s, req->group->world ? NULL : req->group->ranks);
        pc_sched_set_tags(s, pc_tag_id_base(&req->ctx->tags, req->my_id), req->send_bases);
    }
    if (req->shm) pc_shm_group_bind(req->shm, s);
    req->running = 1;
    pc_sched_on_done(s, op_done, req);
    int rc = pc_engine_run(req->ctx->engine, s);
    if (rc != PCOLL_SUCCESS) {
        pc_sched_fail_run(s, rc, "the schedule could not start");
        op_done(s, rc, req);
    }
}

/* The operation is over here: what it holds goes back, the application may
 * take it (and free it) from the moment `done` is set.  tainted: its run
 * failed midway, so messages for it may still arrive; its identity is not
 * reused (the receive id stays taken, the group is out of step). */
static void complete_as(pcoll_request_t *req, int tainted)
{
    pcoll_t *ctx = req->ctx;
    trace_end(req, atomic_load(&req->fault.status));
    if (tainted) {
        pthread_mutex_lock(&ctx->lock);
        if (req->kind == PC_OP_WORLD && req->seq < ctx->world.broken_seq) ctx->world.broken_seq = req->seq;
        if (req->kind != PC_OP_WORLD) req->group->broken = 1;
        pthread_mutex_unlock(&ctx->lock);
    }
    if (req->kind == PC_OP_GROUP || req->kind == PC_OP_PLAN_START) {
        pthread_mutex_lock(&ctx->lock);
        req->group->active--;
        if (req->kind == PC_OP_GROUP) {
            if (!tainted) pc_idpool_put(&ctx->ids, req->my_id);
            pc_groups_put(&ctx->groups, req->group);
            req->group = NULL;
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    atomic_fetch_sub(&ctx->inflight, 1);
    atomic_store(&req->done, 1);
    pc_engine_notify(ctx->engine);
}

static void complete(pcoll_request_t *req) { complete_as(req, 0); }

static void op_done(pc_sched_t *s, int status, void *arg)
{
    pcoll_request_t *req = arg;
    pcoll_t *ctx = req->ctx;
    req->running = 0;
    if (req->abandoned) return; /* its posted messages are over: the schedule may go (finalize) */
    if (status != PCOLL_SUCCESS) pc_fault_copy(&req->fault, pc_sched_fault(s));
    int world = req->kind == PC_OP_WORLD;
    if (world) ctx->world.busy[req->seq % ctx->tags.seq_mod] = 0;
    complete_as(req, status != PCOLL_SUCCESS); /* req may be gone from here */
    if (world) world_slot_freed(ctx);
}

static void op_failed_send(pcoll_t *ctx, void *arg, int status, const char *why)
{
    (void)ctx;
    pcoll_request_t *req = arg;
    /* the operation cannot complete without it: its schedule waits for a
     * peer that never learns our number; the stall report and timeout name
     * it, and the fault says why */
    pc_fault_set(&req->fault, status, "the group's handshake could not be delivered: %s", why);
}

/* ---- giving up ---- */

static void abandon_task(pc_engine_t *e, void *arg)
{
    pcoll_request_t *req = arg;
    pcoll_t *ctx = req->ctx;
    if (!atomic_load(&req->done)) {
        req->abandoned = 1;
        if (req->kind == PC_OP_WORLD) {
            pthread_mutex_lock(&ctx->lock);
            if (req->seq < ctx->world.broken_seq) ctx->world.broken_seq = req->seq;
            pthread_mutex_unlock(&ctx->lock);
            if (req->queued) { /* never started: out of the line */
                pc_world_ops_t *w = &ctx->world;
                pcoll_request_t **pp = &w->wait_head, *prev = NULL;
                while (*pp && *pp != req) {
                    prev = *pp;
                    pp = &(*pp)->next;
                }
                if (*pp) {
                    *pp = req->next;
                    if (w->wait_tail == req) w->wait_tail = prev;
                }
                req->queued = 0;
            }
        } else {
            /* the record stays (the operation keeps its user reference and
             * its place in the HELLO lines), marked broken */
            pthread_mutex_lock(&ctx->lock);
            req->group->broken = 1;
            pthread_mutex_unlock(&ctx->lock);
        }
        if (req->running) pc_engine_abandon(e, req->b.sched, PCOLL_ERR_TIMEOUT);
        trace_end(req, PCOLL_ERR_TIMEOUT);
        atomic_fetch_sub(&ctx->inflight, 1);
    }
    atomic_store(&req->abandon_done, 1);
    pc_engine_notify(e);
}

static int abandon_ran(void *arg) { return atomic_load(&((pcoll_request_t *)arg)->abandon_done); }

int pc_op_abandon(pcoll_request_t *req)
{
    atomic_store(&req->abandon_done, 0);
    req->task.fn = abandon_task;
    req->task.arg = req;
    pc_engine_post_task(req->ctx->engine, &req->task, 1);
    pc_engine_wait(req->ctx->engine, abandon_ran, req);
    return !atomic_load(&req->done);
}

/* ---- stall reports ---- */

static void group_text(const pc_group_t *g, char *buf, size_t len)
{
    if (g->world)
        snprintf(buf, len, "all %d ranks", g->n);
    else
        pc_group_text(g->ranks, g->n, buf, len);
}

static void fallback_messages(pcoll_request_t *req, pc_stall_probe_t *p)
{
    if (!req->running) return;
    int n = req->args.n, *peers = malloc(sizeof(int) * (size_t)n);
    if (!peers) return;
    int k = pc_sched_waiting_on(req->b.sched, peers, n);
    for (int i = 0; i < k; i++) {
        int rank = req->kind == PC_OP_WORLD ? (req->ranks ? req->ranks[peers[i]] : peers[i])
                   : req->group->world ? peers[i]
                                       : req->group->ranks[peers[i]];
        pc_probe_fallback(p, rank, "every rank has started it; its messages to this rank have not arrived");
    }
    free(peers);
}

void pc_op_describe(void *arg, pc_stall_probe_t *p)
{
    pcoll_request_t *req = arg;
    pcoll_t *ctx = req->ctx;
    const pc_op_args_t *a = &req->args;
    char grp[160];
    pc_query_t q;
    memset(&q, 0, sizeof q);
    if (req->kind == PC_OP_WORLD) {
        if (req->ranks) /* a part: the ranks of every node take part in turn, in step */
            pc_probe_what(p, "allreduce #%llu on all %d ranks (%zu x %s across %d nodes, a part of a node-shared "
                          "allreduce)",
                          (unsigned long long)req->seq, ctx->size, a->count, pcoll_dtype_name(a->dtype), a->n);
        else
            pc_probe_what(p, "allreduce #%llu on all %d ranks (%zu x %s)", (unsigned long long)req->seq, ctx->size,
                          a->count, pcoll_dtype_name(a->dtype));
        q.kind = PC_Q_WORLD;
        q.seq = req->seq;
        if (req->queued) /* its turn has not come: an earlier one is still in flight here */
            pc_probe_what(p, "allreduce #%llu on all %d ranks (waits here for #%llu to complete first)",
                          (unsigned long long)req->seq, ctx->size,
                          (unsigned long long)(req->seq - ctx->tags.seq_mod));
        pc_probe_ask(p, NULL, 0, &q, NULL, 0, "has not started it", PC_WHY_CAUSE);
        fallback_messages(req, p);
        return;
    }
    pc_group_t *g = req->group;
    group_text(g, grp, sizeof grp);
    const char *call = req->kind == PC_OP_PLAN_INIT    ? "pcoll_allreduce_init"
                       : req->kind == PC_OP_PLAN_START ? "a persistent allreduce start"
                                                       : "allreduce";
    pc_probe_what(p, "%s on %s (%zu x %s)", call, grp, a->count, pcoll_dtype_name(a->dtype));
    /* members whose HELLO is due have not started it: that much is sure */
    if (req->missing > 0)
        for (int j = 0; j < g->n; j++)
            if (j != g->me && req->send_bases[j] == -1) {
                int needed = req->kind == PC_OP_PLAN_INIT;
                for (int k = 0; k < req->b.nsend && !needed; k++) needed = req->b.send_peers[k] == j;
                if (needed) pc_probe_suspect(p, g->ranks[j], "has not started it", PC_WHY_CAUSE);
            }
    if (req->kind == PC_OP_PLAN_INIT) return;
    q.kind = req->kind == PC_OP_GROUP ? PC_Q_GROUP : PC_Q_PLAN;
    q.world = g->world;
    pc_probe_ask(p, g->ranks, g->n, &q, g->world ? NULL : g->ranks, g->world ? 0 : g->n, "has not started it",
                 PC_WHY_CAUSE);
    fallback_messages(req, p);
}

/* "Have you started operation #seq on all ranks?" */
static void respond_world(pcoll_t *ctx, void *arg, int src, const pc_query_t *q, const int32_t *ranks,
                          unsigned char *missing)
{
    (void)arg;
    (void)src;
    (void)ranks;
    pthread_mutex_lock(&ctx->lock);
    int started = ctx->world.next_seq > q->seq;
    pthread_mutex_unlock(&ctx->lock);
    if (!started) pc_bit_set(missing, ctx->rank);
}

/* "Do you have an operation (or a plan start) on this group in flight?" */
static void respond_group(pcoll_t *ctx, void *arg, int src, const pc_query_t *q, const int32_t *ranks,
                          unsigned char *missing)
{
    (void)arg;
    (void)src;
    int *list = NULL;
    if (!q->world && q->n > 0 && !(list = malloc(sizeof(int) * (size_t)q->n))) return;
    for (int i = 0; i < q->n && list; i++) list[i] = ranks[i];
    pthread_mutex_lock(&ctx->lock);
    pc_group_t *g = pc_groups_find(&ctx->groups, q->world, list, q->n);
    int started = g && g->active > 0;
    pthread_mutex_unlock(&ctx->lock);
    free(list);
    if (!started) pc_bit_set(missing, ctx->rank);
}

void pc_collective_open(pcoll_t *ctx)
{
    pc_service_handle(ctx, PC_SVC_HELLO, on_hello, NULL);
    pc_stall_respond(ctx, PC_Q_WORLD, respond_world, NULL);
    pc_stall_respond(ctx, PC_Q_GROUP, respond_group, NULL);
    pc_stall_respond(ctx, PC_Q_PLAN, respond_group, NULL);
}
