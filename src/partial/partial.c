/*
 * Partial allreduce objects: the public calls, on the application thread.
 *
 *   pcoll_partial_allreduce(p, contribution, out, info)
 *     1. the backend adds (ACCUMULATE) or copies (REPLACE) the contribution
 *        into pending, and with no round taking it in between the policy
 *        chooses the next step (pc_policy_call_step):
 *     2. rounds completed since the last call?  take them, return
 *     3. a round that took pending before step 1 is not complete?  wait
 *     4. else the next round takes the contribution: arrive for it (the
 *        driver starts it or tells the leader) and wait for it
 *
 * Waiting is on rounds_completed (atomic) through pc_block (stall report,
 * timeout), which normally runs the arrival and the round on this thread;
 * the results are taken by swapping the delivered buffer for an empty one
 * under the lock and copied out after it.
 */
#include <stdlib.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../core/agree.h"
#include "../core/stall.h"
#include "../core/timeline.h"
#include "../engine/reduce.h"
#include "../groups/rotation.h"
#include "../util/error.h"
#include "../util/log.h"
#include "../util/parse.h"
#include "driver.h"
#include "object.h"
#include "silence.h"

/* ---- configuration ---- */

void pcoll_partial_config_default(pcoll_partial_config_t *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = PCOLL_PARTIAL_SOLO;
    cfg->quorum = 1;
    cfg->group_size = 0;
    cfg->mode = PCOLL_ACCUMULATE;
    cfg->sync_every = 0;
    cfg->seed = 1;
    cfg->observer = NULL;
    cfg->observer_arg = NULL;
}

/* The kinds' specs (names: pc_policy_kind_name); those with a number
 * after a colon say what it is. */
static const struct kind_spec {
    pcoll_partial_kind_t kind;
    const char *number; /* NULL: none; else its name */
    int required, min;
    char letter;
} kind_specs[] = {
    {PCOLL_PARTIAL_SOLO, NULL, 0, 0, 0},
    {PCOLL_PARTIAL_MAJORITY, NULL, 0, 0, 0},
    {PCOLL_PARTIAL_QUORUM, "quorum", 1, 1, 'Q'},
    {PCOLL_PARTIAL_GROUP, "group size", 0, 2, 'S'},
};

const char *pcoll_partial_kind_name(pcoll_partial_kind_t kind)
{
    const char *name = pc_policy_kind_name((int)kind);
    return strcmp(name, "?") == 0 ? NULL : name;
}

int pcoll_partial_config_parse(const char *spec, pcoll_partial_config_t *cfg)
{
    if (!spec || !cfg) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !spec ? "spec" : "cfg");
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    for (size_t i = 0; i < sizeof kind_specs / sizeof kind_specs[0]; i++) {
        const struct kind_spec *k = &kind_specs[i];
        const char *name = pc_policy_kind_name(k->kind);
        if (strlen(name) != len || strncmp(spec, name, len) != 0) continue;
        if ((colon && !k->number) || (!colon && k->required)) break;
        long v = 0;
        if (colon && pc_parse_long(colon + 1, k->min, 1000000000L, &v) != 0)
            return PC_ERR(PCOLL_ERR_ARG, "\"%s\": the %s must be a whole number >= %d (%s:%c)", spec, k->number, k->min,
                          name, k->letter);
        cfg->kind = k->kind;
        if (k->kind == PCOLL_PARTIAL_QUORUM) cfg->quorum = (int)v;
        if (k->kind == PCOLL_PARTIAL_GROUP) cfg->group_size = (int)v; /* 0: the default size */
        return PCOLL_SUCCESS;
    }
    return PC_ERR(PCOLL_ERR_ARG, "\"%s\" is not solo, majority, quorum:Q, group or group:S", spec);
}

/* ---- small helpers ---- */

int pcoll_partial_initiator(const pcoll_partial_t *p, uint64_t round)
{
    if (!p) return PC_ERR(PCOLL_ERR_NULL, "p is NULL");
    int *scratch = malloc(sizeof(int) * (size_t)p->P);
    if (!scratch) return PC_ERR(PCOLL_ERR_NOMEM, "no memory");
    int who = pc_policy_initiator(&p->policy, round, scratch);
    free(scratch);
    return who;
}

