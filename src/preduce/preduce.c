/*
 * Partial reduce among dynamic groups (pcoll_preduce_*): the messages
 * between ready ranks and the controller, and each group's weighted
 * average.  Who reduces with whom is decided in groups/controller.c (pure);
 * Ripples' static schedule in groups/static_schedule.c.
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
 *   pcoll_preduce_free:
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
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/agree.h"
#include "../core/context.h"
#include "../core/service.h"
#include "../core/stall.h"
#include "../engine/reduce.h"
#include "../groups/controller.h"
#include "../groups/nodes.h"
#include "../groups/static_schedule.h"
#include "../util/error.h"
#include "../util/log.h"
#include "../util/parse.h"

enum { PR_READY = 1, PR_DONE = 2, PR_FIN = 3, PR_GROUP = 4, PR_FINISHED = 5 };

typedef struct pr_msg {
    pc_svc_head_t head;
    uint32_t kind;
    int32_t n;     /* GROUP: members, listed after */
    uint64_t a;    /* READY: iteration; DONE, GROUP: group id */
    uint64_t b;    /* GROUP: iteration after */
    double weight; /* GROUP: the receiver's */
    int32_t members[];
} pr_msg_t;

struct pcoll_preduce {
    pcoll_t *ctx;
    pc_engine_t *engine;
    int P, me, ctl;
    size_t count, esize, bytes;
    pcoll_dtype_t dtype;
    pcoll_preduce_config_t cfg;
    uint32_t channel;
    uint64_t id;
    pc_nodes_t nodes;
    pc_gen_t *gen;       /* the controller's rank only (holder) */
    pr_msg_t *out_msg;   /* holder: the GROUP being sent */
    size_t max_msg;
    pc_fault_t fault;
    pc_object_link_t link;

    /* the mailbox: written by the holder, read by the application */
    pthread_mutex_t lock;
    int has_group, finished, all_finished, opened, closed;
    uint64_t gid, giter;
    double gweight;
    int gn;
    int *gmembers;

