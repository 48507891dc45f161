/*
 * Partial allreduce objects (DESIGN section 4): the state shared by
 *   partial.c  the public calls (application thread),
 *   round.c    activations and rounds (the engine's token holder: the
 *              progress thread, or an application thread blocked in pcoll),
 *   leader.c   arrivals at the leader: quorum, synchronous rounds, flush, free.
 *
 * Buffers hold count elements plus a two-element trailer in the same type:
 * [active, contributions].  A rank writes 1/0 and its number of contributions
 * there when a round takes its pending buffer; after the allreduce the trailer
 * holds the round's totals.  No buffer is ever cleared: `pending` with no
 * contribution and `delivered` with no round are zero by definition, so the
 * first contribution is copied (not added) and results are copied out once;
 * zeros are written only when a round takes from a rank with nothing pending.
 *
 * Locking: `lock` guards the fields marked (L).  The application never holds it
 * while copying data, so the token holder never waits on the application for
 * longer than a few pointer swaps.  Fields marked (P) belong to the token
 * holder ("progress thread" below) alone.
 */
#ifndef PC_PARTIAL_INTERNAL_H
#define PC_PARTIAL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../core/context.h"
#include "../engine/sched.h"
#include "pcoll.h"
#include "node_rounds.h"

#define PC_LEADER 0 /* rank that coordinates quorum, synchronous rounds, flush and free */

/* round flags, carried in activation messages */
enum { PC_ROUND_SYNC = 1, PC_ROUND_FLUSH = 2, PC_ROUND_FREE = 4, PC_ROUND_STANDIN = 8 };

/* control messages */
enum {
    PC_MSG_ACTIVATE = 1, /* round, flags, root, [counted ranks]             */
    PC_MSG_FIN = 2,      /* the sender's last message on a link             */
    PC_MSG_WAIT = 3,     /* to the leader: my application waits for round  */
    PC_MSG_FLUSH = 4,    /* to the leader: I am in flush number `round`    */
    PC_MSG_FREE = 5,     /* to the leader: I am freeing the object         */
    PC_MSG_PARK = 6,     /* to the leader: my application is blocked in
                            another pcoll call (round = 1) / no longer (0) */
};
enum { PC_CTRL_ACTIVATION = 0, PC_CTRL_ARRIVAL = 1 }; /* control tag kinds */

/* An activation from the leader carries, after the header, a bitmap of the
 * ranks it counted as arrived because they were parked in another call:
 * those ranks count themselves active in that round, so that the leader's
 * count and the ranks' own reports agree (quorum's guarantee stays exact). */
typedef struct pc_ctrl_msg {
    uint32_t type;  /* PC_MSG_* */
    uint32_t flags; /* PC_ROUND_* (activation) */
    uint64_t round; /* round number, flush epoch, or park state */
    int32_t root;   /* initiator (activation) or sender (arrival) */
    int32_t counted; /* activation: 1 if the bitmap follows */
} pc_ctrl_msg_t;

/* what a round's result adds to the delivered buffer's description */
typedef struct pc_delivery {
    uint64_t rounds, first, last;
    int active_last, active_min;
    uint64_t active_total, contributions;
    int root_last, sync_last;
    uint64_t parked; /* rounds that counted this rank as parked elsewhere */
} pc_delivery_t;

/* activation state of one round; rounds r and r + 2 share a slot (at most two
 * rounds are ever in play at a rank: the one running and the next) */
typedef struct pc_act_slot {
    uint64_t round;
    int activated;
    int root;
    uint32_t flags;
    uint64_t used_links;    /* links this rank already forwarded on */
    int has_counted;
    unsigned char *counted; /* (P + 7) / 8 bytes: ranks counted as parked */
} pc_act_slot_t;

typedef struct pc_leader pc_leader_t;

struct pcoll_partial {
    pcoll_t *ctx;
    pc_engine_t *engine;
    int P, me;
    size_t count;
    pcoll_dtype_t dtype;
    size_t esize, bytes; /* bytes = (count + 2) * esize */
    pcoll_partial_config_t cfg;
    uint32_t channel;
    int tag_activation, tag_arrival;
    size_t bitmap_bytes;    /* (P + 7) / 8 */
    size_t act_msg_bytes;   /* header + bitmap */
    int needs_park;         /* rounds can wait for other ranks' arrivals:
                               MAJORITY, QUORUM, or sync_every > 0 */
    pc_partial_link_t link; /* in the context's list of live objects */

