/*
 * Rounds of a partial allreduce, on the engine's token holder (the progress
 * thread, or an application thread blocked in pcoll: progress.h).
 *
 *   activation (any rank, any time)          data phase, strictly in order
 *   --------------------------------         -----------------------------
 *   initiator: activate(r, root = me)        start r when it is activated,
 *   message on link h: activate(r, ...)  ->  round r-1 is complete here and
 *     forward on unused links above h        the application is not writing
 *     (algo/activation.c)                    its contribution:
 *                                              take pending, write trailer,
 *                                              allreduce in place (sched)
 *                                            done: add the result to delivered,
 *                                              wake the application, start r+1
 *
 * When every rank shares one node, rounds run in node-shared memory instead
 * (node_rounds.h): activation writes a record there, any rank takes the
 * parts and sums them, and each rank completes the rounds at its next look
 * (the poller below).  No activation messages, no FIN.
 *
 * At most two rounds are in play at a rank: the one running and the next (an
 * initiator of r+1 has finished r, which needed every rank's part of r).
 *
 * End of life: the last round carries PC_ROUND_FREE.  When it completes here,
 * this rank sends FIN on each of its links and ignores activations from then
 * on; it is drained once a FIN came in on each link (MPI keeps messages from
 * one source in order, so nothing of this object can still be on its way).
 */
#include <stdlib.h>
#include <string.h>

#include "../algo/activation.h"
#include "../core/log.h"
#include "../engine/reduce.h"
#include "partial_internal.h"

static void finish_round(pcoll_partial_t *p, uint64_t r, int root, uint32_t flags, int parked, void *buf);
static void node_activate(pcoll_partial_t *p, uint64_t round, int root, uint32_t flags, const unsigned char *counted);

int pc_round_is_sync(const pcoll_partial_t *p, uint64_t round)
{
    return p->cfg.sync_every > 0 && (round + 1) % (uint64_t)p->cfg.sync_every == 0;
}

static void free_sent(pc_engine_t *e, void *arg, int status, const MPI_Status *st)
{
    (void)e;
    (void)st;
    if (status != PCOLL_SUCCESS) pc_log(PCOLL_LOG_ERROR, "partial: a control message could not be sent");
    free(arg);
}

int pc_round_send_ctrl(pcoll_partial_t *p, int peer, int tag, const pc_ctrl_msg_t *m)
{
    /* an activation with a bitmap carries it along; everything else is a header */
    size_t bytes = m->type == PC_MSG_ACTIVATE && m->counted ? p->act_msg_bytes : sizeof *m;
    pc_ctrl_msg_t *copy = malloc(bytes);
    if (!copy) {
        pc_log(PCOLL_LOG_ERROR, "partial: out of memory for a control message");
        return PCOLL_ERR_NOMEM;
    }
    memcpy(copy, m, bytes);
    int rc = pc_engine_isend(p->engine, copy, bytes, peer, tag, free_sent, copy);
    if (rc != PCOLL_SUCCESS) {
        pc_log(PCOLL_LOG_ERROR, "partial: sending a control message failed: %s", pcoll_strerror(rc));
        free(copy);
    }
    return rc;
}

static uint64_t all_links(const pcoll_partial_t *p)
{
    int d = pc_act_ndims(p->P);
    return d >= 64 ? ~0ULL : (1ULL << d) - 1;
}

/* ---- activation ---- */

