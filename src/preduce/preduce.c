/*
 * Partial reduce among dynamic groups (pcoll_preduce_*): the public calls.
 * The group protocol (messages, controller, stall reports) is protocol.c,
 * the specs spec.c; who reduces with whom groups/controller.c (pure) and
 * Ripples' static schedule groups/static_schedule.c.
 *
 *   create   check, agree (agree.h), the object, open, agree
 *   preduce  READY -> GROUP -> model *= weight; allreduce(SUM) over the
 *            group -> DONE
 *   drain    FIN; the groups the controller planned with this rank run
 *            with the caller's model -> FINISHED
 *   free     drain with the last call's model if not drained; close
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/agree.h"
#include "../core/timeline.h"
#include "../engine/reduce.h"
#include "../groups/static_schedule.h"
#include "../util/error.h"
#include "../util/log.h"
#include "object.h"

/* ---- create ---- */

enum { F_COUNT, F_DTYPE, F_POLICY, F_SIZE, F_DYN, F_ALPHA, F_AVOID, F_WINDOW, F_SLOW, F_II, F_CTL, F_SEED, F_CFG, F_OUT,
       NFIELDS };

static const char *policy_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return pc_preduce_policy_name((pcoll_preduce_policy_t)v);
}

/* What a rank can check alone; *bad: the field at fault. */
static int check_args(const pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, const pcoll_preduce_config_t *cfg,
                      const pcoll_preduce_config_t *c, pcoll_preduce_t **out, int *bad, const char *fn)
{
    int P = ctx->size;
    if (!cfg || !out)
        return *bad = !cfg ? F_CFG : F_OUT, pc_error(PCOLL_ERR_NULL, fn, "%s is NULL", !cfg ? "cfg" : "obj");
    if (count == 0) return *bad = F_COUNT, pc_error(PCOLL_ERR_COUNT, fn, "count is 0");
    if (dtype != PCOLL_FLOAT32 && dtype != PCOLL_FLOAT64)
        return *bad = F_DTYPE, pc_error(PCOLL_ERR_DTYPE, fn, "dtype %s: models are averaged, so float32 or float64",
                                        pcoll_dtype_name(dtype));
    if ((int)c->policy < 0 || c->policy > PCOLL_PREDUCE_RIPPLES_STATIC)
        return *bad = F_POLICY,
               pc_error(PCOLL_ERR_ARG, fn, "cfg->policy %d is not a pcoll_preduce_policy_t", (int)c->policy);
    if (c->group_size < 0 || c->group_size > P)
        return *bad = F_SIZE, pc_error(PCOLL_ERR_ARG, fn, "cfg->group_size %d: a group has 1 to %d ranks (0: the default)",
                                       c->group_size, P);
    if (!(c->alpha >= 0 && c->alpha < 1))
        return *bad = F_ALPHA, pc_error(PCOLL_ERR_ARG, fn, "cfg->alpha %g is not in [0, 1)", c->alpha);
    if (c->window < 0) return *bad = F_WINDOW, pc_error(PCOLL_ERR_ARG, fn, "cfg->window %d is negative", c->window);
    if (c->slow_threshold < 0)
        return *bad = F_SLOW, pc_error(PCOLL_ERR_ARG, fn, "cfg->slow_threshold %d is negative", c->slow_threshold);
    if (c->controller < 0 || c->controller >= P)
        return *bad = F_CTL,
               pc_error(PCOLL_ERR_ARG, fn, "cfg->controller %d is not a rank (0 .. %d)", c->controller, P - 1);
    return PCOLL_SUCCESS;
}

static void destroy(pcoll_preduce_t *o)
{
    if (!o) return;
    pc_object_release(&o->base);
    pc_gen_destroy(o->gen);
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

/* The object, its buffers and identity (collective: every rank takes a
 * channel in the same order, even one without memory). */
static int new_object(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, const pcoll_preduce_config_t *c,
                      pcoll_preduce_t **out, const char *fn)
{
    pcoll_preduce_t *o = calloc(1, sizeof *o);
    pc_object_t scratch_base;
    int rc = pc_object_init(o ? &o->base : &scratch_base, ctx, "preduce", 1, fn);
    if (!o) {
        if (rc == PCOLL_SUCCESS) pc_object_release(&scratch_base);
        return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for an object");
    }
    *out = o;
    int P = ctx->size;
    o->P = P;
    o->me = ctx->rank;
    o->ctl = c->controller;
    o->count = count;
    o->dtype = dtype;
    o->esize = pcoll_dtype_size(dtype);
    o->bytes = count * o->esize;
    o->cfg = *c;
    o->nodes = &ctx->nodes;
    pthread_mutex_init(&o->lock, NULL);
    atomic_init(&o->busy_s, 0.0);
    o->max_msg = sizeof(pr_msg_t) + sizeof(int32_t) * (size_t)P;
    o->gmembers = malloc(sizeof(int) * (size_t)P);
    o->members = malloc(sizeof(int) * (size_t)P);
    o->out_msg = malloc(o->max_msg);
    int keeps = c->policy != PCOLL_PREDUCE_RIPPLES_STATIC; /* a controller may still plan groups with a freeing rank */
    if (keeps) o->last = calloc(count, o->esize);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!o->gmembers || !o->members || !o->out_msg || (keeps && !o->last) || pc_preduce_protocol_init(o) != 0)
        return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for an object of %d ranks", P);
    if (o->max_msg > pc_service_max_bytes(ctx))
        return pc_error(PCOLL_ERR_LIMIT, fn, "a group message of %zu bytes exceeds the service channel's %zu",
                        o->max_msg, pc_service_max_bytes(ctx));
    return PCOLL_SUCCESS;
}