    /* ---- shared with the application ---- */
    pthread_mutex_t lock;
    void *pending;              /* (L) contributions not yet taken           */
    uint64_t pending_contribs;  /* (L) contributions in `pending` (0: it is
                                       zero, whatever its bytes; REPLACE:
                                       contributions ever made)             */
    int adding;                 /* (L) the application is writing `pending`  */
    int start_deferred;         /* (L) a round waits for `adding` to clear   */
    uint64_t waiting_from;      /* (L) the application waits in the library
                                       for rounds >= this (UINT64_MAX: not)  */
    int app_busy;               /* (L) a call is in progress (one thread)    */
    void *delivered;            /* (L) results not yet collected             */
    pc_delivery_t dmeta;        /* (L) what `delivered` holds                */
    void **pool;                /* (L) zeroed spare buffers                  */
    int npool, cappool;
    uint64_t activated_upto;    /* (L) rounds < this are activated here      */
    uint64_t rounds_started;    /* (L) rounds whose data phase began here    */
    pcoll_round_observer_t observer; /* (L) */
    void *observer_arg;              /* (L) */
    uint64_t flush_calls;       /* application side: flushes called          */
    atomic_ullong rounds_completed; /* written under (L), read lock-free     */
    atomic_ullong flushes_completed;
    atomic_int drained;         /* the object's traffic has ended here (free) */

    /* ---- progress thread ---- */
    pc_act_slot_t slot[2];   /* (P) */
    pc_sched_t *sched;       /* (P) the data phase: an allreduce in place     */
    pc_node_rounds_t *shm;   /* rounds in node-shared memory (node_rounds.h):
                                then neither slots, sched nor activation
                                messages are used                            */
    pc_poller_t poller;      /* (P) completes node-shared rounds here         */
    void *round_buf;         /* (P) the running round's buffer                */
    uint64_t running_round;  /* (P) */
    int running;             /* (P) */
    uint32_t running_flags;  /* (P) */
    int running_root;        /* (P) */
    int running_parked;      /* (P) this rank was counted as parked elsewhere */
    pc_ctrl_msg_t *act_in;   /* (P) activation listener's buffer (+ bitmap)   */
    int closing;             /* (P) free started here: no more parking        */
    int finishing;           /* (P) final round done: collecting FIN messages */
    uint64_t fins_pending;   /* (P) links whose FIN has not arrived (mask)    */
    pc_leader_t *leader;     /* (P) only at PC_LEADER                         */
};

/* ---- round.c (progress thread unless noted) ---- */
int pc_round_open(pcoll_partial_t *p);          /* posts the listeners (task) */
void pc_round_arrive(pcoll_partial_t *p, uint64_t round); /* the app waits for `round` */
/* counted: the leader's bitmap of ranks counted as parked, or NULL */
void pc_round_activate(pcoll_partial_t *p, uint64_t round, int root, uint32_t flags, const unsigned char *counted,
                       int from_link);
void pc_round_try_start(pcoll_partial_t *p);
int pc_round_is_sync(const pcoll_partial_t *p, uint64_t round);
int pc_round_send_ctrl(pcoll_partial_t *p, int peer, int tag, const pc_ctrl_msg_t *m);
void pc_round_kick(pc_engine_t *e, void *arg); /* task: retry a deferred start */
int pc_round_poll(pc_engine_t *e, void *arg);  /* poller: node-shared rounds done? */

/* ---- leader.c (progress thread, but alloc and destroy) ---- */
int pc_leader_alloc(pcoll_partial_t *p);   /* at create, on the leader rank */
void pc_leader_listen(pcoll_partial_t *p);  /* posts the arrival receive */
void pc_leader_destroy(pcoll_partial_t *p);
/* An arrival (WAIT, FLUSH, FREE) from rank `from`, local or by message. */
void pc_leader_arrival(pcoll_partial_t *p, const pc_ctrl_msg_t *m);
/* The leader learnt that `round` is activated, with these flags. */
void pc_leader_round_activated(pcoll_partial_t *p, uint64_t round, uint32_t flags);
/* Node-shared rounds: learn the rounds other ranks activated. */
void pc_leader_catch_up(pcoll_partial_t *p);
/* Sends an arrival to the leader, or handles it locally at the leader. */
void pc_leader_notify(pcoll_partial_t *p, uint32_t type, uint64_t round);

/* Progress thread (the context's park callback): this rank's application
 * blocks in (parked = 1) or leaves (0) a pcoll call on something else. */
void pc_partial_park(void *object, int parked);

/* ---- partial.c ---- */
void *pc_partial_buffer_get(pcoll_partial_t *p);        /* (L) held: a spare buffer  */
void pc_partial_buffer_put(pcoll_partial_t *p, void *b); /* (L) held */
void pc_trailer_set(pcoll_partial_t *p, void *buf, int64_t active, int64_t contributions);
void pc_trailer_get(const pcoll_partial_t *p, const void *buf, int64_t *active, int64_t *contributions);
int pc_partial_initiator_of(const pcoll_partial_t *p, uint64_t round);

#endif