    /* the application's */
    int busy;
    uint64_t calls;
    int *members;
    int fin_sent;
    int ready_out;       /* a READY is out, no group taken yet */
    pc_gen_stats_t gen_stats; /* (lock) the controller's, after its last event */
    void *last;          /* RANDOM, SMART: the model of the last call */
    double t_open;
    _Atomic double busy_s; /* holder: time in decisions */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- configuration ---- */

void pcoll_preduce_config_default(pcoll_preduce_config_t *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->policy = PCOLL_PREDUCE_FIFO;
    cfg->alpha = 0.5;
    cfg->frozen_avoidance = 1;
    cfg->slow_threshold = 4;
    cfg->seed = 1;
}

static const char *policy_name(pcoll_preduce_policy_t p)
{
    return p == PCOLL_PREDUCE_FIFO             ? "fifo"
           : p == PCOLL_PREDUCE_RIPPLES_RANDOM ? "ripples:random"
           : p == PCOLL_PREDUCE_RIPPLES_SMART  ? "ripples:smart"
           : p == PCOLL_PREDUCE_RIPPLES_STATIC ? "ripples:static"
                                               : "?";
}

int pcoll_preduce_config_parse(const char *spec, pcoll_preduce_config_t *cfg)
{
    static const char *fn = "pcoll_preduce_config_parse";
    if (!spec || !cfg) return pc_error(PCOLL_ERR_NULL, fn, "%s is NULL", !spec ? "spec" : "cfg");
    char buf[256];
    if (strlen(spec) >= sizeof buf) return pc_error(PCOLL_ERR_ARG, fn, "spec \"%.40s...\" is too long", spec);
    strcpy(buf, spec);
    pcoll_preduce_config_t c = *cfg;
    char *save = NULL, *tok = strtok_r(buf, ":", &save);
    if (!tok) return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\" is empty", spec);
    int sized = 0; /* a number (group size) may follow the policy */
    if (strcmp(tok, "fifo") == 0) {
        c.policy = PCOLL_PREDUCE_FIFO;
        sized = 1;
    } else if (strcmp(tok, "ripples") == 0) {
        char *sub = strtok_r(NULL, ":", &save);
        if (!sub) return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\": ripples needs random, smart or static", spec);
        if (strcmp(sub, "random") == 0)
            c.policy = PCOLL_PREDUCE_RIPPLES_RANDOM, sized = 1;
        else if (strcmp(sub, "smart") == 0)
            c.policy = PCOLL_PREDUCE_RIPPLES_SMART, sized = 1;
        else if (strcmp(sub, "static") == 0)
            c.policy = PCOLL_PREDUCE_RIPPLES_STATIC;
        else
            return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\": \"%s\" is not random, smart or static", spec, sub);
    } else {
        return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\": \"%s\" is not fifo or ripples", spec, tok);
    }
    int first = 1;
    while ((tok = strtok_r(NULL, ":", &save))) {
        long v;
        double d;
        int fifo = c.policy == PCOLL_PREDUCE_FIFO, smart = c.policy == PCOLL_PREDUCE_RIPPLES_SMART;
        if (first && sized && pc_parse_long(tok, 1, 1 << 20, &v) == 0) {
            c.group_size = (int)v;
        } else if (fifo && strcmp(tok, "const") == 0) {
            c.dynamic_weights = 0;
        } else if (fifo && strcmp(tok, "dyn") == 0) {
            c.dynamic_weights = 1;
        } else if (fifo && strcmp(tok, "noavoid") == 0) {
            c.frozen_avoidance = 0;
        } else if (fifo && strncmp(tok, "window=", 7) == 0 && pc_parse_long(tok + 7, 1, 1 << 20, &v) == 0) {
            c.window = (int)v;
        } else if (fifo && strncmp(tok, "alpha=", 6) == 0 && pc_parse_double(tok + 6, &d) == 0 && d >= 0 && d < 1) {
            c.alpha = d;
        } else if (smart && strncmp(tok, "c=", 2) == 0 && pc_parse_long(tok + 2, 0, 1 << 30, &v) == 0) {
            c.slow_threshold = (int)v;
        } else if (smart && strcmp(tok, "ii") == 0) {
            c.inter_intra = 1;
        } else if (strncmp(tok, "ctl=", 4) == 0 && pc_parse_long(tok + 4, 0, 1 << 30, &v) == 0) {
            c.controller = (int)v;
        } else if (strncmp(tok, "seed=", 5) == 0 && pc_parse_long(tok + 5, 0, 0x7fffffffL, &v) == 0) {
            c.seed = (uint64_t)v;
        } else {
            return pc_error(PCOLL_ERR_ARG, fn, "spec \"%s\": \"%s\" is not an option of %s", spec, tok,
                            policy_name(c.policy));
        }
        first = 0;
    }
    *cfg = c;
    return PCOLL_SUCCESS;
}

/* ---- messages (token holder) ---- */

static void fail(pcoll_preduce_t *o, int status, const char *what)
{
    pc_log(PCOLL_LOG_ERROR, "preduce object %llu: %s", (unsigned long long)o->id, what);
    pc_fault_set(&o->fault, status, "%s", what);
    pc_engine_notify(o->engine);
}

static void send_failed(pcoll_t *ctx, void *arg, int status, const char *why)
{
    (void)ctx;
    char what[400];
    snprintf(what, sizeof what, "a message of the group protocol could not be delivered: %s", why);
    fail(arg, status, what);
}

static void send_msg(pcoll_preduce_t *o, int peer, pr_msg_t *m, size_t bytes)
{
    pc_service_send_object(o->ctx, peer, o->channel, o->id, m, bytes, send_failed, o);
}

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
    send_msg(o, rank, m, sizeof *m + sizeof(int32_t) * (size_t)g->n);
}

static void on_finished(void *arg, int rank)
{
    pcoll_preduce_t *o = arg;
    pr_msg_t m;
    memset(&m, 0, sizeof m);
    m.kind = PR_FINISHED;
    send_msg(o, rank, &m, sizeof m);
}

