/*
 * Rounds by messages that go on without a silent rank (PCOLL_EXCLUDE_MS):
 * views of the message backend, for objects whose rounds sum over every
 * rank (SOLO, MAJORITY, QUORUM), and GROUP objects whose rounds sum inside
 * groups (`skipping`).
 *
 *   looking (a waiting application's nudge, on the token holder):
 *     the running round has waited a quarter of the limit -> PING the
 *     ranks it waits on; one that leaves a ping unanswered for the limit
 *     (silence.h; backed off under churn: backoff.h) -> SUSPECT to the
 *     coordinator (the view's lowest rank); the coordinator silent -> to
 *     its deputy (the next rank), which takes over: DEPOSE to the others,
 *     and once each agreed (none is frozen for a view), the view without
 *     the coordinator, made by the deputy (SOLO, MAJORITY, rounds in groups)
 *
 *   the coordinator: FREEZE(epoch + 1, the new view's left-out ranks) to
 *   every other rank, and the same here; a rank of the view that has not
 *   said READY and leaves a ping unanswered for the limit is silent too (it
 *   stopped meanwhile): a FREEZE(epoch + 2) leaving it out as well replaces
 *   the view, whose helpers have not begun (only a rank that stops between
 *   GO and the end of its helper's MPI calls holds a change up)
 *
 *   FREEZE, at a rank of the new view:       at a rank it leaves out:
 *     give the running round up               give the running round up,
 *     (its parts copied aside), READY to       keep its state, JOIN to the
 *     the coordinator; once every rank of      coordinator; FREEZE taking
 *     the view is, GO from it, and a           it back later: as on the
 *     helper thread:                           left, with its kept state
 *       MPI_Comm_create_group(its ranks)
 *       allgather the snapshots (regroup.h)
 *       the donor broadcasts round D - 1
 *       keepers send ranks coming back
 *       what they are owed
 *     and the holder installs: rounds from D on, over the view's ranks, on
 *     its communicator (messages of rounds given up are on older ones and
 *     can never match); round D - 1 delivered, or parts put back
 *
 *   from its FREEZE on, a rank drains the communicator it leaves (view 0:
 *   this object's round tags on the engine's): the messages of rounds given
 *   up are dropped as they come, so their senders' runs end and give their
 *   buffers back (drain_left)
 *
 *   while a rank is left out, the coordinator that left it out keeps what
 *   it is owed (the sum of the rounds without it; REPLACE: the last) and
 *   sends it when it comes back: one catch-up delivery.
 *
 *   skipping (rounds in groups): no donor, nothing kept or owed; every rank
 *   goes on from the most rounds any completed, and the rounds it missed
 *   complete as a group of one, itself (regroup.h; with ACCUMULATE, its
 *   parts of the round it gave up, never put back: if nobody completed
 *   that round, they are its input when it runs again); rounds from there
 *   form their groups over the view's ranks (the policy with P = its size).
 *
 * Synchronous rounds (sync_every, flush, free) start only in a view that
 * leaves nobody out: they wait for a left-out rank to come back.  Open MPI
 * 4.1 allows this much (scripts/regroup-experiment.sh): communicators made
 * among the live ranks while one is stopped, and messages of a round given
 * up that never match on later communicators.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/stall.h"
#include "../engine/reduce.h"
#include "../engine/tags.h"
#include "../util/log.h"
#include "backend_msg.h"
#include "silence.h"
#include "view_rules.h"

/* the control tag kind of MPI_Comm_create_group (plus the epoch) */
enum { VIEW_TAG_KIND = 1 };
/* tags on a view's own communicator: what a keeper sends a rank coming back */
enum { TAG_META = 1, TAG_BORDER = 2, TAG_SUM = 3 };

/* a run given up: its buffers stay until its on_done (and its schedule,
 * if it is a group's: the entry owns it from then on) */
typedef struct given_up {
    struct given_up *next;
    pc_sched_t *sched;
    void *in, *buf;
    int owns_sched;
} given_up_t;

/* Runs given up whose sends were let go never finish: at an object's end
 * they stay here, with their buffers and schedules, for as long as the
 * process lives (MPI may still read them). */
static pthread_mutex_t graveyard_lock = PTHREAD_MUTEX_INITIALIZER;
static given_up_t *graveyard;

/* what a keeper sends a rank coming back */
typedef struct owed_meta {
    uint64_t from, upto;
    int64_t active_last, active_min, active_total, contributions, contributions_last;
    uint32_t flags;
    int32_t root, has_border, has_sum;
} owed_meta_t;

/* one view change, from its FREEZE to its install */
typedef struct change {
    pc_task_t task;
    msg_backend_t *m;
    uint32_t epoch;
    int keeper;              /* the coordinator that made it */
    unsigned char *left;     /* its left-out ranks */
    pc_regroup_snap_t mine;
    void *parts;             /* this rank's parts of the round given up (a copy), or NULL */
    /* the helper's results */
    int status;
    char what[200];
    MPI_Comm comm;
    int *live, nlive, me;
    pc_regroup_snap_t *snaps;
    pc_regroup_t plan;
    void *received;          /* round D - 1 from the donor */
    uint32_t received_flags;
    int received_root;
    owed_meta_t meta;        /* coming back: what the keeper sent */
    void *border, *sum;
} change_t;

static uint32_t clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

static uint32_t base_limit_ms(const msg_backend_t *m)
{
    uint64_t ms = m->base.env.exclude_ns / 1000000u;
    return ms ? (uint32_t)(ms < UINT32_MAX ? ms : UINT32_MAX) : 1;
}

/* PCOLL_EXCLUDE_MS, backed off under churn (backoff.h) */
static uint32_t limit_ms(const msg_backend_t *m) { return pc_backoff_limit(base_limit_ms(m), &m->backoff); }

static int count_bits(const unsigned char *b, int P)
{
    int n = 0;
    for (int i = 0; i < P; i++) n += pc_bit_get(b, i);
    return n;
}

/* The view's coordinator and deputy (view_rules.h). */
static int coordinator(const msg_backend_t *m) { return pc_view_coordinator(m->left_out, m->base.env.P); }
static int deputy(const msg_backend_t *m) { return pc_view_deputy(m->left_out, m->base.env.P); }

/* Whether rank r keeps what a left-out rank is owed: it is not left out
 * (rounds wait for it), or what it keeps would be lost (a deputy that took
 * over keeps, and may be neither the coordinator nor safe from a stop). */
static int keeps(const msg_backend_t *m, int r)
{
    for (int x = 0; x < m->base.env.P; x++)
        if (pc_bit_get(m->left_out, x) && m->keeper[x] == r) return 1;
    return 0;
}

static void send_ctl(msg_backend_t *m, int peer, uint32_t type, uint32_t epoch, uint64_t round, int root,
                     const unsigned char *bits)
{
    const pc_backend_env_t *env = &m->base.env;
    size_t bytes = sizeof(pc_obj_msg_t) + (bits ? env->bitmap_bytes : 0);
    pc_obj_msg_t *h = malloc(bytes);
    if (!h) return; /* no memory: the next look asks again */
    pc_obj_msg_fill(h, type, round, root, 0, epoch, bits, env->bitmap_bytes);
    env->send(env->owner, peer, h, bytes);
    free(h);
}

/* ---- state ---- */

int pc_msg_view_init(msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    int P = env->P;
    m->view_comm = m->drained_comm = MPI_COMM_NULL;
    m->kept_round = UINT64_MAX;
    m->held_tail = &m->held;
    /* rounds summed inside groups skip at a view change (skip) */
    m->skipping = pc_policy_in_groups(&env->policy, 0, 0);
    m->excluding = env->exclude_ns > 0 && P >= 2;
    m->nlive = P;
    m->live_me = env->me;
    if (!m->excluding) return PCOLL_SUCCESS;
    m->left_out = calloc(env->bitmap_bytes, 1);
    m->suspected = calloc(env->bitmap_bytes, 1);
    m->want_out = calloc(env->bitmap_bytes, 1);
    m->want_in = calloc(env->bitmap_bytes, 1);
    m->live = malloc(sizeof(int) * (size_t)P);
    m->keeper = malloc(sizeof(int) * (size_t)P);
    m->owed = calloc((size_t)P, sizeof *m->owed);
    m->pinged = calloc((size_t)P, sizeof(uint64_t));
    m->ponged = calloc((size_t)P, sizeof(uint64_t));
    m->ping_wait = calloc((size_t)P, sizeof(uint64_t));
    m->left_at = calloc((size_t)P, sizeof(uint32_t));
    m->ready = calloc(env->bitmap_bytes, 1);
    m->agreed = calloc(env->bitmap_bytes, 1);
    if (!m->left_out || !m->suspected || !m->want_out || !m->want_in || !m->live || !m->keeper || !m->owed ||
        !m->pinged || !m->ponged || !m->ping_wait || !m->left_at || !m->ready || !m->agreed)
        return PCOLL_ERR_NOMEM;
    for (int r = 0; r < P; r++) {
        m->live[r] = r;
        m->keeper[r] = -1;
    }
    return PCOLL_SUCCESS;
}

