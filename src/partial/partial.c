/*
 * Partial allreduce objects: the public calls, on the application thread.
 *
 *   pcoll_partial_allreduce(p, contribution, out, info)
 *     1. add (ACCUMULATE) or copy (REPLACE) the contribution into pending
 *        (outside the lock, flagged `adding` so no round takes it half-written)
 *     2. rounds completed since the last call?  take them, return
 *     3. a round running here?  wait for it (own_included: it had not yet
 *        taken pending -- then it is 3a, handled like 4)
 *     4. else wait for the next round r: post the arrival, which starts r
 *        (SOLO, MAJORITY's initiator) or reports to the leader
 *
 * Waiting is on rounds_completed (atomic) through pc_engine_wait, which
 * normally runs the arrival and the round on this thread; the results are
 * taken by swapping the delivered buffer for an empty one under the lock and
 * copied out after it.
 */
#include <stdlib.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../core/error.h"
#include "../engine/reduce.h"
#include "partial_internal.h"

/* ---- buffers and trailers ---- */

void *pc_partial_buffer_get(pcoll_partial_t *p)
{
    if (p->npool > 0) return p->pool[--p->npool];
    return malloc(p->bytes);
}

void pc_partial_buffer_put(pcoll_partial_t *p, void *b)
{
    if (p->npool == p->cappool) {
        int cap = p->cappool ? 2 * p->cappool : 4;
        void **np = realloc(p->pool, sizeof(void *) * (size_t)cap);
        if (!np) {
            free(b);
            return;
        }
        p->pool = np;
        p->cappool = cap;
    }
    p->pool[p->npool++] = b;
}

static void store_int(void *at, pcoll_dtype_t t, int64_t v)
{
    switch (t) {
    case PCOLL_FLOAT32: *(float *)at = (float)v; break;
    case PCOLL_FLOAT64: *(double *)at = (double)v; break;
    case PCOLL_INT32: *(int32_t *)at = (int32_t)v; break;
    default: *(int64_t *)at = v; break;
    }
}

static int64_t load_int(const void *at, pcoll_dtype_t t)
{
    switch (t) {
    case PCOLL_FLOAT32: return (int64_t)*(const float *)at;
    case PCOLL_FLOAT64: return (int64_t)*(const double *)at;
    case PCOLL_INT32: return *(const int32_t *)at;
    default: return *(const int64_t *)at;
    }
}

void pc_trailer_set(pcoll_partial_t *p, void *buf, int64_t active, int64_t contributions)
{
    char *t = (char *)buf + p->count * p->esize;
    store_int(t, p->dtype, active);
    store_int(t + p->esize, p->dtype, contributions);
}

void pc_trailer_get(const pcoll_partial_t *p, const void *buf, int64_t *active, int64_t *contributions)
{
    const char *t = (const char *)buf + p->count * p->esize;
    *active = load_int(t, p->dtype);
    *contributions = load_int(t + p->esize, p->dtype);
}

/* ---- MAJORITY's initiators ---- */

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* initiator(r): position r mod P of a random permutation of the ranks drawn
 * for block r / P from the seed.  Every rank computes the same value, and
 * over each block of P rounds every rank initiates exactly once: the expected
 * number of active ranks under linear skew, (P + 1) / 2, then holds per block
 * instead of only on average over many rounds. */
