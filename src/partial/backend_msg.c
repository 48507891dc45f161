/*
 * The message backend of partial rounds (backend.h): for objects whose ranks
 * do not all share one node.
 *
 *   activation (any rank, any time)          data phase, strictly in order
 *   --------------------------------         -----------------------------
 *   activate(r, root)                        start r when it is activated,
 *   message on link h: activate(r, ...)  ->  round r-1 is complete here and
 *     forward on unused links above h        the application is not writing
 *     (algo/activation.c)                    its contribution:
 *                                              take pending, write trailer,
 *                                              allreduce (out of place) over
 *                                              the round's members (channel,
 *                                              round r): every rank, or for
 *                                              GROUP this rank's group
 *                                            done: env.completed, start r+1
 *
 * Rounds that can be activated and not complete here at once: two when each
 * round sums over every rank (an initiator of r+1 has finished r, which
 * needed every rank's part of r); under GROUP a rank finishes r with its
 * group alone, but only after every rank finished r - depth
 * (pc_policy_window).  Activation state lives in that many slots, r % n.
 * Schedules: one over all ranks, and one per (group size, own index) met,
 * bound to the round's members; the groups of one round are disjoint and
 * share the round's tags.
 *
 * A rank that completed a round drops further activations of it, as every
 * rank has been activated, unless the round was summed inside groups: then
 * it still passes them on (algo/activation.c).
 *
 * End of life: after the last round completed here, this rank sends FIN on
 * each of its links and ignores activations from then on; it is drained
 * once a FIN came in on each link (MPI keeps messages from one source in
 * order, so nothing of this object can still be on its way).
 *
 * A rank that falls silent: the others go on in a view without it
 * (backend_msg_view.c: rounds over the view's ranks, on its communicator);
 * the state both files share is in backend_msg.h.
 *
 * Locking: `lock` guards the fields shared with the application (marked
 * (L)); the rest belongs to the token holder.  The application never holds
 * the lock while it copies data, so the holder waits for it only as long as
 * a few pointer swaps take.  Lock order: this lock, then the object's.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../core/stall.h"
#include "../engine/reduce.h"
#include "../util/log.h"
#include "backend_msg.h"
#include "policy.h"

static msg_backend_t *M(pc_backend_t *b) { return pc_msg_of(b); }

/* The policy over the view's ranks: round r's members at index i of the
 * view are pc_policy_members(&view, r, flags, i, ...) mapped through live
 * (every rank, before any view). */
static pc_policy_t view_policy(const msg_backend_t *m)
{
    pc_policy_t pol = m->base.env.policy;
    pol.P = m->nlive;
    return pol;
}

static void try_start(msg_backend_t *m);
void pc_msg_try_start(msg_backend_t *m) { try_start(m); }

static void kick_task(pc_engine_t *e, void *arg)
{
    (void)e;
    msg_backend_t *m = arg;
    atomic_store(&m->kick_posted, 0);
    try_start(m);
}

/* ---- the application thread ---- */

static uint64_t msg_contribute(pc_backend_t *b, const void *contribution, int (*choose)(void *, uint64_t), void *arg)
{
    msg_backend_t *m = M(b);
    const pc_backend_env_t *env = &b->env;
    int kick = 0;
    pthread_mutex_lock(&m->lock);
    if (contribution) {
        void *pending = m->pending;
        uint64_t held = m->pending_contribs;
        m->adding = 1; /* no round takes pending half-written */
        pthread_mutex_unlock(&m->lock);
        if (env->mode == PCOLL_ACCUMULATE && held > 0)
            pc_reduce_sum(pending, pending, contribution, env->count, env->dtype);
        else
            memcpy(pending, contribution, env->count * env->esize);
        pthread_mutex_lock(&m->lock);
        m->adding = 0;
        m->pending_contribs++;
        kick = m->start_deferred;
        m->start_deferred = 0;
    }
    uint64_t taken = m->rounds_started;
    if (choose(arg, taken)) m->waiting_from = taken;
    pthread_mutex_unlock(&m->lock);
    /* a round waited for us to finish adding: the holder starts it now */
    if (kick && !atomic_exchange(&m->kick_posted, 1)) pc_engine_post_task(env->engine, &m->kick_task, 0);
    return taken;
}

static void msg_waiting(pc_backend_t *b, int on)
{
    msg_backend_t *m = M(b);
    pthread_mutex_lock(&m->lock);
    m->waiting_from = on ? m->rounds_started : UINT64_MAX;
    pthread_mutex_unlock(&m->lock);
}

static void msg_want(pc_backend_t *b, uint64_t round)
{
    (void)b; /* every completed round notifies the waiters */
    (void)round;
}