static void owed_clear(msg_owed_t *o)
{
    free(o->sum);
    free(o->border);
    memset(o, 0, sizeof *o);
}

static void change_free(change_t *c);

void pc_msg_view_destroy(msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    if (m->owed)
        for (int r = 0; r < env->P; r++) owed_clear(&m->owed[r]);
    for (held_msg_t *h = m->held, *n; h; h = n) {
        n = h->next;
        free(h);
    }
    if (!pc_msg_view_run_out(m, m->view_sched)) pc_sched_free(m->view_sched);
    /* runs given up whose messages may still be out: to the graveyard */
    if (m->given_up) {
        given_up_t *last = m->given_up;
        while (last->next) last = last->next;
        pthread_mutex_lock(&graveyard_lock);
        last->next = graveyard;
        graveyard = m->given_up;
        pthread_mutex_unlock(&graveyard_lock);
        m->given_up = NULL;
    }
    free(m->left_out);
    free(m->suspected);
    free(m->want_out);
    free(m->want_in);
    free(m->live);
    free(m->keeper);
    free(m->owed);
    free(m->pinged);
    free(m->ponged);
    free(m->ping_wait);
    free(m->left_at);
    free(m->ready);
    free(m->agreed);
    if (m->awaiting_go) change_free(m->awaiting_go);
    if (m->kept) env->pin(env->owner, NULL);
    if (m->kept_in) env->release(env->owner, m->kept_in);
    if (m->left_parts) env->release(env->owner, m->left_parts);
    if (m->rerun_parts) env->release(env->owner, m->rerun_parts);
    if (m->view_comm != MPI_COMM_NULL && m->view_comm != m->drained_comm) MPI_Comm_free(&m->view_comm);
}

pc_sched_t *pc_msg_view_sched(msg_backend_t *m) { return m->view_sched; }

int pc_msg_view_may_start(const msg_backend_t *m, uint32_t flags)
{
    return m->n_left_out == 0 || !(flags & (PC_ROUND_SYNC | PC_ROUND_FLUSH | PC_ROUND_FREE));
}

void *pc_msg_view_take_rerun_parts(msg_backend_t *m, uint64_t r)
{
    void *parts = m->rerun_parts;
    if (!parts || m->rerun_round != r) return NULL;
    m->rerun_parts = NULL;
    return parts;
}

/* ---- rounds completed and given up ---- */

static int64_t trailer_contributions(const pc_backend_env_t *env, const void *buf)
{
    int64_t active, contributions;
    pc_trailer_get(env, buf, &active, &contributions);
    return contributions;
}

/* Adds (REPLACE: copies) a round's result into what x is owed. */
static int owe(msg_backend_t *m, msg_owed_t *o, uint64_t r, uint32_t flags, int root, const void *buf)
{
    const pc_backend_env_t *env = &m->base.env;
    int64_t active, contributions;
    pc_trailer_get(env, buf, &active, &contributions);
    int first = o->sum == NULL;
    if (first && !(o->sum = malloc(env->bytes))) return PCOLL_ERR_NOMEM;
    if (first || env->mode != PCOLL_ACCUMULATE) memcpy(o->sum, buf, env->bytes);
    else pc_reduce_sum(o->sum, o->sum, buf, env->count + PC_TRAILER, env->dtype);
    o->upto = r + 1;
    o->active_last = active;
    o->active_min = first || active < o->active_min ? active : o->active_min;
    o->active_total += active;
    o->contributions += contributions;
    o->contributions_last = contributions;
    o->flags = flags | (first ? 0 : o->flags & PC_ROUND_FLUSH);
    o->root = root;
    return PCOLL_SUCCESS;
}

void pc_msg_view_completed(msg_backend_t *m, uint64_t r, uint32_t flags, int root, const void *buf,
                           pc_round_done_t *d)
{
    const pc_backend_env_t *env = &m->base.env;
    if (!m->excluding) {
        env->release(env->owner, m->round_in);
        return;
    }
    pc_backoff_round(&m->backoff);
    if (m->skipping) { /* nobody gives or is owed a round: nothing kept */
        env->release(env->owner, m->round_in);
        m->round_in = NULL;
        if (m->n_left_out > 0) d->left_out = m->left_out;
        return;
    }
    /* for a donor: the result (the driver does not reuse it: no copy); for
     * this rank's own return: its parts */
    env->pin(env->owner, (void *)buf);
    m->kept = buf;
    m->kept_round = r;
    m->kept_flags = flags;
    m->kept_root = root;
    if (m->kept_in) env->release(env->owner, m->kept_in);
    m->kept_in = m->round_in;
    m->round_in = NULL;
    if (m->n_left_out == 0) return;
    d->left_out = m->left_out;
    for (int x = 0; x < env->P; x++)
        if (pc_bit_get(m->left_out, x) && m->keeper[x] == env->me &&
            owe(m, &m->owed[x], r, flags, root, buf) != PCOLL_SUCCESS)
            env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory to keep a round for a left-out rank");
}

int pc_msg_view_run_done(msg_backend_t *m, pc_sched_t *s)
{
    const pc_backend_env_t *env = &m->base.env;
    for (given_up_t **p = &m->given_up; *p; p = &(*p)->next) {
        given_up_t *g = *p;
        if (g->sched != s) continue;
        *p = g->next;
        env->release(env->owner, g->in);
        env->release(env->owner, g->buf);
        if (g->owns_sched) pc_sched_free(g->sched); /* from its own on_done: allowed (sched.c) */
        free(g);
        return 1;
    }
    return 0;
}

/* Gives the running round up: its run is abandoned (its receives are
 * withdrawn; its sends finish when their receivers drop them, drain_left:
 * its buffers stay until then), its parts copied aside into *parts (NULL
 * if no round ran; parts held for round done, which has not run again yet,
 * count as given up again).  1 if a round ran. */
static int give_up(msg_backend_t *m, void **parts)
{
    const pc_backend_env_t *env = &m->base.env;
    *parts = NULL;
    if (!m->running && m->rerun_parts) { /* held for round done, which has not run again yet */
        pthread_mutex_lock(&m->lock);
        *parts = m->rerun_parts;
        m->rerun_parts = NULL;
        pthread_mutex_unlock(&m->lock);
        return 1;
    }
    if (!m->running) return 0;
    given_up_t *g = malloc(sizeof *g);
    void *copy = env->buffer(env->owner);
    if (!g || !copy) {
        free(g);
        if (copy) env->release(env->owner, copy);
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory to give a round up");
        return 0;
    }
    memcpy(copy, m->round_in, env->bytes);
    *parts = copy;
    /* a group's schedule leaves the cache: it never runs again */
    *g = (given_up_t){m->given_up, m->running_sched, m->round_in, m->round_buf,
                      pc_msg_groups_drop(m, m->running_sched)};
    m->given_up = g;
    m->running = 0;
    m->round_in = m->round_buf = NULL;
    pc_sched_t *s = g->sched; /* g may be gone once abandoned (its on_done) */
    pc_engine_abandon(env->engine, s, PCOLL_ERR_TIMEOUT);
    pc_engine_let_finish(env->engine, s);
    return 1;
}

static given_up_t *given_up_run(const msg_backend_t *m, const pc_sched_t *s)
{
    for (given_up_t *g = m->given_up; g; g = g->next)
        if (g->sched == s) return g;
    return NULL;
}

static void run_forgotten(pc_sched_t *s, int status, void *arg) { (void)s, (void)status, (void)arg; }

void pc_msg_view_let_go(msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    for (given_up_t *g = m->given_up; g; g = g->next) {
        pc_engine_let_go(env->engine, g->sched);
        pc_sched_on_done(g->sched, run_forgotten, NULL); /* a withdrawn receive may still complete */
    }
    pc_engine_drain_forget(env->engine, m);
    m->drained_base = 1; /* and none from now on: a later object may take the channel's tags */
}

