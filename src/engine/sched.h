/*
 * Schedules: a DAG of steps with dependency counters (docs/design.md, section 2).
 *
 *   builder:  s = pc_sched_new(); a = pc_sched_send(...); b = pc_sched_recv(...);
 *             c = pc_sched_reduce(...); pc_sched_dep(s, a, c); pc_sched_dep(s, b, c);
 *             pc_sched_commit(s);                       (allocates scratch)
 *   each run: pc_sched_bind(s, PC_SLOT_IN, buf) ...; pc_sched_start(s, issuer)
 *             issuer posts send/recv steps and reports them with
 *             pc_sched_step_done(); local steps run at once; on_done fires
 *             when every step has completed; the schedule can then be started
 *             again (re-armed) for the next round.
 *
 * Peers are group indices: a schedule built for "index `me` of a group of n"
 * serves every group of that size.  Each run binds the group map (index ->
 * rank, pc_sched_bind_ranks) and the tags (pc_sched_set_tags): receives use
 * the run's own tag base, sends the base of their destination (engine/tags.h).
 *
 * A step is issued when all its dependencies completed (AND), or, when marked
 * OR, at the first one; either way it runs at most once per run (consumable).
 * This file has no MPI in it: the issuer is the engine, or a test's loopback.
 * Builder calls after an error are no-ops; the error is returned by commit.
 */
#ifndef PC_ENGINE_SCHED_H
#define PC_ENGINE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "../util/error.h"
#include "pcoll.h"

typedef enum pc_step_kind {
    PC_STEP_SEND,
    PC_STEP_RECV,
    PC_STEP_REDUCE,   /* dst = a + b, elementwise                */
    PC_STEP_SCALE,    /* dst /= divisor (average)                */
    PC_STEP_COPY,     /* dst = a, bytes                          */
    PC_STEP_NOP,
    PC_STEP_CALLBACK, /* fn(s, arg) on the thread running the schedule */
    PC_STEP_BARRIER   /* node-shared barrier (engine/nodebar.h): posted to
                         the issuer like a message, done when every member
                         arrived */
} pc_step_kind_t;

/* A place in one of the schedule's buffer slots. */
typedef struct pc_ref {
    uint32_t slot;
    size_t off; /* bytes */
} pc_ref_t;

enum {
    PC_SLOT_IN = 0,  /* caller's input (bound per run)  */
    PC_SLOT_OUT = 1, /* caller's output (bound per run) */
    PC_NUM_BOUND_SLOTS = 2
};

static inline pc_ref_t pc_ref(uint32_t slot, size_t off)
{
    pc_ref_t r = {slot, off};
    return r;
}

typedef struct pc_sched pc_sched_t;
typedef void (*pc_step_fn)(pc_sched_t *s, void *arg);
typedef void (*pc_sched_done_fn)(pc_sched_t *s, int status, void *arg);

/* Runs communication steps for a schedule. post() starts step `step` and must
 * eventually call pc_sched_step_done(s, step, status, issuer).
 * local (optional) takes the data steps (reduce, scale, copy) the same way
 * instead of the schedule computing them at once: a simulator charges their
 * time (tools/sim); NULL for every real issuer. */
typedef struct pc_issuer {
    int (*post)(void *self, pc_sched_t *s, int step);
    void *self;
    int (*local)(void *self, pc_sched_t *s, int step);
} pc_issuer_t;

pc_sched_t *pc_sched_new(void);
void pc_sched_free(pc_sched_t *s);

/* ---- building ---- */
int pc_sched_scratch(pc_sched_t *s, size_t bytes); /* returns a slot id */
/* A slot of memory the schedule does not own (node-shared segments), bound
 * for each run with pc_sched_bind like PC_SLOT_IN; returns its id. */
int pc_sched_external(pc_sched_t *s);
int pc_sched_send(pc_sched_t *s, pc_ref_t buf, size_t bytes, int peer, int tagstep);
int pc_sched_recv(pc_sched_t *s, pc_ref_t buf, size_t bytes, int peer, int tagstep);
int pc_sched_reduce(pc_sched_t *s, pc_ref_t dst, pc_ref_t a, pc_ref_t b, size_t count,
                    pcoll_dtype_t dtype);
int pc_sched_scale(pc_sched_t *s, pc_ref_t dst, size_t count, pcoll_dtype_t dtype, int64_t divisor);
int pc_sched_copy(pc_sched_t *s, pc_ref_t dst, pc_ref_t src, size_t bytes);
int pc_sched_nop(pc_sched_t *s);
int pc_sched_callback(pc_sched_t *s, pc_step_fn fn, void *arg);
/* Barrier `index` (1, 2, ... within a run) of the members bound with
 * pc_sched_bind_barrier: the run's barrier base + index. */
int pc_sched_barrier(pc_sched_t *s, int index);
/* Before commit: a schedule without data (a simulator's time-only mode):
 * commit allocates no scratch, nothing reads or writes a buffer, and it runs
 * only with an issuer that takes the data steps (pc_issuer_t.local). */
