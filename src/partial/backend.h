/*
 * Data-phase backends of partial rounds: where a rank's pending
 * contribution lives, how an activated round takes every rank's part and
 * sums them, and how the result reaches each rank.  One is chosen when the
 * object is created and used through this interface only:
 *
 *   backend_shm.c   pending buffers, activation records and results in
 *                   node-shared memory; any rank of a node takes its parts
 *                   and sums; no messages inside a node; when the ranks
 *                   span nodes, the node leaders pass activations on and
 *                   add the node sums up by messages (internode.c)
 *   backend_msg.c   anything else (every node has one rank, the object is
 *                   too large, or GROUP objects across nodes): pending in
 *                   process memory, activation broadcast over links
 *                   (links.c), per round an allreduce schedule over the
 *                   round's members (all ranks, or the rank's group:
 *                   pc_policy_members), FIN at the end
 *
 *   driver (driver.c)                       backend
 *   -----------------                       -------
 *   contribute / waiting / want   ----->    (application thread)
 *   activate(round, root, flags)  ----->    (token holder)
 *                                 <-----    env.activated: first activation
 *                                           of a round seen here
 *                                 <-----    env.completed: a round's result
 *   close(last round)             ----->
 *                                 <-----    env.drained: no traffic left
 *
 * A round's data is count + PC_TRAILER elements of the object's type: the
 * contribution, then a trailer [active, contributions] that each rank fills
 * for its part and the sum totals (pc_trailer_*).
 */
#ifndef PC_PARTIAL_BACKEND_H
#define PC_PARTIAL_BACKEND_H

/* The elements after a round's contribution: [active, contributions]. */
#define PC_TRAILER 2

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../core/context.h"
#include "../core/object.h"
#include "../core/service.h"
#include "../engine/progress.h"
#include "pcoll.h"
#include "policy.h"

/* Every control message of an object starts with this; the driver fills
 * the head and routes types >= PC_MSG_BACKEND to the backend. */
typedef struct pc_obj_msg {
    pc_svc_head_t head; /* PC_SVC_OBJECT, the object's channel and id */
    uint32_t type;      /* PC_MSG_* */
    uint32_t flags;     /* PC_ROUND_* (policy.h) */
    uint64_t round;
    int32_t root;       /* initiator, or sender */
    int32_t counted;    /* 1: a bitmap of P bits follows */
    uint32_t epoch;     /* the sender's view (backend_msg.c; 0: the first) */
    uint32_t back;      /* NODESUM: the node sums go back to the leaders'
                           allreduce from round + back on (0: not decided) */
} pc_obj_msg_t;

enum {
    PC_MSG_WAIT = 1,      /* to the leader: my application waits for round */
    PC_MSG_FLUSH = 2,     /* to the leader: I am flushing                   */
    PC_MSG_FREE = 3,      /* to the leader: I am freeing the object         */
    PC_MSG_BACKEND = 16,  /* and above: the backend's own                   */
    PC_MSG_ACTIVATE = 16, /* links.h: round, flags, root, [counted]         */
    PC_MSG_FIN = 17,      /* links.h: the sender's last message on a link   */
    PC_MSG_PING = 18,     /* backend_msg.c, backend_shm.c (another node): are you alive? (round: a number) */
    PC_MSG_PONG = 19,     /* the answer (round: the ping's number)          */
    PC_MSG_SUSPECT = 20,  /* to the coordinator: rank root is silent        */
    PC_MSG_FREEZE = 21,   /* a new view (epoch; bitmap: its left-out ranks) */
    PC_MSG_JOIN = 22,     /* to the coordinator: take me back               */
    PC_MSG_READY = 23,    /* to the coordinator: frozen for the view (epoch) */
    PC_MSG_GO = 24,       /* from it: every rank of the view is: make it     */
    PC_MSG_DEPOSE = 25,   /* from the deputy: coordinator root is silent,
                             hold its FREEZEs (round: the attempt)       */
    PC_MSG_DEPOSED = 26,  /* the answer: round = attempt * 2 + 1 (agreed)
                             or + 0 (refused: frozen for a view)         */
    PC_MSG_RELEASE = 27,  /* from the deputy: it gave the attempt up, the
                             coordinator's FREEZEs are welcome again     */
    PC_MSG_NODESUM = 28,  /* nodesums.h: the sender's node sum of round
                             follows (its record: root, flags, [counted]) */
    PC_MSG_XFIN = 29      /* nodesums.h: the sender's last node sum is sent */
};