/* The step tags (step numbers modulo the tag's step field) that a
 * schedule's messages use, marked in seen[]. */
static void mark_tag_steps(const pc_sched_t *s, uint32_t mask, unsigned char *seen)
{
    for (int i = 0; s && i < pc_sched_nsteps(s); i++) {
        pc_step_kind_t k = pc_sched_step_kind(s, i);
        if (k == PC_STEP_SEND || k == PC_STEP_RECV) seen[(uint32_t)pc_sched_step_tag(s, i, mask) & mask] = 1;
    }
}

/* This rank's rounds leave the view's communicator for good (a FREEZE):
 * messages of rounds given up may still come on it (from ranks that had
 * not given theirs up yet, or late ones of a stopped rank), and their
 * senders hold their buffers until they are received.  The engine drains
 * the communicator from now on: what comes is dropped.  View 0's rounds
 * are on the engine's communicator, which other objects share: there only
 * this object's round tags are drained, for the rounds that can still
 * send here (from this rank's first round not completed, the policy's
 * window of them), until the object's end. */
static void drain_left(msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    int rc = PCOLL_SUCCESS;
    if (m->view_comm != MPI_COMM_NULL) {
        if (m->view_comm == m->drained_comm) return;
        rc = pc_engine_drain(env->engine, &m->view_comm, NULL, 0, NULL); /* drained after the object's end too */
        if (rc == PCOLL_SUCCESS) m->drained_comm = m->view_comm;
    } else {
        if (m->drained_base) return;
        const pc_tags_t *t = pc_engine_tags(env->engine);
        unsigned char *seen = calloc((size_t)t->step_mask + 1, 1);
        int *tags = malloc(sizeof(int) * ((size_t)t->step_mask + 1) * (size_t)(m->nslots + 1));
        if (!seen || !tags) rc = PCOLL_ERR_NOMEM;
        else {
            mark_tag_steps(m->sched, t->step_mask, seen);
            for (int i = 0; i < m->ngroups; i++) mark_tag_steps(m->groups[i].sched, t->step_mask, seen);
            for (const given_up_t *g = m->given_up; g; g = g->next) mark_tag_steps(g->sched, t->step_mask, seen);
            int n = 0;
            uint64_t from = atomic_load(&m->done);
            for (uint64_t r = from; r <= from + (uint64_t)m->nslots; r++)
                for (uint32_t k = 0; k <= t->step_mask; k++)
                    if (seen[k]) tags[n++] = pc_tag_base(t, env->obj->channel, r) | (int)k;
            rc = pc_engine_drain(env->engine, NULL, tags, n, m);
            if (rc == PCOLL_SUCCESS) m->drained_base = 1;
        }
        free(seen);
        free(tags);
    }
    if (rc != PCOLL_SUCCESS) /* its senders keep their buffers */
        pc_log(PCOLL_LOG_WARN, "partial ch%u: no memory to drain the rounds given up", env->obj->channel);
}

int pc_msg_view_run_out(const msg_backend_t *m, const pc_sched_t *s) { return given_up_run(m, s) != NULL; }

/* Takes the lock once the application is not adding to pending (its copy
 * is short): pending is whole. */
static void lock_pending(msg_backend_t *m)
{
    pthread_mutex_lock(&m->lock);
    while (m->adding) {
        pthread_mutex_unlock(&m->lock);
        sched_yield();
        pthread_mutex_lock(&m->lock);
    }
}

/* A round's parts go back into pending (ACCUMULATE; REPLACE keeps its
 * latest contribution pending anyway). */
static void put_back(msg_backend_t *m, const void *parts)
{
    const pc_backend_env_t *env = &m->base.env;
    if (!parts || env->mode != PCOLL_ACCUMULATE) return;
    int64_t n = trailer_contributions(env, parts);
    if (n <= 0) return; /* zeros: nothing was taken */
    lock_pending(m);
    if (m->pending_contribs == 0) memcpy(m->pending, parts, env->count * env->esize);
    else pc_reduce_sum(m->pending, m->pending, parts, env->count, env->dtype);
    m->pending_contribs += (uint64_t)n;
    pthread_mutex_unlock(&m->lock);
}

/* dst = a - b, element by element */
static void diff(void *dst, const void *a, const void *b, size_t n, pcoll_dtype_t t)
{
    for (size_t i = 0; i < n; i++) switch (t) {
        case PCOLL_FLOAT32: ((float *)dst)[i] = ((const float *)a)[i] - ((const float *)b)[i]; break;
        case PCOLL_FLOAT64: ((double *)dst)[i] = ((const double *)a)[i] - ((const double *)b)[i]; break;
        case PCOLL_INT32: ((int32_t *)dst)[i] = ((const int32_t *)a)[i] - ((const int32_t *)b)[i]; break;
        default: ((int64_t *)dst)[i] = ((const int64_t *)a)[i] - ((const int64_t *)b)[i]; break;
        }
}

/* ---- a view change ---- */

static void change_free(change_t *c)
{
    const pc_backend_env_t *env = &c->m->base.env;
    free(c->left);
    free(c->live);
    free(c->snaps);
    if (c->parts) env->release(env->owner, c->parts);
    if (c->received) env->release(env->owner, c->received);
    free(c->border);
    free(c->sum);
    free(c);
}

static void change_fail(change_t *c, int status, const char *fmt, ...) PC_PRINTF(3, 4);
static void change_fail(change_t *c, int status, const char *fmt, ...)
{
    if (c->status != PCOLL_SUCCESS) return;
    c->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->what, sizeof c->what, fmt, ap);
    va_end(ap);
}

static void install(pc_engine_t *e, void *arg);

/* The helper thread: the MPI calls that block (the token holder goes on
 * meanwhile: it answers pings, holds the next views' messages). */