void pc_sched_set_virtual(pc_sched_t *s);
/* `after` waits for `before`. Negative ids (from an earlier failure) are ignored. */
void pc_sched_dep(pc_sched_t *s, int before, int after);
void pc_sched_set_or(pc_sched_t *s, int step);
/* Makes building fail with this status (commit returns it). */
void pc_sched_fail(pc_sched_t *s, int status);
/* Ends building: checks the graph, allocates scratch. Returns a status. */
int pc_sched_commit(pc_sched_t *s);

/* ---- running ---- */
/* PC_SLOT_IN, PC_SLOT_OUT or an external slot. */
void pc_sched_bind(pc_sched_t *s, uint32_t slot, void *ptr);
/* The barrier of the next runs' barrier steps (must outlive them). */
struct pc_nodebar;
void pc_sched_bind_barrier(pc_sched_t *s, struct pc_nodebar *b);
struct pc_nodebar *pc_sched_bound_barrier(const pc_sched_t *s);
/* A barrier step's number for the bound barrier: base + index. */
uint64_t pc_sched_step_barrier(const pc_sched_t *s, int step);
void pc_sched_on_done(pc_sched_t *s, pc_sched_done_fn fn, void *arg);
/* The group map of the next runs: ranks[i] is the rank of group index i
 * (NULL: index i is rank i).  The array must outlive the runs. */
void pc_sched_bind_ranks(pc_sched_t *s, const int *ranks);
int pc_sched_peer_rank(const pc_sched_t *s, int index);
/* The communicator of the next runs' messages: comm points to an MPI_Comm
 * (opaque here) and comm_ranks[i] is group index i's rank in it (NULL
 * comm: the engine's, with the ranks of the group map).  The group map
 * still names the ranks of the engine's communicator (doorbells, stall
 * reports).  Both must outlive the runs. */
void pc_sched_set_comm(pc_sched_t *s, const void *comm, const int *comm_ranks);
const void *pc_sched_comm(const pc_sched_t *s);
int pc_sched_comm_peer(const pc_sched_t *s, int index);
/* Tags of the next runs: a receive uses recv_base | tagstep, a send to index
 * i send_bases[i] | tagstep (send_bases NULL: recv_base as well).  The array
 * must outlive the runs. */
void pc_sched_set_tags(pc_sched_t *s, int recv_base, const int *send_bases);
int pc_sched_step_tag(const pc_sched_t *s, int step, uint32_t step_mask);
/* Makes the current run finish with this status and message (the first
 * failure of a run wins). */
void pc_sched_fail_run(pc_sched_t *s, int status, const char *fmt, ...) PC_PRINTF(3, 4);
/* The status of the current (or last) run and what failed. */
int pc_sched_status(const pc_sched_t *s);
const pc_fault_t *pc_sched_fault(const pc_sched_t *s);
/* Abandons the current run: steps that become ready are completed with
 * `status` without being posted or run (nothing touches the buffers any
 * more); on_done fires once the steps posted before have completed. */
void pc_sched_abort(pc_sched_t *s, int status);
/* Re-arms every counter and issues the steps without dependencies. */
int pc_sched_start(pc_sched_t *s, const pc_issuer_t *iss);
/* Reports a communication step finished (status != 0: it failed). */
void pc_sched_step_done(pc_sched_t *s, int step, int status, const pc_issuer_t *iss);

/* ---- inspection (issuers, tests, debugging) ---- */
int pc_sched_running(const pc_sched_t *s);
int pc_sched_nsteps(const pc_sched_t *s);
pc_step_kind_t pc_sched_step_kind(const pc_sched_t *s, int step);
void *pc_sched_step_buf(const pc_sched_t *s, int step); /* send/recv buffer */
/* Bytes a step moves or touches: its message, or for reduce and scale the
 * elements times their size, for copy its length. */
size_t pc_sched_step_bytes(const pc_sched_t *s, int step);
int pc_sched_step_peer(const pc_sched_t *s, int step); /* group index */
/* The distinct group indices this schedule sends to (kind PC_STEP_SEND) or
 * receives from (PC_STEP_RECV), ascending, into out (at most max, the group
 * size is enough); returns how many were stored. */
int pc_sched_peers(const pc_sched_t *s, pc_step_kind_t kind, int *out, int max);
/* Group indices of the messages of the running run that are posted and not
 * complete (what the run waits for), ascending; returns how many were stored
 * (at most max). */
int pc_sched_waiting_on(const pc_sched_t *s, int *out, int max);
int32_t *pc_sched_step_aux(pc_sched_t *s, int step); /* free for the issuer's use */
size_t pc_sched_scratch_bytes(const pc_sched_t *s); /* total owned scratch */
/* Scratch buffers currently allocated by all schedules (tests check it drops to 0). */
long pc_sched_live_scratch(void);

#endif