int pcoll_partial_group_of(const pcoll_partial_t *p, uint64_t round, int *members, int *n)
{
    if (!p || !members || !n) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !p ? "p" : !members ? "members" : "n");
    int *tmp = malloc(sizeof(int) * (size_t)p->P);
    if (!tmp) return PC_ERR(PCOLL_ERR_NOMEM, "no memory");
    int need = pc_policy_members(&p->policy, round, 0, p->me, tmp);
    int rc = PCOLL_SUCCESS;
    if (*n < need)
        rc = PC_ERR(PCOLL_ERR_ARG, "n is %d; the group of round %llu has %d members", *n, (unsigned long long)round,
                    need);
    else
        memcpy(members, tmp, sizeof(int) * (size_t)need);
    free(tmp);
    *n = need;
    return rc;
}

/* Algorithm 2's rule: model = sum / n when the call's own model is in the
 * sum, else (sum + local) / (n + 1); with no sum (nothing delivered, or
 * nobody had contributed), model = local (zeros without one).  sum may be
 * model. */
static void average_rule(const pcoll_partial_t *p, uint64_t rounds, uint64_t n, int own, const void *sum,
                         const void *local, void *model)
{
    size_t bytes = p->count * p->esize;
    if (rounds == 0 || n == 0) {
        if (!local)
            memset(model, 0, bytes);
        else if (model != local)
            memmove(model, local, bytes);
    } else if (own || !local) {
        pc_reduce_average(model, sum, NULL, p->count, p->dtype, (double)n);
    } else {
        pc_reduce_average(model, sum, local, p->count, p->dtype, (double)n + 1);
    }
}

int pcoll_partial_average(const pcoll_partial_t *p, const pcoll_partial_info_t *info, const void *local, void *model)
{
    if (!p || !info || !local || !model)
        return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !p ? "p" : !info ? "info" : !local ? "local" : "model");
    if (p->dtype != PCOLL_FLOAT32 && p->dtype != PCOLL_FLOAT64)
        return PC_ERR(PCOLL_ERR_DTYPE, "the object's type is %s; model averaging needs float32 or float64",
                      pcoll_dtype_name(p->dtype));
    if (p->cfg.mode != PCOLL_REPLACE)
        return PC_ERR(PCOLL_ERR_ARG, "the object is in %s mode; pcoll_partial_average needs REPLACE (a PCOLL_AVERAGE "
                                     "object averages in the call itself)",
                      p->cfg.mode == PCOLL_ACCUMULATE ? "ACCUMULATE" : "AVERAGE");
    average_rule(p, info->rounds, info->last_contributions, info->own_included, model, local, model);
    return PCOLL_SUCCESS;
}

const char *pcoll_partial_data_phase(const pcoll_partial_t *p)
{
    if (!p) return NULL;
    return p->be->ops->name;
}

int pcoll_partial_set_observer(pcoll_partial_t *p, pcoll_round_observer_t fn, void *arg)
{
    if (!p) return PC_ERR(PCOLL_ERR_NULL, "p is NULL");
    pthread_mutex_lock(&p->lock);
    p->observer = fn;
    p->observer_arg = arg;
    pthread_mutex_unlock(&p->lock);
    return PCOLL_SUCCESS;
}

/* ---- create / free ---- */

static void destroy(pcoll_partial_t *p)
{
    pc_object_release(&p->base);
    if (p->be) p->be->ops->destroy(p->be);
    pc_leader_destroy(&p->leader);
    if (p->pinned && p->pinned_put) free(p->pinned); /* neither delivered nor pooled */
    free(p->delivered);
    for (int i = 0; i < p->npool; i++) free(p->pool[i]);
    free(p->pool);
    free(p->scratch);
    free(p->group);
    free(p->round_group);
    free(p->left_out_h);
    free(p->left_out_d);
    free(p->group_d);
    free(p->left_out);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static int free_for_finalize(void *object)
{
    pcoll_partial_t *p = object;
    return pcoll_partial_free(&p);
}

static const char *kind_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return pc_policy_kind_name((int)v);
}

