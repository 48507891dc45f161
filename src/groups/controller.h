/*
 * The group generator of dynamic-group partial reduce: the decisions of the
 * controller (Partial Reduce's controller, Ripples' Group Generator), as a
 * pure state machine fed with events and answering through callbacks.  It
 * holds no model data and sends nothing itself; preduce/ carries its small
 * messages.  The unit tests drive it with arrival sequences alone.
 *
 *   events in                        decisions out
 *   ---------                        -------------
 *   request(rank, iteration)  --->   assign(rank, group): the group this
 *   done(rank, group id)              ready rank reduces with now
 *   finish(rank) (it frees)   --->   finished(rank): no group will want it
 *
 * Policies:
 *   FIFO    (Partial Reduce) ready ranks queue; a group is the first
 *           group_size of them.  Weights 1/n, or staleness-aware
 *           (staleness.h) from the iterations they reported.  Frozen-group
 *           avoidance: the graph of who averaged with whom in the last
 *           `window` groups; once that many were formed and the graph is
 *           disconnected, the next group takes the first ranks of the queue
 *           from different components (a bridge); when every queued rank
 *           lies in one component and a rank of another one is still to
 *           come, the queue waits for it (the one case in which a ready
 *           rank waits for one that is not).  When every rank still
 *           training is queued, a short group forms (nobody else comes).
 *   RANDOM  (Ripples) a request from a rank with no group makes one: it
 *           and S - 1 others drawn at random (ready or not).  A group is
 *           activated when none of its members holds a lock (the lock
 *           vector: members of an active group that have not reported it
 *           done); otherwise it waits in the pending queue, retried in
 *           order whenever locks clear.  Activated groups go to their
 *           members' group buffers, and each member is sent its buffer's
 *           first group when it is ready.
 *   SMART   (Ripples) a request from a rank with an empty buffer runs a
 *           Global Division: every idle rank (no lock, still training)
 *           whose request counter does not lag the requester's by
 *           slow_threshold or more is dealt into disjoint random groups of
 *           S (a leftover single rank joins the last group), appended to
 *           their buffers.  A requester that finds nobody idle to group
 *           with awaits the next division: when a rank's groups are done
 *           (it is idle again) or another rank asks (one it does not lag
 *           behind by slow_threshold); a group of one only when no other
 *           rank trains, or S = 1.  Inter-intra (nodes given): one head per
 *           node, the heads in groups across nodes and the other ranks in
 *           groups inside their node, then a second division: each node's ranks
 *           together.
 *
 * Groups are activated in one order, and every member performs its groups
 * in that order: two groups that share members never wait for each other.
 */
#ifndef PC_GROUPS_CONTROLLER_H
#define PC_GROUPS_CONTROLLER_H

#include <stdint.h>

#include "../util/nodes.h"
#include "pcoll.h"

typedef enum pc_gen_kind { PC_GEN_FIFO = 0, PC_GEN_RANDOM = 1, PC_GEN_SMART = 2 } pc_gen_kind_t;

typedef struct pc_gen_config {
    pc_gen_kind_t kind;
    int P;              /* ranks */
    int group_size;     /* FIFO: ranks per group; RANDOM, SMART: S (>= 1) */
    int dynamic;        /* FIFO: staleness-aware weights, else 1/n */
    double alpha;       /* their decay */
    int avoid_frozen;   /* FIFO */
    int window;         /* FIFO: T groups; 0 = pc_gen_default_window */
    int slow_threshold; /* SMART: C_thres; 0 = no filter */
    const pc_nodes_t *nodes; /* SMART: inter-intra divisions; NULL = off */
    uint64_t seed;
} pc_gen_config_t;

typedef struct pc_gen_group {
    uint64_t id;          /* 1, 2, ... in activation order */
    int n;
    int *members;         /* increasing */
    double *weights;      /* by member; they sum to 1 */
    uint64_t iteration;   /* every member's iteration after the reduce */
    int left;             /* members that have not reported it done */
    struct pc_gen_group *next; /* the pending queue */
} pc_gen_group_t;

typedef struct pc_gen_out {
    /* rank is ready and gets g (rank == g->members[index]) */
    void (*assign)(void *arg, int rank, const pc_gen_group_t *g, int index);
    void (*finished)(void *arg, int rank);
    void *arg;
} pc_gen_out_t;

typedef struct pc_gen_stats {
    uint64_t requests, groups, bridges, holds, conflicts, divisions;
    int pending_max;
} pc_gen_stats_t;

typedef struct pc_gen pc_gen_t;

/* T >= ceil((P - 1) / (group_size - 1)), the fewest groups that can connect
 * P ranks: twice that (random groups rarely connect in the fewest). */
int pc_gen_default_window(int P, int group_size);

/* NULL without memory. */
pc_gen_t *pc_gen_create(const pc_gen_config_t *cfg, const pc_gen_out_t *out);
void pc_gen_destroy(pc_gen_t *g);

/* PCOLL_SUCCESS; PCOLL_ERR_NOMEM; PCOLL_ERR_INTERNAL when the event breaks
 * the protocol (a rank that is already waiting asks again, a done for a
 * group it was not sent, an event from a finished rank, a rank out of
 * range). */
int pc_gen_request(pc_gen_t *g, int rank, uint64_t iteration);
int pc_gen_done(pc_gen_t *g, int rank, uint64_t group_id);
int pc_gen_finish(pc_gen_t *g, int rank);

/* Every rank finished. */
int pc_gen_all_finished(const pc_gen_t *g);
/* Sets in bits (P bits, zeroed by the caller) the ranks that `rank` waits
 * for, as far as the controller knows; returns how many. */
int pc_gen_missing(const pc_gen_t *g, int rank, unsigned char *bits);
void pc_gen_stats(const pc_gen_t *g, pc_gen_stats_t *stats);

/* For tests: groups in rank's buffer (activated, not sent), its locks, the
 * pending queue's length, and whether the last `window` FIFO groups connect
 * every rank. */
int pc_gen_buffered(const pc_gen_t *g, int rank);
int pc_gen_locks(const pc_gen_t *g, int rank);
int pc_gen_pending(const pc_gen_t *g);

#endif
