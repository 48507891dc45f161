/*
 * The progress engine: issues and tests every library MPI request of a
 * context (DESIGN section 2).  Whoever holds the engine's progress token
 * runs it: the progress thread, or an application thread blocked in
 * pc_engine_wait, which then needs no handoff in either direction.
 *
 *   application thread                 token holder
 *   ------------------                 ------------
 *   pc_engine_post(fn, arg)  --queue-->  runs fn(e, arg): starts schedules,
 *                                        posts sends / receives
 *   pc_engine_wait(pred):                MPI_Testsome -> step / message
 *     takes the token from the             callbacks -> pc_engine_notify()
 *     progress thread and runs the
 *     engine itself until pred holds
 *     (or, when another application
 *     thread has it, waits for its
 *     notifications)
 *
 * The progress thread gives the token up at its next look when an
 * application thread asks, and before it sleeps; it parks while an
 * application thread holds it, and is woken when that thread hands it back
 * with work left (doorbell.h).  Callbacks run on the holder; they must not
 * wait.
 *
 * Idle policy (pcoll_progress_policy_t, see pcoll.h): after the last
 * completion the holder polls, yielding the CPU after every empty poll, for
 * active_spin_us while operations are in flight or idle_spin_us otherwise;
 * then it sleeps in growing pauses (at most max_sleep_us) while receives are
 * posted, and until posted to when nothing at all is outstanding.  A post
 * wakes it at once.  Everything named pc_engine_* below except post, wait,
 * notify, create, destroy and the policy functions runs on the holder only.
 */
#ifndef PC_ENGINE_PROGRESS_H
#define PC_ENGINE_PROGRESS_H

#include <mpi.h>

#include "sched.h"
#include "tags.h"

typedef struct pc_engine pc_engine_t;
typedef void (*pc_task_fn)(pc_engine_t *e, void *arg);
/* status: PCOLL_SUCCESS or an error; st: the MPI status (source, ...). */
typedef void (*pc_msg_fn)(pc_engine_t *e, void *arg, int status, const MPI_Status *st);
typedef int (*pc_pred_fn)(void *arg);

/* comm is owned by the caller and must outlive the engine. */
int pc_engine_create(MPI_Comm comm, const pc_tags_t *tags, const pcoll_progress_policy_t *policy,
                     pc_engine_t **out);
/* Stops the thread once the queued tasks ran; cancels receives still posted. */
void pc_engine_destroy(pc_engine_t *e);
void pc_engine_set_policy(pc_engine_t *e, const pcoll_progress_policy_t *policy);
void pc_engine_get_policy(const pc_engine_t *e, pcoll_progress_policy_t *policy);

/* Any thread: run fn(e, arg) on the token holder. */
int pc_engine_post(pc_engine_t *e, pc_task_fn fn, void *arg);
/* The same for a caller that calls pc_engine_wait next: it rings nobody,
 * as the wait runs the task itself (or rings when it does not). */
int pc_engine_post_quiet(pc_engine_t *e, pc_task_fn fn, void *arg);
/* Any application thread, holding no lock a callback takes: return once
 * pred(arg) is true, progressing the engine meanwhile (see above). */
void pc_engine_wait(pc_engine_t *e, pc_pred_fn pred, void *arg);
/* Wake waiters after making a predicate true. */
void pc_engine_notify(pc_engine_t *e);

/* Holder: run s with tags tag_base | step. on_done is s's own. */
int pc_engine_run(pc_engine_t *e, pc_sched_t *s, int tag_base);

/* Holder: a message with a completion callback.  A `listener`
 * receive is one that may wait indefinitely (activation, arrivals): while only
 * listeners are outstanding the engine is idle and may sleep.  Such sends
 * ring the destination's doorbell (doorbell.h) when posted and when done. */
int pc_engine_isend(pc_engine_t *e, const void *buf, size_t bytes, int peer, int tag, pc_msg_fn fn, void *arg);
int pc_engine_irecv(pc_engine_t *e, void *buf, size_t bytes, int peer, int tag, int listener, pc_msg_fn fn,
                    void *arg);

/* Holder: a poller is called at every look for work, for progress that no
 * MPI request announces (node-shared memory, partial/node_rounds.c); it
 * returns how many things it did.  Pollers do not keep the engine from
 * sleeping: whoever makes a poller's condition true and needs it seen soon
 * nudges the rank (pc_engine_nudge).  Add and remove on the holder. */
typedef int (*pc_poll_fn)(pc_engine_t *e, void *arg);
typedef struct pc_poller {
    pc_poll_fn fn;
    void *arg;
    struct pc_poller *next; /* the engine's */
} pc_poller_t;
/* The poller's memory is the caller's until it is removed. */
void pc_engine_add_poller(pc_engine_t *e, pc_poller_t *poller);
void pc_engine_remove_poller(pc_engine_t *e, pc_poller_t *poller);
/* Any thread: wake whoever progresses rank `peer` of this node (no-op for
 * ranks on other nodes). */
void pc_engine_nudge(pc_engine_t *e, int peer);
/* 1 if every rank of the engine's communicator can be nudged (one node,
 * doorbells in shared memory). */
int pc_engine_can_nudge_all(const pc_engine_t *e);

const pc_tags_t *pc_engine_tags(const pc_engine_t *e);
MPI_Comm pc_engine_comm(const pc_engine_t *e);

/* Counters for tests and diagnostics. */
typedef struct pc_engine_stats {
    unsigned long long loops, sleeps, tasks, requests;
} pc_engine_stats_t;
void pc_engine_stats(const pc_engine_t *e, pc_engine_stats_t *out);

#endif