int pcoll_preduce_create(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, const pcoll_preduce_config_t *cfg,
                         pcoll_preduce_t **out)
{
    static const char *fn = "pcoll_preduce_create";
    if (out) *out = NULL;
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc; /* without a context nothing can be agreed */
    pcoll_preduce_config_t c;
    pcoll_preduce_config_default(&c);
    if (cfg) c = *cfg;
    int bad = -1;
    rc = check_args(ctx, count, dtype, cfg, &c, out, &bad, fn);
    if (c.group_size == 0) c.group_size = ctx->size < 3 ? ctx->size : 3;
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
        {"cfg", 0, 0, NULL},
        {"obj", 0, 0, NULL},
    };
    pc_agree_over_t all = pc_agree_group(ctx, NULL, 0);
    if ((rc = pc_agree(&all, fn, rc, bad, fields, NFIELDS, PCOLL_ERR_ARG)) != PCOLL_SUCCESS) return rc;
    pcoll_preduce_t *o = NULL;
    rc = new_object(ctx, count, dtype, &c, &o, fn);
    if (rc == PCOLL_SUCCESS) rc = pc_object_open(&o->base, fn);
    /* every rank listens before anyone sends */
    if ((rc = pc_agree_step(&all, fn, rc)) != PCOLL_SUCCESS) {
        if (o) pc_object_close(&o->base);
        destroy(o);
        return rc;
    }
    o->t_open = pc_preduce_now();
    pc_object_register(&o->base, o, free_for_finalize, 0);
    *out = o;
    return PCOLL_SUCCESS;
}

/* ---- calls ---- */

static int leave(pcoll_preduce_t *o, int rc)
{
    pthread_mutex_lock(&o->lock);
    o->busy = 0;
    pthread_mutex_unlock(&o->lock);
    return rc;
}