int pc_partial_initiator_of(const pcoll_partial_t *p, uint64_t round)
{
    int P = p->P;
    uint64_t block = round / (uint64_t)P, pos = round % (uint64_t)P;
    uint64_t state = mix64(p->cfg.seed ^ mix64(block));
    /* Fisher-Yates over all P ranks: O(P) per call, a few calls per round */
    int *perm = malloc(sizeof(int) * (size_t)P);
    if (!perm) return (int)(mix64(state ^ round) % (uint64_t)P);
    for (int i = 0; i < P; i++) perm[i] = i;
    for (int i = P - 1; i > 0; i--) {
        state = mix64(state);
        int j = (int)(state % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int who = perm[pos];
    free(perm);
    return who;
}

int pcoll_partial_initiator(const pcoll_partial_t *p, uint64_t round)
{
    if (!p) return PC_ERR(PCOLL_ERR_NULL, "p is NULL");
    return pc_partial_initiator_of(p, round);
}

const char *pcoll_partial_data_phase(const pcoll_partial_t *p)
{
    if (!p) return NULL;
    return p->shm ? "shared-memory" : "messages";
}

/* ---- configuration ---- */

void pcoll_partial_config_default(pcoll_partial_config_t *cfg)
{
    if (!cfg) return;
    cfg->kind = PCOLL_PARTIAL_SOLO;
    cfg->quorum = 1;
    cfg->mode = PCOLL_ACCUMULATE;
    cfg->sync_every = 0;
    cfg->seed = 1;
    cfg->observer = NULL;
    cfg->observer_arg = NULL;
}

int pcoll_partial_config_parse(const char *spec, pcoll_partial_config_t *cfg)
{
    if (!spec || !cfg) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !spec ? "spec" : "cfg");
    if (strcmp(spec, "solo") == 0) {
        cfg->kind = PCOLL_PARTIAL_SOLO;
        return PCOLL_SUCCESS;
    }
    if (strcmp(spec, "majority") == 0) {
        cfg->kind = PCOLL_PARTIAL_MAJORITY;
        return PCOLL_SUCCESS;
    }
    if (strncmp(spec, "quorum:", 7) == 0) {
        char *end = NULL;
        long q = strtol(spec + 7, &end, 10);
        if (end == spec + 7 || *end != '\0' || q < 1 || q > 1000000000L)
            return PC_ERR(PCOLL_ERR_ARG, "\"%s\": the quorum must be a whole number >= 1 (quorum:Q)", spec);
        cfg->kind = PCOLL_PARTIAL_QUORUM;
        cfg->quorum = (int)q;
        return PCOLL_SUCCESS;
    }
    return PC_ERR(PCOLL_ERR_ARG, "\"%s\" is not solo, majority or quorum:Q", spec);
}

/* ---- create / free ---- */

static void destroy(pcoll_partial_t *p)
{
    if (p->sched) pc_sched_free(p->sched);
    pc_nr_destroy(p->shm); /* collective, like create */
    pc_leader_destroy(p);
    free(p->act_in);
    free(p->slot[0].counted);
    free(p->slot[1].counted);
    free(p->pending);
    free(p->delivered);
    for (int i = 0; i < p->npool; i++) free(p->pool[i]);
    free(p->pool);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void free_for_finalize(void *object)
{
    pcoll_partial_t *p = object;
    pcoll_partial_free(&p);
}

int pcoll_partial_create(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, const pcoll_partial_config_t *cfg,
                         pcoll_partial_t **out)
{
    if (!out) return PC_ERR(PCOLL_ERR_NULL, "p (the output pointer) is NULL");
    *out = NULL;
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!cfg) return PC_ERR(PCOLL_ERR_NULL, "cfg is NULL (see pcoll_partial_config_default)");
    if (!pc_dtype_valid(dtype))
        return PC_ERR(PCOLL_ERR_DTYPE, "dtype %d is not one of PCOLL_FLOAT32/FLOAT64/INT32/INT64", (int)dtype);
    if (count == 0) return PC_ERR(PCOLL_ERR_COUNT, "count is 0; a partial allreduce needs at least one element");
    size_t es = pcoll_dtype_size(dtype);
    if (count > (size_t)PTRDIFF_MAX / es - 2)
        return PC_ERR(PCOLL_ERR_COUNT, "count %zu of %s overflows the addressable byte size", count,
                      pcoll_dtype_name(dtype));
    if (cfg->kind != PCOLL_PARTIAL_SOLO && cfg->kind != PCOLL_PARTIAL_MAJORITY && cfg->kind != PCOLL_PARTIAL_QUORUM)
        return PC_ERR(PCOLL_ERR_ARG, "cfg->kind %d is not SOLO, MAJORITY or QUORUM", (int)cfg->kind);
    if (cfg->kind == PCOLL_PARTIAL_QUORUM && (cfg->quorum < 1 || cfg->quorum > ctx->size))
        return PC_ERR(PCOLL_ERR_ARG, "cfg->quorum is %d; it must be between 1 and the number of ranks (%d)",
                      cfg->quorum, ctx->size);
    if (cfg->mode != PCOLL_ACCUMULATE && cfg->mode != PCOLL_REPLACE)
        return PC_ERR(PCOLL_ERR_ARG, "cfg->mode %d is not PCOLL_ACCUMULATE or PCOLL_REPLACE", (int)cfg->mode);
    if (cfg->sync_every < 0)
        return PC_ERR(PCOLL_ERR_ARG, "cfg->sync_every is %d; it must be >= 0 (0: never)", cfg->sync_every);

    pcoll_partial_t *p = calloc(1, sizeof *p);
    if (!p) return PC_ERR(PCOLL_ERR_NOMEM, "no memory for a partial object");
    p->ctx = ctx;
    p->engine = ctx->engine;
    p->P = ctx->size;
    p->me = ctx->rank;
    p->count = count;
    p->dtype = dtype;
    p->esize = es;
    p->bytes = (count + 2) * es;
    p->cfg = *cfg;
    p->waiting_from = UINT64_MAX;
    p->observer = cfg->observer;
    p->observer_arg = cfg->observer_arg;
    pthread_mutex_init(&p->lock, NULL);
    atomic_init(&p->rounds_completed, 0);
    atomic_init(&p->flushes_completed, 0);
    atomic_init(&p->drained, 0);
    p->needs_park = cfg->kind != PCOLL_PARTIAL_SOLO || cfg->sync_every > 0;
    p->bitmap_bytes = ((size_t)p->P + 7) / 8;
    p->act_msg_bytes = sizeof(pc_ctrl_msg_t) + p->bitmap_bytes;
    p->act_in = calloc(1, p->act_msg_bytes);
    p->slot[0].counted = calloc(p->bitmap_bytes, 1);
    p->slot[1].counted = calloc(p->bitmap_bytes, 1);
    p->pending = malloc(p->bytes);
    p->delivered = malloc(p->bytes);
    int have_buffers = p->act_in && p->slot[0].counted && p->slot[1].counted && p->pending && p->delivered &&
                       (p->me != PC_LEADER || pc_leader_alloc(p) == PCOLL_SUCCESS);
    /* the data phase: on one node and up to PCOLL_PARTIAL_SHM_BYTES, node-shared
     * memory (collective: every rank takes part and all decide alike, even
     * one that is out of memory here) ... */
    rc = pc_nr_create(p, ctx->comm, have_buffers && count * es <= ctx->partial_shm_bytes, &p->shm);
    if (!have_buffers || rc != PCOLL_SUCCESS) {
        destroy(p);
        return PC_ERR(PCOLL_ERR_NOMEM, "no memory for the buffers of %zu elements", count);
    }
    if (!p->shm) { /* ... else an allreduce in place over every rank, trailer included */
        pc_allreduce_spec_t spec = {p->P, ctx->groups.world->ranks, p->me, count + 2, dtype, PCOLL_SUM, 1};
        /* never direct unless forced: ranks join a round one by one as the activation reaches
         * them, and direct's n - 1 messages per rank then slow the activation
         * down (measured: a round at P = 16 takes about 25% longer) */
        pcoll_allreduce_algo_t algo = pc_allreduce_choose((pcoll_allreduce_algo_t)atomic_load(&ctx->algo), 0,
                                                          atomic_load(&ctx->small_bytes), p->bytes, p->P);
        if ((rc = pc_allreduce_build(&spec, algo, &p->sched)) != PCOLL_SUCCESS) {
            p->sched = NULL;
            destroy(p);
            return PC_ERR(rc, "cannot build the round schedule (%s)", pcoll_allreduce_algo_name(algo));
        }
    }
    if ((rc = pc_ctx_alloc_channel(ctx, &p->channel)) != PCOLL_SUCCESS) {
        destroy(p);
        return rc;
    }
    p->tag_activation = pc_tag_ctrl(&ctx->tags, p->channel, PC_CTRL_ACTIVATION);
    p->tag_arrival = pc_tag_ctrl(&ctx->tags, p->channel, PC_CTRL_ARRIVAL);
    if ((rc = pc_round_open(p)) != PCOLL_SUCCESS) {
        pc_ctx_free_channel(ctx, p->channel);
        destroy(p);
        return PC_ERR(rc, "cannot queue the object's start");
    }
    p->link.object = p;
    p->link.free_fn = free_for_finalize;
    p->link.park_fn = p->needs_park ? pc_partial_park : NULL;
    pc_ctx_register_object(ctx, &p->link);
    *out = p;
    return PCOLL_SUCCESS;
}

/* ---- the calls ---- */

typedef struct wait_target {
    pcoll_partial_t *p;
    uint64_t rounds, flushes;
} wait_target_t;

static int reached(void *arg)
{
    wait_target_t *w = arg;
    return atomic_load(&w->p->rounds_completed) >= w->rounds && atomic_load(&w->p->flushes_completed) >= w->flushes;
}

static int is_drained(void *arg) { return atomic_load(&((pcoll_partial_t *)arg)->drained); }

typedef struct arrive_task {
    pcoll_partial_t *p;
    uint32_t type; /* 0: the application waits for `round`; else an arrival for the leader */
    uint64_t round;
} arrive_task_t;

static void arrive_run(pc_engine_t *e, void *arg)
{
    (void)e;
    arrive_task_t *t = arg;
    if (t->type == PC_MSG_FREE) t->p->closing = 1; /* no PARK after our FREE */
    if (t->type == 0)
        pc_round_arrive(t->p, t->round);
    else
        pc_leader_notify(t->p, t->type, t->round);
    free(t);
}

/* Waits for the object, telling the other objects that this rank is parked
 * here meanwhile (they may count it as arrived).  Follows post_arrival. */
static void wait_parked(pcoll_partial_t *p, pc_pred_fn pred, void *arg)
{
    int blocks = !pred(arg);
    if (blocks) pc_ctx_park(p->ctx, &p->link, 1);
    pc_engine_wait(p->engine, pred, arg); /* also when it holds: it hands on a quiet post */
    if (blocks) pc_ctx_park(p->ctx, &p->link, 0);
}

static int post_arrival(pcoll_partial_t *p, uint32_t type, uint64_t round)
{
    arrive_task_t *t = malloc(sizeof *t);
    if (!t) return PCOLL_ERR_NOMEM;
    t->p = p;
    t->type = type;
    t->round = round;
    int rc = pc_engine_post_quiet(p->engine, arrive_run, t); /* the caller waits next */
    if (rc != PCOLL_SUCCESS) free(t);
    return rc;
}

/* Starts a call: one application thread at a time. */
static int enter(pcoll_partial_t *p, const char *fn)
{
    if (!p) return pc_error(PCOLL_ERR_NULL, fn, "p is NULL");
    pthread_mutex_lock(&p->lock);
    if (p->app_busy) {
        pthread_mutex_unlock(&p->lock);
        return pc_error(PCOLL_ERR_STATE, fn, "the object is already in use by another call (one thread at a time)");
    }
    p->app_busy = 1;
    return PCOLL_SUCCESS; /* with the lock held */
}

/* A delivered buffer with no round in it is zero, whatever its bytes. */
static void copy_delivered(const pcoll_partial_t *p, void *out, const void *delivered, uint64_t rounds)
{
    if (rounds > 0)
        memcpy(out, delivered, p->count * p->esize);
    else
        memset(out, 0, p->count * p->esize);
}

/* Takes the delivered results (lock held on entry, released on return). */
static void take(pcoll_partial_t *p, void *out, pcoll_partial_info_t *info, int own)
{
    void *fresh = pc_partial_buffer_get(p);
    void *d = p->delivered;
    pc_delivery_t m = p->dmeta;
    if (fresh) {
        p->delivered = fresh;
        memset(&p->dmeta, 0, sizeof p->dmeta);
    }
    p->waiting_from = UINT64_MAX;
    pthread_mutex_unlock(&p->lock);
    if (!fresh) { /* no memory for a swap: copy under the lock instead */
        pthread_mutex_lock(&p->lock);
        copy_delivered(p, out, p->delivered, p->dmeta.rounds);
        m = p->dmeta;
        memset(&p->dmeta, 0, sizeof p->dmeta);
    } else {
        copy_delivered(p, out, d, m.rounds);
        pthread_mutex_lock(&p->lock);
        pc_partial_buffer_put(p, d);
    }
    p->app_busy = 0;
    pthread_mutex_unlock(&p->lock);
    if (info) {
        info->rounds = m.rounds;
        info->first_round = m.first;
        info->last_round = m.last;
        info->active = m.active_last;
        info->active_min = m.active_min;
        info->active_total = m.active_total;
        info->contributions = m.contributions;
        info->own_included = own;
        info->root = m.root_last;
        info->synchronous = m.sync_last;
        info->parked = m.parked;
    }
}

/* dst holds `held` contributions (0: it is zero, whatever its bytes) */
static void add_contribution(pcoll_partial_t *p, void *dst, const void *src, uint64_t held)
{
    if (p->cfg.mode == PCOLL_ACCUMULATE && held > 0)
        pc_reduce_sum(dst, dst, src, p->count, p->dtype);
    else
        memcpy(dst, src, p->count * p->esize);
}

/* Waits for w with want set: whoever completes the round in node-shared
 * memory nudges this rank (node_rounds.h). */
static void wait_node(pcoll_partial_t *p, wait_target_t *w)
{
    if (reached(w)) return;
    pc_nr_set_want(p->shm, w->rounds > 0 ? w->rounds : atomic_load(&p->rounds_completed) + 1);
    wait_parked(p, reached, w);
    pc_nr_set_want(p->shm, 0);
}

typedef struct step_choice {
    pcoll_partial_t *p;
    int step;
} step_choice_t;

/* Which step follows step 1 (node-shared rounds): called while no round
 * can take this rank's part; `taken` is the round that will.  Nonzero:
 * step 4, the application waits for that round. */
static int choose(void *arg, uint64_t taken)
{
    step_choice_t *c = arg;
    pcoll_partial_t *p = c->p;
    pthread_mutex_lock(&p->lock);
    int results = p->dmeta.rounds > 0;
    pthread_mutex_unlock(&p->lock);
    uint64_t completed = atomic_load(&p->rounds_completed);
    if (results || pc_nr_done(p->shm) > completed)
        c->step = 2; /* results are waiting */
    else if (taken > completed)
        c->step = 3; /* rounds that took pending before step 1 */
    else
        c->step = 4; /* the application waits for `taken` */
    return c->step == 4;
}

/* The call when rounds run in node-shared memory: the same steps, with
 * pending and the takes in shared memory (the lock is held on entry). */
static int allreduce_node(pcoll_partial_t *p, const void *contribution, void *out, pcoll_partial_info_t *info)
{
    pc_node_rounds_t *s = p->shm;
    pthread_mutex_unlock(&p->lock);
    step_choice_t c = {p, 0};
    uint64_t taken = pc_nr_contribute(s, contribution, choose, &c);
    pc_nr_help(s); /* a round may have skipped our part while we added */
    wait_target_t w = {p, 0, 0};
    if (c.step == 2) {
        /* the rounds done in shared memory, completed here: nothing to wait for
         * but this rank's own poller, so not parked */
        w.rounds = pc_nr_done(s);
        pc_engine_wait(p->engine, reached, &w);
    } else {
        if (c.step == 3) w.rounds = taken;
        if (c.step == 4) {
            w.rounds = taken + 1;
            if (pc_nr_activated(s) <= taken) {
                int rc = post_arrival(p, 0, taken);
                if (rc != PCOLL_SUCCESS) {
                    pc_nr_clear_waiting(s);
                    pthread_mutex_lock(&p->lock);
                    p->app_busy = 0;
                    pthread_mutex_unlock(&p->lock);
                    return PC_ERR(rc, "cannot queue the request for the progress engine");
                }
            }
        }
        wait_node(p, &w);
        if (c.step == 4) pc_nr_clear_waiting(s);
    }
    pthread_mutex_lock(&p->lock);
    /* the round that took this call's contribution delivered it here */
    take(p, out, info, atomic_load(&p->rounds_completed) > taken);
    return PCOLL_SUCCESS;
}

int pcoll_partial_allreduce(pcoll_partial_t *p, const void *contribution, void *out, pcoll_partial_info_t *info)
{
    if (p && !out) return PC_ERR(PCOLL_ERR_NULL, "out is NULL");
    int rc = enter(p, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if (p->shm) return allreduce_node(p, contribution, out, info);
    int kick = 0;
    if (contribution) { /* step 1 */
        void *pending = p->pending;
        uint64_t held = p->pending_contribs;
        p->adding = 1;
        pthread_mutex_unlock(&p->lock);
        add_contribution(p, pending, contribution, held);
        pthread_mutex_lock(&p->lock);
        p->adding = 0;
        p->pending_contribs++;
        kick = p->start_deferred;
        p->start_deferred = 0;
    }
    uint64_t completed = atomic_load(&p->rounds_completed);
    wait_target_t w = {p, 0, 0};
    int own = 0, arrive = 0;
    uint64_t next = p->rounds_started;
    if (p->dmeta.rounds > 0) {
        /* step 2: results are waiting; the contribution goes to a later round */
    } else if (next > completed) {
        w.rounds = next; /* step 3: the running round took pending before step 1 */
    } else {
        /* steps 3a/4: the next round will take this contribution */
        own = 1;
        p->waiting_from = next;
        w.rounds = next + 1;
        arrive = next >= p->activated_upto;
    }
    pthread_mutex_unlock(&p->lock);
    if (kick && (rc = pc_engine_post_quiet(p->engine, pc_round_kick, p)) != PCOLL_SUCCESS) goto fail;
    if (arrive && (rc = post_arrival(p, 0, next)) != PCOLL_SUCCESS) goto fail;
    wait_parked(p, reached, &w);
    pthread_mutex_lock(&p->lock);
    take(p, out, info, own);
    return PCOLL_SUCCESS;
fail:
    pthread_mutex_lock(&p->lock);
    p->waiting_from = UINT64_MAX;
    p->app_busy = 0;
    pthread_mutex_unlock(&p->lock);
    return PC_ERR(rc, "cannot queue the request for the progress engine");
}

int pcoll_partial_flush(pcoll_partial_t *p, void *out, pcoll_partial_info_t *info)
{
    if (p && !out) return PC_ERR(PCOLL_ERR_NULL, "out is NULL");
    int rc = enter(p, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    uint64_t epoch = ++p->flush_calls;
    p->waiting_from = p->rounds_started; /* inside the library for every round until the flush */
    pthread_mutex_unlock(&p->lock);
    if (p->shm) pc_nr_set_waiting(p->shm);
    if ((rc = post_arrival(p, PC_MSG_FLUSH, epoch)) != PCOLL_SUCCESS) {
        if (p->shm) pc_nr_clear_waiting(p->shm);
        pthread_mutex_lock(&p->lock);
        p->waiting_from = UINT64_MAX;
        p->app_busy = 0;
        pthread_mutex_unlock(&p->lock);
        return PC_ERR(rc, "cannot queue the request for the progress engine");
    }
    wait_target_t w = {p, 0, epoch};
    if (p->shm) {
        wait_node(p, &w);
        pc_nr_clear_waiting(p->shm);
    } else {
        wait_parked(p, reached, &w);
    }
    pthread_mutex_lock(&p->lock);
    take(p, out, info, 1);
    return PCOLL_SUCCESS;
}

int pcoll_partial_free(pcoll_partial_t **pp)
{
    if (!pp) return PC_ERR(PCOLL_ERR_NULL, "p (the pointer to the object) is NULL");
    pcoll_partial_t *p = *pp;
    int rc = enter(p, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    p->waiting_from = p->rounds_started;
    pthread_mutex_unlock(&p->lock);
    if (p->shm) { /* active in every round until the last; woken at each */
        pc_nr_set_waiting(p->shm);
        pc_nr_set_want(p->shm, atomic_load(&p->rounds_completed) + 1);
    }
    if ((rc = post_arrival(p, PC_MSG_FREE, 0)) != PCOLL_SUCCESS) {
        if (p->shm) {
            pc_nr_clear_waiting(p->shm);
            pc_nr_set_want(p->shm, 0);
        }
        pthread_mutex_lock(&p->lock);
        p->app_busy = 0;
        pthread_mutex_unlock(&p->lock);
        return PC_ERR(rc, "cannot queue the request for the progress engine");
    }
    /* the last round runs, then the FIN exchange: nothing of this object is
     * left in flight or posted once `drained` is set */
    pcoll_t *ctx = p->ctx;
    pc_ctx_park(ctx, &p->link, 1);
    pc_engine_wait(p->engine, is_drained, p);
    pc_ctx_unregister_object(ctx, &p->link);
    pc_ctx_park(ctx, NULL, 0);
    pc_ctx_free_channel(p->ctx, p->channel);
    destroy(p);
    *pp = NULL;
    return PCOLL_SUCCESS;
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