static const char *dtype_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return pcoll_dtype_name((pcoll_dtype_t)v);
}

static const char *mode_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return v == PCOLL_ACCUMULATE ? "ACCUMULATE" : v == PCOLL_REPLACE ? "REPLACE" : v == PCOLL_AVERAGE ? "AVERAGE" : "?";
}

enum { F_COUNT, F_DTYPE, F_KIND, F_QUORUM, F_GROUP, F_MODE, F_SYNC, F_SEED, F_CFG, F_P, NFIELDS };

/* The checks a rank can make alone; *bad: the field at fault. */
static int check_args(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, const pcoll_partial_config_t *cfg,
                      pcoll_partial_t **out, const char *fn, int *bad)
{
    if (!out) return *bad = F_P, pc_error(PCOLL_ERR_NULL, fn, "p (the output pointer) is NULL");
    if (!cfg) return *bad = F_CFG, pc_error(PCOLL_ERR_NULL, fn, "cfg is NULL (see pcoll_partial_config_default)");
    if (!pc_dtype_valid(dtype))
        return *bad = F_DTYPE,
               pc_error(PCOLL_ERR_DTYPE, fn, "dtype %d is not one of PCOLL_FLOAT32/FLOAT64/INT32/INT64", (int)dtype);
    size_t es = pcoll_dtype_size(dtype);
    if (count == 0)
        return *bad = F_COUNT, pc_error(PCOLL_ERR_COUNT, fn, "count is 0; a partial allreduce needs at least one element");
    if (count > (size_t)PTRDIFF_MAX / es - PC_TRAILER)
        return *bad = F_COUNT, pc_error(PCOLL_ERR_COUNT, fn, "count %zu of %s overflows the addressable byte size",
                                        count, pcoll_dtype_name(dtype));
    if (cfg->kind != PCOLL_PARTIAL_SOLO && cfg->kind != PCOLL_PARTIAL_MAJORITY && cfg->kind != PCOLL_PARTIAL_QUORUM &&
        cfg->kind != PCOLL_PARTIAL_GROUP)
        return *bad = F_KIND,
               pc_error(PCOLL_ERR_ARG, fn, "cfg->kind %d is not SOLO, MAJORITY, QUORUM or GROUP", (int)cfg->kind);
    if (cfg->kind == PCOLL_PARTIAL_GROUP && (cfg->group_size < 0 || cfg->group_size == 1))
        return *bad = F_GROUP, pc_error(PCOLL_ERR_ARG, fn,
                                        "cfg->group_size is %d; it must be >= 2 (or 0: max(2, round(sqrt(P))))",
                                        cfg->group_size);
    if (cfg->kind == PCOLL_PARTIAL_QUORUM && (cfg->quorum < 1 || cfg->quorum > ctx->size))
        return *bad = F_QUORUM, pc_error(PCOLL_ERR_ARG, fn,
                                         "cfg->quorum is %d; it must be between 1 and the number of ranks (%d)",
                                         cfg->quorum, ctx->size);
    if (cfg->mode != PCOLL_ACCUMULATE && cfg->mode != PCOLL_REPLACE && cfg->mode != PCOLL_AVERAGE)
        return *bad = F_MODE, pc_error(PCOLL_ERR_ARG, fn,
                                       "cfg->mode %d is not PCOLL_ACCUMULATE, PCOLL_REPLACE or PCOLL_AVERAGE",
                                       (int)cfg->mode);
    if (cfg->mode == PCOLL_AVERAGE && dtype != PCOLL_FLOAT32 && dtype != PCOLL_FLOAT64)
        return *bad = F_DTYPE, pc_error(PCOLL_ERR_DTYPE, fn, "PCOLL_AVERAGE needs float32 or float64, not %s",
                                        pcoll_dtype_name(dtype));
    if (cfg->sync_every < 0)
        return *bad = F_SYNC, pc_error(PCOLL_ERR_ARG, fn, "cfg->sync_every is %d; it must be >= 0 (0: never)",
                                       cfg->sync_every);
    return PCOLL_SUCCESS;
}

/* Step 1: the object and its buffers, and its identity (collective: every
 * rank takes a channel in the same order, even one without memory). */