/* One of an object's control messages without a bitmap (the driver or
 * the service fills the head). */
static inline pc_obj_msg_t pc_obj_msg(uint32_t type, uint64_t round, int root)
{
    pc_obj_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.round = round;
    m.root = root;
    return m;
}

/* The same with flags, the sender's epoch and a bitmap of bitmap_bytes
 * after it (bits NULL: none), into m (room for them); returns its size. */
static inline size_t pc_obj_msg_fill(pc_obj_msg_t *m, uint32_t type, uint64_t round, int root, uint32_t flags,
                                     uint32_t epoch, const unsigned char *bits, size_t bitmap_bytes)
{
    *m = pc_obj_msg(type, round, root);
    m->flags = flags;
    m->epoch = epoch;
    m->counted = bits != NULL;
    if (bits) memcpy(m + 1, bits, bitmap_bytes);
    return sizeof *m + (bits ? bitmap_bytes : 0);
}

/* A round (or rounds) complete at this rank, as env.completed hears of it. */
typedef struct pc_round_done {
    uint64_t first, round; /* first < round: a catch-up, the rounds first..round
                              summed (ACCUMULATE) or the last of them (REPLACE),
                              kept while this rank was silent */
    int root;              /* the last round's initiator */
    uint32_t flags;        /* PC_ROUND_* of the last round (and FLUSH if one
                              of the rounds was a flush) */
    int parked;            /* the rounds that counted this rank as parked */
    const unsigned char *left_out; /* NULL, or a bitmap of P: the ranks that
                              were silent when the round was summed (it did
                              not wait for them: their results were kept) */
    int catch_up;          /* the rounds' results were kept for this rank */
    int alone;             /* rounds a view change skipped here, as a group of
                              one: the result is this rank's own latest
                              contribution (REPLACE, AVERAGE: a result not yet
                              collected stays) or its parts of the first of them
                              (ACCUMULATE) */
    const int *members;    /* the last round's members (ranks, increasing) when
                              the backend's differ from pc_policy_members (a
                              view's groups), nmembers of them; NULL: the policy's */
    int nmembers;
    /* a catch-up's rounds, round by round (the trailer of buf holds their sum,
     * REPLACE: the last round's): */
    int64_t active_last, active_min, active_total, contributions, contributions_last;
} pc_round_done_t;

/* What a backend knows of its object, and how it reports back. */
typedef struct pc_backend_env {
    pcoll_t *ctx;
    pc_engine_t *engine;
    int P, me;
    size_t count;
    pcoll_dtype_t dtype;
    size_t esize, bytes; /* bytes = (count + PC_TRAILER) * esize */
    pcoll_contrib_mode_t mode;
    pc_policy_t policy;  /* whose data each round sums (pc_policy_members) */
    const pc_object_t *obj; /* the object: its identity (channel: engine/tags.h) */
    size_t bitmap_bytes; /* (P + 7) / 8 */
    uint64_t exclude_ns; /* PCOLL_EXCLUDE_MS (0: rounds wait for every rank) */
    int node_deputy;     /* PCOLL_NODE_DEPUTY (with exclude_ns): 1: a silent node
                            leader's deputy takes over (nodesums.h); 2: node sums
                            node to node from the first round */
    /* the driver's side, called on the token holder */
    void *owner;
    void (*activated)(void *owner, uint64_t round, int root, uint32_t flags);
    /* buf (bytes) is the round's result; the driver takes it over */
    void (*completed)(void *owner, const pc_round_done_t *done, void *buf);
    void (*drained)(void *owner);
    void (*failed)(void *owner, int status, const char *what);
    /* send one of the backend's control messages (the driver routes the
     * answers back through ops->message) */
    int (*send)(void *owner, int peer, void *msg, size_t bytes);
    /* spare buffers of `bytes` (NULL: no memory), any thread */
    void *(*buffer)(void *owner);
    void (*release)(void *owner, void *buf);
    /* the backend goes on reading buf, a result it handed to `completed`,
     * until its next pin (NULL: none): the driver does not reuse it (token
     * holder) */
    void (*pin)(void *owner, void *buf);
} pc_backend_env_t;

