/* The driver of a partial object on the token holder: see driver.h. */
#include "driver.h"

#include <stdlib.h>
#include <string.h>

#include "../core/service.h"
#include "../algo/activation.h"
#include "../core/stall.h"
#include "../core/timeline.h"
#include "../engine/reduce.h"
#include "../util/log.h"

static void decide(pcoll_partial_t *p);
static void decide_stand_in(pcoll_partial_t *p);

/* ---- buffers ---- */

void *pc_partial_buffer_get(pcoll_partial_t *p)
{
    pthread_mutex_lock(&p->lock);
    void *b = p->npool > 0 ? p->pool[--p->npool] : NULL;
    pthread_mutex_unlock(&p->lock);
    return b ? b : malloc(p->bytes);
}

void pc_partial_buffer_put(pcoll_partial_t *p, void *b)
{
    if (!b) return;
    pthread_mutex_lock(&p->lock);
    if (b == p->pinned) { /* the backend still reads it: pooled when it lets go */
        p->pinned_put = 1;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    if (p->npool == p->cappool) {
        int cap = p->cappool ? 2 * p->cappool : 4;
        void **np = realloc(p->pool, sizeof(void *) * (size_t)cap);
        if (!np) {
            pthread_mutex_unlock(&p->lock);
            free(b);
            return;
        }
        p->pool = np;
        p->cappool = cap;
    }
    p->pool[p->npool++] = b;
    pthread_mutex_unlock(&p->lock);
}

/* ---- the object fails; its control messages ---- */

static void fail(pcoll_partial_t *p, int status, const char *what) { pc_object_fail(&p->base, status, "%s", what); }

static int send_msg(pcoll_partial_t *p, int peer, void *m, size_t bytes)
{
    return pc_object_send(&p->base, peer, m, bytes);
}

/* ---- the leader ---- */

static int elsewhere(void *arg, int rank)
{
    pcoll_partial_t *p = arg;
    return p->needs_park && pc_park_elsewhere(p->base.ctx, &p->watch, rank);
}

/* whether rank's progress engine is silent (asked only on a nudge) */
static int silent(void *arg, int rank)
{
    pcoll_partial_t *p = arg;
    return p->be->ops->silent && p->be->ops->silent(p->be, rank, p->probing);
}

/* Rounds activated where the leader did not hear of it (node-shared memory:
 * another rank's initiator wrote the record). */
static void catch_up(pcoll_partial_t *p)
{
    uint64_t a = p->be->ops->activated(p->be);
    if (a > p->leader.next) pc_leader_activated(&p->leader, a - 1, 0);
}

static void activate(pcoll_partial_t *p, uint64_t round, int root, uint32_t flags, const unsigned char *counted)
{
    /* comes back through on_activated (the leader learns it there) */
    p->be->ops->activate(p->be, round, root, flags, counted, -1);
}

static void decide(pcoll_partial_t *p)
{
    if (!p->is_leader || p->finishing) return;
    catch_up(p);
    pc_decision_t d;
    if (pc_leader_decide_silent(&p->leader, p->me, elsewhere, p->be->env.exclude_ns ? silent : NULL, p, &d))
        activate(p, d.round, d.root, d.flags, d.counted);
    if (p->needs_park) pc_park_set_waiting(p->base.ctx, &p->watch, pc_leader_has_waiters(&p->leader));
}

static void park_decide(void *arg) { decide(arg); }

static void leader_arrival(pcoll_partial_t *p, int type, int from, uint64_t round)
{
    PC_DEBUG("partial ch%u leader: arrival %d for %llu from %d (next %llu)", p->base.channel, type,
             (unsigned long long)round, from, (unsigned long long)p->leader.next);
    catch_up(p);
    if (pc_leader_arrival(&p->leader, type, from, round) != 0) {
        pc_log(PCOLL_LOG_ERROR, "partial: rank %d arrived (%d) for round %llu but round %llu is next (bug)", from, type,
               (unsigned long long)round, (unsigned long long)p->leader.next);
        return;
    }
    decide(p);
}

static void tell_leader(pcoll_partial_t *p, int type, uint64_t round)
{
    if (p->is_leader) {
        leader_arrival(p, type, p->me, round);
        return;
    }
    /* FLUSH, FREE: round = the rounds this rank knows activated */
    pc_obj_msg_t m = pc_obj_msg(type == PC_ARR_WAIT    ? PC_MSG_WAIT
                                : type == PC_ARR_FLUSH ? PC_MSG_FLUSH
                                                       : PC_MSG_FREE,
                                round, p->me);
    send_msg(p, PC_LEADER, &m, sizeof m);
}

/* ---- without the leader (MAJORITY, QUORUM) ----
 *
 *   rank x waits for round r; the leader is silent (x's own look)
 *     x counts its arrival in its own counter (p->leader)
 *     QUORUM: and sends it to every rank once (WAIT, as to the leader)
 *   any rank but the leader, on such an arrival, an activation or a nudge:
 *     pc_leader_decide_stand_in on its counter -> start r on the leader's
 *     behalf (the first activation counts)
 *
 * The counters need no state from the leader: the ranks that wait say so
 * again.  A leader that was only slow still counts its own arrivals. */
static void decide_stand_in(pcoll_partial_t *p)
{
    if (p->is_leader || !p->counting || p->finishing) return;
    catch_up(p); /* node-shared memory: rounds others started */
    /* only while the leader is silent here too: back, it decides (a flush
     * round among them), and a late shared arrival must not start that
     * round as a plain one */
    if (!pc_leader_has_waiters(&p->leader) || !silent(p, PC_LEADER)) return;
    pc_decision_t d;
    if (pc_leader_decide_stand_in(&p->leader, silent, p, &d)) activate(p, d.round, d.root, d.flags, NULL);
}

static void arrive_without_leader(pcoll_partial_t *p, uint64_t round)
{
    if (pc_leader_arrival(&p->leader, PC_ARR_WAIT, p->me, round) != 0) return;
    if (pc_policy_shares_arrivals(&p->policy) && p->shared != round + 1) {
        p->shared = round + 1;
        pc_obj_msg_t m = pc_obj_msg(PC_MSG_WAIT, round, p->me);
        for (int r = 0; r < p->P; r++) /* the leader had it already */
            if (r != p->me && r != PC_LEADER) send_msg(p, r, &m, sizeof m);
    }
    decide_stand_in(p);
}

/* MAJORITY, a rank other than the leader that waits for round r: once it
 * finds r's initiator silent, it starts r on the initiator's behalf, as the
 * leader does (the leader sees only its own node's ranks in node-shared
 * memory: across nodes, the initiator's node-mates see it); the first
 * activation counts. */
static void cover_initiator(pcoll_partial_t *p, uint64_t r)
{
    int init = pc_policy_initiator_to_cover(&p->policy, p->me, r, p->scratch);
    if (init >= 0 && silent(p, init)) activate(p, r, init, PC_ROUND_STANDIN, NULL);
}

/* ---- backend events ---- */

static void on_activated(void *owner, uint64_t round, int root, uint32_t flags)
{
    pcoll_partial_t *p = owner;
    pc_tl_round_start(p->base.ctx, p->base.id, round, root, (flags & PC_ROUND_SYNC) != 0);
    if (!p->is_leader && !p->counting) return;
    pc_leader_activated(&p->leader, round, flags);
    if (p->is_leader) decide(p);
    else decide_stand_in(p); /* early arrivals for the next round */
}

/* The ranks of a left-out bitmap into out (room for P); their number. */
static int left_out_ranks(const pcoll_partial_t *p, const unsigned char *bits, int *out)
{
    int n = 0;
    for (int j = 0; bits && j < p->P; j++)
        if (pc_bit_get(bits, j)) out[n++] = j;
    return n;
}

/* Round r is complete here (or rounds dn->first..r, kept while this rank
 * was silent), its result (trailer: totals) in buf, which this takes over:
 * observer, delivered, waiters; then, if it was the last round, the end of
 * the object's traffic. */
static void on_completed(void *owner, const pc_round_done_t *dn, void *buf)
{
    pcoll_partial_t *p = owner;
    uint64_t r = dn->round;
    int root = dn->root, parked = dn->parked;
    uint32_t flags = dn->flags;
    int64_t active, contribs;
    pc_trailer_get(&p->be->env, buf, &active, &contribs);
    /* a catch-up's rounds: their totals, the last and the fewest active */
    int64_t active_last = active, active_min = active, contribs_last = contribs;
    if (dn->catch_up) {
        active_last = dn->active_last;
        active_min = dn->active_min;
        active = dn->active_total;
        contribs = dn->contributions;
        contribs_last = dn->contributions_last;
    }
    PC_DEBUG("partial ch%u: round %llu done, flags %u", p->base.channel, (unsigned long long)r, flags);

    pthread_mutex_lock(&p->lock);
    pcoll_round_observer_t obs = p->observer;
    void *obs_arg = p->observer_arg;
    pthread_mutex_unlock(&p->lock);
    /* the round's members: the backend's (a view's groups), or the policy's
     * (listed only when a group's, or for the observer: every rank) */
    int in_groups = dn->members || pc_policy_in_groups(&p->policy, r, flags), n = p->P;
    if (dn->members) memcpy(p->round_group, dn->members, sizeof(int) * (size_t)(n = dn->nmembers));
    else if (in_groups || obs) n = pc_policy_members(&p->policy, r, flags, p->me, p->round_group);
    int traced = pc_tl_on(p->base.ctx), grouped = traced && in_groups;
    if (traced) {
        pc_tl_round(p->base.ctx, p->base.id, pcoll_partial_kind_name(p->cfg.kind), r, root, active, contribs,
                    (flags & PC_ROUND_SYNC) != 0, (flags & PC_ROUND_STANDIN) != 0, grouped ? p->round_group : NULL,
                    grouped ? n : 0);
    }
    int n_left = left_out_ranks(p, dn->left_out, p->left_out_h);
    if (traced && (n_left > 0 || dn->catch_up))
        pc_tl_left_out(p->base.ctx, p->base.id, r, dn->first, dn->catch_up, p->left_out_h, n_left);
    if (obs) {
        pcoll_round_t info = {r,       root,     (flags & PC_ROUND_STANDIN) != 0,
                              (int)active, (uint64_t)contribs, (flags & PC_ROUND_SYNC) != 0,
                              buf,     p->count, p->dtype, n, p->round_group, n_left, p->left_out_h, dn->first,
                              dn->catch_up};
        obs(&info, obs_arg);
    }

    void *spare = NULL;
    pthread_mutex_lock(&p->lock);
    pc_delivery_t *d = &p->dmeta;
    if (d->rounds == 0) {
        spare = p->delivered; /* empty: the round's buffer becomes delivered */
        p->delivered = buf;
        d->first = dn->first;
        d->active_min = (int)active_min;
    } else if (p->cfg.mode == PCOLL_ACCUMULATE) {
        pc_reduce_sum(p->delivered, p->delivered, buf, p->count, p->dtype);
        spare = buf;
    } else if (dn->alone) {
        spare = buf; /* REPLACE: a result not yet collected beats this rank's own contribution */
    } else {
        spare = p->delivered; /* REPLACE: the latest result wins */
        p->delivered = buf;
    }
    int stays = spare == buf && p->cfg.mode != PCOLL_ACCUMULATE; /* the delivered result and its record */
    d->rounds += r - dn->first + 1;
    d->last = r;
    if (n_left > 0) d->left_out_rounds++;
    if (dn->catch_up) d->caught_up += r - dn->first + 1;
    atomic_store(&p->rounds_completed, r + 1);
    if (flags & PC_ROUND_FLUSH) atomic_fetch_add(&p->flushes_completed, 1);
    if (!stays) { /* what the delivered result holds: this round's record too */
        d->n_left_out = n_left;
        memcpy(p->left_out_d, p->left_out_h, sizeof(int) * (size_t)n_left);
        d->group_n = in_groups && n < p->P ? n : 0;
        if (d->group_n > 0) memcpy(p->group_d, p->round_group, sizeof(int) * (size_t)n);
        d->active_last = (int)active_last;
        if ((int)active_min < d->active_min) d->active_min = (int)active_min;
        d->active_total += (uint64_t)active;
        d->contributions += (uint64_t)contribs;
        d->contributions_last = (uint64_t)contribs_last;
        d->root_last = root;
        d->sync_last = (flags & PC_ROUND_SYNC) != 0;
        d->parked += (uint64_t)parked;
    }
    pthread_mutex_unlock(&p->lock);
    pc_partial_buffer_put(p, spare);
    pc_engine_notify(p->base.engine);

    if (flags & PC_ROUND_FREE) {
        p->finishing = 1;
        p->be->ops->close(p->be);
    }
}

static void on_drained(void *owner)
{
    pcoll_partial_t *p = owner;
    atomic_store(&p->drained, 1);
    pc_engine_notify(p->base.engine);
}

static void on_failed(void *owner, int status, const char *what) { fail(owner, status, what); }

static int backend_send(void *owner, int peer, void *msg, size_t bytes) { return send_msg(owner, peer, msg, bytes); }
static void *backend_buffer(void *owner) { return pc_partial_buffer_get(owner); }
static void backend_release(void *owner, void *buf) { pc_partial_buffer_put(owner, buf); }
/* The backend reads buf (a result it handed over) until the next pin; the
 * buffer pinned before is let go (pooled if it was put back meanwhile). */
static void backend_pin(void *owner, void *buf)
{
    pcoll_partial_t *p = owner;
    pthread_mutex_lock(&p->lock);
    void *old = p->pinned_put ? p->pinned : NULL;
    p->pinned = buf;
    p->pinned_put = 0;
    pthread_mutex_unlock(&p->lock);
    pc_partial_buffer_put(p, old);
}

void pc_driver_env(pcoll_partial_t *p, pc_backend_env_t *env)
{
    memset(env, 0, sizeof *env);
    env->ctx = p->base.ctx;
    env->engine = p->base.engine;
    env->P = p->P;
    env->me = p->me;
    env->count = p->count;
    env->dtype = p->dtype;
    env->esize = p->esize;
    env->bytes = p->bytes;
    env->mode = p->cfg.mode;
    env->policy = p->policy;
    env->obj = &p->base;
    env->bitmap_bytes = p->bitmap_bytes;
    env->exclude_ns = (uint64_t)p->base.ctx->exclude_ms * 1000000u;
    env->node_deputy = p->base.ctx->node_deputy;
    env->owner = p;
    env->activated = on_activated;
    env->completed = on_completed;
    env->drained = on_drained;
    env->failed = on_failed;
    env->send = backend_send;
    env->buffer = backend_buffer;
    env->release = backend_release;
    env->pin = backend_pin;
}

/* ---- messages ---- */

static void on_message(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    (void)ctx;
    pcoll_partial_t *p = pc_object_of(arg, pcoll_partial_t);
    const pc_obj_msg_t *m = msg;
    if (bytes < sizeof *m) {
        pc_log(PCOLL_LOG_ERROR, "partial: a control message of %zu bytes from rank %d is too short", bytes, src);
        return;
    }
    if (m->type >= PC_MSG_BACKEND) {
        p->be->ops->message(p->be, src, msg, bytes);
        return;
    }
    if (!p->is_leader) {
        if (m->type == PC_MSG_WAIT && p->counting) { /* its leader is silent */
            if (pc_leader_arrival(&p->leader, PC_ARR_WAIT, src, m->round) == 0) decide_stand_in(p);
            return;
        }
        pc_log(PCOLL_LOG_ERROR, "partial: an arrival from rank %d at a rank that is not the leader", src);
        return;
    }
    int type = m->type == PC_MSG_WAIT ? PC_ARR_WAIT : m->type == PC_MSG_FLUSH ? PC_ARR_FLUSH : PC_ARR_FREE;
    if (m->type != PC_MSG_WAIT && m->type != PC_MSG_FLUSH && m->type != PC_MSG_FREE) {
        pc_log(PCOLL_LOG_ERROR, "partial: unknown control message %u from rank %d", m->type, src);
        return;
    }
    leader_arrival(p, type, src, m->round);
}

/* ---- arrivals from the application ---- */

typedef struct arrive_task {
    pc_task_t task;
    pcoll_partial_t *p;
    int type;
    uint64_t round;
} arrive_task_t;

static void arrive_run(pc_engine_t *e, void *arg)
{
    (void)e;
    arrive_task_t *t = arg;
    pcoll_partial_t *p = t->p;
    uint64_t round = t->round;
    int type = t->type;
    free(t);
    if (type != 0) { /* the leader must not pick a round this rank knows started */
        p->arrived = 0; /* a flush or free waits now: no stand-in (its round is the leader's) */
        if (p->counting && !p->is_leader) pc_leader_withdraw(&p->leader, p->me);
        tell_leader(p, type, p->be->ops->activated(p->be));
        return;
    }
    PC_DEBUG("partial ch%u: application waits for round %llu", p->base.channel, (unsigned long long)round);
    if (round < p->be->ops->activated(p->be)) return; /* it came meanwhile: it starts on its own */
    if (pc_policy_arrival(&p->policy, p->me, round, p->scratch) == PC_ARRIVE_START) {
        activate(p, round, p->me, 0, NULL);
        return;
    }
    p->arrived = round + 1;
    tell_leader(p, PC_ARR_WAIT, round); /* also when silent: it may only be slow */
    /* known silent (not asked here; stand_in_run asks) */
    if (pc_policy_counts_without_leader(&p->policy, p->me, round) && silent(p, PC_LEADER))
        arrive_without_leader(p, round);
    else if (!p->is_leader)
        cover_initiator(p, round);
}

/* ---- a waiting application's nudge (PCOLL_EXCLUDE_MS) ---- */

/* the leader decides again, asking the MAJORITY initiator it waits for
 * whether it is alive (the ranks it asked before: whether they answered) */
static void nudge_run(pc_engine_t *e, void *arg)
{
    (void)e;
    pcoll_partial_t *p = arg;
    p->probing = 1;
    decide(p);
    p->probing = 0;
}

/* Any other rank (MAJORITY, QUORUM): once the leader is silent (asked: by
 * messages, it is left out of the view once its deputy takes over), the
 * round this rank waits for is counted here too (the initiator asked).
 * MAJORITY, the leader not silent: the round's initiator is asked whether
 * it is silent (cover_initiator). */
static void stand_in_run(pc_engine_t *e, void *arg)
{
    (void)e;
    pcoll_partial_t *p = arg;
    uint64_t n = p->arrived;
    if (n == 0 || n - 1 < p->be->ops->activated(p->be) || p->finishing) return;
    uint64_t r = n - 1;
    p->probing = 1;
    if (pc_policy_counts_without_leader(&p->policy, p->me, r) && silent(p, PC_LEADER))
        arrive_without_leader(p, r);
    else
        cover_initiator(p, r);
    p->probing = 0;
}

void pc_driver_nudge(pcoll_partial_t *p)
{
    p->be->ops->nudge(p->be);
    if (p->counting && p->be->ops->silent) /* no memory: the next nudge */
        (void)pc_engine_post(p->base.engine, p->is_leader ? nudge_run : stand_in_run, p);
}

int pc_driver_arrive(pcoll_partial_t *p, int type, uint64_t round, int quiet)
{
    arrive_task_t *t = malloc(sizeof *t);
    if (!t) return PCOLL_ERR_NOMEM;
    t->p = p;
    t->type = type;
    t->round = round;
    t->task.fn = arrive_run;
    t->task.arg = t;
    pc_engine_post_task(p->base.engine, &t->task, quiet); /* arrive_run frees it */
    return PCOLL_SUCCESS;
}

/* ---- open and close ---- */

static void respond(pcoll_t *ctx, void *arg, int src, const pc_query_t *q, const int32_t *ranks,
                    unsigned char *missing);

/* the holder, once the object's messages come here */
static void on_open(pc_object_t *base)
{
    pcoll_partial_t *p = pc_object_of(base, pcoll_partial_t);
    pc_park_open(p->base.ctx);
    pc_stall_respond(p->base.ctx, PC_Q_OBJECT, respond, NULL);
    if (p->is_leader && p->needs_park) {
        p->watch.object = p->base.id;
        p->watch.channel = p->base.channel;
        p->watch.decide = park_decide;
        p->watch.arg = p;
        if (pc_park_watch(p->base.ctx, &p->watch) != 0) {
            fail(p, PCOLL_ERR_NOMEM, "no memory to set the object up");
            return;
        }
    }
    p->be->ops->open(p->be);
}

static void on_close(pc_object_t *base)
{
    pcoll_partial_t *p = pc_object_of(base, pcoll_partial_t);
    if (p->is_leader && p->needs_park) pc_park_unwatch(p->base.ctx, &p->watch);
    /* after a FREE round the backend is closed already; else (a create
     * that failed after open) nothing may call into it any more */
    if (p->be && p->be->ops->stop) p->be->ops->stop(p->be);
}

int pc_driver_open(pcoll_partial_t *p, const char *fn)
{
    p->base.on_message = on_message;
    p->base.on_open = on_open;
    p->base.on_close = on_close;
    return pc_object_open(&p->base, fn);
}

void pc_driver_close(pcoll_partial_t *p) { pc_object_close(&p->base); }

/* ---- stall reports ---- */

/* Questions any rank answers: has it given its part of a round; is a round
 * activated there. */
#define Q_DATA 100
#define Q_ACTIVATED 101

/* The ranks that the asker's call still waits for: at the leader, who has
 * not arrived; at any rank, whether it has given its part of a round. */
static void respond(pcoll_t *ctx, void *arg, int src, const pc_query_t *q, const int32_t *ranks,
                    unsigned char *missing)
{
    (void)arg;
    (void)src;
    (void)ranks;
    void *base = pc_service_object(ctx, q->head.channel, q->head.object);
    if (!base) return;
    pcoll_partial_t *p = pc_object_of(base, pcoll_partial_t);
    if (q->what == Q_DATA) {
        if (!p->be->ops->gave(p->be, q->seq)) pc_bit_set(missing, p->me);
        return;
    }
    if (q->what == Q_ACTIVATED) {
        if (p->be->ops->activated(p->be) <= q->seq) pc_bit_set(missing, p->me);
        return;
    }
    if (!p->is_leader) return;
    catch_up(p);
    pc_leader_missing(&p->leader, (int)q->what, q->seq, elsewhere, p, missing);
}

void pc_driver_describe(pcoll_partial_t *p, int type, uint64_t round, pc_stall_probe_t *probe)
{
    const char *call = type == PC_ARR_FLUSH ? "pcoll_partial_flush" : type == PC_ARR_FREE ? "pcoll_partial_free"
                                                                                          : "a round";
    if (type == 0)
        pc_probe_what(probe, "partial object %llu (%s, %s), round %llu", (unsigned long long)p->base.id, pc_policy_kind_name(p->cfg.kind),
                      p->be->ops->name, (unsigned long long)round);
    else
        pc_probe_what(probe, "%s of partial object %llu (%s, %s)", call, (unsigned long long)p->base.id, pc_policy_kind_name(p->cfg.kind),
                      p->be->ops->name);
    int atype = type == 0 ? PC_ARR_WAIT : type;
    uint64_t activated = p->be->ops->activated(p->be);
    pc_query_t q;
    memset(&q, 0, sizeof q);
    q.head.channel = p->base.channel;
    q.head.object = p->base.id;
    q.kind = PC_Q_OBJECT;
    q.seq = round;
    if (type == 0 && round < activated) {
        /* activated: its data phase is what waits.  Every rank's progress
         * thread can say whether it gave its part (a stopped or dead one
         * cannot answer); the messages still awaited come last */
        if (!p->be->ops->gave(p->be, round))
            pc_probe_suspect(probe, p->me, "this rank has not given its part yet", PC_WHY_PATH);
        q.what = Q_DATA;
        /* a group round waits for its members only */
        int n = p->be->ops->members ? p->be->ops->members(p->be, round, p->scratch) : 0;
        pc_probe_ask(probe, n > 0 ? p->scratch : NULL, n, &q, NULL, 0, "has not given its part of the round",
                     PC_WHY_PATH);
        p->be->ops->describe(p->be, round, probe);
        return;
    }
    /* not activated here: who starts it, and (when activations travel from
     * rank to rank) the ranks that pass it on to this one */
    int starter = PC_LEADER;
    const char *why = type == PC_ARR_FLUSH ? "has not called pcoll_partial_flush"
                      : type == PC_ARR_FREE ? "has not called pcoll_partial_free"
                                            : "has not arrived for the round";
    if (type == 0 && p->counting && pc_policy_counts_without_leader(&p->policy, p->me, round) &&
        silent(p, PC_LEADER)) { /* this rank counts for the silent leader: what its counter lacks */
        pc_probe_what_add(probe, "the leader (rank %d) is silent: the ranks that wait start the round", PC_LEADER);
        unsigned char *missing = calloc(p->bitmap_bytes, 1);
        if (!missing) return;
        catch_up(p);
        pc_leader_missing(&p->leader, PC_ARR_WAIT, round, NULL, p, missing);
        for (int r = 0; r < p->P; r++)
            if (r != p->me && pc_bit_get(missing, r))
                pc_probe_suspect(probe, r, p->cfg.kind == PCOLL_PARTIAL_QUORUM ? "has not said it waits for the round"
                                                                             : "it initiates this round",
                                 PC_WHY_CAUSE);
        free(missing);
        return;
    }
    if (type == 0 && !pc_policy_is_sync(&p->policy, round) && p->cfg.kind != PCOLL_PARTIAL_QUORUM) {
        starter = pc_policy_initiator(&p->policy, round, p->scratch);
        q.what = Q_ACTIVATED;
        if (starter == p->me) return; /* this rank starts it: nothing to wait for */
        pc_probe_ask(probe, &starter, 1, &q, NULL, 0, "it initiates this round and has not started it",
                     PC_WHY_CAUSE);
    } else if (p->is_leader) {
        unsigned char *missing = calloc(p->bitmap_bytes, 1);
        if (!missing) return;
        catch_up(p);
        pc_leader_missing(&p->leader, atype, round, elsewhere, p, missing);
        for (int r = 0; r < p->P; r++)
            if (pc_bit_get(missing, r)) pc_probe_suspect(probe, r, why, PC_WHY_CAUSE);
        free(missing);
    } else {
        q.what = (uint32_t)atype;
        pc_probe_ask(probe, &starter, 1, &q, NULL, 0, why, PC_WHY_CAUSE);
    }
    if (p->be->ops->forwards) {
        q.what = Q_ACTIVATED;
        for (int r = pc_act_parent(p->P, starter, p->me); r >= 0 && r != starter; r = pc_act_parent(p->P, starter, r))
            pc_probe_ask(probe, &r, 1, &q, NULL, 0, "it has not passed the round's activation on", PC_WHY_PATH);
    }
}
