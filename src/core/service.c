/* The context's service channel: see service.h. */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/log.h"
#include "context.h"

typedef struct handler {
    pc_svc_fn fn;
    void *arg;
} handler_t;

typedef struct object_entry {
    pc_svc_fn fn;
    void *arg;
    uint64_t object;
} object_entry_t;

struct pc_service {
    size_t max_bytes;
    void *buf;                 /* the listener's */
    int tag;
    int failures;              /* the listener's failures in a row */
    handler_t handlers[PC_SVC_NTYPES];
    object_entry_t *objects;   /* by channel, allocated at the first */
    uint32_t nobjects;
};

typedef struct sent {
    pcoll_t *ctx;
    pc_svc_failed_fn failed;
    void *arg;
    int peer;
    /* the message follows */
} sent_t;

int pc_service_create(pcoll_t *ctx, size_t max_bytes, pc_service_t **out)
{
    pc_service_t *s = calloc(1, sizeof *s);
    if (!s) return PCOLL_ERR_NOMEM;
    s->max_bytes = max_bytes < sizeof(pc_svc_head_t) ? sizeof(pc_svc_head_t) : max_bytes;
    /* 8-byte aligned for the handlers' structs */
    s->buf = malloc((s->max_bytes + 7) / 8 * 8);
    if (!s->buf) {
        free(s);
        return PCOLL_ERR_NOMEM;
    }
    s->tag = pc_tag_ctrl(&ctx->tags, 0, 0);
    *out = s;
    return PCOLL_SUCCESS;
}

void pc_service_destroy(pc_service_t *s)
{
    if (!s) return;
    free(s->buf);
    free(s->objects);
    free(s);
}

size_t pc_service_max_bytes(const pcoll_t *ctx) { return ctx->service->max_bytes; }

static void post_listener(pcoll_t *ctx);

static void dispatch(pcoll_t *ctx, int src, const void *msg, size_t bytes)
{
    pc_service_t *s = ctx->service;
    if (bytes < sizeof(pc_svc_head_t)) {
        pc_log(PCOLL_LOG_ERROR, "service: a message of %zu bytes from rank %d is too short", bytes, src);
        return;
    }
    const pc_svc_head_t *h = msg;
    if (h->type == PC_SVC_OBJECT) {
        object_entry_t *o = h->channel < s->nobjects ? &s->objects[h->channel] : NULL;
        if (o && o->fn && o->object == h->object)
            o->fn(ctx, o->arg, src, msg, bytes);
        else
            PC_DEBUG("service: dropped a message from rank %d for object %llu on channel %u (not here)", src,
                     (unsigned long long)h->object, h->channel);
        return;
    }
    if (h->type >= PC_SVC_NTYPES || !s->handlers[h->type].fn) {
        pc_log(PCOLL_LOG_ERROR, "service: message type %u from rank %d has no handler", h->type, src);
        return;
    }
    s->handlers[h->type].fn(ctx, s->handlers[h->type].arg, src, msg, bytes);
}

static void on_message(pc_engine_t *e, void *arg, int status, const MPI_Status *st)
{
    pcoll_t *ctx = arg;
    pc_service_t *s = ctx->service;
    if (status != PCOLL_SUCCESS) {
        pc_log(PCOLL_LOG_ERROR, "service: %s", pc_engine_msg_error(e));
        if (++s->failures >= 100) {
            pc_log(PCOLL_LOG_ERROR, "service: the listener failed 100 times in a row; it stops");
            return;
        }
    } else {
        s->failures = 0;
        int count = 0;
        MPI_Get_count(st, MPI_BYTE, &count);
        dispatch(ctx, st->MPI_SOURCE, s->buf, (size_t)count);
    }
    post_listener(ctx);
}

static void post_listener(pcoll_t *ctx)
{
    pc_service_t *s = ctx->service;
    int rc = pc_engine_irecv(ctx->engine, s->buf, s->max_bytes, MPI_ANY_SOURCE, s->tag, 1, on_message, ctx);
    if (rc != PCOLL_SUCCESS)
        pc_log(PCOLL_LOG_ERROR, "service: cannot post the listener: %s", pc_engine_msg_error(ctx->engine));
}

void pc_service_open(pcoll_t *ctx) { post_listener(ctx); }

void pc_service_handle(pcoll_t *ctx, uint32_t type, pc_svc_fn fn, void *arg)
{
    if (type >= PC_SVC_NTYPES || type == PC_SVC_OBJECT) return;
    ctx->service->handlers[type].fn = fn;
    ctx->service->handlers[type].arg = arg;
}

int pc_service_register_object(pcoll_t *ctx, uint32_t channel, uint64_t object, pc_svc_fn fn, void *arg)
{
    pc_service_t *s = ctx->service;
    if (channel >= ctx->tags.nchannels) return PCOLL_ERR_INTERNAL;
    if (!s->objects) {
        if (!(s->objects = calloc(ctx->tags.nchannels, sizeof *s->objects))) return PCOLL_ERR_NOMEM;
        s->nobjects = ctx->tags.nchannels;
    }
    s->objects[channel].fn = fn;
    s->objects[channel].arg = arg;
    s->objects[channel].object = object;
    return PCOLL_SUCCESS;
}

void *pc_service_object(pcoll_t *ctx, uint32_t channel, uint64_t object)
{
    pc_service_t *s = ctx->service;
    if (channel >= s->nobjects || !s->objects[channel].fn || s->objects[channel].object != object) return NULL;
    return s->objects[channel].arg;
}

static void on_sent(pc_engine_t *e, void *arg, int status, const MPI_Status *st)
{
    (void)st;
    sent_t *m = arg;
    if (status != PCOLL_SUCCESS) {
        const pc_svc_head_t *h = (const pc_svc_head_t *)(m + 1);
        pc_log(PCOLL_LOG_ERROR, "service: a message of type %u to rank %d failed: %s", h->type, m->peer,
               pc_engine_msg_error(e));
        if (m->failed) m->failed(m->ctx, m->arg, status, pc_engine_msg_error(e));
    }
    free(m);
}

int pc_service_send(pcoll_t *ctx, int peer, const void *msg, size_t bytes, pc_svc_failed_fn failed, void *arg)
{
    if (bytes > ctx->service->max_bytes) return PCOLL_ERR_INTERNAL;
    sent_t *m = malloc(sizeof *m + bytes);
    if (!m) return PCOLL_ERR_NOMEM;
    m->ctx = ctx;
    m->failed = failed;
    m->arg = arg;
    m->peer = peer;
    memcpy(m + 1, msg, bytes);
    int rc = pc_engine_isend(ctx->engine, m + 1, bytes, peer, ctx->service->tag, on_sent, m);
    if (rc != PCOLL_SUCCESS) {
        pc_log(PCOLL_LOG_ERROR, "service: %s", pc_engine_msg_error(ctx->engine));
        free(m);
    }
    return rc;
}

int pc_service_send_object(pcoll_t *ctx, int peer, uint32_t channel, uint64_t object, void *msg, size_t bytes,
                           pc_svc_failed_fn failed, void *arg)
{
    pc_svc_head_t *head = msg;
    head->type = PC_SVC_OBJECT;
    head->channel = channel;
    head->object = object;
    int rc = pc_service_send(ctx, peer, msg, bytes, failed, arg);
    if (rc != PCOLL_SUCCESS && failed) {
        char why[320];
        snprintf(why, sizeof why, "to rank %d: %s", peer, pc_engine_msg_error(ctx->engine));
        failed(ctx, arg, rc, why);
    }
    return rc;
}
