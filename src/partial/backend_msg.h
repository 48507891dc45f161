/*
 * The message backend's state, shared by its two files: backend_msg.c
 * (activation and the data phase) and backend_msg_view.c (rounds that go
 * on without a silent rank: views).  Nothing else includes this.
 */
#ifndef PC_PARTIAL_BACKEND_MSG_H
#define PC_PARTIAL_BACKEND_MSG_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backend.h"
#include "backoff.h"
#include "links.h"
#include "regroup.h"

typedef struct act_slot {
    uint64_t round;
    int activated;
    int root;
    uint32_t flags;
    uint64_t used_links; /* links this rank already forwarded on */
    int has_counted;
    unsigned char *counted; /* ranks counted as parked by the leader */
} act_slot_t;

/* an allreduce schedule over n members, this rank the idx-th */
typedef struct group_sched {
    int n, idx;
    pc_sched_t *sched;
} group_sched_t;

/* What the rank that left x out keeps for it (ACCUMULATE: the sum of the
 * rounds; REPLACE: the last), until x comes back. */
typedef struct msg_owed {
    void *sum;           /* rounds [from, upto) (NULL until the first) */
    void *border;        /* round from - 1's result (NULL: none) */
    uint64_t from, upto;
    int64_t active_last, active_min, active_total, contributions, contributions_last;
    uint32_t flags;
    int root;
} msg_owed_t;

/* A message of a view still to come, held until it is installed. */
typedef struct held_msg {
    struct held_msg *next;
    int src;
    size_t bytes;
    /* the message follows */
} held_msg_t;

typedef struct msg_backend {
    pc_backend_t base;
    pcoll_allreduce_algo_t forced;
    size_t small_bytes;
    pthread_mutex_t lock;
    void *pending;             /* (L) contributions not yet taken */
    uint64_t pending_contribs; /* (L) contributions in pending (0: it is zero,
                                      whatever its bytes; REPLACE: ever made) */
    int adding;                /* (L) the application writes pending */
    int start_deferred;        /* (L) a round waits for `adding` to clear */
    uint64_t waiting_from;     /* (L) the application waits for rounds >= this
                                      (UINT64_MAX: not) */
    uint64_t activated_upto;   /* (L) rounds < this are activated here */
    uint64_t rounds_started;   /* (L) rounds whose data phase began here */
    atomic_ullong done;        /* rounds completed here */
    /* token holder */
    act_slot_t *slot;          /* nslots, round r in slot[r % nslots] */
    int nslots;
    pc_sched_t *sched;         /* the data phase over all ranks: an allreduce */
    group_sched_t *groups;     /* over groups (GROUP) */
    int ngroups;
    int *members;              /* the running round's, as ranks of the context (P ints) */
    int *member_idx;           /* and as indices among the view's ranks (P ints) */
    int nmembers;
    pc_sched_t *running_sched;
    int running;
    uint64_t running_round;
    uint32_t running_flags;
    int running_root, running_parked;
    void *round_in;            /* the running round's parts (its input, kept as it is) */
    void *round_buf;           /* and its result */
    int finishing;             /* the last round is done: collecting FINs */
    pc_links_t links;          /* activation links and FINs among the view's ranks */
    pc_task_t kick_task;       /* a deferred start, posted by the application */
    atomic_int kick_posted;

    /* ---- rounds without a silent rank (backend_msg_view.c); the token
     * holder's unless marked ---- */
    int excluding;             /* PCOLL_EXCLUDE_MS > 0, P >= 2, not ACCUMULATE rounds in groups */
    int lag_logged;            /* (H) a local activation was dropped (msg_activate) */
    int skipping;              /* rounds in groups: a view change skips (regroup.h) */
    uint32_t epoch;            /* the view: its number */
    pc_backoff_t backoff;      /* the limit in use (backoff.h; its shift comes in the
                                  coordinator's FREEZE) */
    uint32_t *left_at;         /* coordinator: per rank, when it was left out (ms) */
    int back_soon;             /* coordinator: a rank comes back soon (the next view
                                  raises backoff) */
    unsigned char *left_out;   /* its left-out ranks (bitmap; NULL: not excluding) */
    int n_left_out;
    int *live, nlive, live_me; /* its ranks in order; this rank's index (-1: left out) */
    MPI_Comm view_comm;        /* its communicator (MPI_COMM_NULL: the context's) */
    pc_sched_t *view_sched;    /* its rounds' schedule (NULL: sched) */
    MPI_Comm drained_comm;     /* the last view's communicator given to the engine to drain */
    int drained_base;          /* ... and view 0's round tags (on the engine's communicator), or no more */
    int *keeper;               /* per left-out rank: who keeps what it is owed */
    msg_owed_t *owed;          /* per rank: kept here for it (keeper) */
    atomic_int frozen;         /* a view change is under way: no round starts (read by
                                  the application's nudge) */
    struct change *awaiting_go; /* frozen for this view change, waiting for GO (its
                                  helper not begun: a newer FREEZE replaces it) */
    uint32_t forming;          /* coordinator: the epoch it waits for READYs of (0: none) */
    unsigned char *ready;      /* ... from these ranks (bitmap) */
    int view_maker;            /* the rank that made the view (of two FREEZEs of one
                                  epoch, the higher maker's wins: the deputy's) */
    int coord_silent;          /* deputy: the coordinator was found silent (by a rank's
                                  ping; the deputy pings it too before each attempt) */
    int deposing;              /* deputy: DEPOSE sent, answers awaited ... */
    uint32_t deposing_since;   /* ... since (ms) */
    uint64_t deposing_attempt; /* ... for this attempt (answers to older ones are stale) */
    unsigned char *agreed;     /* ... from these ranks (bitmap) */
    int deposed;               /* rank + 1 whose FREEZEs are held (the deputy takes
                                  over from it; 0: none) */
    int left_me;               /* this rank is left out: it asks to come back */
    int replaying;             /* held messages are replayed: changes they ask for wait
                                  for the end (one view for all of them) */
    uint32_t left_epoch;       /* ... of the view that left it out */
    int left_keeper;
    pc_regroup_snap_t left_snap; /* its rounds when it was left out */
    void *left_parts;          /* and the parts of the round it gave up (a copy) */
    const void *kept;          /* the last completed round's result (pinned: env.pin) */
    void *kept_in;             /* and its parts */
    uint64_t kept_round;       /* which (UINT64_MAX: none) */
    uint32_t kept_flags;
    int kept_root;
    struct given_up *given_up; /* runs given up (their on_done releases their buffers) */
    uint64_t run_wait;         /* how long the running round has waited (silence.h) */
    uint64_t ping_seq;
    uint64_t *pinged, *ponged, *ping_wait; /* per rank */
    unsigned char *suspected;  /* ranks reported silent in this view */
    unsigned char *want_out, *want_in; /* coordinator: changes asked for meanwhile */
    held_msg_t *held, **held_tail;
    atomic_int look_posted;
    pc_task_t look_task;
    void *rerun_parts;         /* rounds in groups, ACCUMULATE: its parts of round
                                  rerun_round, given up at a view change that goes
                                  on from that round: its input when it runs again
                                  (never put back into pending; holder) */
    uint64_t rerun_round;
} msg_backend_t;