static uint64_t msg_done(const pc_backend_t *b) { return atomic_load(&((const msg_backend_t *)b)->done); }

static uint64_t msg_activated(const pc_backend_t *b)
{
    msg_backend_t *m = (msg_backend_t *)b;
    pthread_mutex_lock(&m->lock);
    uint64_t a = m->activated_upto;
    pthread_mutex_unlock(&m->lock);
    return a;
}

/* ---- activation ---- */

static void msg_open(pc_backend_t *b) { pc_links_init(&M(b)->links, b->env.P, b->env.me, NULL); }

static int msg_activate(pc_backend_t *b, uint64_t round, int root, uint32_t flags, const unsigned char *counted,
                        int from_link)
{
    msg_backend_t *m = M(b);
    const pc_backend_env_t *env = &b->env;
    if (m->finishing) return 0;
    act_slot_t *s = &m->slot[round % (uint64_t)m->nslots];
    if (round < atomic_load(&m->done)) {
        /* Completed here.  If that needed every rank's part, every rank has
         * been activated: a late duplicate.  A round summed inside groups
         * completes with the group alone, and the ranks behind this one on
         * the activation's links may not have it yet: pass it on (the slot
         * remembers the links used, unless a later round took it: then a
         * link may carry the round twice, which the receiver absorbs). */
        pc_policy_t pol = view_policy(m);
        if (!pc_policy_in_groups(&pol, round, flags)) return 0;
        uint64_t links = pc_links_forward(&m->links, from_link);
        if (s->round == round) {
            links &= ~s->used_links;
            s->used_links |= links;
        }
        return pc_links_activate(&m->links, env, round, root, flags, counted, links) < 0 ? -1 : 0;
    }
    if (s->round != round) {
        if (s->activated && s->round >= atomic_load(&m->done)) {
            /* A decision of this rank's own for others' arrivals (its
             * leader's) while its rounds lag a view behind (it was left out
             * while it was stopped, and has yet to learn it): dropped, the
             * others go on without it (and decide again when it is back) */
            if (from_link < 0 && m->excluding) {
                if (!m->lag_logged++)
                    pc_log(PCOLL_LOG_INFO,
                           "partial ch%u: round %llu not started here: this rank's round %llu is still open (its "
                           "rounds lag a view behind the others'; logged once per object)",
                           env->obj->channel, (unsigned long long)round, (unsigned long long)s->round);
                return 0;
            }
            /* more rounds open than the policy's window: a bug, which fails
             * the object (every call returns the error) rather than hang */
            char what[160];
            snprintf(what, sizeof what, "activation of round %llu while round %llu is open (internal error)",
                     (unsigned long long)round, (unsigned long long)s->round);
            env->failed(env->owner, PCOLL_ERR_INTERNAL, what);
            return -1;
        }
        unsigned char *bits = s->counted;
        memset(s, 0, sizeof *s);
        s->counted = bits;
        s->round = round;
    }
    int first = !s->activated;
    PC_DEBUG("partial ch%u: activate round %llu root %d flags %u link %d first %d", env->obj->channel,
             (unsigned long long)round, root, flags, from_link, first);
    if (first) {
        s->activated = 1;
        s->root = root;
        s->flags = flags;
        s->has_counted = counted != NULL;
        if (counted) memcpy(s->counted, counted, env->bitmap_bytes);
        pthread_mutex_lock(&m->lock);
        if (m->activated_upto < round + 1) m->activated_upto = round + 1;
        pthread_mutex_unlock(&m->lock);
    }
    uint64_t links = pc_links_forward(&m->links, from_link) & ~s->used_links;
    s->used_links |= links;
    if (pc_links_activate(&m->links, env, round, s->root, s->flags, s->has_counted ? s->counted : NULL, links) < 0)
        return -1;
    if (first) {
        env->activated(env->owner, round, s->root, flags);
        try_start(m);
    }
    return first;
}

/* Nothing of this object is in flight any more (the last round ran, every
 * FIN came): runs given up that MPI has not finished are let go (the
 * object's end may come before their receivers drop them). */
static void drained(msg_backend_t *m)
{
    pc_msg_view_let_go(m);
    m->base.env.drained(m->base.env.owner);
}