static void *helper(void *arg)
{
    change_t *c = arg;
    msg_backend_t *m = c->m;
    const pc_backend_env_t *env = &m->base.env;
    int P = env->P;
    c->live = malloc(sizeof(int) * (size_t)P);
    c->snaps = malloc(sizeof *c->snaps * (size_t)P);
    if (!c->live || !c->snaps) {
        change_fail(c, PCOLL_ERR_NOMEM, "no memory for a view change");
        goto out;
    }
    for (int r = 0; r < P; r++)
        if (!pc_bit_get(c->left, r)) {
            if (r == env->me) c->me = c->nlive;
            c->live[c->nlive++] = r;
        }
    MPI_Group all, g;
    int rc = MPI_Comm_group(env->ctx->comm, &all);
    if (rc == MPI_SUCCESS) rc = MPI_Group_incl(all, c->nlive, c->live, &g);
    /* a tag per epoch: a rank may still be inside the previous view's
     * MPI_Comm_create_group when the next one begins elsewhere */
    const pc_tags_t *tags = pc_engine_tags(env->engine);
    int tag = pc_tag_ctrl(tags, env->obj->channel, VIEW_TAG_KIND + c->epoch % tags->step_mask);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(env->ctx->comm, g, tag, &c->comm);
    if (rc != MPI_SUCCESS) {
        change_fail(c, PCOLL_ERR_MPI, "MPI_Comm_create_group for a view failed (code %d)", rc);
        goto out;
    }
    MPI_Group_free(&g);
    MPI_Group_free(&all);
    rc = MPI_Allgather(&c->mine, sizeof c->mine, MPI_BYTE, c->snaps, sizeof c->mine, MPI_BYTE, c->comm);
    if (rc == MPI_SUCCESS && (m->skipping ? pc_regroup_plan_skip(c->snaps, c->nlive, &c->plan)
                                          : pc_regroup_plan(c->snaps, c->nlive, &c->plan)) != 0)
        rc = -1;
    if (rc != MPI_SUCCESS) {
        change_fail(c, PCOLL_ERR_INTERNAL, "a view change found rounds it cannot resolve (code %d)", rc);
        goto out;
    }
    /* round D - 1 from the donor, to those that did not complete it */
    if (c->plan.donor >= 0) {
        uint64_t want = c->plan.resume - 1;
        int32_t hdr[3] = {(int32_t)m->kept_flags, m->kept_root, m->kept_round == want};
        void *buf = (void *)m->kept;
        if (c->me != c->plan.donor && !(buf = c->received = env->buffer(env->owner)))
            change_fail(c, PCOLL_ERR_NOMEM, "no memory for a view change's round");
        MPI_Bcast(hdr, 3, MPI_INT32_T, c->plan.donor, c->comm);
        MPI_Bcast(buf ? buf : c->snaps, buf ? (int)env->bytes : 0, MPI_BYTE, c->plan.donor, c->comm);
        if (!hdr[2]) /* every rank of the view fails alike */
            change_fail(c, PCOLL_ERR_INTERNAL, "the donor of a view change does not have the round");
        c->received_flags = (uint32_t)hdr[0];
        c->received_root = hdr[1];
        if (c->received && pc_regroup_action(&c->plan, &c->mine) != PC_REGROUP_RECEIVE) {
            env->release(env->owner, c->received);
            c->received = NULL;
        }
    }
    /* a keeper one round behind got round D - 1 from the donor: the ranks
     * it keeps for were not in it, so each is owed it (those coming back
     * now, below, and those that stay left out) */
    for (int x = 0; c->received && c->status == PCOLL_SUCCESS && x < env->P; x++)
        if (pc_bit_get(m->left_out, x) && m->keeper[x] == env->me &&
            owe(m, &m->owed[x], c->plan.resume - 1, c->received_flags, c->received_root, c->received) != PCOLL_SUCCESS)
            change_fail(c, PCOLL_ERR_NOMEM, "no memory to keep a round for a left-out rank");
    /* ranks coming back: what their keepers kept for them (skipping: none) */
    for (int j = 0; j < c->nlive && !m->skipping; j++) {
        if (!c->snaps[j].left_out) continue;
        int x = c->live[j], k = c->me == j ? m->left_keeper : m->keeper[x], kj = -1;
        for (int i = 0; i < c->nlive; i++)
            if (c->live[i] == k) kj = i;
        if (kj < 0) { /* its keeper is left out itself: it comes back owed nothing */
            if (c->me == j) {
                pc_log(PCOLL_LOG_WARN, "partial: rank %d kept the rounds this rank missed, and is left out: they are "
                                       "lost here", k);
                c->meta.from = c->meta.upto = c->mine.done;
            }
            continue;
        }
        if (c->me == kj) {
            msg_owed_t *o = &m->owed[x];
            owed_meta_t meta = {o->from, o->upto ? o->upto : o->from, o->active_last, o->active_min,
                                o->active_total, o->contributions, o->contributions_last, o->flags,
                                o->root, o->border != NULL, o->sum != NULL};
            MPI_Send(&meta, sizeof meta, MPI_BYTE, j, TAG_META, c->comm);
            if (o->border) MPI_Send(o->border, (int)env->bytes, MPI_BYTE, j, TAG_BORDER, c->comm);
            if (o->sum) MPI_Send(o->sum, (int)env->bytes, MPI_BYTE, j, TAG_SUM, c->comm);
        } else if (c->me == j) {
            MPI_Recv(&c->meta, sizeof c->meta, MPI_BYTE, kj, TAG_META, c->comm, MPI_STATUS_IGNORE);
            if (c->meta.has_border && (c->border = malloc(env->bytes)))
                MPI_Recv(c->border, (int)env->bytes, MPI_BYTE, kj, TAG_BORDER, c->comm, MPI_STATUS_IGNORE);
            if (c->meta.has_sum && (c->sum = malloc(env->bytes)))
                MPI_Recv(c->sum, (int)env->bytes, MPI_BYTE, kj, TAG_SUM, c->comm, MPI_STATUS_IGNORE);
            if ((c->meta.has_border && !c->border) || (c->meta.has_sum && !c->sum))
                change_fail(c, PCOLL_ERR_NOMEM, "no memory for the rounds this rank missed");
        }
    }
out:
    c->task.fn = install;
    c->task.arg = c;
    pc_engine_post_task(env->engine, &c->task, 0);
    return NULL;
}

static void replay_held(msg_backend_t *m);

/* The view change c's helper thread: the MPI calls among the view's ranks. */
static void start_helper(msg_backend_t *m, change_t *c)
{
    const pc_backend_env_t *env = &m->base.env;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, helper, c) != 0) {
        pthread_attr_destroy(&attr);
        change_free(c);
        env->failed(env->owner, PCOLL_ERR_INTERNAL, "no thread for a view change");
        return;
    }
    pthread_attr_destroy(&attr);
}

/* The coordinator: once every rank of the view it forms is frozen for it
 * (READY), GO to them, and its own helper. */
static void maybe_go(msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    change_t *c = m->awaiting_go;
    if (!m->forming || !c || c->epoch != m->forming) return;
    for (int r = 0; r < env->P; r++)
        if (!pc_bit_get(c->left, r) && !pc_bit_get(m->ready, r)) return;
    m->forming = 0;
    for (int r = 0; r < env->P; r++)
        if (r != env->me && !pc_bit_get(c->left, r)) send_ctl(m, r, PC_MSG_GO, c->epoch, 0, env->me, NULL);
    m->awaiting_go = NULL;
    start_helper(m, c);
}

/* This rank is frozen for the view change c: it waits for GO. */
static void ready_for(msg_backend_t *m, change_t *c)
{
    const pc_backend_env_t *env = &m->base.env;
    m->awaiting_go = c;
    if (c->keeper != env->me) {
        send_ctl(m, c->keeper, PC_MSG_READY, c->epoch, 0, env->me, NULL);
        return;
    }
    pc_bit_put(m->ready, env->me, 1);
    maybe_go(m);
}

/* This rank's rounds freeze for the view (epoch, left); keeper made it.  A
 * view change this rank is frozen for and that has not begun (no GO) is
 * replaced: the state it froze with stands for the new one. */
static void freeze(msg_backend_t *m, uint32_t epoch, const unsigned char *left, int keeper, uint32_t backoff)
{
    const pc_backend_env_t *env = &m->base.env;
    pc_backoff_set(&m->backoff, backoff);
    if (keeper != env->me) m->forming = 0; /* a view of its own not begun: replaced */
    change_t *c = m->awaiting_go;
    m->awaiting_go = NULL;
    void *parts = NULL;
    int ran = c ? 0 : give_up(m, &parts); /* frozen: nothing runs */
    drain_left(m);
    if (pc_bit_get(left, env->me)) { /* left out: ask to come back */
        if (c) { /* as it froze for the view replaced */
            if (!m->left_me) { /* (else: its keeper stays, as at the others) */
                m->left_snap = c->mine;
                m->left_snap.left_out = 1;
                m->left_snap.has_last = 0;
                m->left_me = 1;
                m->left_keeper = keeper;
            }
            m->left_parts = c->parts; /* a rank coming back lent them to c */
            c->parts = NULL;
            change_free(c);
        } else if (!m->left_me) {
            m->left_snap = (pc_regroup_snap_t){atomic_load(&m->done), m->activated_upto, ran, 1, 0, 0};
            m->left_parts = parts;
            m->left_me = 1;
            m->left_keeper = keeper;
        } else if (parts) {
            env->release(env->owner, parts);
        }
        m->epoch = epoch;
        m->view_maker = keeper;
        memcpy(m->left_out, left, env->bitmap_bytes);
        m->n_left_out = count_bits(left, env->P);
        memset(m->want_out, 0, env->bitmap_bytes); /* a coordinator no more */
        memset(m->want_in, 0, env->bitmap_bytes);
        m->deposed = m->coord_silent = 0;
        send_ctl(m, keeper, PC_MSG_JOIN, epoch, 0, env->me, NULL);
        if (c) atomic_store(&m->frozen, 0);
        if (!m->replaying) replay_held(m); /* held while it was frozen, or for a later view (else: the replay goes on) */
        return;
    }
    if (c) { /* still in the view */
        c->epoch = epoch;
        c->keeper = keeper;
        memcpy(c->left, left, env->bitmap_bytes);
        ready_for(m, c);
        return;
    }
    c = calloc(1, sizeof *c);
    if (!c || !(c->left = malloc(env->bitmap_bytes))) {
        free(c);
        if (parts) env->release(env->owner, parts);
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory for a view change");
        return;
    }
    atomic_store(&m->frozen, 1);
    c->m = m;
    c->epoch = epoch;
    c->keeper = keeper;
    memcpy(c->left, left, env->bitmap_bytes);
    c->comm = MPI_COMM_NULL;
    c->me = -1;
    if (m->left_me) { /* coming back: the state it was left out with */
        c->mine = m->left_snap;
        c->parts = m->left_parts;
        m->left_parts = NULL;
        if (parts) env->release(env->owner, parts);
    } else {
        pthread_mutex_lock(&m->lock);
        uint64_t act = m->activated_upto;
        pthread_mutex_unlock(&m->lock);
        uint64_t done = atomic_load(&m->done);
        c->mine = (pc_regroup_snap_t){done, act, ran, 0, m->kept && m->kept_round + 1 == done, 0};
        c->parts = parts;
    }
    ready_for(m, c);
}