static int enter(pcoll_preduce_t *o, const char *fn)
{
    if (!o) return pc_error(PCOLL_ERR_NULL, fn, "obj is NULL");
    pc_log_set_rank(o->me, o->base.ctx->id);
    int rc = pc_ctx_replaced(o->base.ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    pthread_mutex_lock(&o->lock);
    int busy = o->busy;
    o->busy = 1;
    pthread_mutex_unlock(&o->lock);
    if (busy) return pc_error(PCOLL_ERR_STATE, fn, "the object is already in use by another call (one thread at a time)");
    rc = pc_fault_raise(&o->base.fault, fn);
    return rc != PCOLL_SUCCESS ? leave(o, rc) : PCOLL_SUCCESS;
}

/* The weighted average of the group in o->members (n): model *= weight,
 * then the sum over the members. */
static int average(pcoll_preduce_t *o, void *model, int n, double weight, const char *fn)
{
    if (n <= 1) return PCOLL_SUCCESS;
    pc_reduce_scale(model, o->count, o->dtype, weight);
    int rc = pcoll_allreduce(o->base.ctx, model, model, o->count, o->dtype, PCOLL_SUM, o->members, n);
    if (rc != PCOLL_SUCCESS) {
        char why[400];
        snprintf(why, sizeof why, "%s", pcoll_last_error());
        rc = pc_error(rc, fn, "the group's allreduce failed: %s", why);
    }
    return rc;
}

/* pcoll_preduce; *info is filled (group_size >= 1) once the group is known */
static int preduce_call(pcoll_preduce_t *o, void *model, uint64_t iteration, pcoll_preduce_info_t *info)
{
    static const char *fn = "pcoll_preduce";
    if (o && !model) return pc_error(PCOLL_ERR_NULL, fn, "model_inout is NULL");
    int rc = enter(o, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (o->fin_sent || o->drained)
        return leave(o, pc_error(PCOLL_ERR_STATE, fn, "pcoll_preduce_drain was called: only free may follow"));
    double t0 = pc_preduce_now(), t1;
    uint64_t gid, iter;
    double weight;
    int n;
    if (o->cfg.policy == PCOLL_PREDUCE_RIPPLES_STATIC) {
        gid = o->calls;
        n = pc_static_group(o->nodes, o->me, o->calls, o->members);
        weight = 1.0 / n;
        iter = iteration;
        t1 = t0;
    } else {
        /* a call that timed out waiting is resumed: its READY stands */
        if (!o->ready_out) {
            if ((rc = pc_preduce_to_controller(o, PR_READY, iteration)) != PCOLL_SUCCESS)
                return leave(o, pc_error(rc, fn, "no memory for a message"));
            o->ready_out = 1;
        }
        int never = 0;
        if ((rc = pc_preduce_wait(o, &never, 1, fn)) != PCOLL_SUCCESS) return leave(o, rc);
        n = pc_preduce_take_group(o, &gid, &weight, &iter);
        o->ready_out = 0;
        t1 = pc_preduce_now();
    }
    rc = average(o, model, n, weight, fn);
    double t2 = pc_preduce_now();
    if (o->cfg.policy != PCOLL_PREDUCE_RIPPLES_STATIC && rc == PCOLL_SUCCESS &&
        (rc = pc_preduce_to_controller(o, PR_DONE, gid)) != PCOLL_SUCCESS)
        rc = pc_error(rc, fn, "no memory for a message");
    /* a free without drain brings this model to the groups still planned
     * with this rank */
    if (o->last && rc == PCOLL_SUCCESS) memcpy(o->last, model, o->bytes);
    o->calls++;
    info->group_id = gid;
    info->group_size = n;
    info->members = o->members;
    info->weight = weight;
    info->iteration = iter;
    info->wait_s = t1 - t0;
    info->reduce_s = t2 - t1;
    return leave(o, rc);
}

int pcoll_preduce(pcoll_preduce_t *o, void *model, uint64_t iteration, pcoll_preduce_info_t *info)
{
    pcoll_preduce_info_t got;
    memset(&got, 0, sizeof got);
    uint64_t t0 = o ? pc_tl_now(o->base.ctx) : 0;
    int rc = preduce_call(o, model, iteration, &got);
    if (t0) pc_tl_preduce(o->base.ctx, t0, o->base.id, pcoll_preduce_policy_name(o->cfg.policy), iteration, &got, rc);
    if (info && got.group_size > 0) *info = got;
    return rc;
}

/* FIN, then every group the controller planned with this rank, with
 * model (in place), until FINISHED; the controller's rank also waits for
 * every other rank's FIN.  Resumed where it stopped after a timeout.  A
 * pcoll_preduce that timed out left its READY standing: the group that
 * answers it comes first (a FIN while ready would break the protocol). */
static int finish(pcoll_preduce_t *o, void *model, const char *fn)
{
    int rc;
    if (o->cfg.policy == PCOLL_PREDUCE_RIPPLES_STATIC) return PCOLL_SUCCESS;
    if (o->ready_out) {
        int never = 0;
        if ((rc = pc_preduce_wait(o, &never, 1, fn)) != PCOLL_SUCCESS) return rc;
        uint64_t gid, iter;
        double weight;
        int n = pc_preduce_take_group(o, &gid, &weight, &iter);
        o->ready_out = 0;
        if ((rc = average(o, model, n, weight, fn)) != PCOLL_SUCCESS) return rc;
        if ((rc = pc_preduce_to_controller(o, PR_DONE, gid)) != PCOLL_SUCCESS)
            return pc_error(rc, fn, "no memory for a message");
    }
    if (!o->fin_sent) {
        if ((rc = pc_preduce_to_controller(o, PR_FIN, 0)) != PCOLL_SUCCESS)
            return pc_error(rc, fn, "no memory for a message");
        o->fin_sent = 1;
    }
    for (;;) {
        if ((rc = pc_preduce_wait(o, &o->finished, 1, fn)) != PCOLL_SUCCESS) return rc;
        if (!pc_preduce_has_group(o)) break;
        uint64_t gid, iter;
        double weight;
        int n = pc_preduce_take_group(o, &gid, &weight, &iter);
        if ((rc = average(o, model, n, weight, fn)) != PCOLL_SUCCESS) return rc;
        if ((rc = pc_preduce_to_controller(o, PR_DONE, gid)) != PCOLL_SUCCESS)
            return pc_error(rc, fn, "no memory for a message");
    }
    if (o->me == o->ctl) return pc_preduce_wait(o, &o->all_finished, 0, fn);
    return PCOLL_SUCCESS;
}

int pcoll_preduce_drain(pcoll_preduce_t *o, void *model)
{
    static const char *fn = "pcoll_preduce_drain";
    if (o && !model) return pc_error(PCOLL_ERR_NULL, fn, "model_inout is NULL");
    int rc = enter(o, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (o->drained) return leave(o, pc_error(PCOLL_ERR_STATE, fn, "the object was drained already"));
    if ((rc = finish(o, model, fn)) == PCOLL_SUCCESS) o->drained = 1;
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
    stats->open_s = pc_preduce_now() - o->t_open;
    return PCOLL_SUCCESS;
}

int pcoll_preduce_free(pcoll_preduce_t **pp)
{
    static const char *fn = "pcoll_preduce_free";
    if (!pp) return pc_error(PCOLL_ERR_NULL, fn, "obj (the pointer to the object) is NULL");
    pcoll_preduce_t *o = *pp;
    int rc = enter(o, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    /* not drained: the groups still planned with this rank run with the
     * model of its last call (their averages are not returned) */
    if (!o->drained && (rc = finish(o, o->last, fn)) != PCOLL_SUCCESS) return leave(o, rc);
    o->drained = 1;
    pc_object_close(&o->base);
    destroy(o);
    *pp = NULL;
    return PCOLL_SUCCESS;
}
