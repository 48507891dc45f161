/*
 * What every persistent object shares: partial objects (eager-SGD's kinds,
 * WAGMA's group rounds), dynamic-group (preduce) objects and fusion
 * executors.  Each kind embeds a pc_object_t and keeps only what is its
 * own.
 *
 *   create (collective, every rank in the same order)
 *     pc_object_init        identity: a channel and an id, the same at every
 *                           rank (objects that send control messages)
 *     ... the kind's own setup, agreed on (agree.h) ...
 *     pc_object_open        holder task: the object's service messages go
 *                           to on_message, then the kind's on_open; the
 *                           application waits (stall reports, timeout)
 *     pc_object_register    the context's list: finalize frees what the
 *                           application left
 *   use
 *     pc_object_send        holder: a control message; one that cannot be
 *                           delivered fails the object
 *     pc_object_fail        any thread: the object fails; every later call
 *                           on it says why (pc_fault_raise(&o->fault, fn))
 *   free (collective)
 *     pc_object_close       holder task: no more messages, the kind's on_close
 *     pc_object_release     off the context's list, the channel given back
 */
#ifndef PC_CORE_OBJECT_H
#define PC_CORE_OBJECT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/error.h"
#include "context.h"
#include "service.h"

typedef struct pc_object pc_object_t;

/* The object of a kind from its base (the argument of the handlers). */
#define pc_object_of(ptr, type) ((type *)((char *)(ptr) - offsetof(type, base)))

struct pc_object {
    pcoll_t *ctx;
    pc_engine_t *engine;
    const char *kind;         /* "partial", "preduce", "fusion": in messages */
    uint32_t channel;         /* engine/tags.h; 0: none (no control messages) */
    uint64_t id;              /* the context's object number, the same at every rank */
    pc_fault_t fault;         /* the object failed: every call says why */
    pc_object_link_t link;    /* on the context's list while registered */
    /* the kind's side, on the token holder */
    pc_svc_fn on_message;     /* its service messages (NULL: none); arg: the base */
    void (*on_open)(pc_object_t *o);  /* after the messages are routed here */
    void (*on_close)(pc_object_t *o); /* after they stopped */
    pc_task_t task;           /* open / close */
    atomic_int opened;
};

/* Collective (every rank creates objects in the same order): the identity
 * (with_channel: a channel for control messages and round tags) and a
 * clear fault.  PCOLL_ERR_LIMIT (message set) when no channel is left. */
int pc_object_init(pc_object_t *o, pcoll_t *ctx, const char *kind, int with_channel, const char *fn);
/* Application: the holder routes the object's messages to on_message (arg:
 * the object) and runs on_open; waits for it as a blocking call.  Returns
 * the object's fault, if it failed meanwhile. */
int pc_object_open(pc_object_t *o, const char *fn);
/* Application: no more messages; the holder runs on_close. */
void pc_object_close(pc_object_t *o);
/* On the context's list: finalize frees it with free_fn(object). */
void pc_object_register(pc_object_t *o, void *object, int (*free_fn)(void *), int watches_blocks);
/* Off the list (if on it), the channel given back (if any). */
void pc_object_release(pc_object_t *o);

/* Any thread: the object fails (the first failure wins), logged, and the
 * threads waiting in its calls are woken. */
void pc_object_fail(pc_object_t *o, int status, const char *fmt, ...) PC_PRINTF(3, 4);
/* Holder: sends one of the object's control messages (its head set here);
 * a message that cannot be delivered fails the object. */
int pc_object_send(pc_object_t *o, int peer, void *msg, size_t bytes);

#endif