void pc_round_activate(pcoll_partial_t *p, uint64_t round, int root, uint32_t flags, const unsigned char *counted,
                       int from_link)
{
    if (p->shm) {
        node_activate(p, round, root, flags, counted);
        return;
    }
    uint64_t completed = atomic_load(&p->rounds_completed);
    if (round < completed) return; /* a late duplicate: everyone has this round already */
    pc_act_slot_t *s = &p->slot[round % 2];
    if (s->round != round) {
        if (s->activated && s->round >= completed) {
            pc_log(PCOLL_LOG_ERROR, "partial: activation of round %llu while round %llu is pending (bug)",
                   (unsigned long long)round, (unsigned long long)s->round);
            return;
        }
        unsigned char *bits = s->counted;
        memset(s, 0, sizeof *s);
        s->counted = bits;
        s->round = round;
    }
    int first = !s->activated;
    PC_DEBUG("partial ch%u: activate round %llu root %d flags %u link %d first %d", p->channel,
             (unsigned long long)round, root, flags, from_link, first);
    if (first) {
        s->activated = 1;
        s->root = root;
        s->flags = flags;
        s->has_counted = counted != NULL;
        if (counted) memcpy(s->counted, counted, p->bitmap_bytes);
        pthread_mutex_lock(&p->lock);
        if (p->activated_upto < round + 1) p->activated_upto = round + 1;
        pthread_mutex_unlock(&p->lock);
    }
    uint64_t links = pc_act_forward_mask(p->P, from_link) & ~s->used_links;
    s->used_links |= links;
    if (links) {
        _Alignas(pc_ctrl_msg_t) unsigned char buf[sizeof(pc_ctrl_msg_t) + 64]; /* P <= 512: no allocation */
        pc_ctrl_msg_t *out = p->act_msg_bytes <= sizeof buf ? (pc_ctrl_msg_t *)buf : malloc(p->act_msg_bytes);
        if (!out) {
            pc_log(PCOLL_LOG_ERROR, "partial: out of memory forwarding round %llu", (unsigned long long)round);
            return;
        }
        out->type = PC_MSG_ACTIVATE;
        out->flags = s->flags;
        out->round = round;
        out->root = s->root;
        out->counted = s->has_counted;
        if (s->has_counted) memcpy(out + 1, s->counted, p->bitmap_bytes);
        for (int k = 0; links; k++, links >>= 1)
            if (links & 1) pc_round_send_ctrl(p, pc_act_peer(p->P, p->me, k), p->tag_activation, out);
        if ((unsigned char *)out != buf) free(out);
    }
    if (first) {
        if (p->leader) pc_leader_round_activated(p, round, flags);
        pc_round_try_start(p);
    }
}

static void post_activation_listener(pcoll_partial_t *p);

static void on_activation(pc_engine_t *e, void *arg, int status, const MPI_Status *st)
{
    pcoll_partial_t *p = arg;
    if (status != PCOLL_SUCCESS) {
        pc_log(PCOLL_LOG_ERROR, "partial: receiving an activation failed");
    } else {
        pc_ctrl_msg_t *m = p->act_in;
        int link = pc_act_dim_from(p->P, p->me, st->MPI_SOURCE);
        if (link < 0) {
            pc_log(PCOLL_LOG_ERROR, "partial: activation from rank %d, which is not a link source", st->MPI_SOURCE);
        } else if (m->type == PC_MSG_FIN) {
            p->fins_pending &= ~(1ULL << link);
        } else if (m->type == PC_MSG_ACTIVATE && !p->finishing) {
            pc_round_activate(p, m->round, m->root, m->flags, m->counted ? (const unsigned char *)(m + 1) : NULL, link);
        }
    }
    if (p->fins_pending == 0) {
        /* every link source has said its last word: the listener stops */
        if (p->finishing) {
            atomic_store(&p->drained, 1);
            pc_engine_notify(e);
        }
        return;
    }
    post_activation_listener(p);
}

static void post_activation_listener(pcoll_partial_t *p)
{
    int rc = pc_engine_irecv(p->engine, p->act_in, p->act_msg_bytes, MPI_ANY_SOURCE, p->tag_activation, 1,
                             on_activation, p);
    if (rc != PCOLL_SUCCESS) pc_log(PCOLL_LOG_ERROR, "partial: cannot post the activation receive: %s", pcoll_strerror(rc));
}

/* task: the object is created; listen (links exist only when P > 1) */
static void open_task(pc_engine_t *e, void *arg)
{
    pcoll_partial_t *p = arg;
    p->fins_pending = p->shm ? 0 : all_links(p);
    if (p->P > 1 && !p->shm) post_activation_listener(p);
    if (p->leader) pc_leader_listen(p);
    if (p->shm) {
        p->poller.fn = pc_round_poll;
        p->poller.arg = p;
        pc_engine_add_poller(e, &p->poller);
    }
}

int pc_round_open(pcoll_partial_t *p) { return pc_engine_post(p->engine, open_task, p); }

/* ---- the application arrived for `round` (steps 3/4 of a call) ---- */

