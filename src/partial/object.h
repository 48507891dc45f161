/*
 * A partial allreduce object: the state that the public calls (partial.c,
 * application thread) and the driver (driver.c, token holder) share.  The
 * protocol's rules are in policy.h, the data phase behind backend.h.
 *
 * Locking: `lock` guards the fields marked (L).  The application never holds
 * it while copying data.  Fields marked (H) belong to the token holder.
 */
#ifndef PC_PARTIAL_OBJECT_H
#define PC_PARTIAL_OBJECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../core/context.h"
#include "../core/object.h"
#include "../util/error.h"
#include "backend.h"
#include "park.h"
#include "pcoll.h"
#include "policy.h"

/* what the delivered buffer holds */
typedef struct pc_delivery {
    uint64_t rounds, first, last;
    int active_last, active_min;
    uint64_t active_total, contributions, contributions_last;
    int root_last, sync_last;
    uint64_t parked; /* rounds that counted this rank as parked elsewhere */
    uint64_t left_out_rounds, caught_up;
    int n_left_out;  /* the last round's, listed in the object's left_out_d */
    int group_n;     /* the last round's members, listed in group_d, if fewer
                        than every rank (0: every rank) */
} pc_delivery_t;

struct pcoll_partial {
    pc_object_t base;    /* identity, messages, open / close, failure */
    int P, me;
    size_t count;
    pcoll_dtype_t dtype;
    size_t esize, bytes; /* bytes = (count + PC_TRAILER) * esize */
    pcoll_partial_config_t cfg;
    pc_policy_t policy;
    size_t bitmap_bytes; /* (P + 7) / 8 */
    int needs_park;      /* rounds can wait for other ranks' arrivals:
                            MAJORITY, QUORUM, or sync_every > 0 (flush and
                            free rounds count only ranks that call them) */
    pc_backend_t *be;    /* the data phase */

    /* ---- shared with the application ---- */
    pthread_mutex_t lock;
    int app_busy;                /* (L) a call is in progress (one thread) */
    struct {                     /* application: the call in progress, for the timeline */
        uint64_t t0;             /* its start (0: not recorded) */
        const char *fn;          /* "allreduce", "deposit", "flush", "free" */
        int64_t round;           /* the round that takes its contribution (-1: none) */
        int waited;
        uint64_t rounds;         /* results it delivered */
    } tl;
    void *delivered;             /* (L) results not yet collected */
    pc_delivery_t dmeta;         /* (L) what `delivered` holds */
    int *left_out_d;             /* (L) P ints: its last round's left-out ranks */
    int *group_d;                /* (L) P ints: its last round's members (group_n) */
    int *left_out;               /* application: P ints, info.left_out */
    void **pool;                 /* (L) spare buffers */
    int npool, cappool;
    void *pinned;                /* (L) a buffer the backend still reads (its last
                                    result, for a view change): not pooled */
    int pinned_put;              /* (L) it was put back meanwhile: pooled once unpinned */
    pcoll_round_observer_t observer; /* (L) */
    void *observer_arg;              /* (L) */
    uint64_t flush_calls;        /* application: flushes begun */
    int flush_resumes;           /* application: the last flush timed out; the
                                    next call resumes it (it may have completed
                                    since, in the background) */
    int free_sent;               /* application: the FREE arrival is out */
    atomic_ullong rounds_completed;
    atomic_ullong flushes_completed;
    atomic_int drained;          /* the object's traffic has ended here */

    /* ---- token holder ---- */
    int *scratch;                /* (H) P ints for the policy */
    int *left_out_h;             /* (H) P ints: a completed round's left-out ranks */
    int *round_group;            /* (H) P ints: a completed round's members */
    int *group;                  /* application: the last round's members (info.group) */
    int group_all;               /* application: group lists every rank */
    int is_leader;
    int probing;                 /* (H) decide() may ask ranks if they are alive */
    uint64_t arrived;            /* (H) the round + 1 its application last waited for
                                    and told the leader of (0: none) */
    pc_leader_t leader;          /* (H) at PC_LEADER: the arrivals; at another rank
                                    when `counting`: those it knows of while the
                                    leader is silent (its own, and QUORUM's shared) */
    int counting;                /* MAJORITY or QUORUM: every rank keeps `leader` */
    uint64_t shared;             /* (H) QUORUM: the round + 1 whose arrival this rank
                                    sent to every rank, the leader being silent */
    pc_park_watch_t watch;       /* (H) at PC_LEADER, when needs_park */
    int finishing;               /* (H) the last round completed here */
};

/* Spare buffers of p->bytes (any thread; NULL: no memory). */
void *pc_partial_buffer_get(pcoll_partial_t *p);
void pc_partial_buffer_put(pcoll_partial_t *p, void *buf);

#endif