/* The coordinator forms a view: FREEZE to every other rank, and here. */
static void form(msg_backend_t *m, uint32_t epoch, const unsigned char *left)
{
    const pc_backend_env_t *env = &m->base.env;
    m->forming = epoch;
    memset(m->ready, 0, env->bitmap_bytes);
    for (int r = 0; r < env->P; r++)
        if (r != env->me) send_ctl(m, r, PC_MSG_FREEZE, epoch, m->backoff.shift, env->me, left);
    freeze(m, epoch, left, env->me, m->backoff.shift);
}

static int probe(msg_backend_t *m, int j);

/* The coordinator: a rank of the view it forms that has not said READY
 * and leaves a ping unanswered for the limit (as any silent rank: its
 * holder answers pings even while it finishes the previous view) stopped
 * since: a view that leaves it out as well replaces this one (no helper
 * has begun; nobody waits in MPI). */
static void forming_check(msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    change_t *c = m->awaiting_go;
    if (!m->forming || !c || c->epoch != m->forming || c->keeper != env->me) return;
    unsigned char *left = malloc(env->bitmap_bytes);
    if (!left) return; /* no memory: the next look */
    memcpy(left, c->left, env->bitmap_bytes);
    int added = 0;
    for (int r = 0; r < env->P; r++)
        if (r != env->me && !pc_bit_get(c->left, r) && !pc_bit_get(m->ready, r) && !keeps(m, r) && probe(m, r)) {
            pc_bit_put(left, r, 1);
            pc_bit_put(m->suspected, r, 1);
            added++;
            pc_log(PCOLL_LOG_INFO, "partial ch%u: rank %d, not frozen for view %u, has not answered for %u ms: left "
                   "out too", env->obj->channel, r, c->epoch, limit_ms(m));
        }
    if (added && pc_view_allowed(left, env->P)) form(m, c->epoch + 1, left);
    free(left);
}

/* The coordinator: a view that leaves out (or takes back) the ranks asked
 * for meanwhile. */
static void start_change(msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    /* One change at a time: what is asked for meanwhile waits for the
     * install (a second FREEZE of the same epoch, with other left-out
     * ranks, split the ranks between two views of one epoch) */
    if (atomic_load(&m->frozen) || m->left_me || m->replaying || env->me != coordinator(m)) return;
    if (m->finishing || (m->running && (m->running_flags & PC_ROUND_FREE))) {
        /* This rank gave its part of the last round: the others may have
         * completed it and closed the object, and would never take part in
         * a view.  (The last round starts only in a view that leaves nobody
         * out, and waits for every rank, as synchronous rounds do.) */
        memset(m->want_out, 0, env->bitmap_bytes);
        memset(m->want_in, 0, env->bitmap_bytes);
        return;
    }
    unsigned char *left = malloc(env->bitmap_bytes);
    if (!left) return; /* no memory: the next look asks again */
    int changed = 0;
    for (int r = 0; r < env->P; r++) {
        int out = pc_bit_get(m->left_out, r);
        int want = (out && !pc_bit_get(m->want_in, r)) ||
                   (!out && pc_bit_get(m->want_out, r) && r != env->me && !keeps(m, r));
        pc_bit_put(left, r, want);
        changed |= want != out;
    }
    memset(m->want_out, 0, env->bitmap_bytes);
    memset(m->want_in, 0, env->bitmap_bytes);
    if (m->back_soon) { /* once per view change */
        m->back_soon = 0;
        if (pc_backoff_raise(base_limit_ms(m), &m->backoff))
            pc_log(PCOLL_LOG_INFO, "partial ch%u: the limit is now %u ms", env->obj->channel, limit_ms(m));
    }
    if (changed && pc_view_allowed(left, env->P)) form(m, m->epoch + 1, left);
    free(left);
}

/* ---- a silent coordinator: its deputy takes over ----
 *
 *   the deputy (the view's second rank), the coordinator silent (a ping of
 *   its own unanswered for the limit; other ranks report it, SUSPECT):
 *     DEPOSE(epoch, attempt) to every other rank of the view
 *   a rank of that view, not frozen for a view change: it holds the
 *     coordinator's FREEZEs from now on, DEPOSED(yes); else DEPOSED(no)
 *   every rank said yes: the deputy makes the view that leaves the
 *     coordinator out (it is that view's coordinator, and keeps what the
 *     old one is owed); a no, a FREEZE here, or no answer within the
 *     limit: RELEASE (the held FREEZEs are replayed), and again later
 *
 * A rank frozen for a view of the coordinator says no: that view may have
 * begun (GO), and its ranks wait in MPI for each other.  The deputy itself
 * begins only while it is not frozen: a view of the coordinator that began
 * had its READY too (or left it out: then it is no deputy).  What a rank
 * does with the FREEZEs of the two: view_rules.h.  Only
 * for objects whose rounds go on without a leader (SOLO; MAJORITY and
 * QUORUM, whose rounds the waiting ranks count and start while the leader
 * is silent: pc_leader_decide_stand_in; GROUP rounds that skip), in a
 * view of three ranks or more (a view keeps two: pc_view_allowed), with
 * nobody else left out (the coordinator keeps what they are owed).  The
 * deputy keeps what the coordinator is owed, so from then on it is never
 * left out itself while it keeps (keeps): rounds wait for it.  Ranks that
 * said yes wait for the deputy's view (or RELEASE): a deputy that stops
 * meanwhile holds the changes up, as a coordinator that stops with ranks
 * frozen for its view does (they say no until it goes on).
 */
static int takeover_allowed(const msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    return (env->policy.kind != PCOLL_PARTIAL_GROUP || m->skipping) &&
           m->n_left_out == 0 && env->P >= 3 &&
           env->me == deputy(m) && !atomic_load(&m->frozen) && !m->awaiting_go && !m->left_me && !m->replaying &&
           !m->finishing && !(m->running && (m->running_flags & PC_ROUND_FREE));
}

/* type to every rank of the view but this one and the coordinator */
static void send_deputies_view(msg_backend_t *m, uint32_t type, uint64_t round)
{
    const pc_backend_env_t *env = &m->base.env;
    int c = coordinator(m);
    for (int r = 0; r < env->P; r++)
        if (r != env->me && r != c && !pc_bit_get(m->left_out, r)) send_ctl(m, r, type, m->epoch, round, c, NULL);
}

/* The deputy gives its attempt up: the coordinator's views are welcome
 * again (a later look may try again, a limit after this one began). */
static void release(msg_backend_t *m)
{
    if (!m->deposing) return;
    m->deposing = 0;
    send_deputies_view(m, PC_MSG_RELEASE, m->deposing_attempt);
}

/* The deputy: once every rank of the view said yes, the view without the
 * coordinator. */
static void maybe_take_over(msg_backend_t *m)
{
    const pc_backend_env_t *env = &m->base.env;
    int c = coordinator(m);
    for (int r = 0; r < env->P; r++)
        if (r != env->me && r != c && !pc_bit_get(m->left_out, r) && !pc_bit_get(m->agreed, r)) return;
    unsigned char *left = malloc(env->bitmap_bytes);
    if (!left) return; /* no memory: the attempt runs out, and another follows */
    m->deposing = 0;
    m->deposed = c + 1; /* its views wait (its own, made meanwhile, go once this one is installed) */
    memcpy(left, m->left_out, env->bitmap_bytes);
    pc_bit_put(left, c, 1);
    pc_log(PCOLL_LOG_INFO, "partial ch%u: rank %d, the views' coordinator, has not answered for %u ms: this rank "
           "takes over", env->obj->channel, c, limit_ms(m));
    form(m, m->epoch + 1, left);
    free(left);
}

/* The deputy's look: the coordinator reported silent. */
static void deputy_check(msg_backend_t *m)
{
    if (!m->coord_silent) return;
    if (!takeover_allowed(m)) {
        release(m);
        return;
    }
    uint32_t now = clock_ms();
    if (m->deposing) {
        if (now - m->deposing_since > limit_ms(m)) release(m); /* a rank did not answer */
        return;
    }
    if ((m->deposing_attempt && now - m->deposing_since <= limit_ms(m)) || !probe(m, coordinator(m))) return;
    m->deposing = 1;
    m->deposing_since = now;
    m->deposing_attempt++;
    memset(m->agreed, 0, m->base.env.bitmap_bytes);
    send_deputies_view(m, PC_MSG_DEPOSE, m->deposing_attempt);
    maybe_take_over(m); /* no other rank to ask */
}