typedef struct pc_backend pc_backend_t;
typedef struct pc_stall_probe pc_stall_probe_t;

typedef struct pc_backend_ops {
    const char *name; /* pcoll_partial_data_phase() */

    /* -- the application thread (one at a time) -- */
    /* Adds (ACCUMULATE) or copies (REPLACE) the contribution (NULL: none)
     * into pending, then calls choose(arg, taken) with no take of this
     * rank's part in between: taken is the round that will take the
     * contribution; if choose returns nonzero the application waits for that
     * round, and the rank counts as active in it.  Returns taken.  (A rank
     * silent in the middle of its add may have its part taken around it,
     * without what it holds, which then goes into a later round: choose is
     * then asked again, with the later round.) */
    uint64_t (*contribute)(pc_backend_t *b, const void *contribution, int (*choose)(void *arg, uint64_t taken),
                           void *arg);
    /* The application waits in the library for every round from now on
     * (flush, free), or no longer (on = 0). */
    void (*waiting)(pc_backend_t *b, int on);
    /* Wake this rank's waiting thread once `done` reaches round (0: no). */
    void (*want)(pc_backend_t *b, uint64_t round);

    /* -- any thread -- */
    /* A waiting thread's look, every PC_SILENCE_NUDGES-th of env.exclude_ns (silence.h), for rounds
     * held up by a silent rank (NULL: rounds always wait for every rank). */
    void (*nudge)(pc_backend_t *b);
    uint64_t (*done)(const pc_backend_t *b);      /* rounds whose result exists */
    uint64_t (*activated)(const pc_backend_t *b); /* rounds activated */

    /* -- the token holder -- */
    void (*open)(pc_backend_t *b);
    /* Activates round r here (from_link: the link an activation message
     * came on, -1 for a local decision).  Returns 1 if this was its first
     * activation here, 0 if known, -1 if impossible (logged). */
    int (*activate)(pc_backend_t *b, uint64_t r, int root, uint32_t flags, const unsigned char *counted, int from_link);
    /* Moves rounds along (start, help, complete) as far as they can go. */
    void (*kick)(pc_backend_t *b);
    /* One of its own control messages, from rank src. */
    void (*message)(pc_backend_t *b, int src, const void *msg, size_t bytes);
    /* The last round completed here: end the traffic, then env.drained. */
    void (*close)(pc_backend_t *b);
    /* The object is taken down without its last round (a create that
     * failed after open): stop answering kicks (NULL: nothing to stop). */
    void (*stop)(pc_backend_t *b);
    /* 1 if rank's progress engine is known to be silent (rounds go on
     * without it); with probe, also asks it, and says 1 once a question has
     * gone unanswered for env.exclude_ns (NULL: never silent). */
    int (*silent)(pc_backend_t *b, int rank, int probe);
    /* Stall report: what the data phase of round r waits for. */
    void (*describe)(pc_backend_t *b, uint64_t r, pc_stall_probe_t *p);
    /* The ranks whose parts round r (activated here) sums at this rank,
     * into out (room for P); returns their number, or 0 for every rank. */
    int (*members)(pc_backend_t *b, uint64_t r, int *out);
    /* 1 if this rank has given its part of round r (or r is done here). */
    int (*gave)(pc_backend_t *b, uint64_t r);
    /* 1 if activations travel from rank to rank (a stall report then asks
     * the ranks between the initiator and this one). */
    int forwards;
    /* Collective for the node-shared backend. */
    void (*destroy)(pc_backend_t *b);
} pc_backend_ops_t;

struct pc_backend {
    const pc_backend_ops_t *ops;
    pc_backend_env_t env;
};

/* Collective over comm: a node-shared backend if `use` at every rank, some
 * node with two ranks or more (GROUP objects whose rounds sum in groups:
 * every rank on one node), every doorbell of a node reachable from its
 * ranks and a free kick key; else *out = NULL (and PCOLL_SUCCESS).  forced,
 * small_bytes: the allreduce setting for the node leaders' exchange. */
int pc_backend_shm_create(const pc_backend_env_t *env, MPI_Comm comm, int use, pcoll_allreduce_algo_t forced,
                          size_t small_bytes, pc_backend_t **out);
/* How the node-shared protocol makes a rank of the node look at the object
 * (pc_backend_shm_create: the engine's kicks on the object's key). */