/* An activation or FIN of this view (also a held one, at its install). */
int pc_msg_handle(msg_backend_t *m, int src, const void *msg, size_t bytes)
{
    pc_backend_t *b = &m->base;
    const pc_backend_env_t *env = &b->env;
    const pc_obj_msg_t *h = msg;
    int link = pc_links_from(&m->links, src);
    if (link < 0) {
        pc_log(PCOLL_LOG_ERROR, "partial: activation from rank %d, which is not a link source", src);
        return 0;
    }
    if (h->type == PC_MSG_FIN) {
        if (pc_links_fin(&m->links, link)) drained(m);
    } else if (h->type == PC_MSG_ACTIVATE) {
        if (h->counted && bytes < sizeof *h + env->bitmap_bytes) {
            pc_log(PCOLL_LOG_ERROR, "partial: a truncated activation from rank %d", src);
            return 0;
        }
        msg_activate(b, h->round, h->root, h->flags, h->counted ? (const unsigned char *)(h + 1) : NULL, link);
    }
    return 1;
}

static void msg_message(pc_backend_t *b, int src, const void *msg, size_t bytes)
{
    msg_backend_t *m = M(b);
    if (pc_msg_view_message(m, src, msg, bytes)) return; /* the view's, another view's, or held */
    pc_msg_handle(m, src, msg, bytes);
}

/* ---- data phase ---- */

static void round_done(pc_sched_t *s, int status, void *arg);

/* The round's allreduce over n members, this rank the idx-th. */
static int build(msg_backend_t *m, int n, int idx, pc_sched_t **out)
{
    return pc_round_sched_build(&m->base.env, m->forced, m->small_bytes, n, idx, 0, out);
}

/* Round r's members (activated with flags) at this rank: their indices
 * among the view's ranks into idx, and their ranks of the context into
 * ranks (which may be idx: mapped in place); their number. */
static int view_members(const msg_backend_t *m, uint64_t r, uint32_t flags, int *idx, int *ranks)
{
    pc_policy_t pol = view_policy(m);
    int n = pc_policy_members(&pol, r, flags, m->live_me, idx);
    for (int i = 0; i < n; i++) ranks[i] = m->live ? m->live[idx[i]] : idx[i];
    return n;
}

/* The schedule of round r (activated with flags), bound to its members,
 * on the view's communicator once there is a view; NULL: no memory. */
static pc_sched_t *round_sched(msg_backend_t *m, uint64_t r, uint32_t flags)
{
    pc_sched_t *view = pc_msg_view_sched(m);
    int n = m->nmembers = view_members(m, r, flags, m->member_idx, m->members);
    if (n == m->nlive) return view ? view : m->sched; /* every rank of the view */
    int idx = 0;
    while (m->member_idx[idx] != m->live_me) idx++;
    pc_sched_t *s = NULL;
    for (int i = 0; i < m->ngroups && !s; i++)
        if (m->groups[i].n == n && m->groups[i].idx == idx) s = m->groups[i].sched;
    if (!s) {
        group_sched_t *g = realloc(m->groups, sizeof *g * (size_t)(m->ngroups + 1));
        if (!g) return NULL;
        m->groups = g;
        if (build(m, n, idx, &s) != PCOLL_SUCCESS) return NULL;
        g[m->ngroups++] = (group_sched_t){n, idx, s};
    }
    pc_sched_bind_ranks(s, m->members);
    if (view) pc_sched_set_comm(s, &m->view_comm, m->member_idx);
    return s;
}

int pc_msg_groups_drop(msg_backend_t *m, const pc_sched_t *s)
{
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].sched == s) {
            m->groups[i] = m->groups[--m->ngroups];
            return 1;
        }
    return 0;
}

void pc_msg_groups_clear(msg_backend_t *m)
{
    int keep = 0; /* a run that could not be given up (no memory: the object failed) stays */
    for (int i = 0; i < m->ngroups; i++)
        if (m->running && m->groups[i].sched == m->running_sched) m->groups[keep++] = m->groups[i];
        else pc_sched_free(m->groups[i].sched);
    m->ngroups = keep;
}