static int new_object(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, const pcoll_partial_config_t *cfg,
                      pcoll_partial_t **out, const char *fn)
{
    pcoll_partial_t *p = calloc(1, sizeof *p);
    pc_object_t scratch_base;
    int rc = pc_object_init(p ? &p->base : &scratch_base, ctx, "partial", 1, fn);
    if (!p) {
        if (rc == PCOLL_SUCCESS) pc_object_release(&scratch_base);
        return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for a partial object");
    }
    *out = p;
    p->P = ctx->size;
    p->me = ctx->rank;
    p->count = count;
    p->dtype = dtype;
    p->esize = pcoll_dtype_size(dtype);
    p->bytes = (count + PC_TRAILER) * p->esize;
    p->cfg = *cfg;
    p->policy = pc_policy_of(cfg, ctx->size);
    p->observer = cfg->observer;
    p->observer_arg = cfg->observer_arg;
    p->bitmap_bytes = ((size_t)p->P + 7) / 8;
    p->needs_park = cfg->kind == PCOLL_PARTIAL_MAJORITY || cfg->kind == PCOLL_PARTIAL_QUORUM || cfg->sync_every > 0;
    p->is_leader = p->me == PC_LEADER;
    p->counting = cfg->kind == PCOLL_PARTIAL_MAJORITY || cfg->kind == PCOLL_PARTIAL_QUORUM;
    pthread_mutex_init(&p->lock, NULL);
    atomic_init(&p->rounds_completed, 0);
    atomic_init(&p->flushes_completed, 0);
    atomic_init(&p->drained, 0);
    p->delivered = malloc(p->bytes);
    p->scratch = malloc(sizeof(int) * (size_t)p->P);
    p->group = malloc(sizeof(int) * (size_t)p->P);
    p->round_group = malloc(sizeof(int) * (size_t)p->P);
    p->left_out_h = malloc(sizeof(int) * (size_t)p->P);
    p->left_out_d = malloc(sizeof(int) * (size_t)p->P);
    p->group_d = malloc(sizeof(int) * (size_t)p->P);
    p->left_out = malloc(sizeof(int) * (size_t)p->P);
    if (rc == PCOLL_SUCCESS && (!p->delivered || !p->scratch || !p->group || !p->round_group || !p->left_out_h ||
                                !p->left_out_d || !p->group_d || !p->left_out ||
                                ((p->is_leader || p->counting) && pc_leader_init(&p->leader, &p->policy) != 0)))
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the buffers of %zu elements", count);
    return rc;
}

/* Step 2: the data phase.  Up to PCOLL_PARTIAL_SHM_BYTES, node-shared
 * memory inside each node (collective: every rank takes part and all
 * decide alike, even one that failed in step 1) ... */
static int choose_data_phase(pcoll_t *ctx, pcoll_partial_t *p, int rc, const char *fn)
{
    pc_backend_env_t env;
    memset(&env, 0, sizeof env);
    env.ctx = ctx;
    env.engine = ctx->engine;
    env.P = ctx->size;
    env.me = ctx->rank;
    if (p) pc_driver_env(p, &env);
    pcoll_allreduce_algo_t forced = (pcoll_allreduce_algo_t)atomic_load(&ctx->algo);
    size_t small_bytes = atomic_load(&ctx->small_bytes);
    int use = p && rc == PCOLL_SUCCESS && p->count * p->esize <= ctx->partial_shm_bytes;
    pc_backend_t *be = NULL;
    int brc = pc_backend_shm_create(&env, ctx->comm, use, forced, small_bytes, &be);
    if (!p) return rc;
    p->be = be;
    if (rc == PCOLL_SUCCESS && brc != PCOLL_SUCCESS)
        rc = pc_error(brc, fn, "cannot set up node-shared memory for the object");
    /* ... else an allreduce in place over every rank, trailer included:
     * never the direct algorithm unless forced (ranks join a round one by
     * one as the activation reaches them, and direct's n - 1 messages per
     * rank then slow the activation down: a round at P = 16 took about 25%
     * longer) */
    if (rc == PCOLL_SUCCESS && !be && (rc = pc_backend_msg_create(&env, forced, small_bytes, &p->be)) != PCOLL_SUCCESS)
        rc = pc_error(rc, fn, "cannot build the round schedule (%s)", pcoll_allreduce_algo_name(forced));
    return rc;
}