typedef struct pc_shm_signals {
    void *arg;
    void (*kick)(void *arg, int rank); /* rank's holder runs ops->kick soon */
    void (*mark)(void *arg);           /* this rank's holder does */
    void (*listen)(void *arg, int on); /* this rank's holder starts/stops answering kicks */
} pc_shm_signals_t;
/* The bytes of a rank's segment (leads: the node's smallest rank). */
size_t pc_backend_shm_segment_bytes(const pc_backend_env_t *env, int leads);
/* Local: the node-shared backend of one node's ranks local[0..nlocal)
 * (increasing; every rank of env->P) over segments the caller made: seg[rank]
 * of pc_backend_shm_segment_bytes, zeroed, addressable by all of them (a
 * test runs ranks as threads).  ops->destroy frees only the backend. */
int pc_backend_shm_attach(const pc_backend_env_t *env, void **seg, const int *local, int nlocal,
                          const pc_shm_signals_t *sig, pc_backend_t **out);
/* Local: the message backend.  forced: the context's algorithm setting
 * (PCOLL_ALGO_AUTO: chosen per round's size, never direct). */
int pc_backend_msg_create(const pc_backend_env_t *env, pcoll_allreduce_algo_t forced, size_t small_bytes,
                          pc_backend_t **out);

/* ---- the round's data format ---- */

static inline void pc_store_int(void *at, pcoll_dtype_t t, int64_t v)
{
    switch (t) {
    case PCOLL_FLOAT32: *(float *)at = (float)v; break;
    case PCOLL_FLOAT64: *(double *)at = (double)v; break;
    case PCOLL_INT32: *(int32_t *)at = (int32_t)v; break;
    default: *(int64_t *)at = v; break;
    }
}

static inline int64_t pc_load_int(const void *at, pcoll_dtype_t t)
{
    switch (t) {
    case PCOLL_FLOAT32: return (int64_t)*(const float *)at;
    case PCOLL_FLOAT64: return (int64_t)*(const double *)at;
    case PCOLL_INT32: return *(const int32_t *)at;
    default: return *(const int64_t *)at;
    }
}

/* The allreduce of a round's data (count + PC_TRAILER elements) over n
 * members, this rank the idx-th: the message backend's over the round's
 * members (out of place: PC_SLOT_IN, the parts the round took, is only
 * read, so that a round can be given up and its parts put back), the node
 * leaders' over the leaders (in place, in PC_SLOT_OUT).  With the algorithm
 * for rounds (PC_USE_ROUND: never direct unless forced).  pc_round_spec:
 * its spec and algorithm (the simulator builds the same, without data). */
static inline pcoll_allreduce_algo_t pc_round_spec(size_t count, pcoll_dtype_t dtype, pcoll_allreduce_algo_t forced,
                                                   size_t small_bytes, int n, int idx, int inplace,
                                                   pc_allreduce_spec_t *spec)
{
    *spec = (pc_allreduce_spec_t){n, idx, count + PC_TRAILER, dtype, PCOLL_SUM, inplace, 0, 0, 0};
    size_t bytes = (count + PC_TRAILER) * pcoll_dtype_size(dtype);
    return pc_allreduce_choose(PC_USE_ROUND, forced, PCOLL_ALGO_AUTO, 0, small_bytes, bytes, n);
}

static inline int pc_round_sched_build(const pc_backend_env_t *env, pcoll_allreduce_algo_t forced, size_t small_bytes,
                                       int n, int idx, int inplace, pc_sched_t **out)
{
    pc_allreduce_spec_t spec;
    pcoll_allreduce_algo_t algo = pc_round_spec(env->count, env->dtype, forced, small_bytes, n, idx, inplace, &spec);
    return pc_allreduce_build(&spec, algo, out);
}

static inline void pc_trailer_set(const pc_backend_env_t *env, void *buf, int64_t active, int64_t contributions)
{
    char *t = (char *)buf + env->count * env->esize;
    pc_store_int(t, env->dtype, active);
    pc_store_int(t + env->esize, env->dtype, contributions);
}

static inline void pc_trailer_get(const pc_backend_env_t *env, const void *buf, int64_t *active,
                                  int64_t *contributions)
{
    const char *t = (const char *)buf + env->count * env->esize;
    *active = pc_load_int(t, env->dtype);
    *contributions = pc_load_int(t + env->esize, env->dtype);
}

#endif
