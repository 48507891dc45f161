/*
 * The progress engine: issues and tests every library MPI request of a
 * context (docs/design.md, section 2).  Whoever holds the engine's progress token
 * runs it: the progress thread, or an application thread blocked in
 * pc_engine_wait, which then needs no handoff in either direction.
 *
 *   application thread                 token holder
 *   ------------------                 ------------
 *   pc_engine_post(fn, arg)  --queue-->  runs fn(e, arg): starts schedules,
 *                                        posts sends / receives
 *   pc_engine_wait(pred):                MPI_Testsome -> step / message
 *     takes the token from the             callbacks -> pc_engine_notify()
 *     progress thread and runs the       kicked keys -> keyed pollers
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
 * Failures: every MPI call's return code is checked.  A message that fails
 * (to post, or in its status) completes its callback with PCOLL_ERR_MPI, or
 * stops its schedule's run (as pc_engine_abandon) with the failing call
 * recorded, so the run completes with the error as soon as the messages it
 * had posted are done; if
 * MPI_Testsome itself fails, every request is tested alone so that the
 * failing ones are found and completed.  Nothing waits for a request that
 * MPI will not complete.
 *
 * Idle policy (pcoll_progress_policy_t, see pcoll.h): after the last
 * completion the holder polls, yielding the CPU after every empty poll, for
 * active_spin_us while operations are in flight or idle_spin_us otherwise;
 * then it sleeps in growing pauses (at most max_sleep_us) while receives are
 * posted, and until posted to when nothing at all is outstanding.  A post
 * wakes it at once.  Any thread may call create, destroy, the posts, the
 * waits (wait, wait_for), notify, kick, mark, can_kick, tags, stats, the key
 * allocator and the policy functions; every other pc_engine_* below runs on
 * the holder only.
 */
#ifndef PC_ENGINE_PROGRESS_H
#define PC_ENGINE_PROGRESS_H

#include <mpi.h>

#include "sched.h"
#include "tags.h"

typedef struct pc_engine pc_engine_t;
typedef void (*pc_task_fn)(pc_engine_t *e, void *arg);
/* status: PCOLL_SUCCESS or an error (then pc_engine_msg_error says what);
 * st: the MPI status (source, ...). */
typedef void (*pc_msg_fn)(pc_engine_t *e, void *arg, int status, const MPI_Status *st);
typedef int (*pc_pred_fn)(void *arg);

/* Schedules' messages travel on comm, messages with callbacks (control) on
 * ctrl_comm (a duplicate: the receive that control keeps posted for any
 * source then does not slow down the matching of data); node is this
 * rank's node (the doorbells' shared memory).  All three are owned by the
 * caller and must outlive the engine.  log_id: the context's number in log
 * lines (util/log.h). */
int pc_engine_create(MPI_Comm comm, MPI_Comm ctrl_comm, MPI_Comm node, const pc_tags_t *tags,
                     const pcoll_progress_policy_t *policy, int log_id, pc_engine_t **out);
/* Stops the thread once the queued tasks ran; cancels the receives still
 * posted (listeners, and those of abandoned runs). */
void pc_engine_destroy(pc_engine_t *e);
/* Stops the progress thread now, whatever is in flight, and frees nothing
 * (an application thread, holding no lock; pcoll_finalize of a context
 * pcoll_shrink replaced: runs with dead ranks are never completed). */
void pc_engine_halt(pc_engine_t *e);
void pc_engine_set_policy(pc_engine_t *e, const pcoll_progress_policy_t *policy);
void pc_engine_get_policy(const pc_engine_t *e, pcoll_progress_policy_t *policy);

/* A task to run on the holder.  The caller owns the memory until fn runs. */
typedef struct pc_task {
    pc_task_fn fn;
    void *arg;
    struct pc_task *next; /* the engine's */
    int heap;             /* the engine's: freed after it ran */
} pc_task_t;

/* Any thread: run fn(e, arg) on the token holder (allocates the task). */
int pc_engine_post(pc_engine_t *e, pc_task_fn fn, void *arg);
/* The same for a caller that calls pc_engine_wait next: it rings nobody,
 * as the wait runs the task itself (or rings when it does not). */
int pc_engine_post_quiet(pc_engine_t *e, pc_task_fn fn, void *arg);
/* The same with the caller's task memory (no allocation): t->fn, t->arg set. */
void pc_engine_post_task(pc_engine_t *e, pc_task_t *t, int quiet);
/* Any application thread, holding no lock a callback takes: return once
 * pred(arg) is true, progressing the engine meanwhile (see above). */
void pc_engine_wait(pc_engine_t *e, pc_pred_fn pred, void *arg);
/* The same, giving up after timeout_us (< 0: never).  Returns 1 when pred
 * holds, 0 when the time is up.  began_us (may be NULL): when the timeout
 * started, on the clock of CLOCK_MONOTONIC in microseconds (< 0: no clock
 * was read, the wait was over at once). */
int pc_engine_wait_for(pc_engine_t *e, pc_pred_fn pred, void *arg, double timeout_us, double *began_us);
/* Wake waiters after making a predicate true. */
void pc_engine_notify(pc_engine_t *e);