int pcoll_partial_create(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, const pcoll_partial_config_t *cfg,
                         pcoll_partial_t **out)
{
    static const char *fn = "pcoll_partial_create";
    if (out) *out = NULL;
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc; /* without a context nothing can be agreed */
    int bad = -1;
    rc = check_args(ctx, count, dtype, cfg, out, fn, &bad);
    /* every rank checks that the others create the same object: a
     * difference fails all of them, naming it */
    pcoll_partial_config_t c0;
    pcoll_partial_config_default(&c0);
    const pcoll_partial_config_t *c = cfg ? cfg : &c0;
    pc_agree_field_t fields[NFIELDS] = {
        {"count", (int64_t)count, 1, NULL},
        {"dtype", (int64_t)dtype, 1, dtype_text},
        {"cfg->kind", (int64_t)c->kind, 1, kind_text},
        {"cfg->quorum", c->kind == PCOLL_PARTIAL_QUORUM ? c->quorum : 0, 1, NULL},
        {"cfg->group_size", pc_policy_of(c, ctx->size).group_size, 1, NULL},
        {"cfg->mode", (int64_t)c->mode, 1, mode_text},
        {"cfg->sync_every", c->sync_every, 1, NULL},
        {"cfg->seed", (int64_t)c->seed, c->kind == PCOLL_PARTIAL_MAJORITY, NULL},
        {"cfg", 0, 0, NULL},
        {"p", 0, 0, NULL},
    };
    pc_agree_over_t all = pc_agree_group(ctx, NULL, 0);
    if ((rc = pc_agree(&all, fn, rc, bad, fields, NFIELDS, PCOLL_ERR_ARG)) != PCOLL_SUCCESS) return rc;
    pcoll_partial_t *p = NULL;
    rc = new_object(ctx, count, dtype, cfg, &p, fn);
    rc = choose_data_phase(ctx, p, rc, fn);
    int attached = 0;
    if (rc == PCOLL_SUCCESS && p->needs_park && (rc = pc_park_attach(ctx, fn)) == PCOLL_SUCCESS) attached = 1;
    if (rc == PCOLL_SUCCESS) rc = pc_driver_open(p, fn);
    /* every rank set up (and listens) before anyone sends */
    if ((rc = pc_agree_step(&all, fn, rc)) != PCOLL_SUCCESS) {
        if (p) pc_driver_close(p);
        if (attached) pc_park_detach(ctx);
        if (p) destroy(p); /* collective for a node-shared backend: every rank is here */
        return rc;
    }
    pc_object_register(&p->base, p, free_for_finalize, p->needs_park);
    *out = p;
    return PCOLL_SUCCESS;
}

/* ---- waiting ---- */

typedef struct wait_target {
    pcoll_partial_t *p;
    uint64_t rounds, flushes;
    int drain;
    int type;       /* what the call is: 0, PC_ARR_FLUSH or PC_ARR_FREE */
    uint64_t round; /* the round it waits for (type 0) */
} wait_target_t;

static int reached(void *arg)
{
    wait_target_t *w = arg;
    pcoll_partial_t *p = w->p;
    if (pc_fault_status(&p->base.fault) != PCOLL_SUCCESS) return 1;
    if (w->drain) return atomic_load(&p->drained);
    return atomic_load(&p->rounds_completed) >= w->rounds && atomic_load(&p->flushes_completed) >= w->flushes;
}

static void describe(void *arg, pc_stall_probe_t *probe)
{
    wait_target_t *w = arg;
    pc_driver_describe(w->p, w->type, w->round, probe);
}

static void nudge(void *arg) { pc_driver_nudge(arg); }

/* Waits for w as a blocking call about this object (the other objects may
 * count this rank as parked meanwhile). */
