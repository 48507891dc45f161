/* Blocked calls, counted once per context at the leader: see park.h. */
#include "park.h"

#include <stdlib.h>
#include <string.h>

#include "../core/service.h"
#include "../util/error.h"
#include "../util/log.h"
#include "policy.h"

typedef struct park_state {
    int attached;            /* objects that need it (application, ctx lock) */
    int opened;              /* holder: the handler is set */
    pc_park_ledger_t ledger; /* the leader, holder */
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

static void on_park(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    (void)arg;
    const park_msg_t *m = msg;
    if (bytes < sizeof *m || src < 0 || src >= ctx->size) return;
    pc_park_ledger_apply(&state(ctx)->ledger, src, m->delta, m->object, m->channel);
}

static void park_run(pc_engine_t *e, void *arg)
{
    (void)e;
    park_task_t *t = arg;
    pcoll_t *ctx = t->ctx;
    if (ctx->rank == PC_LEADER)
        pc_park_ledger_apply(&state(ctx)->ledger, ctx->rank, t->msg.delta, t->msg.object, t->msg.channel);
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
    pc_park_ledger_destroy(&ps->ledger);
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
        pc_park_ledger_init(&state(ctx)->ledger, ctx->size, ctx->tags.nchannels);
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
    return ps ? pc_park_ledger_watch(&ps->ledger, w) : PCOLL_ERR_STATE;
}

void pc_park_unwatch(pcoll_t *ctx, pc_park_watch_t *w)
{
    if (state(ctx)) pc_park_ledger_unwatch(&state(ctx)->ledger, w);
}

void pc_park_set_waiting(pcoll_t *ctx, pc_park_watch_t *w, int on)
{
    if (state(ctx)) pc_park_ledger_set_waiting(&state(ctx)->ledger, w, on);
}

int pc_park_elsewhere(pcoll_t *ctx, const pc_park_watch_t *w, int rank)
{
    return state(ctx) && pc_park_ledger_elsewhere(&state(ctx)->ledger, w, rank);
}