static void on_message(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    (void)ctx;
    pcoll_preduce_t *o = arg;
    const pr_msg_t *m = msg;
    if (bytes < sizeof *m) return;
    if (m->kind == PR_GROUP || m->kind == PR_FINISHED) {
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
        pc_engine_notify(o->engine);
        return;
    }
    if (!o->gen) {
        pc_log(PCOLL_LOG_ERROR, "preduce object %llu: a controller message from rank %d at rank %d, which is "
               "not the controller (dropped)", (unsigned long long)o->id, src, o->me);
        return;
    }
    double t0 = now_s();
    int rc = m->kind == PR_READY  ? pc_gen_request(o->gen, src, m->a)
             : m->kind == PR_DONE ? pc_gen_done(o->gen, src, m->a)
             : m->kind == PR_FIN  ? pc_gen_finish(o->gen, src)
                                  : -2;
    int all = rc == 0 && pc_gen_all_finished(o->gen);
    pthread_mutex_lock(&o->lock);
    pc_gen_stats(o->gen, &o->gen_stats); /* for pcoll_preduce_get_stats */
    if (all) o->all_finished = 1;
    pthread_mutex_unlock(&o->lock);
    if (all) pc_engine_notify(o->engine);
    atomic_store(&o->busy_s, atomic_load(&o->busy_s) + (now_s() - t0));
    if (rc == -1) fail(o, PCOLL_ERR_NOMEM, "the controller ran out of memory");
    if (rc == -2) {
        char what[200];
        snprintf(what, sizeof what, "the controller got a message of kind %u from rank %d that breaks the protocol",
                 m->kind, src);
        fail(o, PCOLL_ERR_INTERNAL, what);
    }
}

typedef struct send_task {
    pcoll_preduce_t *o;
    pr_msg_t m;
} send_task_t;

static void send_task(pc_engine_t *e, void *arg)
{
    (void)e;
    send_task_t *t = arg;
    send_msg(t->o, t->o->ctl, &t->m, sizeof t->m);
    free(t);
}

/* Application: a message to the controller, sent by the holder. */
static int to_controller(pcoll_preduce_t *o, uint32_t kind, uint64_t a)
{
    send_task_t *t = calloc(1, sizeof *t);
    if (!t) return PCOLL_ERR_NOMEM;
    t->o = o;
    t->m.kind = kind;
    t->m.a = a;
    if (pc_engine_post(o->engine, send_task, t) != 0) {
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
    pcoll_preduce_t *o = pc_service_object(ctx, q->head.channel, q->head.object);
    if (o && o->gen) pc_gen_missing(o->gen, src, missing);
}

static void describe(void *arg, pc_stall_probe_t *probe)
{
    pcoll_preduce_t *o = arg;
    pc_probe_what(probe, "preduce object %llu (%s): waiting for a group from the controller (rank %d)",
                  (unsigned long long)o->id, policy_name(o->cfg.policy), o->ctl);
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
    q.head.channel = o->channel;
    q.head.object = o->id;
    q.kind = PC_Q_PREDUCE;
    pc_probe_ask(probe, &o->ctl, 1, &q, NULL, 0, "is not ready: the group waits for it", PC_WHY_CAUSE);
    pc_probe_fallback(probe, o->ctl, "the controller has not sent a group");
}

/* ---- open and close (holder tasks) ---- */

static void open_task(pc_engine_t *e, void *arg)
{
    pcoll_preduce_t *o = arg;
    int rc = pc_service_register_object(o->ctx, o->channel, o->id, on_message, o);
    pc_stall_respond(o->ctx, PC_Q_PREDUCE, respond, NULL);
    if (rc != PCOLL_SUCCESS) fail(o, rc, "cannot register the object's messages");
    pthread_mutex_lock(&o->lock);
    o->opened = 1;
    pthread_mutex_unlock(&o->lock);
    pc_engine_notify(e);
}

static void close_task(pc_engine_t *e, void *arg)
{
    pcoll_preduce_t *o = arg;
    pc_service_register_object(o->ctx, o->channel, o->id, NULL, NULL);
    pthread_mutex_lock(&o->lock);
    o->closed = 1;
    pthread_mutex_unlock(&o->lock);
    pc_engine_notify(e); /* not o->engine: the application may free o now */
}

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
    return set || pc_fault_status(&o->fault) != PCOLL_SUCCESS;
}

static int wait_flag(pcoll_preduce_t *o, int *flag, int any_mail, const char *fn)
{
    flag_wait_t w = {o, flag, any_mail};
    pc_wait_t wait = {fn, flag_set, &w, describe, o, o->id, o->channel, 0};
    int rc = pc_block(o->ctx, &wait);
    if (rc == PCOLL_SUCCESS) rc = pc_fault_raise(&o->fault, fn);
    return rc;
}