static void try_start(msg_backend_t *m)
{
    pc_backend_t *b = &m->base;
    const pc_backend_env_t *env = &b->env;
    if (m->finishing || m->running || atomic_load(&m->frozen) || m->left_me) return;
    pthread_mutex_lock(&m->lock);
    uint64_t r = m->rounds_started;
    act_slot_t *slot = &m->slot[r % (uint64_t)m->nslots];
    if (slot->round != r || !slot->activated || !pc_msg_view_may_start(m, slot->flags)) {
        pthread_mutex_unlock(&m->lock);
        return;
    }
    if (m->adding) { /* the application finishes its copy, then kicks us */
        m->start_deferred = 1;
        pthread_mutex_unlock(&m->lock);
        return;
    }
    void *fresh = env->buffer(env->owner), *buf = env->buffer(env->owner);
    if (!fresh || !buf) {
        pthread_mutex_unlock(&m->lock);
        if (fresh) env->release(env->owner, fresh);
        if (buf) env->release(env->owner, buf);
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory for the data of a round");
        return;
    }
    void *in, *rerun = m->rerun_parts ? pc_msg_view_take_rerun_parts(m, r) : NULL;
    int64_t contribs;
    int zero = m->pending_contribs == 0; /* nothing ever put there: contribute zeros */
    if (rerun) { /* its parts of this round, given up at a view change: pending stays */
        in = rerun;
        int64_t a;
        pc_trailer_get(env, rerun, &a, &contribs);
        zero = 0;
        env->release(env->owner, fresh);
    } else if (env->mode == PCOLL_ACCUMULATE) {
        in = m->pending; /* swapped out: the round takes everything pending */
        m->pending = fresh;
        contribs = (int64_t)m->pending_contribs;
        m->pending_contribs = 0;
    } else {
        in = fresh; /* REPLACE: the latest contribution stays for later rounds */
        if (!zero) memcpy(in, m->pending, env->count * env->esize);
        contribs = !zero; /* a rank that never contributed adds zeros */
    }
    /* active: waiting for this round here, or counted by the leader as parked
     * in another call (then its data is as fresh as it gets) */
    int parked = slot->has_counted && pc_bit_get(slot->counted, env->me);
    int active = r >= m->waiting_from || parked;
    m->rounds_started = r + 1;
    pthread_mutex_unlock(&m->lock);
    PC_DEBUG("partial ch%u: start round %llu active %d contributions %lld", env->obj->channel, (unsigned long long)r,
             active, (long long)contribs);

    if (zero) memset(in, 0, env->count * env->esize);
    pc_trailer_set(env, in, active, contribs);
    pc_sched_t *sched = round_sched(m, r, slot->flags);
    if (!sched) {
        env->release(env->owner, in);
        env->release(env->owner, buf);
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory for the schedule of a group");
        return;
    }
    m->running_sched = sched;
    m->running = 1;
    m->running_round = r;
    m->running_flags = slot->flags;
    m->running_root = slot->root;
    m->running_parked = parked;
    m->round_in = in;
    m->round_buf = buf;
    pc_sched_bind(sched, PC_SLOT_IN, in);
    pc_sched_bind(sched, PC_SLOT_OUT, buf);
    pc_sched_set_tags(sched, pc_tag_base(pc_engine_tags(env->engine), env->obj->channel, r), NULL);
    pc_sched_on_done(sched, round_done, m);
    int rc = pc_engine_run(env->engine, sched);
    if (rc != PCOLL_SUCCESS) {
        pc_sched_fail_run(sched, rc, "the round's schedule could not start");
        round_done(sched, rc, m);
    }
}

static void round_done(pc_sched_t *s, int status, void *arg)
{
    msg_backend_t *m = arg;
    const pc_backend_env_t *env = &m->base.env;
    if (pc_msg_view_run_done(m, s)) return; /* given up at a view change */
    m->running = 0;
    if (status != PCOLL_SUCCESS) {
        /* the round cannot be completed: the object fails (every call
         * returns the error), and this rank's rounds stop here */
        char what[400];
        snprintf(what, sizeof what, "round %llu failed: %s", (unsigned long long)m->running_round,
                 pc_sched_fault(s)->msg);
        env->release(env->owner, m->round_in);
        env->release(env->owner, m->round_buf);
        env->failed(env->owner, status, what);
        return;
    }
    uint64_t r = m->running_round;
    atomic_store(&m->done, r + 1);
    pc_round_done_t d = {.first = r, .round = r, .root = m->running_root, .flags = m->running_flags,
                         .parked = m->running_parked};
    if (m->skipping && m->epoch > 0) { /* a view's groups: not the policy's */
        d.members = m->members;
        d.nmembers = m->nmembers;
    }
    pc_msg_view_completed(m, r, m->running_flags, m->running_root, m->round_buf, &d);
    env->completed(env->owner, &d, m->round_buf);
    if (!m->finishing) try_start(m); /* completed() may have closed us (the last round) */
}

static void msg_kick(pc_backend_t *b) { try_start(M(b)); }

static void msg_close(pc_backend_t *b)
{
    msg_backend_t *m = M(b);
    const pc_backend_env_t *env = &b->env;
    m->finishing = 1;
    if (pc_links_close(&m->links, env)) drained(m); /* no links (P = 1), or every FIN came first */
}

