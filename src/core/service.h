/*
 * The context's service channel: every small control message of a context
 * (HELLOs of group operations, stall queries and answers, the control
 * messages of persistent objects) travels on one tag, channel 0's control
 * tag (engine/tags.h), and one receive per rank listens for all of them, so
 * the receives a rank keeps posted do not grow with the number of objects.
 *
 *   sender (token holder)                    receiver (token holder)
 *   pc_service_send(ctx, peer, msg, bytes)   listener (MPI_ANY_SOURCE)
 *     msg starts with pc_svc_head_t   ---->    by head.type: the handler set
 *                                              with pc_service_handle, or for
 *                                              PC_SVC_OBJECT the object
 *                                              registered on head.channel
 *                                              (if head.object matches)
 *
 * Messages from one rank are handled in the order it sent them (one tag, and
 * MPI does not let messages overtake each other).  A message for an object
 * this rank does not know (freed, or a stray) is dropped: objects end their
 * traffic before they are freed, so only a bug produces one.
 */
#ifndef PC_CORE_SERVICE_H
#define PC_CORE_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "pcoll.h"

enum {
    PC_SVC_HELLO = 1,  /* core/hello.c: a member's receive id          */
    PC_SVC_QUERY = 2,  /* core/stall.c: what are you waiting for?      */
    PC_SVC_ANSWER = 3, /* core/stall.c                                 */
    PC_SVC_OBJECT = 4, /* a persistent object's control message        */
    PC_SVC_PARK = 5,   /* partial/park.c: blocked in a call, or not    */
    PC_SVC_SHRINK = 6, /* core/shrink.c: a view of the survivors       */
    PC_SVC_NTYPES = 7
};

typedef struct pc_svc_head {
    uint32_t type;    /* PC_SVC_* */
    uint32_t channel; /* PC_SVC_OBJECT: the object's channel */
    uint64_t object;  /* PC_SVC_OBJECT: the object's id (a stray check) */
} pc_svc_head_t;

/* A handler runs on the token holder; msg is valid during the call. */
typedef void (*pc_svc_fn)(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes);

typedef struct pc_service pc_service_t;

/* At pcoll_init: max_bytes is the largest message any rank will send. */
int pc_service_create(pcoll_t *ctx, size_t max_bytes, pc_service_t **out);
void pc_service_destroy(pc_service_t *s); /* after the engine stopped */
/* Holder: post the listener (once, from a task at init). */
void pc_service_open(pcoll_t *ctx);
/* Holder: who handles a message type (not PC_SVC_OBJECT). */
void pc_service_handle(pcoll_t *ctx, uint32_t type, pc_svc_fn fn, void *arg);
/* Holder: the handler of an object's messages (fn NULL: none any more). */
int pc_service_register_object(pcoll_t *ctx, uint32_t channel, uint64_t object, pc_svc_fn fn, void *arg);
/* Called when a service message could not be delivered: status and what
 * failed (MPI's words). */
typedef void (*pc_svc_failed_fn)(pcoll_t *ctx, void *arg, int status, const char *why);
/* Holder: the argument an object registered with (NULL: no such object). */
void *pc_service_object(pcoll_t *ctx, uint32_t channel, uint64_t object);
/* Holder: sends a copy of msg (bytes <= the context's maximum) to peer.  A
 * send that cannot be posted returns its status (and calls nothing); one
 * that fails later calls failed(ctx, arg, ...) (NULL: logged only). */
int pc_service_send(pcoll_t *ctx, int peer, const void *msg, size_t bytes, pc_svc_failed_fn failed, void *arg);
/* Holder: pc_service_send of an object's message, whose head (the start of
 * msg) is set here to PC_SVC_OBJECT, channel and object.  A send that cannot
 * be posted calls failed too (why: the peer and MPI's words) and returns its
 * status. */
int pc_service_send_object(pcoll_t *ctx, int peer, uint32_t channel, uint64_t object, void *msg, size_t bytes,
                           pc_svc_failed_fn failed, void *arg);
/* The largest message. */
size_t pc_service_max_bytes(const pcoll_t *ctx);

#endif