/* ---- create ---- */

static const char *policy_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return policy_name((pcoll_preduce_policy_t)v);
}

static void destroy(pcoll_preduce_t *o)
{
    if (!o) return;
    pc_gen_destroy(o->gen);
    pc_nodes_destroy(&o->nodes);
    free(o->out_msg);
    free(o->gmembers);
    free(o->members);
    free(o->last);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

static int free_for_finalize(void *object)
{
    pcoll_preduce_t *o = object;
    return pcoll_preduce_free(&o);
}

/* Node labels of every rank: PCOLL_RANKS_PER_NODE blocks, else the
 * context's node map (the smallest rank on each node).  *per_node: the
 * variable's value (0: unset). */
static int node_labels(pcoll_t *ctx, int *labels, long *per_node, const char *fn)
{
    *per_node = 0;
    const char *v = getenv("PCOLL_RANKS_PER_NODE");
    if (v && pc_parse_long(v, 1, 1 << 30, per_node) != 0) {
        *per_node = -1;
        return pc_error(PCOLL_ERR_CONFIG, fn, "PCOLL_RANKS_PER_NODE=\"%s\" is not a whole number >= 1", v);
    }
    for (int r = 0; r < ctx->size; r++) labels[r] = *per_node > 0 ? r / (int)*per_node : ctx->node_of[r];
    return PCOLL_SUCCESS;
}

int pcoll_preduce_create(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, const pcoll_preduce_config_t *cfg,
                         pcoll_preduce_t **out)
{
    static const char *fn = "pcoll_preduce_create";
    if (!ctx) return pc_error(PCOLL_ERR_NULL, fn, "ctx is NULL");
    int rc = PCOLL_SUCCESS, bad = -1;
    enum { F_COUNT, F_DTYPE, F_POLICY, F_SIZE, F_DYN, F_ALPHA, F_AVOID, F_WINDOW, F_SLOW, F_II, F_CTL, F_SEED, F_RPN,
           F_CFG, F_OUT, NFIELDS };
    pcoll_preduce_config_t c;
    pcoll_preduce_config_default(&c);
    if (cfg) c = *cfg;
    int P = ctx->size;
    if (!cfg || !out) {
        rc = pc_error(PCOLL_ERR_NULL, fn, "%s is NULL", !cfg ? "cfg" : "obj");
        bad = !cfg ? F_CFG : F_OUT;
    } else if (count == 0) {
        rc = pc_error(PCOLL_ERR_ARG, fn, "count is 0");
        bad = F_COUNT;
    } else if (dtype != PCOLL_FLOAT32 && dtype != PCOLL_FLOAT64) {
        rc = pc_error(PCOLL_ERR_DTYPE, fn, "dtype %s: models are averaged, so float32 or float64",
                      pcoll_dtype_name(dtype));
        bad = F_DTYPE;
    } else if ((int)c.policy < 0 || c.policy > PCOLL_PREDUCE_RIPPLES_STATIC) {
        rc = pc_error(PCOLL_ERR_ARG, fn, "cfg->policy %d is not a pcoll_preduce_policy_t", (int)c.policy);
        bad = F_POLICY;
    } else if (c.group_size < 0 || c.group_size > P) {
        rc = pc_error(PCOLL_ERR_ARG, fn, "cfg->group_size %d: a group has 1 to %d ranks (0: the default)",
                      c.group_size, P);
        bad = F_SIZE;
    } else if (!(c.alpha >= 0 && c.alpha < 1)) {
        rc = pc_error(PCOLL_ERR_ARG, fn, "cfg->alpha %g is not in [0, 1)", c.alpha);
        bad = F_ALPHA;
    } else if (c.window < 0) {
        rc = pc_error(PCOLL_ERR_ARG, fn, "cfg->window %d is negative", c.window);
        bad = F_WINDOW;
    } else if (c.slow_threshold < 0) {
        rc = pc_error(PCOLL_ERR_ARG, fn, "cfg->slow_threshold %d is negative", c.slow_threshold);
        bad = F_SLOW;
    } else if (c.controller < 0 || c.controller >= P) {
        rc = pc_error(PCOLL_ERR_ARG, fn, "cfg->controller %d is not a rank (0 .. %d)", c.controller, P - 1);
        bad = F_CTL;
    }
    if (c.group_size == 0) c.group_size = P < 3 ? P : 3;
    int *labels = malloc(sizeof(int) * (size_t)P);
    long per_node = 0;
    if (!labels) {
        if (rc == PCOLL_SUCCESS) rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory");
    } else {
        int lrc = node_labels(ctx, labels, &per_node, fn);
        if (rc == PCOLL_SUCCESS && lrc != PCOLL_SUCCESS) {
            rc = lrc;
            bad = F_RPN;
        }
    }
    pc_agree_field_t fields[NFIELDS] = {
        {"count", (int64_t)count, 1, NULL},
        {"dtype", (int64_t)dtype, 1, NULL},
        {"cfg->policy", (int64_t)c.policy, 1, policy_text},
        {"cfg->group_size", c.group_size, 1, NULL},
        {"cfg->dynamic_weights", c.dynamic_weights != 0, 1, NULL},
        {"cfg->alpha (x 1e9)", (int64_t)llround(c.alpha * 1e9), 1, NULL},
        {"cfg->frozen_avoidance", c.frozen_avoidance != 0, 1, NULL},
        {"cfg->window", c.window, 1, NULL},
        {"cfg->slow_threshold", c.slow_threshold, 1, NULL},
        {"cfg->inter_intra", c.inter_intra != 0, 1, NULL},
        {"cfg->controller", c.controller, 1, NULL},
        {"cfg->seed", (int64_t)c.seed, 1, NULL},
        {"PCOLL_RANKS_PER_NODE", per_node, 1, NULL},
        {"cfg", 0, 0, NULL},
        {"obj", 0, 0, NULL},
    };
    if ((rc = pc_agree(ctx->comm, fn, rc, bad, fields, NFIELDS, PCOLL_ERR_ARG)) != PCOLL_SUCCESS) {
        free(labels);
        return rc;
    }

    pcoll_preduce_t *o = calloc(1, sizeof *o);
    if (o) {
        o->ctx = ctx;
        o->engine = ctx->engine;
        o->P = P;
        o->me = ctx->rank;
        o->ctl = c.controller;
        o->count = count;
        o->dtype = dtype;
        o->esize = pcoll_dtype_size(dtype);
        o->bytes = count * o->esize;
        o->cfg = c;
        pthread_mutex_init(&o->lock, NULL);
        pc_fault_clear(&o->fault);
        atomic_init(&o->busy_s, 0.0);
        o->max_msg = sizeof(pr_msg_t) + sizeof(int32_t) * (size_t)P;
        o->gmembers = malloc(sizeof(int) * (size_t)P);
        o->members = malloc(sizeof(int) * (size_t)P);
        o->out_msg = malloc(o->max_msg);
        int nodes_ok = pc_nodes_init(&o->nodes, P, labels) == 0;
        int keeps = c.policy == PCOLL_PREDUCE_RIPPLES_RANDOM || c.policy == PCOLL_PREDUCE_RIPPLES_SMART;
        if (keeps) o->last = calloc(count, o->esize);
        if (!o->gmembers || !o->members || !o->out_msg || !nodes_ok || (keeps && !o->last))
            rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for an object of %d ranks", P);
        else if (o->max_msg > pc_service_max_bytes(ctx))
            rc = pc_error(PCOLL_ERR_LIMIT, fn, "a group message of %zu bytes exceeds the service channel's %zu",
                          o->max_msg, pc_service_max_bytes(ctx));
        if (rc == PCOLL_SUCCESS && o->me == o->ctl && c.policy != PCOLL_PREDUCE_RIPPLES_STATIC) {
            pc_gen_config_t gc = {c.policy == PCOLL_PREDUCE_FIFO            ? PC_GEN_FIFO
                                  : c.policy == PCOLL_PREDUCE_RIPPLES_RANDOM ? PC_GEN_RANDOM
                                                                             : PC_GEN_SMART,
                                  P,
                                  c.group_size,
                                  c.dynamic_weights,
                                  c.alpha,
                                  c.frozen_avoidance,
                                  c.window,
                                  c.slow_threshold,
                                  c.inter_intra ? &o->nodes : NULL,
                                  c.seed};
            pc_gen_out_t go = {on_assign, on_finished, o};
            if (!(o->gen = pc_gen_create(&gc, &go))) rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the controller");
        }
    } else {
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for an object");
    }
    free(labels);
    uint32_t channel = 0;
    uint64_t id = 0;
    int have_channel = pc_ctx_alloc_channel(ctx, fn, &channel, &id) == PCOLL_SUCCESS;
    if (rc == PCOLL_SUCCESS && !have_channel) rc = PCOLL_ERR_LIMIT;
    if (o) {
        o->channel = channel;
        o->id = id;
    }
    if (rc == PCOLL_SUCCESS && pc_engine_post(o->engine, open_task, o) != 0)
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for a task");
    else if (rc == PCOLL_SUCCESS)
        rc = wait_flag(o, &o->opened, 0, fn);
    /* every rank listens before anyone sends */
    pc_agree_field_t done[1] = {{"obj", 0, 0, NULL}};
    int arc = pc_agree(ctx->comm, fn, rc, rc == PCOLL_SUCCESS ? -1 : 0, done, 1, PCOLL_ERR_ARG);
    if (arc != PCOLL_SUCCESS) {
        if (o && o->opened && pc_engine_post(o->engine, close_task, o) == 0) wait_flag(o, &o->closed, 0, fn);
        if (have_channel) pc_ctx_free_channel(ctx, channel);
        destroy(o);
        return arc;
    }
    o->t_open = now_s();
    o->link.object = o;
    o->link.free_fn = free_for_finalize;
    o->link.watches_blocks = 0;
    pc_ctx_register_object(ctx, &o->link);
    *out = o;
    return PCOLL_SUCCESS;
}

/* ---- calls ---- */

static int leave(pcoll_preduce_t *o, int rc);

static int enter(pcoll_preduce_t *o, const char *fn)
{
    if (!o) return pc_error(PCOLL_ERR_NULL, fn, "obj is NULL");
    pthread_mutex_lock(&o->lock);
    int busy = o->busy;
    o->busy = 1;
    pthread_mutex_unlock(&o->lock);
    if (busy) return pc_error(PCOLL_ERR_STATE, fn, "the object is already in use by another call (one thread at a time)");
    int rc = pc_fault_raise(&o->fault, fn);
    return rc != PCOLL_SUCCESS ? leave(o, rc) : PCOLL_SUCCESS;
}

static int leave(pcoll_preduce_t *o, int rc)
{
    pthread_mutex_lock(&o->lock);
    o->busy = 0;
    pthread_mutex_unlock(&o->lock);
    return rc;
}

/* The weighted average of the group in o->members (n): model *= weight,
 * then the sum over the members. */
static int average(pcoll_preduce_t *o, void *model, int n, double weight, const char *fn)
{
    if (n <= 1) return PCOLL_SUCCESS;
    pc_reduce_scale(model, o->count, o->dtype, weight);
    int rc = pcoll_allreduce(o->ctx, model, model, o->count, o->dtype, PCOLL_SUM, o->members, n);
    if (rc != PCOLL_SUCCESS) {
        char why[400];
        snprintf(why, sizeof why, "%s", pcoll_last_error());
        rc = pc_error(rc, fn, "the group's allreduce failed: %s", why);
    }
    return rc;
}

/* Takes the mailbox's group into o->members; its size. */
static int take_group(pcoll_preduce_t *o, uint64_t *gid, double *weight, uint64_t *iter)
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

int pcoll_preduce(pcoll_preduce_t *o, void *model, uint64_t iteration, pcoll_preduce_info_t *info)
{
    static const char *fn = "pcoll_preduce";
    if (o && !model) return pc_error(PCOLL_ERR_NULL, fn, "model_inout is NULL");
    int rc = enter(o, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (o->fin_sent) return leave(o, pc_error(PCOLL_ERR_STATE, fn, "pcoll_preduce_free was called on the object"));
    double t0 = now_s(), t1;
    uint64_t gid, iter;
    double weight;
    int n;
    if (o->cfg.policy == PCOLL_PREDUCE_RIPPLES_STATIC) {
        gid = o->calls;
        n = pc_static_group(&o->nodes, o->me, o->calls, o->members);
        weight = 1.0 / n;
        iter = iteration;
        t1 = t0;
    } else {
        /* a call that timed out waiting is resumed: its READY stands */
        if (!o->ready_out) {
            if ((rc = to_controller(o, PR_READY, iteration)) != PCOLL_SUCCESS)
                return leave(o, pc_error(rc, fn, "no memory for a message"));
            o->ready_out = 1;
        }
        int never = 0;
        if ((rc = wait_flag(o, &never, 1, fn)) != PCOLL_SUCCESS) return leave(o, rc);
        n = take_group(o, &gid, &weight, &iter);
        o->ready_out = 0;
        t1 = now_s();
    }
    rc = average(o, model, n, weight, fn);
    double t2 = now_s();
    if (o->cfg.policy != PCOLL_PREDUCE_RIPPLES_STATIC && rc == PCOLL_SUCCESS &&
        (rc = to_controller(o, PR_DONE, gid)) != PCOLL_SUCCESS)
        rc = pc_error(rc, fn, "no memory for a message");
    /* RANDOM, SMART: groups may take this rank after it freed; it brings
     * this model then */
    if (o->last) memcpy(o->last, model, o->bytes);
    o->calls++;
    if (info) {
        info->group_id = gid;
        info->group_size = n;
        info->members = o->members;
        info->weight = weight;
        info->iteration = iter;
        info->wait_s = t1 - t0;
        info->reduce_s = t2 - t1;
    }
    return leave(o, rc);
}

int pcoll_preduce_get_stats(const pcoll_preduce_t *o, pcoll_preduce_stats_t *stats)
{
    if (!o || !stats) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !o ? "obj" : "stats");
    memset(stats, 0, sizeof *stats);
    pthread_mutex_lock(&((pcoll_preduce_t *)o)->lock);
    pc_gen_stats_t g = o->gen_stats;
    pthread_mutex_unlock(&((pcoll_preduce_t *)o)->lock);
    stats->requests = g.requests;
    stats->groups = g.groups;
    stats->bridges = g.bridges;
    stats->holds = g.holds;
    stats->conflicts = g.conflicts;
    stats->divisions = g.divisions;
    stats->busy_s = atomic_load(&((pcoll_preduce_t *)o)->busy_s);
    stats->open_s = now_s() - o->t_open;
    return PCOLL_SUCCESS;
}

int pcoll_preduce_free(pcoll_preduce_t **pp)
{
    static const char *fn = "pcoll_preduce_free";
    if (!pp) return pc_error(PCOLL_ERR_NULL, fn, "obj (the pointer to the object) is NULL");
    pcoll_preduce_t *o = *pp;
    int rc = enter(o, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (o->cfg.policy != PCOLL_PREDUCE_RIPPLES_STATIC) {
        if (!o->fin_sent) {
            if ((rc = to_controller(o, PR_FIN, 0)) != PCOLL_SUCCESS)
                return leave(o, pc_error(rc, fn, "no memory for a message"));
            o->fin_sent = 1;
        }
        /* groups the controller planned with this rank come first */
        for (;;) {
            if ((rc = wait_flag(o, &o->finished, 1, fn)) != PCOLL_SUCCESS) return leave(o, rc);
            pthread_mutex_lock(&o->lock);
            int has = o->has_group;
            pthread_mutex_unlock(&o->lock);
            if (!has) break;
            uint64_t gid, iter;
            double weight;
            int n = take_group(o, &gid, &weight, &iter);
            /* the caller's model is not here: the one of its last call
             * takes part (zeros if it never called) */
            if ((rc = average(o, o->last, n, weight, fn)) != PCOLL_SUCCESS) return leave(o, rc);
            if ((rc = to_controller(o, PR_DONE, gid)) != PCOLL_SUCCESS)
                return leave(o, pc_error(rc, fn, "no memory for a message"));
        }
        if (o->me == o->ctl && (rc = wait_flag(o, &o->all_finished, 0, fn)) != PCOLL_SUCCESS) return leave(o, rc);
    }
    if (pc_engine_post(o->engine, close_task, o) != 0) return leave(o, pc_error(PCOLL_ERR_NOMEM, fn, "no memory"));
    if ((rc = wait_flag(o, &o->closed, 0, fn)) != PCOLL_SUCCESS) return leave(o, rc);
    pcoll_t *ctx = o->ctx;
    pc_ctx_unregister_object(ctx, &o->link);
    pc_ctx_free_channel(ctx, o->channel);
    destroy(o);
    *pp = NULL;
    return PCOLL_SUCCESS;
}