static void replay_held(msg_backend_t *m);
static void skip_or_hold(msg_backend_t *m, change_t *c, uint64_t D);

/* A left-out rank back in a view (c): its parts of the rounds the others
 * gave up go back, and what it missed comes as one catch-up (regroup.h).
 * 0, or -1 after env->failed. */
static int come_back(msg_backend_t *m, change_t *c)
{
    const pc_backend_env_t *env = &m->base.env;
    if (m->skipping) { /* its rounds go on from the view's (its latest contribution is pending) */
        m->left_me = 0;
        skip_or_hold(m, c, c->plan.resume);
        return 0;
    }
    int how = pc_regroup_return(c->meta.from, c->mine.done);
    if (how == -2) {
        env->failed(env->owner, PCOLL_ERR_INTERNAL, "a rank coming back is rounds away from the others");
        return -1;
    }
    if (how < 0 && m->kept_round != c->meta.from) {
        env->failed(env->owner, PCOLL_ERR_INTERNAL, "a rank coming back does not have the round it completed");
        return -1;
    }
    if (how <= 0 && c->mine.running) put_back(m, c->parts);
    if (how < 0) put_back(m, m->kept_in); /* its parts of the round it alone completed */
    void *buf = env->buffer(env->owner);
    int deliver = c->sum || (how == 1 && c->border) || (how < 0 && env->mode == PCOLL_ACCUMULATE);
    if (deliver && !buf) {
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory for the rounds this rank missed");
        return -1;
    }
    if (deliver) {
        owed_meta_t *o = &c->meta;
        int64_t contributions = o->contributions, active = o->active_total;
        if (c->sum) memcpy(buf, c->sum, env->bytes);
        else memset(buf, 0, env->bytes);
        if (how == 1 && c->border) {
            if (env->mode == PCOLL_ACCUMULATE && c->sum)
                pc_reduce_sum(buf, buf, c->border, env->count + PC_TRAILER, env->dtype);
            else if (!c->sum)
                memcpy(buf, c->border, env->bytes);
            int64_t a, n;
            pc_trailer_get(env, c->border, &a, &n);
            contributions += n;
            active += a;
        }
        if (how < 0 && env->mode == PCOLL_ACCUMULATE) { /* less what it already had of round D */
            diff(buf, buf, m->kept, env->count + PC_TRAILER, env->dtype);
            int64_t a, n;
            pc_trailer_get(env, m->kept, &a, &n);
            contributions -= n;
            active -= a;
        }
        uint64_t last = o->upto > 0 ? o->upto - 1 : 0, first = c->mine.done;
        if (first > last) first = last;
        pc_round_done_t d = {.first = first, .round = last, .root = o->root, .flags = o->flags,
                             .catch_up = 1, .active_last = o->active_last,
                             .active_min = o->active_min, .active_total = active,
                             .contributions = contributions, .contributions_last = o->contributions_last};
        /* the driver may add this into the buffer pinned last: this rank
         * holds no round's result to give from now until its next round */
        env->pin(env->owner, NULL);
        m->kept = NULL;
        m->kept_round = UINT64_MAX;
        env->completed(env->owner, &d, buf);
    } else if (buf) {
        env->release(env->owner, buf);
    }
    m->left_me = 0;
    return 0;
}

/* Rounds [first, D) are skipped here (rounds in groups): they complete as
 * rounds of a group of one, this rank alone, so that an application
 * waiting for one of them goes on (a result it has not collected yet
 * stays: `alone`).  What that group of one holds:
 *   REPLACE, AVERAGE: its latest contribution (still pending);
 *   ACCUMULATE: its parts of round `first`, the round it gave up (`parts`,
 *     NULL if none ran), and not put back: the other members of that
 *     group may have completed the round with them, and a part put back
 *     would reach one of them again in a later group.  So each part
 *     reaches its own rank once and the members that completed its round
 *     once; members that skipped the round miss it, as they miss every
 *     other part of a round skipped.  The rounds after `first` hold none
 *     of its parts (it had not begun them: they are still pending).
 * Of them, only `first` can have been a flush (a flush needs every rank's
 * part, so no rank completed one after it without this rank): its flag
 * comes along, or the flush call that waits for it would wait for ever. */
static void skip(msg_backend_t *m, uint64_t first, uint64_t D, const void *parts)
{
    const pc_backend_env_t *env = &m->base.env;
    void *buf = env->buffer(env->owner);
    if (!buf) {
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory for the rounds a view change skipped");
        return;
    }
    int64_t active, n;
    if (env->mode == PCOLL_ACCUMULATE) {
        active = n = 0;
        if (parts) pc_trailer_get(env, parts, &active, &n);
        if (n > 0) memcpy(buf, parts, env->bytes);
        else memset(buf, 0, env->bytes);
    } else {
        lock_pending(m);
        active = m->waiting_from < D;
        n = m->pending_contribs > 0;
        if (n) memcpy(buf, m->pending, env->count * env->esize);
        pthread_mutex_unlock(&m->lock);
        if (!n) memset(buf, 0, env->count * env->esize);
    }
    pc_trailer_set(env, buf, active, n);
    const act_slot_t *sl = &m->slot[first % (uint64_t)m->nslots];
    uint32_t flags = sl->round == first && sl->activated ? sl->flags & PC_ROUND_FLUSH : 0;
    int me = env->me;
    pc_round_done_t d = {.first = first, .round = D - 1, .root = me, .flags = flags, .catch_up = 1,
                         .active_last = active, .active_min = active, .active_total = active,
                         .contributions = n, .contributions_last = n, .alone = 1, .members = &me,
                         .nmembers = 1};
    env->completed(env->owner, &d, buf);
}

/* Rounds in groups, at a view change that goes on from round D: this
 * rank's rounds [done, D) are skipped (skip).  With ACCUMULATE, when it
 * gave up round D itself (nobody in the view completed it), its parts of D
 * are held as D's input when D runs again, not put back: a member of its
 * old group left out at this change may have completed D with them, and
 * parts put back would reach it again in a later group.  Held, they reach
 * the rank's new group of round D, and that member, once each. */
static void skip_or_hold(msg_backend_t *m, change_t *c, uint64_t D)
{
    const pc_backend_env_t *env = &m->base.env;
    uint64_t done = c->mine.done;
    void *parts = c->mine.running ? c->parts : NULL;
    pc_regroup_action_t a = pc_regroup_skip_action(D, &c->mine, env->mode == PCOLL_ACCUMULATE);
    if (a == PC_REGROUP_SKIP) {
        skip(m, done, D, parts);
    } else if (a == PC_REGROUP_HOLD && parts) {
        pthread_mutex_lock(&m->lock);
        m->rerun_parts = parts;
        m->rerun_round = done;
        pthread_mutex_unlock(&m->lock);
        c->parts = NULL;
        PC_DEBUG("partial ch%u: holds its parts of round %llu for when it runs again", env->obj->channel,
                 (unsigned long long)done);
    }
}

/* A rank of the old view: its round per the plan (regroup.h). */
static void resolve(msg_backend_t *m, change_t *c, uint64_t D)
{
    const pc_backend_env_t *env = &m->base.env;
    if (m->skipping) { /* rounds before D are over here (nothing put back: skip) */
        skip_or_hold(m, c, D);
        return;
    }
    switch (pc_regroup_action(&c->plan, &c->mine)) {
    case PC_REGROUP_RECEIVE: { /* round D - 1, as the others completed it */
        pc_round_done_t d = {.first = D - 1, .round = D - 1, .root = c->received_root,
                             .flags = c->received_flags};
        env->pin(env->owner, c->received);
        m->kept = c->received;
        m->kept_round = D - 1;
        m->kept_flags = c->received_flags;
        m->kept_root = c->received_root;
        void *buf = c->received;
        c->received = NULL;
        env->completed(env->owner, &d, buf);
        break;
    }
    case PC_REGROUP_PUT_BACK: put_back(m, c->parts); break;
    case PC_REGROUP_NOTHING:
    case PC_REGROUP_SKIP: /* (rounds in groups: skip_or_hold) */
    case PC_REGROUP_HOLD: break;
    }
}

