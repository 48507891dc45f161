/*
 * The group protocol of dynamic-group objects: the messages between ready
 * ranks and the controller, and the stall reports about them.
 *
 *   rank i (application)              controller rank (token holder)
 *   --------------------              ------------------------------
 *   pcoll_preduce(model, k):
 *     READY(k)  ------------------->  pc_gen_request(i, k)
 *     wait for a GROUP                  ... assign(j, group) for each
 *     <-----------------------------    member j once it is ready:
 *       GROUP(id, members, w_i, k')       GROUP to j
 *     model *= w_i; allreduce(SUM)
 *       among the members (a fresh
 *       group operation: identity by
 *       the groundwork's handshake)
 *     DONE(id)  ------------------->  pc_gen_done(i, id): locks clear,
 *                                     pending groups go
 *   pcoll_preduce_drain / _free:
 *     FIN  ------------------------>  pc_gen_finish(i): no new group
 *     (GROUPs it still owes: done)      takes i; its buffer drains
 *     <------------------ FINISHED
 *   the controller's rank frees once every rank finished.
 *
 * Messages travel on the context's service channel (core/service.h) under
 * the object's channel and id, and are small: a GROUP carries the member
 * list (4 bytes a member) and this member's weight only.  The controller
 * runs inside the handler of its rank's token holder: no thread of its
 * own, and its decisions are timed (pcoll_preduce_get_stats: busy_s).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/stall.h"
#include "../util/log.h"
#include "object.h"

double pc_preduce_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the controller's side (holder) ---- */

static void on_assign(void *arg, int rank, const pc_gen_group_t *g, int index)
{
    pcoll_preduce_t *o = arg;
    pr_msg_t *m = o->out_msg;
    memset(m, 0, sizeof *m);
    m->kind = PR_GROUP;
    m->n = g->n;
    m->a = g->id;
    m->b = g->iteration;
    m->weight = g->weights[index];
    for (int i = 0; i < g->n; i++) m->members[i] = g->members[i];
    pc_object_send(&o->base, rank, m, sizeof *m + sizeof(int32_t) * (size_t)g->n);
}

static void on_finished(void *arg, int rank)
{
    pcoll_preduce_t *o = arg;
    pr_msg_t m;
    memset(&m, 0, sizeof m);
    m.kind = PR_FINISHED;
    pc_object_send(&o->base, rank, &m, sizeof m);
}

/* a member's READY, DONE or FIN, at the controller */
static void to_generator(pcoll_preduce_t *o, int src, const pr_msg_t *m)
{
    double t0 = pc_preduce_now();
    int rc = m->kind == PR_READY  ? pc_gen_request(o->gen, src, m->a)
             : m->kind == PR_DONE ? pc_gen_done(o->gen, src, m->a)
             : m->kind == PR_FIN  ? pc_gen_finish(o->gen, src)
                                  : PCOLL_ERR_INTERNAL;
    int all = rc == PCOLL_SUCCESS && pc_gen_all_finished(o->gen);
    pthread_mutex_lock(&o->lock);
    pc_gen_stats(o->gen, &o->gen_stats); /* for pcoll_preduce_get_stats */
    if (all) o->all_finished = 1;
    pthread_mutex_unlock(&o->lock);
    if (all) pc_engine_notify(o->base.engine);
    atomic_store(&o->busy_s, atomic_load(&o->busy_s) + (pc_preduce_now() - t0));
    if (rc == PCOLL_ERR_NOMEM) pc_object_fail(&o->base, rc, "the controller ran out of memory");
    if (rc == PCOLL_ERR_INTERNAL)
        pc_object_fail(&o->base, PCOLL_ERR_INTERNAL,
                       "the controller got a message of kind %u from rank %d that breaks the protocol", m->kind, src);
}

/* ---- every rank (holder) ---- */

static void on_message(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    (void)ctx;
    pcoll_preduce_t *o = pc_object_of(arg, pcoll_preduce_t);
    const pr_msg_t *m = msg;
    if (bytes < sizeof *m) return;
    if (m->kind == PR_GROUP || m->kind == PR_FINISHED) { /* into the mailbox */
        pthread_mutex_lock(&o->lock);
        if (m->kind == PR_GROUP) {
            int n = m->n < 1 ? 1 : m->n > o->P ? o->P : m->n;
            o->has_group = 1;
            o->gid = m->a;
            o->giter = m->b;
            o->gweight = m->weight;
            o->gn = n;
            memcpy(o->gmembers, m->members, sizeof(int) * (size_t)n);
        } else {
            o->finished = 1;
        }
        pthread_mutex_unlock(&o->lock);
        pc_engine_notify(o->base.engine);
        return;
    }
    if (!o->gen) {
        pc_log(PCOLL_LOG_ERROR,
               "preduce object %llu: a controller message from rank %d at rank %d, which is not the controller "
               "(dropped)",
               (unsigned long long)o->base.id, src, o->me);
        return;
    }
    to_generator(o, src, m);
}

