/*
 * A dynamic-group (preduce) object: the state that the public calls
 * (preduce.c, application thread) and the group protocol (protocol.c,
 * token holder) share.  Who reduces with whom is decided in
 * groups/controller.c (pure); Ripples' static schedule in
 * groups/static_schedule.c; the specs in spec.c.
 *
 * Locking: `lock` guards the mailbox and gen_stats, written by the holder
 * and read by the application.
 */
#ifndef PC_PREDUCE_OBJECT_H
#define PC_PREDUCE_OBJECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../core/object.h"
#include "../groups/controller.h"
#include "../util/nodes.h"
#include "pcoll.h"

enum { PR_READY = 1, PR_DONE = 2, PR_FIN = 3, PR_GROUP = 4, PR_FINISHED = 5 };

typedef struct pr_msg {
    pc_svc_head_t head;
    uint32_t kind;
    int32_t n;     /* GROUP: members, listed after */
    uint64_t a;    /* READY: iteration; DONE, GROUP: group id */
    uint64_t b;    /* GROUP: iteration after */
    double weight; /* GROUP: the receiver's */
    int32_t members[];
} pr_msg_t;

struct pcoll_preduce {
    pc_object_t base;    /* identity, messages, open / close, failure */
    int P, me, ctl;
    size_t count, esize, bytes;
    pcoll_dtype_t dtype;
    pcoll_preduce_config_t cfg;
    const pc_nodes_t *nodes; /* the context's node map */
    pc_gen_t *gen;       /* the controller's rank only (holder) */
    pr_msg_t *out_msg;   /* holder: the GROUP being sent */
    size_t max_msg;

    /* the mailbox: written by the holder, read by the application */
    pthread_mutex_t lock;
    int has_group, finished, all_finished;
    uint64_t gid, giter;
    double gweight;
    int gn;
    int *gmembers;
    pc_gen_stats_t gen_stats; /* the controller's, after its last event */

    /* the application's */
    int busy;
    uint64_t calls;
    int *members;
    int fin_sent;
    int ready_out;       /* a READY is out, no group taken yet */
    int drained;         /* pcoll_preduce_drain ran: only free is left */
    void *last;          /* controller policies: the model of the last call */
    double t_open;
    _Atomic double busy_s; /* holder: time in decisions */
};

/* ---- spec.c ---- */
const char *pc_preduce_policy_name(pcoll_preduce_policy_t p);
/* The controller's configuration for an object's config over P ranks
 * (nodes: the ranks' nodes, used by inter_intra); pure, for the object's
 * controller and pcoll-sim's. */
pc_gen_config_t pc_preduce_gen_config(const pcoll_preduce_config_t *c, int P, const pc_nodes_t *nodes);

/* ---- protocol.c ---- */
/* The object's handlers and the controller (on the controller's rank);
 * 0, or -1 without memory. */
int pc_preduce_protocol_init(pcoll_preduce_t *o);
/* Application: a message to the controller, sent by the holder. */
int pc_preduce_to_controller(pcoll_preduce_t *o, uint32_t kind, uint64_t a);
/* Application: waits until *flag is set (or, any_mail, a group is in the
 * mailbox), as a blocking call with stall reports and a timeout. */
int pc_preduce_wait(pcoll_preduce_t *o, int *flag, int any_mail, const char *fn);
/* Application: a group is in the mailbox */
int pc_preduce_has_group(pcoll_preduce_t *o);
/* Application: takes the mailbox's group into o->members; its size. */
int pc_preduce_take_group(pcoll_preduce_t *o, uint64_t *gid, double *weight, uint64_t *iter);

double pc_preduce_now(void);

#endif