/* The holder: the view the helper made becomes this rank's. */
static void install(pc_engine_t *e, void *arg)
{
    (void)e;
    change_t *c = arg;
    msg_backend_t *m = c->m;
    const pc_backend_env_t *env = &m->base.env;
    if (c->status != PCOLL_SUCCESS) {
        env->failed(env->owner, c->status, c->what);
        change_free(c);
        return;
    }
    pc_sched_t *s = NULL;
    if (pc_round_sched_build(env, m->forced, m->small_bytes, c->nlive, c->me, 0, &s) != PCOLL_SUCCESS) {
        pc_sched_free(s);
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory for a view's schedule");
        change_free(c);
        return;
    }
    if (m->view_sched) { /* the last view's (view 0's is m->sched): a run given up owns it until it ends */
        given_up_t *g = given_up_run(m, m->view_sched);
        if (g) g->owns_sched = 1;
        else pc_sched_free(m->view_sched);
    }
    pc_msg_groups_clear(m); /* groups of the new view's ranks, built as met */
    /* the view (the old communicator stays, drained since the FREEZE:
     * messages of rounds given up may still come on it) */
    uint64_t D = c->plan.resume;
    for (int x = 0; x < env->P; x++) {
        int was = pc_bit_get(m->left_out, x), is = pc_bit_get(c->left, x);
        if (is && !was) { /* left out now: its keeper keeps from D on */
            m->keeper[x] = c->keeper;
            if (c->keeper == env->me) { /* the coordinator */
                m->left_at[x] = clock_ms();
                msg_owed_t *o = &m->owed[x];
                owed_clear(o);
                o->from = o->upto = D;
                const void *border = c->received ? c->received : m->kept_round + 1 == D ? m->kept : NULL;
                if (!m->skipping && D > 0 && border && (o->border = malloc(env->bytes)))
                    memcpy(o->border, border, env->bytes);
            }
        } else if (was && !is) {
            if (m->keeper[x] == env->me) owed_clear(&m->owed[x]);
            m->keeper[x] = -1;
        }
    }
    m->view_comm = c->comm; /* the old one is never freed (late messages: drain_left) */
    c->comm = MPI_COMM_NULL;
    m->epoch = c->epoch;
    m->view_maker = c->keeper;
    m->deposed = m->coord_silent = 0; /* FREEZEs held from a coordinator left out: older, dropped */
    memcpy(m->left_out, c->left, env->bitmap_bytes);
    m->n_left_out = count_bits(c->left, env->P);
    memcpy(m->live, c->live, sizeof(int) * (size_t)c->nlive);
    m->nlive = c->nlive;
    m->live_me = c->me;
    m->view_sched = s;
    pc_sched_bind_ranks(s, m->live);
    pc_sched_set_comm(s, &m->view_comm, NULL);
    pc_links_init(&m->links, m->nlive, m->live_me, m->live);
    m->links.epoch = m->epoch;
    memset(m->suspected, 0, env->bitmap_bytes);
    memset(m->pinged, 0, sizeof(uint64_t) * (size_t)env->P);
    memset(m->ponged, 0, sizeof(uint64_t) * (size_t)env->P);
    memset(m->ping_wait, 0, sizeof(uint64_t) * (size_t)env->P);
    m->run_wait = 0;

    /* this rank's rounds go on from D: set before the deliveries below, as
     * an application they wake takes the next round at once (rounds_started) */
    atomic_store(&m->done, D);
    pthread_mutex_lock(&m->lock);
    m->rounds_started = D;
    if (m->activated_upto < D) m->activated_upto = D; /* every round before D is complete */
    uint64_t act = m->activated_upto;
    pthread_mutex_unlock(&m->lock);
    if (m->left_me) {
        if (come_back(m, c) != 0) {
            change_free(c);
            return;
        }
    } else {
        resolve(m, c, D);
    }
    /* rounds activated before the change: again, on the new links (the
     * others take the first activation they get) */
    for (uint64_t r = D; r < act; r++) {
        act_slot_t *sl = &m->slot[r % (uint64_t)m->nslots];
        if (sl->round != r || !sl->activated) continue;
        sl->used_links = pc_links_forward(&m->links, -1);
        pc_links_activate(&m->links, env, r, sl->root, sl->flags, sl->has_counted ? sl->counted : NULL,
                          sl->used_links);
    }
    change_free(c);
    atomic_store(&m->frozen, 0);
    pc_log(PCOLL_LOG_INFO, "partial ch%u: view %u: %d ranks left out, rounds from %llu", env->obj->channel, m->epoch,
           m->n_left_out, (unsigned long long)D);
    replay_held(m);
    if (env->me == coordinator(m)) start_change(m); /* what was asked for meanwhile */
    pc_msg_try_start(m);
}

/* ---- messages ---- */

static void hold(msg_backend_t *m, int src, const void *msg, size_t bytes)
{
    held_msg_t *h = malloc(sizeof *h + bytes);
    if (!h) return; /* no memory: lost like a message never sent (the next look asks again) */
    h->next = NULL;
    h->src = src;
    h->bytes = bytes;
    memcpy(h + 1, msg, bytes);
    *m->held_tail = h;
    m->held_tail = &h->next;
}

static void replay_held(msg_backend_t *m)
{
    held_msg_t *list = m->held;
    m->held = NULL;
    m->held_tail = &m->held;
    m->replaying = 1;
    while (list) {
        held_msg_t *h = list;
        list = h->next;
        if (!pc_msg_view_message(m, h->src, h + 1, h->bytes)) pc_msg_handle(m, h->src, h + 1, h->bytes);
        free(h);
    }
    m->replaying = 0;
}

/* The coordinator: left-out rank x asks to come back.  Soon: the next view
 * doubles the limit (backoff.h). */
static void came_back(msg_backend_t *m, int x)
{
    uint32_t away = clock_ms() - m->left_at[x];
    if (m->left_at[x] != 0 && pc_backoff_soon(base_limit_ms(m), &m->backoff, away) && !m->back_soon) {
        m->back_soon = 1;
        pc_log(PCOLL_LOG_INFO, "partial ch%u: rank %d asks to come back after %u ms", m->base.env.obj->channel, x,
               away);
    }
    m->left_at[x] = 0;
}

/* This rank's side of the views, for view_rules.h. */
static pc_view_state_t view_state(const msg_backend_t *m)
{
    const struct change *aw = m->awaiting_go;
    return (pc_view_state_t){.me = m->base.env.me, .epoch = m->epoch, .maker = m->view_maker,
                             .left_out = m->left_out, .left_me = m->left_me, .frozen = atomic_load(&m->frozen),
                             .awaiting = aw != NULL, .await_epoch = aw ? aw->epoch : 0,
                             .await_maker = aw ? aw->keeper : -1, .deposed = m->deposed};
}