void pc_round_arrive(pcoll_partial_t *p, uint64_t round)
{
    PC_DEBUG("partial ch%u: application waits for round %llu", p->channel, (unsigned long long)round);
    int activated;
    if (p->shm) {
        activated = round < pc_nr_activated(p->shm);
    } else {
        pthread_mutex_lock(&p->lock);
        activated = round < p->activated_upto;
        pthread_mutex_unlock(&p->lock);
    }
    if (activated) return; /* it came meanwhile: it starts on its own */
    if (pc_round_is_sync(p, round)) {
        pc_leader_notify(p, PC_MSG_WAIT, round);
        return;
    }
    switch (p->cfg.kind) {
    case PCOLL_PARTIAL_SOLO: pc_round_activate(p, round, p->me, 0, NULL, -1); break;
    case PCOLL_PARTIAL_MAJORITY:
        if (pc_partial_initiator_of(p, round) == p->me)
            pc_round_activate(p, round, p->me, 0, NULL, -1);
        else /* the leader stands in when the initiator is flushing */
            pc_leader_notify(p, PC_MSG_WAIT, round);
        break;
    case PCOLL_PARTIAL_QUORUM: pc_leader_notify(p, PC_MSG_WAIT, round); break;
    }
}

/* ---- data phase ---- */

static void round_done(pc_sched_t *s, int status, void *arg);

void pc_round_kick(pc_engine_t *e, void *arg)
{
    (void)e;
    pc_round_try_start(arg);
}

/* ---- rounds in node-shared memory ---- */

static void node_activate(pcoll_partial_t *p, uint64_t round, int root, uint32_t flags, const unsigned char *counted)
{
    int rc = pc_nr_activate(p->shm, round, root, flags, counted);
    PC_DEBUG("partial ch%u: activate round %llu root %d flags %u in shared memory: %d", p->channel,
             (unsigned long long)round, root, flags, rc);
    if (p->leader) {
        if (rc == 1)
            pc_leader_round_activated(p, round, flags);
        else
            pc_leader_catch_up(p);
    }
    pc_nr_help(p->shm);
}

/* Poller: completes here the rounds done in shared memory, in order, then
 * helps the running one along. */
int pc_round_poll(pc_engine_t *e, void *arg)
{
    (void)e;
    pcoll_partial_t *p = arg;
    int did = 0;
    while (!p->finishing) {
        uint64_t c = atomic_load(&p->rounds_completed);
        if (pc_nr_done(p->shm) <= c) break;
        pthread_mutex_lock(&p->lock);
        void *buf = pc_partial_buffer_get(p);
        pthread_mutex_unlock(&p->lock);
        if (!buf) {
            pc_log(PCOLL_LOG_ERROR, "partial: out of memory for the result of round %llu; retrying",
                   (unsigned long long)c);
            pc_engine_post(p->engine, pc_round_kick, p); /* as the message path does */
            break;
        }
        int root, parked;
        uint32_t flags;
        pc_nr_consume(p->shm, c, buf, &root, &flags, &parked);
        finish_round(p, c, root, flags, parked, buf);
        did++;
    }
    if (!p->finishing) did += pc_nr_help(p->shm); /* returns at once unless a round runs */
    return did;
}

