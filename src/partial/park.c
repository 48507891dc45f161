/* Blocked calls, counted once per context at the leader: see park.h. */
#include "park.h"

#include <stdlib.h>
#include <string.h>

#include "../core/service.h"
#include "../util/error.h"
#include "../util/log.h"
#include "policy.h"

typedef struct park_state {
    int attached;              /* objects that need it (application, ctx lock) */
    int opened;                /* holder: the handler is set */
    /* the leader, holder */
    int *blocked;              /* blocking calls of each rank */
    pc_park_watch_t **watches; /* by channel */
    pc_park_watch_t *waiting;  /* watches with a rank waiting */
} park_state_t;

typedef struct park_msg {
    pc_svc_head_t head; /* PC_SVC_PARK */
    int32_t delta;
    int32_t pad;
    uint64_t object;    /* the object the call is about, 0: none */
    uint32_t channel;   /* and its channel */
    uint32_t pad2;
} park_msg_t;

typedef struct park_task {
    pc_task_t task;
    pcoll_t *ctx;
    park_msg_t msg;
} park_task_t;

static park_state_t *state(pcoll_t *ctx) { return ctx->partial; }

/* ---- the leader ---- */

static void apply(pcoll_t *ctx, int src, int delta, uint64_t object, uint32_t channel)
{
    park_state_t *ps = state(ctx);
    if (!ps->blocked) return; /* no object ever watched here */
    ps->blocked[src] += delta;
    if (ps->blocked[src] < 0) ps->blocked[src] = 0;
    /* a call about an object that is gone here (freed since) counts only
     * in blocked[]: the id tells a reused channel apart */
    pc_park_watch_t *w = object && ps->watches && channel < ctx->tags.nchannels ? ps->watches[channel] : NULL;
    if (w && w->object == object) {
        w->own[src] += delta;
        if (w->own[src] < 0) w->own[src] = 0;
    }
    /* only objects with a rank waiting can decide differently now */
    for (pc_park_watch_t *x = ps->waiting, *next; x; x = next) {
        next = x->next_waiting; /* a decision may take x off the list */
        x->decide(x->arg);
    }
}

static void on_park(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    (void)arg;
    const park_msg_t *m = msg;
    if (bytes < sizeof *m || src < 0 || src >= ctx->size) return;
    apply(ctx, src, m->delta, m->object, m->channel);
}

static void park_run(pc_engine_t *e, void *arg)
{
    (void)e;
    park_task_t *t = arg;
    pcoll_t *ctx = t->ctx;
    if (ctx->rank == PC_LEADER)
        apply(ctx, ctx->rank, t->msg.delta, t->msg.object, t->msg.channel);
    else if (pc_service_send(ctx, PC_LEADER, &t->msg, sizeof t->msg, NULL, NULL) != PCOLL_SUCCESS)
        pc_log(PCOLL_LOG_ERROR, "partial: a blocked call could not be reported to the leader");
    free(t);
}

/* The context's hook: a blocking call begins (1) or ends (-1). */
static void block_hook(pcoll_t *ctx, void *arg, int delta, uint64_t object, uint32_t channel)
{
    (void)arg;
    park_task_t *t = malloc(sizeof *t);
    if (!t) {
        pc_log(PCOLL_LOG_ERROR, "partial: no memory to report a blocked call to the leader");
        return;
    }
    memset(t, 0, sizeof *t);
    t->ctx = ctx;
    t->msg.head.type = PC_SVC_PARK;
    t->msg.delta = delta;
    t->msg.object = object;
    t->msg.channel = channel;
    t->task.fn = park_run;
    t->task.arg = t;
    pc_engine_post_task(ctx->engine, &t->task, 0); /* park_run frees it */
}

static void free_state(void *arg)
{
    park_state_t *ps = arg;
    if (!ps) return;
    free(ps->blocked);
    free(ps->watches);
    free(ps);
}

int pc_park_attach(pcoll_t *ctx, const char *fn)
{
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->partial) {
        if (!(ctx->partial = calloc(1, sizeof(park_state_t)))) {
            pthread_mutex_unlock(&ctx->lock);
            return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the partial objects' state");
        }
        ctx->partial_free = free_state;
    }
    state(ctx)->attached++;
    pthread_mutex_unlock(&ctx->lock);
    pc_ctx_set_block_hook(ctx, block_hook, NULL);
    return PCOLL_SUCCESS;
}

void pc_park_detach(pcoll_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    if (ctx->partial) state(ctx)->attached--;
    pthread_mutex_unlock(&ctx->lock);
}

void pc_park_open(pcoll_t *ctx)
{
    park_state_t *ps = state(ctx);
    if (!ps || ps->opened) return;
    ps->opened = 1;
    pc_service_handle(ctx, PC_SVC_PARK, on_park, NULL);
}

int pc_park_watch(pcoll_t *ctx, pc_park_watch_t *w)
{
    park_state_t *ps = state(ctx);
    if (!ps) return -1;
    if (!ps->blocked && !(ps->blocked = calloc((size_t)ctx->size, sizeof(int)))) return -1;
    if (!ps->watches && !(ps->watches = calloc(ctx->tags.nchannels, sizeof *ps->watches))) return -1;
    if (!(w->own = calloc((size_t)ctx->size, sizeof(int)))) return -1;
    w->waiting = 0;
    w->next_waiting = NULL;
    ps->watches[w->channel] = w;
    return 0;
}

void pc_park_unwatch(pcoll_t *ctx, pc_park_watch_t *w)
{
    park_state_t *ps = state(ctx);
    if (!ps || !ps->watches || ps->watches[w->channel] != w) return;
    pc_park_set_waiting(ctx, w, 0);
    ps->watches[w->channel] = NULL;
    free(w->own);
    w->own = NULL;
}

void pc_park_set_waiting(pcoll_t *ctx, pc_park_watch_t *w, int on)
{
    park_state_t *ps = state(ctx);
    if (!ps || w->waiting == (on != 0)) return;
    if (on) {
        w->next_waiting = ps->waiting;
        ps->waiting = w;
    } else {
        for (pc_park_watch_t **pp = &ps->waiting; *pp; pp = &(*pp)->next_waiting)
            if (*pp == w) {
                *pp = w->next_waiting;
                break;
            }
        w->next_waiting = NULL;
    }
    w->waiting = on != 0;
}

int pc_park_elsewhere(pcoll_t *ctx, const pc_park_watch_t *w, int rank)
{
    park_state_t *ps = state(ctx);
    return ps && ps->blocked && w->own && ps->blocked[rank] > w->own[rank];
}