int pc_msg_view_message(msg_backend_t *m, int src, const void *msg, size_t bytes)
{
    const pc_backend_env_t *env = &m->base.env;
    const pc_obj_msg_t *h = msg;
    int frozen = atomic_load(&m->frozen);
    switch (h->type) {
    case PC_MSG_ACTIVATE:
    case PC_MSG_FIN:
        if (!m->excluding) return 0;
        if (h->epoch < m->epoch) return 1; /* a view left: dropped */
        if (h->epoch > m->epoch) {
            hold(m, src, msg, bytes);
            return 1;
        }
        return m->left_me; /* a left-out rank takes no rounds */
    case PC_MSG_PING:
        send_ctl(m, src, PC_MSG_PONG, h->epoch, h->round, env->me, NULL);
        return 1;
    case PC_MSG_PONG:
        if (m->ponged && h->round > m->ponged[src]) m->ponged[src] = h->round;
        return 1;
    case PC_MSG_SUSPECT:
        if (!m->excluding || h->epoch < m->epoch || h->root < 0 || h->root >= env->P) return 1;
        if (h->epoch > m->epoch) { /* from a view this rank has yet to install */
            hold(m, src, msg, bytes);
            return 1;
        }
        if (h->root == coordinator(m)) { /* to its deputy */
            if (env->me == deputy(m) && !m->coord_silent) {
                m->coord_silent = 1;
                pc_msg_view_nudge(m);
            }
            return 1;
        }
        pc_bit_put(m->want_out, h->root, 1);
        start_change(m);
        return 1;
    case PC_MSG_JOIN:
        if (!m->excluding || h->root < 0 || h->root >= env->P || m->left_me) return 1;
        if (frozen || h->epoch > m->epoch) { /* maybe left out by the view being made */
            hold(m, src, msg, bytes);
            return 1;
        }
        if (pc_bit_get(m->left_out, h->root) && env->me != coordinator(m)) { /* it was left out by a deputy */
            send_ctl(m, coordinator(m), PC_MSG_JOIN, m->epoch, 0, h->root, NULL);
        } else if (pc_bit_get(m->left_out, h->root)) {
            if (!pc_bit_get(m->want_in, h->root)) came_back(m, h->root);
            pc_bit_put(m->want_in, h->root, 1);
            start_change(m);
        }
        return 1;
    case PC_MSG_FREEZE: {
        if (!m->excluding || !h->counted || bytes < sizeof *h + env->bitmap_bytes || h->root < 0 || h->root >= env->P)
            return 1;
        pc_view_state_t vs = view_state(m);
        pc_freeze_action_t what = pc_view_on_freeze(&vs, h->epoch, h->root, (const unsigned char *)(h + 1));
        if (what == PC_FREEZE_HOLD) hold(m, src, msg, bytes);
        if (what != PC_FREEZE_FOLLOW) return 1;
        release(m); /* a deputy: the coordinator is not silent */
        freeze(m, h->epoch, (const unsigned char *)(h + 1), h->root, (uint32_t)h->round);
        return 1;
    }
    case PC_MSG_READY:
        if (m->excluding && m->forming && h->epoch == m->forming && src >= 0 && src < env->P) {
            pc_bit_put(m->ready, src, 1);
            maybe_go(m);
        }
        return 1;
    case PC_MSG_GO:
        if (m->excluding && m->awaiting_go && m->awaiting_go->epoch == h->epoch && m->awaiting_go->keeper == src) {
            change_t *c = m->awaiting_go;
            m->awaiting_go = NULL;
            start_helper(m, c);
        }
        return 1;
    case PC_MSG_DEPOSE: { /* a view of its, frozen for none: hold the coordinator's FREEZEs */
        if (!m->excluding) return 1;
        pc_view_state_t vs = view_state(m);
        int yes = pc_view_agrees(&vs, env->P, h->epoch, src, h->root);
        if (yes) m->deposed = h->root + 1;
        send_ctl(m, src, PC_MSG_DEPOSED, h->epoch, h->round * 2 + (uint64_t)yes, env->me, NULL);
        return 1;
    }
    case PC_MSG_DEPOSED:
        if (!m->excluding || !m->deposing || h->epoch != m->epoch || h->round / 2 != m->deposing_attempt ||
            src < 0 || src >= env->P)
            return 1; /* stale */
        if (h->round % 2 == 0) {
            pc_log(PCOLL_LOG_INFO, "partial ch%u: rank %d is frozen for a view change: no takeover yet",
                   env->obj->channel, src);
            release(m);
            return 1;
        }
        pc_bit_put(m->agreed, src, 1);
        maybe_take_over(m);
        return 1;
    case PC_MSG_RELEASE: /* after its DEPOSE (one sender's messages keep their order) */
        if (m->excluding && m->deposed && h->root == m->deposed - 1 && src == deputy(m)) {
            m->deposed = 0;
            if (!frozen && !m->replaying) replay_held(m); /* the coordinator's FREEZEs held */
        }
        return 1;
    default: return 0;
    }
}

/* ---- looking for silent ranks ---- */

/* Pings rank j (again once it answered); 1 once it has left a ping
 * unanswered for the limit. */
static int probe(msg_backend_t *m, int j)
{
    if (pc_ping_due(m->pinged[j], m->ponged[j])) {
        m->pinged[j] = ++m->ping_seq;
        send_ctl(m, j, PC_MSG_PING, m->epoch, m->pinged[j], m->base.env.me, NULL);
    }
    return pc_ping_look(&m->ping_wait[j], m->pinged[j], clock_ms(), limit_ms(m));
}

/* Rank j is silent: the coordinator hears of it; of the coordinator, its
 * deputy (which may take over: deputy_check). */
static void suspect(msg_backend_t *m, int j)
{
    const pc_backend_env_t *env = &m->base.env;
    int c = coordinator(m);
    if (pc_bit_get(m->suspected, j) || pc_bit_get(m->left_out, j)) return;
    pc_bit_put(m->suspected, j, 1);
    if (j == c) { /* its deputy takes over (deputy_check), if it may */
        int d = deputy(m);
        pc_log(PCOLL_LOG_INFO, "partial ch%u: rank %d, the views' coordinator, has not answered for %u ms",
               env->obj->channel, j, limit_ms(m));
        if (d == env->me) m->coord_silent = 1;
        else if (d >= 0) send_ctl(m, d, PC_MSG_SUSPECT, m->epoch, 0, j, NULL);
        return;
    }
    pc_log(PCOLL_LOG_INFO, "partial ch%u: rank %d has not answered for %u ms: rounds go on without it",
           env->obj->channel, j, limit_ms(m));
    if (c == env->me) {
        pc_bit_put(m->want_out, j, 1);
        start_change(m);
    } else if (c >= 0) {
        send_ctl(m, c, PC_MSG_SUSPECT, m->epoch, 0, j, NULL);
    }
}

static void look_task(pc_engine_t *e, void *arg)
{
    (void)e;
    msg_backend_t *m = arg;
    const pc_backend_env_t *env = &m->base.env;
    atomic_store(&m->look_posted, 0);
    forming_check(m);
    deputy_check(m);
    if (atomic_load(&m->frozen) || m->left_me || m->finishing || !m->running ||
        (m->running_flags & (PC_ROUND_SYNC | PC_ROUND_FLUSH | PC_ROUND_FREE))) {
        m->run_wait = 0;
        return;
    }
    uint32_t what = (uint32_t)(m->running_round + 1);
    m->run_wait = pc_silence_look(m->run_wait, what, clock_ms(), limit_ms(m) / 4 ? limit_ms(m) / 4 : 1);
    if (!pc_silence_reached(m->run_wait, what, limit_ms(m) / 4 ? limit_ms(m) / 4 : 1)) return;
    int peers[64], *buf = env->P <= 64 ? peers : malloc(sizeof(int) * (size_t)env->P);
    if (!buf) return;
    int k = pc_sched_waiting_on(m->running_sched, buf, env->P);
    for (int i = 0; i < k; i++) {
        int j = m->members[buf[i]]; /* positions in the running round's members */
        if (j != env->me && probe(m, j)) suspect(m, j);
    }
    if (buf != peers) free(buf);
}

void pc_msg_view_nudge(msg_backend_t *m)
{
    if (!m->excluding || atomic_exchange(&m->look_posted, 1)) return;
    m->look_task.fn = look_task;
    m->look_task.arg = m;
    pc_engine_post_task(m->base.env.engine, &m->look_task, 0);
}

void pc_msg_view_describe(const msg_backend_t *m, pc_stall_probe_t *p)
{
    if (!m->excluding || (m->epoch == 0 && !atomic_load(&m->frozen) && !m->deposing)) return;
    if (m->left_me) {
        pc_probe_what_add(p, "this rank is left out of view %u and asked rank %d to take it back", m->epoch,
                          m->left_keeper);
        pc_probe_suspect(p, m->left_keeper, "has not taken this rank back into the rounds", PC_WHY_CAUSE);
    } else if (atomic_load(&m->frozen)) {
        pc_probe_what_add(p, "the view after view %u is being made", m->epoch);
        for (int r = 0; m->forming && m->awaiting_go && r < m->base.env.P; r++)
            if (!pc_bit_get(m->awaiting_go->left, r) && !pc_bit_get(m->ready, r))
                pc_probe_suspect(p, r, "has not said it is frozen for the view change", PC_WHY_CAUSE);
    } else {
        pc_probe_what_add(p, "view %u, %d ranks left out", m->epoch, m->n_left_out);
        int c = coordinator(m);
        if (m->deposing) pc_probe_what_add(p, "this rank takes over from rank %d, the silent coordinator", c);
        for (int r = 0; m->deposing && r < m->base.env.P; r++)
            if (r != m->base.env.me && r != c && !pc_bit_get(m->left_out, r) && !pc_bit_get(m->agreed, r))
                pc_probe_suspect(p, r, "has not agreed to the takeover", PC_WHY_CAUSE);
    }
}

int pc_msg_view_silent(msg_backend_t *m, int rank, int probe_it)
{
    if (!m->excluding || rank == m->base.env.me) return 0;
    if (pc_bit_get(m->left_out, rank)) return 1;
    if (probe_it && !atomic_load(&m->frozen) && probe(m, rank)) suspect(m, rank);
    return 0;
}