void pc_round_try_start(pcoll_partial_t *p)
{
    if (p->finishing) return;
    if (p->shm) {
        pc_round_poll(p->engine, p);
        return;
    }
    if (p->running) return;
    pthread_mutex_lock(&p->lock);
    uint64_t r = p->rounds_started;
    pc_act_slot_t *slot = &p->slot[r % 2];
    if (slot->round != r || !slot->activated) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    if (p->adding) { /* the application finishes its copy, then kicks us */
        p->start_deferred = 1;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    void *fresh = pc_partial_buffer_get(p);
    if (!fresh) {
        pthread_mutex_unlock(&p->lock);
        pc_log(PCOLL_LOG_ERROR, "partial: out of memory for round %llu; retrying", (unsigned long long)r);
        pc_engine_post(p->engine, pc_round_kick, p);
        return;
    }
    void *buf;
    int64_t contribs;
    int zero = p->pending_contribs == 0; /* nothing ever put there: contribute zeros */
    if (p->cfg.mode == PCOLL_ACCUMULATE) {
        buf = p->pending; /* swapped out: the round takes everything pending */
        p->pending = fresh;
        contribs = (int64_t)p->pending_contribs;
        p->pending_contribs = 0;
    } else {
        buf = fresh; /* REPLACE: the latest contribution stays for later rounds */
        if (!zero) memcpy(buf, p->pending, p->count * p->esize);
        contribs = 1;
    }
    /* active: waiting for this round here, or counted by the leader as parked
     * in another call (then its data is as fresh as it gets) */
    int parked = slot->has_counted && (slot->counted[p->me / 8] >> (p->me % 8)) & 1;
    int active = r >= p->waiting_from || parked;
    p->rounds_started = r + 1;
    pthread_mutex_unlock(&p->lock);
    PC_DEBUG("partial ch%u: start round %llu active %d contributions %lld", p->channel, (unsigned long long)r, active,
             (long long)contribs);

    if (zero) memset(buf, 0, p->count * p->esize);
    pc_trailer_set(p, buf, active, contribs);
    p->running = 1;
    p->running_round = r;
    p->running_flags = slot->flags;
    p->running_root = slot->root;
    p->running_parked = parked;
    p->round_buf = buf;
    pc_sched_bind(p->sched, PC_SLOT_OUT, buf);
    pc_sched_on_done(p->sched, round_done, p);
    int rc = pc_engine_run(p->engine, p->sched, pc_tag_base(pc_engine_tags(p->engine), p->channel, r));
    if (rc != PCOLL_SUCCESS) round_done(p->sched, rc, p);
}

static void round_done(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    pcoll_partial_t *p = arg;
    if (status != PCOLL_SUCCESS)
        pc_log(PCOLL_LOG_ERROR, "partial: round %llu failed: %s", (unsigned long long)p->running_round,
               pcoll_strerror(status));
    p->running = 0;
    finish_round(p, p->running_round, p->running_root, p->running_flags, p->running_parked, p->round_buf);
}

/* Round r is complete here, its result (trailer: totals) in buf, which this
 * takes over: observer, delivered, waiters; then the next round, or the end. */
static void finish_round(pcoll_partial_t *p, uint64_t r, int root, uint32_t flags, int parked, void *buf)
{
    int64_t active, contribs;
    pc_trailer_get(p, buf, &active, &contribs);
    PC_DEBUG("partial ch%u: round %llu done, flags %u", p->channel, (unsigned long long)r, flags);

    pthread_mutex_lock(&p->lock);
    pcoll_round_observer_t obs = p->observer;
    void *obs_arg = p->observer_arg;
    pthread_mutex_unlock(&p->lock);
    if (obs) {
        pcoll_round_t info = {r,       root,     (flags & PC_ROUND_STANDIN) != 0,
                              (int)active, (uint64_t)contribs, (flags & PC_ROUND_SYNC) != 0,
                              buf,     p->count, p->dtype};
        obs(&info, obs_arg);
    }

    void *spare = NULL;
    pthread_mutex_lock(&p->lock);
    pc_delivery_t *d = &p->dmeta;
    if (d->rounds == 0) {
        spare = p->delivered; /* empty: the round's buffer becomes delivered */
        p->delivered = buf;
        d->first = r;
        d->active_min = (int)active;
    } else if (p->cfg.mode == PCOLL_ACCUMULATE) {
        pc_reduce_sum(p->delivered, p->delivered, buf, p->count, p->dtype);
        spare = buf;
    } else {
        spare = p->delivered; /* REPLACE: the latest result wins */
        p->delivered = buf;
    }
    d->rounds++;
    d->last = r;
    d->active_last = (int)active;
    if ((int)active < d->active_min) d->active_min = (int)active;
    d->active_total += (uint64_t)active;
    d->contributions += (uint64_t)contribs;
    d->root_last = root;
    d->sync_last = (flags & PC_ROUND_SYNC) != 0;
    d->parked += (uint64_t)parked;
    if (spare) pc_partial_buffer_put(p, spare);
    atomic_store(&p->rounds_completed, r + 1);
    if (flags & PC_ROUND_FLUSH) atomic_fetch_add(&p->flushes_completed, 1);
    pthread_mutex_unlock(&p->lock);
    pc_engine_notify(p->engine);

    if (!(flags & PC_ROUND_FREE)) {
        if (!p->shm) pc_round_try_start(p);
        return;
    }
    /* the last round: say so on every link, then wait for the neighbours' FINs
     * (none in shared memory: nothing of this object travels in messages
     * there but arrivals at the leader, which end with FREE) */
    p->finishing = 1;
    if (p->shm) pc_engine_remove_poller(p->engine, &p->poller);
    pc_ctrl_msg_t fin = {PC_MSG_FIN, 0, r, p->me, 0};
    if (!p->shm)
        for (int k = 0; k < pc_act_ndims(p->P); k++)
            pc_round_send_ctrl(p, pc_act_peer(p->P, p->me, k), p->tag_activation, &fin);
    if (p->fins_pending == 0) { /* no links (P = 1), shared memory, or every FIN came first */
        atomic_store(&p->drained, 1);
        pc_engine_notify(p->engine);
    }
}