static inline msg_backend_t *pc_msg_of(pc_backend_t *b) { return (msg_backend_t *)b; }

/* backend_msg.c, for the view change (token holder) */
void pc_msg_try_start(msg_backend_t *m);
/* The cached group schedules: s leaves the cache, if it is there (a run of
 * it was given up: it never runs again; the caller owns it).  1 if it was. */
int pc_msg_groups_drop(msg_backend_t *m, const pc_sched_t *s);
/* Frees every cached group schedule (a new view: groups of its ranks, on
 * its communicator). */
void pc_msg_groups_clear(msg_backend_t *m);
int pc_msg_handle(msg_backend_t *m, int src, const void *msg, size_t bytes);

/* backend_msg_view.c (token holder unless said) */
int pc_msg_view_init(msg_backend_t *m);   /* PCOLL_SUCCESS or PCOLL_ERR_NOMEM */
void pc_msg_view_destroy(msg_backend_t *m);
/* A message of the view protocol (PING ... JOIN): 1 if it was one. */
int pc_msg_view_message(msg_backend_t *m, int src, const void *msg, size_t bytes);
/* Any thread: a waiting application's look (PC_SILENCE_NUDGES per limit). */
void pc_msg_view_nudge(msg_backend_t *m);
/* Whether rank is silent (left out; probe: or asked and silent). */
int pc_msg_view_silent(msg_backend_t *m, int rank, int probe);
/* A stall report: the view this rank is in, or out of (and who is to take
 * it back). */
void pc_msg_view_describe(const msg_backend_t *m, pc_stall_probe_t *p);
/* Round r (flags) completed here with result buf: kept for donors and for
 * the ranks left out; fills d->left_out. */
void pc_msg_view_completed(msg_backend_t *m, uint64_t r, uint32_t flags, int root, const void *buf,
                           pc_round_done_t *d);
/* The schedule of a round in the current view (NULL: the caller's own). */
pc_sched_t *pc_msg_view_sched(msg_backend_t *m);
/* Whether a round with these flags may start in this view. */
int pc_msg_view_may_start(const msg_backend_t *m, uint32_t flags);
/* The parts this rank holds for round r (rerun_parts), handed over, or NULL:
 * the round's input instead of what is pending.  Holder, under m->lock. */
void *pc_msg_view_take_rerun_parts(msg_backend_t *m, uint64_t r);
/* Whether a run of s was given up and may still have messages out (then s
 * is never freed). */
int pc_msg_view_run_out(const msg_backend_t *m, const pc_sched_t *s);
/* A run finished: 1 if it was one given up (its buffers released). */
int pc_msg_view_run_done(msg_backend_t *m, pc_sched_t *s);
/* The object's traffic ended: runs given up that MPI has not finished
 * are let go (their buffers stay for good), this object's round tags are
 * drained no more (the channel may be reused). */
void pc_msg_view_let_go(msg_backend_t *m);

#endif