static int wait_for(pcoll_partial_t *p, wait_target_t *w, const char *fn)
{
    p->be->ops->want(p->be, w->rounds ? w->rounds : atomic_load(&p->rounds_completed) + 1);
    pc_wait_t wait = {.fn = fn,
                      .done = reached,
                      .arg = w,
                      .describe = describe,
                      .describe_arg = w,
                      .object = p->base.id,
                      .channel = p->base.channel,
                      .object_watches = p->needs_park};
    if (p->be->ops->nudge && p->be->env.exclude_ns) { /* rounds may go on without a silent rank */
        wait.nudge = nudge;
        wait.nudge_arg = p;
        wait.nudge_s = (double)p->be->env.exclude_ns * 1e-9 / PC_SILENCE_NUDGES;
    }
    int rc = pc_block(p->base.ctx, &wait);
    p->be->ops->want(p->be, 0);
    if (rc == PCOLL_SUCCESS) rc = pc_fault_raise(&p->base.fault, fn);
    return rc;
}

/* Starts a call: one application thread at a time, on an object that has
 * not failed. */
static int enter(pcoll_partial_t *p, const char *fn)
{
    if (!p) return pc_error(PCOLL_ERR_NULL, fn, "p is NULL");
    int rc = pc_ctx_replaced(p->base.ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    pthread_mutex_lock(&p->lock);
    if (p->app_busy) {
        pthread_mutex_unlock(&p->lock);
        return pc_error(PCOLL_ERR_STATE, fn, "the object is already in use by another call (one thread at a time)");
    }
    p->app_busy = 1;
    pthread_mutex_unlock(&p->lock);
    p->tl.t0 = pc_tl_now(p->base.ctx);
    p->tl.fn = fn + strlen("pcoll_partial_"); /* fn is a literal: so is its tail */
    p->tl.round = -1;
    p->tl.waited = 0;
    p->tl.rounds = 0;
    return PCOLL_SUCCESS;
}

/* the call in the timeline */
static void trace_call(const pcoll_partial_t *p, int rc)
{
    pc_tl_partial_call(p->base.ctx, p->tl.t0, p->base.id, pcoll_partial_kind_name(p->cfg.kind), p->tl.fn, p->tl.round,
                       p->tl.waited, p->tl.rounds, rc);
}

static int leave(pcoll_partial_t *p, int rc)
{
    trace_call(p, rc);
    pthread_mutex_lock(&p->lock);
    p->app_busy = 0;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* What the application receives of delivered rounds d (m): their result,
 * zeros for none, or for PCOLL_AVERAGE the averaged model. */
static void copy_out(const pcoll_partial_t *p, void *out, const void *d, const pc_delivery_t *m, int own,
                     const void *contribution)
{
    if (p->cfg.mode == PCOLL_AVERAGE)
        average_rule(p, m->rounds, m->rounds ? m->contributions_last : 0, own, d, contribution, out);
    else if (m->rounds > 0)
        memcpy(out, d, p->count * p->esize);
    else
        memset(out, 0, p->count * p->esize);
}

/* Takes the delivered results: the buffer is swapped for an empty one under
 * the lock, the copy made after it.  A delivered buffer with no round in it
 * is zero, whatever its bytes.  The call's contribution is in them when the
 * round `taken` (that took it) is: read under the same lock as the swap, as
 * a round may complete meanwhile (own: it is in them anyway). */
static void take(pcoll_partial_t *p, void *out, pcoll_partial_info_t *info, uint64_t taken, int own,
                 const void *contribution)
{
    void *fresh = pc_partial_buffer_get(p);
    pthread_mutex_lock(&p->lock);
    own = own || atomic_load(&p->rounds_completed) > taken;
    void *d = p->delivered;
    pc_delivery_t m = p->dmeta;
    memcpy(p->left_out, p->left_out_d, sizeof(int) * (size_t)m.n_left_out);
    if (m.group_n > 0) memcpy(p->group, p->group_d, sizeof(int) * (size_t)m.group_n);
    if (fresh) {
        p->delivered = fresh;
        memset(&p->dmeta, 0, sizeof p->dmeta);
    } else { /* no memory for a swap: copy under the lock instead */
        copy_out(p, out, d, &m, own, contribution);
        memset(&p->dmeta, 0, sizeof p->dmeta);
        d = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    p->tl.rounds = m.rounds;
    if (d) {
        copy_out(p, out, d, &m, own, contribution);
        pc_partial_buffer_put(p, d);
    }
    if (info) {
        memset(info, 0, sizeof *info);
        info->rounds = m.rounds;
        info->first_round = m.first;
        info->last_round = m.last;
        info->active = m.active_last;
        info->active_min = m.active_min;
        info->active_total = m.active_total;
        info->contributions = m.contributions;
        info->last_contributions = m.rounds > 0 ? m.contributions_last : 0;
        info->own_included = own;
        info->root = m.root_last;
        info->synchronous = m.sync_last;
        info->parked = m.parked;
        info->left_out_rounds = m.left_out_rounds;
        info->caught_up = m.caught_up;
        info->n_left_out = m.n_left_out;
        info->left_out = m.n_left_out > 0 ? p->left_out : NULL;
        info->group_size = 0;
        info->group = NULL;
        if (m.rounds > 0) {
            if (m.group_n > 0) { /* copied with the delivery */
                info->group_size = m.group_n;
                p->group_all = 0;
            } else { /* every rank: listed once, not at every call */
                if (!p->group_all)
                    for (int r = 0; r < p->P; r++) p->group[r] = r;
                p->group_all = 1;
                info->group_size = p->P;
            }
            info->group = p->group;
        }
    }
}

typedef struct step_choice {
    pcoll_partial_t *p;
    pc_call_step_t step;
} step_choice_t;

/* Which step follows step 1: called while no round can take this rank's
 * part; `taken` is the round that will.  Nonzero: the application waits
 * for that round (and counts as active in it).  It may be called again
 * for a later round (backend.h: contribute). */
static int choose(void *arg, uint64_t taken)
{
    step_choice_t *c = arg;
    pcoll_partial_t *p = c->p;
    pthread_mutex_lock(&p->lock);
    int results = p->dmeta.rounds > 0;
    pthread_mutex_unlock(&p->lock);
    uint64_t completed = atomic_load(&p->rounds_completed);
    /* rounds done elsewhere and not yet completed here are results too */
    results = results || p->be->ops->done(p->be) > completed;
    c->step = pc_policy_call_step(results, completed, taken);
    return c->step == PC_STEP_NEXT;
}

int pcoll_partial_allreduce(pcoll_partial_t *p, const void *contribution, void *out, pcoll_partial_info_t *info)
{
    static const char *fn = "pcoll_partial_allreduce";
    if (p && !out) return pc_error(PCOLL_ERR_NULL, fn, "out is NULL");
    int rc = enter(p, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if ((rc = pc_fault_raise(&p->base.fault, fn)) != PCOLL_SUCCESS) return leave(p, rc);
    step_choice_t c = {p, PC_STEP_RESULTS};
    uint64_t taken = p->be->ops->contribute(p->be, contribution, choose, &c);
    p->tl.round = (int64_t)taken;
    p->tl.waited = c.step != PC_STEP_RESULTS;
    wait_target_t w = {p, 0, 0, 0, 0, taken};
    if (c.step == PC_STEP_RESULTS) {
        /* rounds done (in node-shared memory, perhaps not yet completed
         * here): nothing to wait for but this rank's own poller */
        w.rounds = p->be->ops->done(p->be);
        if (!reached(&w)) {
            p->be->ops->want(p->be, w.rounds);
            pc_engine_wait(p->base.engine, reached, &w);
            p->be->ops->want(p->be, 0);
        }
    } else {
        if (c.step == PC_STEP_RUNNING) {
            w.rounds = taken;
            w.round = taken - 1;
        } else {
            w.rounds = taken + 1;
            if (p->be->ops->activated(p->be) <= taken &&
                (rc = pc_driver_arrive(p, 0, taken, 1)) != PCOLL_SUCCESS) {
                p->be->ops->waiting(p->be, 0);
                return leave(p, pc_error(rc, fn, "no memory for the request to the progress engine"));
            }
        }
        rc = wait_for(p, &w, fn);
        /* after a timeout the arrival stands: the rank stays waiting, as the
         * leader counted it, until its next call */
        if (rc == PCOLL_ERR_TIMEOUT) return leave(p, rc);
        p->be->ops->waiting(p->be, 0);
        if (rc != PCOLL_SUCCESS) return leave(p, rc);
    }
    if ((rc = pc_fault_raise(&p->base.fault, fn)) != PCOLL_SUCCESS) return leave(p, rc);
    take(p, out, info, taken, 0, contribution);
    return leave(p, PCOLL_SUCCESS);
}

static int no_wait(void *arg, uint64_t taken)
{
    (void)arg;
    (void)taken;
    return 0;
}

int pcoll_partial_deposit(pcoll_partial_t *p, const void *contribution)
{
    static const char *fn = "pcoll_partial_deposit";
    if (p && !contribution) return pc_error(PCOLL_ERR_NULL, fn, "contribution is NULL");
    int rc = enter(p, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if ((rc = pc_fault_raise(&p->base.fault, fn)) != PCOLL_SUCCESS) return leave(p, rc);
    p->tl.round = (int64_t)p->be->ops->contribute(p->be, contribution, no_wait, NULL);
    p->be->ops->waiting(p->be, 0); /* a timed-out call's arrival stood until this call */
    return leave(p, PCOLL_SUCCESS);
}

int pcoll_partial_flush(pcoll_partial_t *p, void *out, pcoll_partial_info_t *info)
{
    static const char *fn = "pcoll_partial_flush";
    if (p && !out) return pc_error(PCOLL_ERR_NULL, fn, "out is NULL");
    int rc = enter(p, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if ((rc = pc_fault_raise(&p->base.fault, fn)) != PCOLL_SUCCESS) return leave(p, rc);
    /* a flush that timed out is resumed, not begun again, even when it
     * completed in the background since (its result is delivered now) */
    if (!p->flush_resumes) {
        p->flush_calls++;
        p->be->ops->waiting(p->be, 1); /* inside the library for every round until the flush */
        if ((rc = pc_driver_arrive(p, PC_ARR_FLUSH, p->flush_calls, 1)) != PCOLL_SUCCESS) {
            p->flush_calls--;
            p->be->ops->waiting(p->be, 0);
            return leave(p, pc_error(rc, fn, "no memory for the request to the progress engine"));
        }
    }
    wait_target_t w = {p, 0, p->flush_calls, 0, PC_ARR_FLUSH, 0};
    p->tl.waited = 1;
    rc = wait_for(p, &w, fn);
    p->flush_resumes = rc == PCOLL_ERR_TIMEOUT;
    if (rc == PCOLL_ERR_TIMEOUT) return leave(p, rc);
    p->be->ops->waiting(p->be, 0);
    if (rc != PCOLL_SUCCESS) return leave(p, rc);
    take(p, out, info, 0, 1, NULL);
    return leave(p, PCOLL_SUCCESS);
}

int pcoll_partial_free(pcoll_partial_t **pp)
{
    static const char *fn = "pcoll_partial_free";
    if (!pp) return pc_error(PCOLL_ERR_NULL, fn, "p (the pointer to the object) is NULL");
    pcoll_partial_t *p = *pp;
    int rc = enter(p, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    p->tl.waited = 1;
    /* a free that timed out is resumed, not begun again */
    if (!p->free_sent) {
        p->be->ops->waiting(p->be, 1); /* active in every round until the last */
        if ((rc = pc_driver_arrive(p, PC_ARR_FREE, 0, 1)) != PCOLL_SUCCESS) {
            p->be->ops->waiting(p->be, 0);
            return leave(p, pc_error(rc, fn, "no memory for the request to the progress engine"));
        }
        p->free_sent = 1;
    }
    /* the last round runs, then the backend's traffic ends: nothing of this
     * object is left in flight or posted once `drained` is set */
    wait_target_t w = {p, 0, 0, 1, PC_ARR_FREE, 0};
    rc = wait_for(p, &w, fn);
    if (rc != PCOLL_SUCCESS && !atomic_load(&p->drained)) return leave(p, rc);
    pc_driver_close(p);
    if (p->needs_park) pc_park_detach(p->base.ctx);
    trace_call(p, PCOLL_SUCCESS);
    destroy(p); /* collective for a node-shared backend: every rank is draining */
    *pp = NULL;
    return PCOLL_SUCCESS;
}