typedef struct send_task {
    pcoll_preduce_t *o;
    pr_msg_t m;
} send_task_t;

static void send_task(pc_engine_t *e, void *arg)
{
    (void)e;
    send_task_t *t = arg;
    pc_object_send(&t->o->base, t->o->ctl, &t->m, sizeof t->m);
    free(t);
}

int pc_preduce_to_controller(pcoll_preduce_t *o, uint32_t kind, uint64_t a)
{
    send_task_t *t = calloc(1, sizeof *t);
    if (!t) return PCOLL_ERR_NOMEM;
    t->o = o;
    t->m.kind = kind;
    t->m.a = a;
    if (pc_engine_post(o->base.engine, send_task, t) != 0) {
        free(t);
        return PCOLL_ERR_NOMEM;
    }
    return PCOLL_SUCCESS;
}

/* ---- stall reports ---- */

static void respond(pcoll_t *ctx, void *arg, int src, const pc_query_t *q, const int32_t *ranks,
                    unsigned char *missing)
{
    (void)arg;
    (void)ranks;
    void *base = pc_service_object(ctx, q->head.channel, q->head.object);
    pcoll_preduce_t *o = base ? pc_object_of(base, pcoll_preduce_t) : NULL;
    if (o && o->gen) pc_gen_missing(o->gen, src, missing);
}

static void describe(void *arg, pc_stall_probe_t *probe)
{
    pcoll_preduce_t *o = arg;
    pc_probe_what(probe, "preduce object %llu (%s): waiting for a group from the controller (rank %d)",
                  (unsigned long long)o->base.id, pc_preduce_policy_name(o->cfg.policy), o->ctl);
    if (o->gen) { /* the controller is here: it knows */
        unsigned char *bits = calloc(((size_t)o->P + 7) / 8, 1);
        if (bits) {
            pc_gen_missing(o->gen, o->me, bits);
            for (int r = 0; r < o->P; r++)
                if (pc_bit_get(bits, r)) pc_probe_suspect(probe, r, "is not ready: the group waits for it", PC_WHY_CAUSE);
            free(bits);
        }
        return;
    }
    pc_query_t q;
    memset(&q, 0, sizeof q);
    q.head.channel = o->base.channel;
    q.head.object = o->base.id;
    q.kind = PC_Q_PREDUCE;
    pc_probe_ask(probe, &o->ctl, 1, &q, NULL, 0, "is not ready: the group waits for it", PC_WHY_CAUSE);
    pc_probe_fallback(probe, o->ctl, "the controller has not sent a group");
}

static void on_open(pc_object_t *base) { pc_stall_respond(base->ctx, PC_Q_PREDUCE, respond, NULL); }

int pc_preduce_protocol_init(pcoll_preduce_t *o)
{
    o->base.on_message = on_message;
    o->base.on_open = on_open;
    if (o->me != o->ctl || o->cfg.policy == PCOLL_PREDUCE_RIPPLES_STATIC) return 0;
    pc_gen_config_t gc = pc_preduce_gen_config(&o->cfg, o->P, o->nodes);
    pc_gen_out_t go = {on_assign, on_finished, o};
    return (o->gen = pc_gen_create(&gc, &go)) ? 0 : -1;
}

/* ---- the application's waits on the mailbox ---- */

typedef struct flag_wait {
    pcoll_preduce_t *o;
    int *flag;
    int any_mail; /* also a group in the mailbox, or a fault */
} flag_wait_t;

static int flag_set(void *arg)
{
    flag_wait_t *w = arg;
    pcoll_preduce_t *o = w->o;
    pthread_mutex_lock(&o->lock);
    int set = *w->flag || (w->any_mail && o->has_group);
    pthread_mutex_unlock(&o->lock);
    return set || pc_fault_status(&o->base.fault) != PCOLL_SUCCESS;
}

int pc_preduce_wait(pcoll_preduce_t *o, int *flag, int any_mail, const char *fn)
{
    flag_wait_t w = {o, flag, any_mail};
    pc_wait_t wait = {.fn = fn, .done = flag_set, .arg = &w, .describe = describe, .describe_arg = o, .object = o->base.id, .channel = o->base.channel};
    int rc = pc_block(o->base.ctx, &wait);
    if (rc == PCOLL_SUCCESS) rc = pc_fault_raise(&o->base.fault, fn);
    return rc;
}

int pc_preduce_has_group(pcoll_preduce_t *o)
{
    pthread_mutex_lock(&o->lock);
    int has = o->has_group;
    pthread_mutex_unlock(&o->lock);
    return has;
}

int pc_preduce_take_group(pcoll_preduce_t *o, uint64_t *gid, double *weight, uint64_t *iter)
{
    pthread_mutex_lock(&o->lock);
    int n = o->gn;
    memcpy(o->members, o->gmembers, sizeof(int) * (size_t)n);
    *gid = o->gid;
    *weight = o->gweight;
    *iter = o->giter;
    o->has_group = 0;
    pthread_mutex_unlock(&o->lock);
    return n;
}