static void msg_describe(pc_backend_t *b, uint64_t r, pc_stall_probe_t *p)
{
    msg_backend_t *m = M(b);
    const pc_backend_env_t *env = &b->env;
    pc_msg_view_describe(m, p);
    if (!m->running || m->running_round != r) return;
    int *peers = malloc(sizeof(int) * (size_t)env->P);
    if (!peers) return;
    int k = pc_sched_waiting_on(m->running_sched, peers, env->P);
    /* the schedule's peers are positions in the round's members */
    for (int i = 0; i < k; i++)
        pc_probe_fallback(p, m->members[peers[i]],
                          "its part of the round has not arrived (its progress thread may be stopped)");
    free(peers);
}

static int msg_members(pc_backend_t *b, uint64_t r, int *out)
{
    msg_backend_t *m = M(b);
    const act_slot_t *s = &m->slot[r % (uint64_t)m->nslots];
    pc_policy_t pol = view_policy(m);
    if (s->round != r || !s->activated || !pc_policy_in_groups(&pol, r, s->flags)) return 0;
    return view_members(m, r, s->flags, out, out);
}

static int msg_gave(pc_backend_t *b, uint64_t r)
{
    msg_backend_t *m = M(b);
    pthread_mutex_lock(&m->lock);
    int gave = m->rounds_started > r;
    pthread_mutex_unlock(&m->lock);
    return gave;
}

static void msg_nudge(pc_backend_t *b) { pc_msg_view_nudge(M(b)); }
static int msg_silent(pc_backend_t *b, int rank, int probe) { return pc_msg_view_silent(M(b), rank, probe); }

static void msg_destroy(pc_backend_t *b)
{
    msg_backend_t *m = M(b);
    if (!pc_msg_view_run_out(m, m->sched)) pc_sched_free(m->sched);
    pc_msg_view_destroy(m);
    for (int i = 0; i < m->ngroups; i++) pc_sched_free(m->groups[i].sched);
    free(m->groups);
    for (int i = 0; m->slot && i < m->nslots; i++) free(m->slot[i].counted);
    free(m->slot);
    free(m->members);
    free(m->member_idx);
    free(m->pending);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static const pc_backend_ops_t msg_ops = {
    .name = "messages",
    .contribute = msg_contribute,
    .waiting = msg_waiting,
    .want = msg_want,
    .done = msg_done,
    .activated = msg_activated,
    .open = msg_open,
    .activate = msg_activate,
    .kick = msg_kick,
    .message = msg_message,
    .close = msg_close,
    .describe = msg_describe,
    .members = msg_members,
    .gave = msg_gave,
    .nudge = msg_nudge,
    .silent = msg_silent,
    .forwards = 1,
    .destroy = msg_destroy,
};

int pc_backend_msg_create(const pc_backend_env_t *env, pcoll_allreduce_algo_t forced, size_t small_bytes,
                          pc_backend_t **out)
{
    msg_backend_t *m = calloc(1, sizeof *m);
    if (!m) return PCOLL_ERR_NOMEM;
    m->base.ops = &msg_ops;
    m->base.env = *env;
    m->view_comm = MPI_COMM_NULL;
    m->forced = forced;
    m->small_bytes = small_bytes;
    pthread_mutex_init(&m->lock, NULL);
    m->waiting_from = UINT64_MAX;
    m->kick_task.fn = kick_task;
    m->kick_task.arg = m;
    atomic_init(&m->kick_posted, 0);
    atomic_init(&m->done, 0);
    m->pending = malloc(env->bytes);
    m->members = malloc(sizeof(int) * (size_t)env->P);
    m->member_idx = malloc(sizeof(int) * (size_t)env->P);
    m->nlive = env->P; /* every rank, until a view (pc_msg_view_init) */
    m->live_me = env->me;
    m->nslots = pc_policy_window(&env->policy);
    m->slot = calloc((size_t)m->nslots, sizeof *m->slot);
    int rc = m->pending && m->members && m->member_idx && m->slot ? PCOLL_SUCCESS : PCOLL_ERR_NOMEM;
    for (int i = 0; rc == PCOLL_SUCCESS && i < m->nslots; i++)
        if (!(m->slot[i].counted = calloc(env->bitmap_bytes, 1))) rc = PCOLL_ERR_NOMEM;
    pc_sched_t *all = NULL;
    if (rc == PCOLL_SUCCESS && (rc = build(m, env->P, env->me, &all)) == PCOLL_SUCCESS)
        m->sched = all; /* over every rank */
    if (rc == PCOLL_SUCCESS) rc = pc_msg_view_init(m);
    if (rc != PCOLL_SUCCESS) {
        msg_destroy(&m->base);
        return rc;
    }
    pc_sched_bind_ranks(m->sched, NULL);
    *out = &m->base;
    return PCOLL_SUCCESS;
}