/* Holder: run s with its bound tags and group map (sched.h); on_done is s's
 * own.  A run that fails is completed with its status (never left). */
int pc_engine_run(pc_engine_t *e, pc_sched_t *s);
/* Holder: abandon s's current run (a timeout): its receives are cancelled,
 * nothing more of it is posted or run; on_done fires with `status` once its
 * posted messages completed or were cancelled (a send to a rank that never
 * receives may keep it from firing: the caller keeps the schedule). */
void pc_engine_abandon(pc_engine_t *e, pc_sched_t *s, int status);
/* Holder, after pc_engine_abandon: its sends finish when MPI finishes
 * them (a receiver that drains them, below), tested with the other
 * requests but never a reason to keep polling; on_done fires then.  The
 * run's buffers stay until on_done. */
void pc_engine_let_finish(pc_engine_t *e, pc_sched_t *s);
/* Holder, after pc_engine_abandon (or pc_engine_let_finish): its sends are
 * let go (MPI_Request_free: a send to a rank that never receives it no
 * longer keeps anything waiting).  The run's on_done then never fires, and
 * its buffers and the schedule must stay as they are for good. */
void pc_engine_let_go(pc_engine_t *e, pc_sched_t *s);
/* Holder: messages of runs given up elsewhere (stale) may come on *comm
 * (NULL: the engine's communicator of schedules) with one of tags (ntags =
 * 0: any tag): every so often the holder receives and drops what waits
 * there, so that their senders' requests complete and free their buffers.
 * The communicator must stay valid while the engine lives; owner (may be
 * NULL) names the place for pc_engine_drain_forget. */
int pc_engine_drain(pc_engine_t *e, const MPI_Comm *comm, const int *tags, int ntags, const void *owner);
/* Holder: no more draining of the places registered with this owner (a
 * channel whose tags are about to be reused). */
void pc_engine_drain_forget(pc_engine_t *e, const void *owner);

/* Holder: a message with a completion callback.  A `listener`
 * receive is one that may wait indefinitely (activation, arrivals): while only
 * listeners are outstanding the engine is idle and may sleep.  Such sends
 * ring the destination's doorbell (doorbell.h) when posted and when done. */
int pc_engine_isend(pc_engine_t *e, const void *buf, size_t bytes, int peer, int tag, pc_msg_fn fn, void *arg);
int pc_engine_irecv(pc_engine_t *e, void *buf, size_t bytes, int peer, int tag, int listener, pc_msg_fn fn,
                    void *arg);
/* Inside a pc_msg_fn called with an error: which MPI call failed and why. */
const char *pc_engine_msg_error(const pc_engine_t *e);

/*
 * Keyed pollers, for progress that no MPI request announces (node-shared
 * memory): a poller is called when its key was kicked (by any thread of any
 * rank on the node, pc_engine_kick), on the holder's next look; it returns
 * how many things it did and kicks its own key again if it wants another
 * look.  A look costs nothing for keys nobody kicked, so a rank may have
 * thousands of pollers.  Keys are numbers < PC_KICK_KEYS that every rank
 * agrees on: pc_engine_key_alloc gives the lowest free one, so ranks that
 * allocate and free in the same order get the same keys.
 */
typedef int (*pc_poll_fn)(pc_engine_t *e, void *arg);
int pc_engine_key_alloc(pc_engine_t *e); /* -1 if none is free */
void pc_engine_key_free(pc_engine_t *e, int key);
/* Holder: install (fn != NULL) or remove the poller of a key. */
void pc_engine_set_poller(pc_engine_t *e, int key, pc_poll_fn fn, void *arg);
/* Any thread: make rank `peer` (this rank, or one on its node) run the
 * poller of `key` soon, waking it.  Returns 0 if peer cannot be reached. */
int pc_engine_kick(pc_engine_t *e, int peer, int key);
/* An application thread of this rank that waits in pcoll next: the poller
 * of `key` runs at the wait's first look; nobody is woken for it (a wait
 * that cannot take the progress token rings for it). */
void pc_engine_mark(pc_engine_t *e, int key);
/* Any thread: wake rank `peer`'s sleeping holder (it looks at what it waits
 * for again), without a key.  Returns 0 if peer cannot be reached. */
int pc_engine_nudge(pc_engine_t *e, int peer);
/* 1 if rank `peer` can be kicked (on this node, doorbells in shared memory). */
int pc_engine_can_kick(const pc_engine_t *e, int peer);

const pc_tags_t *pc_engine_tags(const pc_engine_t *e);

/* Counters for tests and diagnostics. */
typedef struct pc_engine_stats {
    unsigned long long loops, sleeps, tasks, requests;
    /* sent: schedules' messages (data) and the others (control) */
    unsigned long long data_bytes, data_msgs, ctrl_bytes, ctrl_msgs;
    /* messages of rounds given up that MPI has not finished (sends whose
     * buffers are held, stale ones being dropped); stale messages dropped */
    unsigned long long stale_requests, stale_dropped;
} pc_engine_stats_t;
void pc_engine_stats(const pc_engine_t *e, pc_engine_stats_t *out);

#endif
