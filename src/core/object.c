/* What every persistent object shares: see object.h. */
#include "object.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../util/log.h"
#include "stall.h"

int pc_object_init(pc_object_t *o, pcoll_t *ctx, const char *kind, int with_channel, const char *fn)
{
    memset(o, 0, sizeof *o);
    o->ctx = ctx;
    o->engine = ctx->engine;
    o->kind = kind;
    pc_fault_clear(&o->fault);
    atomic_init(&o->opened, 0);
    if (with_channel) return pc_ctx_alloc_channel(ctx, fn, &o->channel, &o->id);
    pthread_mutex_lock(&ctx->lock);
    o->id = ++ctx->objects_created;
    pthread_mutex_unlock(&ctx->lock);
    return PCOLL_SUCCESS;
}

void pc_object_fail(pc_object_t *o, int status, const char *fmt, ...)
{
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    pc_log(PCOLL_LOG_ERROR, "%s object %llu: %s", o->kind, (unsigned long long)o->id, what);
    pc_fault_set(&o->fault, status, "%s", what);
    pc_engine_notify(o->engine);
}

static void send_failed(pcoll_t *ctx, void *arg, int status, const char *why)
{
    (void)ctx;
    pc_object_fail(arg, status, "a control message could not be delivered: %s", why);
}

int pc_object_send(pc_object_t *o, int peer, void *msg, size_t bytes)
{
    return pc_service_send_object(o->ctx, peer, o->channel, o->id, msg, bytes, send_failed, o);
}

/* ---- open and close: tasks on the holder ---- */

static void open_task(pc_engine_t *e, void *arg)
{
    pc_object_t *o = arg;
    int rc = o->on_message ? pc_service_register_object(o->ctx, o->channel, o->id, o->on_message, o)
                           : PCOLL_SUCCESS;
    if (rc != PCOLL_SUCCESS)
        pc_object_fail(o, rc, "cannot register the object's messages");
    else if (o->on_open)
        o->on_open(o);
    atomic_store(&o->opened, 1);
    pc_engine_notify(e);
}

static void close_task(pc_engine_t *e, void *arg)
{
    pc_object_t *o = arg;
    if (o->on_message) pc_service_register_object(o->ctx, o->channel, 0, NULL, NULL);
    if (o->on_close) o->on_close(o);
    atomic_store(&o->opened, 0);
    pc_engine_notify(e);
}

static int is_open(void *arg) { return atomic_load(&((pc_object_t *)arg)->opened); }
static int is_closed(void *arg) { return !atomic_load(&((pc_object_t *)arg)->opened); }

static void describe(void *arg, pc_stall_probe_t *probe)
{
    pc_object_t *o = arg;
    pc_probe_what(probe, "setting up or taking down %s object %llu on this rank's progress engine", o->kind,
                  (unsigned long long)o->id);
}

/* A holder task, posted once and waited for as a blocking call (stall
 * reports, PCOLL_TIMEOUT_S).  The holder is this rank's own progress
 * engine, so a timeout means this process is starved, not that a peer is
 * gone: the task stays queued and will run; it is waited out (no timeout)
 * so that it runs exactly once and never after the object is freed.  The
 * blocking wait's status is returned. */
static int run_task(pc_object_t *o, pc_task_fn fn, pc_pred_fn done, const char *call)
{
    o->task.fn = fn;
    o->task.arg = o;
    pc_engine_post_task(o->engine, &o->task, 1);
    pc_wait_t w = {.fn = call, .done = done, .arg = o, .describe = describe, .describe_arg = o, .object = o->id, .channel = o->channel};
    int rc = pc_block(o->ctx, &w);
    if (!done(o)) pc_engine_wait(o->engine, done, o);
    return rc;
}

int pc_object_open(pc_object_t *o, const char *fn)
{
    int rc = run_task(o, open_task, is_open, fn);
    return rc != PCOLL_SUCCESS ? rc : pc_fault_raise(&o->fault, fn);
}

void pc_object_close(pc_object_t *o)
{
    if (!atomic_load(&o->opened)) return;
    (void)run_task(o, close_task, is_closed, "closing an object"); /* closed on return, timeout or not */
}

/* ---- the context's list ---- */

void pc_object_register(pc_object_t *o, void *object, int (*free_fn)(void *), int watches_blocks)
{
    o->link.object = object;
    o->link.free_fn = free_fn;
    o->link.watches_blocks = watches_blocks;
    pc_ctx_register_object(o->ctx, &o->link);
}

void pc_object_release(pc_object_t *o)
{
    if (o->link.free_fn) pc_ctx_unregister_object(o->ctx, &o->link);
    o->link.free_fn = NULL;
    if (o->channel) pc_ctx_free_channel(o->ctx, o->channel);
    o->channel = 0;
}
