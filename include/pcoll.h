/*
 * pcoll: collectives for data-parallel training that keeps going when some
 * workers are slow.  One public header; every function returns a status
 * (PCOLL_SUCCESS == 0, negative on error) unless it says otherwise.
 *
 *   pcoll_t *ctx;
 *   pcoll_init(MPI_COMM_WORLD, &ctx);           // dup the comm, start progress
 *   pcoll_allreduce(ctx, grad, grad_sum, n, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0);
 *   pcoll_finalize(&ctx);
 *
 * Threading: a context may be used from any application thread, but a given
 * request or partial object from one thread at a time.  The library's MPI
 * traffic runs on a private duplicate of the user's communicator, on the
 * context's progress thread or, while an application thread blocks in a pcoll
 * call, on that thread; so MPI must provide MPI_THREAD_MULTIPLE.
 */
#ifndef PCOLL_H
#define PCOLL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PCOLL_API __attribute__((visibility("default")))
#else
#define PCOLL_API
#endif

#define PCOLL_VERSION_MAJOR 0
#define PCOLL_VERSION_MINOR 2
#define PCOLL_VERSION_PATCH 0

/*
 * ABI: the structs a caller allocates (configurations, infos, statistics,
 * cost models, profiles) end in a reserved tail of zeros, `reserved`.  A
 * field added later is taken from that tail, so the struct keeps its size,
 * and a zero in it means what the library did before the field existed:
 * a caller compiled against an older pcoll.h keeps working with a newer
 * libpcoll.so, unchanged.  So: initialize a struct with its *_default
 * function or zero it (memset, = {0}) before setting fields, and keep the
 * tail zero.  The library writes zeros into the tail of what it returns.
 * Structs the library allocates and the caller only reads through a
 * pointer (pcoll_round_t, pcoll_fusion_plan_t, pcoll_config_var_t) grow
 * at their end.  Enums only gain values.  A change that cannot keep to this
 * gets a new function and a new major version.  (tests/unit/test_abi.c
 * holds the sizes.)  While the version is 0.x (the library's SOVERSION is
 * 0) this is the aim, not yet a promise: a 0.x release may still break the
 * ABI, and says so in its notes.
 */
#define PCOLL_RESERVED 8

/* ---- status codes -------------------------------------------------------- */

typedef enum pcoll_status {
    PCOLL_SUCCESS = 0,
    PCOLL_ERR_NULL = -1,         /* a required pointer argument is NULL       */
    PCOLL_ERR_ARG = -2,          /* an argument has an invalid value          */
    PCOLL_ERR_COUNT = -3,        /* element count invalid or bytes overflow   */
    PCOLL_ERR_DTYPE = -4,        /* unknown data type                         */
    PCOLL_ERR_OP = -5,           /* unknown reduction operation               */
    PCOLL_ERR_GROUP = -6,        /* bad group map: duplicate / out-of-range
                                    ranks, empty, or caller not a member      */
    PCOLL_ERR_THREAD_LEVEL = -7, /* MPI does not provide MPI_THREAD_MULTIPLE  */
    PCOLL_ERR_MPI = -8,          /* an MPI call failed                        */
    PCOLL_ERR_NOMEM = -9,        /* out of memory                             */
    PCOLL_ERR_CONFIG = -10,      /* a PCOLL_* environment variable is invalid,
                                    or differs between ranks where it must
                                    agree                                     */
    PCOLL_ERR_STATE = -11,       /* object in the wrong state (e.g. in use by
                                    another thread, finalized)                */
    PCOLL_ERR_LIMIT = -12,       /* a resource is exhausted (e.g. tag space)  */
    PCOLL_ERR_INTERNAL = -13,    /* a bug in pcoll: please report it          */
    PCOLL_ERR_TIMEOUT = -14      /* a blocking call waited PCOLL_TIMEOUT_S;
                                    pcoll_last_error() names the operation and
                                    the ranks it was still waiting for        */
} pcoll_status_t;

/*
 * Which status a condition gives, everywhere in the API (one condition, one
 * status):
 *
 *   a required pointer argument is NULL                      PCOLL_ERR_NULL
 *   count 0 where elements are needed, or a byte size that
 *     overflows                                              PCOLL_ERR_COUNT
 *   a dtype that is not one of the four, or not allowed
 *     here (averaging needs a floating-point type)           PCOLL_ERR_DTYPE
 *   an op that is not PCOLL_SUM or PCOLL_AVG                 PCOLL_ERR_OP
 *   a group list that is empty (group_size < 1), holds a
 *     rank twice or out of range, or not the caller          PCOLL_ERR_GROUP
 *   any other argument out of its range (kinds, modes,
 *     sizes, specs, layers, plans)                           PCOLL_ERR_ARG
 *   ranks calling a collective setup with different values   PCOLL_ERR_ARG, naming
 *                                                            the value and the ranks
 *   another rank's part of a collective setup failed         that rank's status,
 *                                                            naming it and why
 *   a PCOLL_* variable malformed, or different between
 *     ranks where it must agree                              PCOLL_ERR_CONFIG
 *   MPI without MPI_THREAD_MULTIPLE                          PCOLL_ERR_THREAD_LEVEL
 *   the object or context in the wrong state: in use by
 *     another thread, freed, drained, a start not completed,
 *     out of step after a timeout                            PCOLL_ERR_STATE
 *   out of memory                                            PCOLL_ERR_NOMEM
 *   out of tag bits, object channels or shared memory        PCOLL_ERR_LIMIT
 *   an MPI call failed                                       PCOLL_ERR_MPI
 *   a blocking call waited PCOLL_TIMEOUT_S                   PCOLL_ERR_TIMEOUT
 *   a bug in pcoll (a broken protocol)                       PCOLL_ERR_INTERNAL
 */

/* Short description of a status code (never NULL). */
PCOLL_API const char *pcoll_strerror(int status);

/* The detailed message of the last error raised in the calling thread, naming
 * the offending argument or variable ("" if none yet). */
PCOLL_API const char *pcoll_last_error(void);

/* ---- logging ------------------------------------------------------------- */

typedef enum pcoll_log_level {
    PCOLL_LOG_NONE = 0,
    PCOLL_LOG_ERROR = 1,
    PCOLL_LOG_WARN = 2, /* default: errors returned to the caller are logged */
    PCOLL_LOG_INFO = 3,
    PCOLL_LOG_DEBUG = 4
} pcoll_log_level_t;

/* Process-wide; the initial value comes from PCOLL_LOG_LEVEL
 * (none|error|warn|info|debug or 0-4). */
PCOLL_API int pcoll_set_log_level(pcoll_log_level_t level);
PCOLL_API pcoll_log_level_t pcoll_get_log_level(void);

/* ---- configuration: the PCOLL_* variables -------------------------------- */

/* One variable that pcoll_init reads (pcoll-info prints them all). */
typedef struct pcoll_config_var {
    const char *name;          /* "PCOLL_TIMEOUT_S"                            */
    const char *range;         /* what a valid value looks like                */
    const char *default_value; /* as text ("0 if oversubscribed, else 50")     */
    const char *description;   /* one line                                     */
    const char *api;           /* the call that changes it after pcoll_init,
                                  "" if none                                   */
    int must_agree;            /* every rank must have the same value          */
} pcoll_config_var_t;

/* Variable i (0, 1, ...), NULL after the last.  The library owns it. */
PCOLL_API const pcoll_config_var_t *pcoll_config_var(int i);

/* The value variable `name` has for this process: the environment's
 * (normalized: "4K" gives "4096"), else the default.  PCOLL_ERR_CONFIG
 * (naming it) if the environment's is malformed, PCOLL_ERR_ARG for a name
 * that is not one of them.  Local; needs no context. */
PCOLL_API int pcoll_config_get(const char *name, char *value, size_t len);

/* ---- data types and operations ------------------------------------------- */

typedef enum pcoll_dtype {
    PCOLL_FLOAT32 = 0,
    PCOLL_FLOAT64 = 1,
    PCOLL_INT32 = 2,
    PCOLL_INT64 = 3
} pcoll_dtype_t;

typedef enum pcoll_op {
    PCOLL_SUM = 0,
    PCOLL_AVG = 1 /* sum, then divided by the group size (integer types:
                     C division, truncating toward zero) */
} pcoll_op_t;

/* Size in bytes of one element, 0 for an unknown type. */
PCOLL_API size_t pcoll_dtype_size(pcoll_dtype_t dtype);
PCOLL_API const char *pcoll_dtype_name(pcoll_dtype_t dtype);

/* Pass as sendbuf to reduce in place in recvbuf (sendbuf == recvbuf works too). */
PCOLL_API extern const char pcoll_in_place_marker;
#define PCOLL_IN_PLACE ((const void *)&pcoll_in_place_marker)

/* ---- context ------------------------------------------------------------- */

typedef struct pcoll_ctx pcoll_t;

/* Collective over comm.  Duplicates comm, checks that MPI provides
 * MPI_THREAD_MULTIPLE (initializing MPI with it when the caller has not
 * initialized MPI; pcoll_finalize then finalizes MPI), reads the PCOLL_*
 * environment variables and starts the progress thread. */
PCOLL_API int pcoll_init(MPI_Comm comm, pcoll_t **ctx);

/* Collective.  Waits for the operations in flight, stops the progress thread,
 * frees the duplicate communicator and sets *ctx to NULL. */
PCOLL_API int pcoll_finalize(pcoll_t **ctx);

/* After ranks died (or stopped answering): a context over the ranks left.
 * Collective over the live ranks of ctx, which must all call it within one
 * round's time of each other (2 PCOLL_TIMEOUT_S + 1 s, or 10 s when the
 * timeout is 0): the ranks that do not take part in time are left out.  They agree on who is
 * left by rounds of messages (the first round with a dead rank takes that
 * long, the others a round trip), then the survivors get *survivors (an
 * MPI_Comm_create_group of them on ctx's communicator, the old ranks in
 * increasing order; the caller frees it) and *newctx (pcoll_init on it).
 * ctx is then replaced: its calls and those of its objects and requests
 * fail with PCOLL_ERR_STATE (pcoll_plan_free frees the handle only), and
 * pcoll_finalize(&ctx) only stops its progress thread (its memory, its
 * objects' included, stays until the process ends; finalizing it again, from
 * another copy of the pointer, does nothing).  Errors: PCOLL_ERR_STATE when
 * the agreed ranks are not more than half of ctx's (this rank may be the
 * one cut off: it must not go on), PCOLL_ERR_MPI when MPI refuses, and
 * PCOLL_ERR_NULL.  Not survived: a rank that dies or falls silent while
 * pcoll_shrink runs.  MPI_Finalize with a dead rank may not return: a job
 * that lost ranks should end its processes with _exit once its output is
 * written. */
PCOLL_API int pcoll_shrink(pcoll_t *ctx, MPI_Comm *survivors, pcoll_t **newctx);

PCOLL_API int pcoll_rank(const pcoll_t *ctx); /* rank in the context's communicator */
PCOLL_API int pcoll_size(const pcoll_t *ctx);

/* What this rank's context has sent since pcoll_init (the counters only
 * grow, but given_up_messages, a count of the moment): data are the messages of allreduces and of partial rounds' data
 * phases, control the small ones (activations, arrivals, HELLOs, stall
 * questions).  Data moved through node-shared memory is not counted. */
typedef struct pcoll_stats {
    uint64_t data_bytes_sent, data_messages_sent;
    uint64_t control_bytes_sent, control_messages_sent;
    /* Partial rounds by messages given up at a view change (a rank left
     * out or taken back: docs/design.md, section 9): their messages that
     * MPI has not finished yet (this rank holds their buffers until then:
     * sends that wait for their receivers to drop them, stale messages
     * being dropped here), and the stale messages dropped so far. */
    uint64_t given_up_messages, stale_messages_dropped;
    uint64_t reserved[PCOLL_RESERVED - 2]; /* zeros: future fields (see "ABI" above) */
} pcoll_stats_t;
PCOLL_API int pcoll_get_stats(const pcoll_t *ctx, pcoll_stats_t *stats);

/*
 * How the thread progressing pcoll uses the CPU: the progress thread, or an
 * application thread blocked in pcoll, which progresses it meanwhile.  It
 * polls MPI (yielding the CPU after every empty poll) for active_spin_us
 * after the last completion while operations are in flight, or idle_spin_us
 * when only receives for incoming activations are posted; then it sleeps in
 * pauses growing to max_sleep_us, or until woken when nothing at all is
 * outstanding.  A second application thread waiting in pcoll while another
 * one progresses it polls for wait_spin_us, then blocks until woken.
 * Defaults: when this node runs more threads than it has CPUs (2 per rank,
 * or a process bound to a single CPU) idle_spin_us = wait_spin_us = 0, else
 * 50; active_spin_us = 2000; max_sleep_us = 200.  The environment variables
 * PCOLL_SPIN_US, PCOLL_WAIT_SPIN_US, PCOLL_ACTIVE_SPIN_US and PCOLL_POLL_MAX_US
 * override the defaults at pcoll_init.
 */
typedef struct pcoll_progress_policy {
    int idle_spin_us;
    int active_spin_us;
    int wait_spin_us;
    int max_sleep_us;
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_progress_policy_t;

PCOLL_API int pcoll_get_progress_policy(const pcoll_t *ctx, pcoll_progress_policy_t *policy);
PCOLL_API int pcoll_set_progress_policy(pcoll_t *ctx, const pcoll_progress_policy_t *policy);

/*
 * Stalls and timeouts of blocking calls (pcoll_allreduce, pcoll_wait, the
 * partial calls that wait, pcoll_allreduce_init).  A call that has waited
 * stall_warn_s seconds prints one warning naming the operation and the ranks
 * it is still waiting for (0: never warn); one that has waited timeout_s
 * fails with PCOLL_ERR_TIMEOUT and the same names in pcoll_last_error()
 * (0: wait forever).  Finding the names takes up to a second more.  Initial
 * values: PCOLL_STALL_WARN_S (default 60) and PCOLL_TIMEOUT_S (default 0).
 *
 * What a timeout leaves behind: an allreduce that timed out is abandoned (its
 * receives are cancelled; its buffers may still be read by sends MPI has
 * not finished) and the ranks are out of step on its group: later
 * operations on that group (on all ranks, for group NULL) fail with
 * PCOLL_ERR_STATE at this rank.  A partial call that timed out leaves the
 * object usable: its contribution stays pending and the rank counts as
 * arrived until its next call; a timed-out flush or free is resumed by
 * calling it again.
 */
PCOLL_API int pcoll_set_timeouts(pcoll_t *ctx, double stall_warn_s, double timeout_s);
PCOLL_API int pcoll_get_timeouts(const pcoll_t *ctx, double *stall_warn_s, double *timeout_s);

/*
 * Setup agreement, for code that sets things up collectively on top of
 * pcoll (a binding, an application's own objects), as the library's own
 * setup calls do.  Collective over the context.  Each rank passes its
 * status so far (PCOLL_SUCCESS, or an error it found alone: `why` says
 * what, NULL for pcoll_last_error()) and n values that must be equal at
 * every rank, names[i] saying what value i is.  The ranks agree on n first,
 * so a rank with more values fails every rank too.  Every rank returns an
 * error if any failed (a failed rank its own; the others its status and
 * "rank 2 failed (there: <why>); every rank fails"), PCOLL_ERR_ARG if a
 * value differs ("<names[i]> differs between ranks: 32 at rank(s) 0, 2; 16
 * at rank(s) 1"), else PCOLL_SUCCESS.  `what` starts the messages (NULL:
 * "pcoll_agree").
 */
PCOLL_API int pcoll_agree(pcoll_t *ctx, const char *what, int status, const char *why, int n,
                          const char *const *names, const int64_t *values);

/* ---- timelines: what every rank did, for pcoll-trace ---------------------- */

/*
 * Recording a timeline (docs/timeline.md): each rank writes PREFIX.R.jsonl,
 * its own events and the library's: every allreduce call, partial call and
 * round, dynamic group, fusion bucket, stall warning and timeout, and the
 * application's marks; `pcoll-trace merge PREFIX -o FILE` makes one Chrome
 * Trace Event Format file of them (Perfetto, chrome://tracing), with the
 * ranks' clocks aligned to rank 0's (offsets measured at start and stop);
 * `pcoll-trace report FILE` names the straggler.
 *
 * pcoll_timeline_start and _stop are collective over the context (every
 * rank, not concurrently with another start or stop); PCOLL_TIMELINE=PREFIX
 * starts one in pcoll_init, and pcoll_finalize stops one that runs.  A
 * prefix whose file cannot be created at some rank fails every rank
 * (PCOLL_ERR_ARG, naming the file; files of an earlier run stay); a start
 * while recording, or a stop while not, PCOLL_ERR_STATE at every rank (a
 * recording rank still ends its file); a file that could not be written,
 * PCOLL_ERR_LIMIT (pcoll_finalize only logs it).  The clock measurement's
 * waits warn and time out as blocking calls do.  Events go into
 * per-thread buffers without locks or allocation, are copied out when a
 * buffer fills and written at the stop; none is lost.
 */
PCOLL_API int pcoll_timeline_start(pcoll_t *ctx, const char *prefix);
PCOLL_API int pcoll_timeline_stop(pcoll_t *ctx);
/* 1 while a timeline records, else 0 (also for a NULL context). */
PCOLL_API int pcoll_timeline_recording(const pcoll_t *ctx);

typedef enum pcoll_mark_phase { PCOLL_MARK_BEGIN = 0, PCOLL_MARK_END = 1 } pcoll_mark_phase_t;
#define PCOLL_MARK_NAME_MAX 63
/* Marks a phase of the application (name: 1 to PCOLL_MARK_NAME_MAX bytes,
 * e.g. "forward", "backward", "step") beginning or ending on the calling
 * thread; a thread's marks nest.  Local; without a running timeline it
 * returns at once (after checking its arguments). */
PCOLL_API int pcoll_timeline_mark(pcoll_t *ctx, const char *name, pcoll_mark_phase_t phase);

/* ---- synchronous allreduce on any group ---------------------------------- */

typedef enum pcoll_allreduce_algo {
    PCOLL_ALGO_AUTO = 0,     /* choose by message size and group size        */
    PCOLL_ALGO_RECDBL = 1,   /* recursive doubling (latency-bound sizes)     */
    PCOLL_ALGO_RABENSEIFNER = 2, /* reduce-scatter + allgather by halving    */
    PCOLL_ALGO_RING = 3,     /* ring reduce-scatter + ring allgather         */
    PCOLL_ALGO_DIRECT = 4,   /* every rank sends to every rank: one round    */
    PCOLL_ALGO_SHM = 5       /* node-shared memory (reported by
                                pcoll_allreduce_algo_for; chosen, not forced) */
} pcoll_allreduce_algo_t;

/* Force an algorithm (PCOLL_ALGO_AUTO restores the automatic choice).  The
 * initial value comes from PCOLL_ALLREDUCE_ALGO=auto|recdbl|rabenseifner|ring|direct. */
PCOLL_API int pcoll_set_allreduce_algo(pcoll_t *ctx, pcoll_allreduce_algo_t algo);

/*
 * The automatic choice for a group of n ranks and a message of `bytes`:
 *   direct        if n >= 3 and (bytes + 1024) * (n - 1) <= direct_bytes
 *                 (PCOLL_ALLREDUCE_DIRECT_BYTES, default 32768: each of the
 *                 n - 1 messages a rank sends costs about 1 KiB extra);
 *   recdbl        else if n <= 2 or bytes <= small_bytes
 *                 (PCOLL_ALLREDUCE_SMALL_BYTES, default 8192);
 *   rabenseifner  else if n is a power of two;
 *   ring          else.
 * A tuning table (PCOLL_TUNING_FILE, written by `pcoll-bench allreduce
 * --tune`) overrides this rule for a call of n ranks where it has rows for
 * n ranks on the context's number of nodes (pcoll_node_count) and the size;
 * partial rounds and fusion buckets keep their own rules.
 */
PCOLL_API int pcoll_set_allreduce_thresholds(pcoll_t *ctx, size_t direct_bytes, size_t small_bytes);

/* The algorithm a call with these sizes would use now.  PCOLL_ALGO_SHM: a
 * blocking pcoll_allreduce of every rank (group NULL) up to
 * PCOLL_SHM_ALLREDUCE_BYTES (unless a tuning table row says a message
 * algorithm for the size) goes through node-shared memory: on one node with
 * the direct algorithm's sums (ranks in order, bit for bit); on several
 * nodes that hold as many ranks each, hierarchically (each node's sum in
 * its shared memory, in rank order; every rank of a node takes a slice of
 * it across the nodes with the ranks of the same place, by the rule above
 * for that many ranks; one rank per node: only the sizes above 8 KiB, which
 * pipeline), the same bits at every rank.  So does a persistent plan
 * (pcoll_allreduce_init) whose members share a node, as a nonblocking
 * schedule in a segment of its own, and a blocking call with a member list
 * whose ranks share a node (sums in the list's order; reported for any
 * group_size below the context's size when the context is one node);
 * nonblocking calls, and groups across nodes, use the rule above. */
PCOLL_API pcoll_allreduce_algo_t pcoll_allreduce_algo_for(const pcoll_t *ctx, size_t bytes, int group_size);
PCOLL_API const char *pcoll_allreduce_algo_name(pcoll_allreduce_algo_t algo);
/* The number of nodes of the context's node map: machines whose ranks share
 * memory, each split into blocks of PCOLL_RANKS_PER_NODE ranks if that is
 * set (0 for a NULL context). */
PCOLL_API int pcoll_node_count(const pcoll_t *ctx);

/*
 * A group map is an ordered list of distinct ranks of the context's
 * communicator (group == NULL: all ranks in rank order, group_size ignored).
 * Every member calls with the same list, count, type and op; operations on
 * one group must be started in the same order at every member.  Operations
 * on different groups may be in flight at once in any order, and any number
 * of them (an operation on a group list exchanges a small handshake with the
 * members it talks to first, which is how its messages are told apart from
 * every other operation's: see docs/design.md, operation identity).
 */
PCOLL_API int pcoll_allreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                    pcoll_dtype_t dtype, pcoll_op_t op, const int *group, int group_size);

typedef struct pcoll_request pcoll_request_t;

/* Buffers must stay valid and untouched until the request completes.
 * With PCOLL_CHECK=1 a call on all ranks first agrees with the other ranks
 * on count, type and op, so it returns only once every rank has called
 * it (without the check it returns at once). */
PCOLL_API int pcoll_iallreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                     pcoll_dtype_t dtype, pcoll_op_t op, const int *group, int group_size,
                     pcoll_request_t **req);

/* *flag = 1 when complete; a completed request is freed and *req set to NULL.
 * The status returned is the operation's. */
PCOLL_API int pcoll_test(pcoll_request_t **req, int *flag);
PCOLL_API int pcoll_wait(pcoll_request_t **req);

/*
 * Persistent allreduce plans (as MPI-4's persistent collectives): the
 * schedule and the operation's identity are set up once, by a call that is
 * collective over the group's members (the same arguments everywhere, or
 * every member fails with PCOLL_ERR_ARG naming the difference); each
 * pcoll_start runs the same allreduce of the same buffers again and
 * allocates nothing.  *req (complete it with pcoll_wait or pcoll_test)
 * belongs to the plan: it is not freed when it completes, and the next start
 * may come once pcoll_wait or pcoll_test has completed it (a start before
 * that fails with PCOLL_ERR_STATE, as with MPI's persistent requests).
 * Plans and operations on one group are started in the same order at every
 * member.
 */
typedef struct pcoll_plan pcoll_plan_t;
PCOLL_API int pcoll_allreduce_init(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count,
                                   pcoll_dtype_t dtype, pcoll_op_t op, const int *group, int group_size,
                                   pcoll_plan_t **plan);
PCOLL_API int pcoll_start(pcoll_plan_t *plan, pcoll_request_t **req);
/* Local: the last start must have been completed by pcoll_wait or pcoll_test.
 * Sets *plan to NULL. */
PCOLL_API int pcoll_plan_free(pcoll_plan_t **plan);

/* ---- partial allreduce (eager-SGD) --------------------------------------- */

typedef enum pcoll_partial_kind {
    PCOLL_PARTIAL_SOLO = 0,     /* the first rank to arrive starts a round   */
    PCOLL_PARTIAL_MAJORITY = 1, /* round r starts when initiator(r) arrives;
                                   initiators drawn from a shared seed       */
    PCOLL_PARTIAL_QUORUM = 2,   /* round r starts once `quorum` ranks arrived */
    PCOLL_PARTIAL_GROUP = 3     /* WAGMA: started as SOLO, but round r sums
                                   only inside each group of round r (groups
                                   of group_size that rotate every round, see
                                   pcoll_partial_group_of); synchronous rounds
                                   (sync_every, flush, free) sum over all   */
} pcoll_partial_kind_t;

typedef enum pcoll_contrib_mode {
    PCOLL_ACCUMULATE = 0, /* contributions add up until a round takes them,
                             results of all rounds since the last call are
                             summed into out (gradients: nothing is lost)     */
    PCOLL_REPLACE = 1,    /* a contribution replaces the previous one and
                             stays until replaced; out is the latest round's
                             result (models)                                  */
    PCOLL_AVERAGE = 2     /* REPLACE, and out is the new model by WAGMA-SGD's
                             rule (as pcoll_partial_average, applied while
                             the result is copied out: one pass less;
                             contribution and out are the same buffer or
                             disjoint); float32 and float64 only            */
} pcoll_contrib_mode_t;

/* One completed round, as seen by an observer. */
typedef struct pcoll_round {
    uint64_t round;
    int root;          /* the rank that started the round (SOLO: the first
                          initiator this rank heard from; MAJORITY: always
                          initiator(round); the leader for synchronous ones) */
    int stand_in;      /* MAJORITY: as far as this rank saw, the leader
                          started the round on behalf of an initiator that was
                          blocked in another pcoll call or flushing */
    int active;
    uint64_t contributions;
    int synchronous;
    const void *result; /* count elements; valid only during the callback */
    size_t count;
    pcoll_dtype_t dtype;
    int group_size;     /* the ranks whose data the result sums: this rank's
                           group (GROUP), else every rank                    */
    const int *group;   /* their ranks, increasing; valid during the callback */
    /* Node-shared rounds go on without a rank whose progress engine has been
     * silent for PCOLL_EXCLUDE_MS (a stopped process): the part it had
     * published is taken as it stands, and its results are kept for it. */
    int n_left_out;     /* the ranks this round went on without */
    const int *left_out; /* their ranks, increasing; valid during the callback */
    uint64_t first_round; /* = round, or for a catch-up (the results kept for
                           this rank while it was silent, delivered as one
                           when it answered again) the first round it holds:
                           result sums rounds first_round..round (REPLACE:
                           round's), and so do active and contributions    */
    int catch_up;
} pcoll_round_t;

typedef void (*pcoll_round_observer_t)(const pcoll_round_t *round, void *arg);

typedef struct pcoll_partial_config {
    pcoll_partial_kind_t kind;
    int quorum;                /* QUORUM: ranks needed, 1 <= quorum <= P      */
    pcoll_contrib_mode_t mode;
    int sync_every;            /* tau: every tau-th round is synchronous
                                  (all ranks arrive); 0 = never.  Then no
                                  pcoll_partial_allreduce call delivers more
                                  than tau rounds, except after the rank was
                                  blocked in another pcoll call (a flush, a
                                  wait...): such a rank counts as arrived, as
                                  otherwise two objects could wait for each
                                  other forever; info.parked tells.  A flush
                                  delivers whatever is outstanding.          */
    uint64_t seed;             /* MAJORITY initiator sequence                 */
    pcoll_round_observer_t observer; /* called for every round from round 0
                                  on (see pcoll_partial_set_observer); NULL:
                                  none                                        */
    void *observer_arg;
    int group_size;            /* GROUP: S >= 2 ranks per group (S >= P: one
                                  group of all); 0 = max(2, round(sqrt(P)))  */
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_partial_config_t;

/* SOLO, ACCUMULATE, quorum 1, group_size 0, sync_every 0, seed 1, no
 * observer. */
PCOLL_API void pcoll_partial_config_default(pcoll_partial_config_t *cfg);

/* "solo", "majority", "quorum", "group"; NULL for another value. */
PCOLL_API const char *pcoll_partial_kind_name(pcoll_partial_kind_t kind);

/* Parse "solo", "majority", "quorum:Q", "group" or "group:S" into
 * cfg->kind / cfg->quorum / cfg->group_size (the rest of cfg unchanged). */
PCOLL_API int pcoll_partial_config_parse(const char *spec, pcoll_partial_config_t *cfg);

typedef struct pcoll_partial pcoll_partial_t;

/* What one call delivered.  Round numbers count from 0 per object. */
typedef struct pcoll_partial_info {
    uint64_t rounds;        /* rounds whose results this call delivered       */
    uint64_t first_round;   /* valid when rounds > 0                          */
    uint64_t last_round;
    int active;             /* active ranks in the last round: ranks waiting
                               in the library when the round took their data  */
    int active_min;         /* the fewest active ranks in any covered round   */
    uint64_t active_total;  /* active ranks summed over the covered rounds    */
    uint64_t contributions; /* contributions summed into the covered rounds
                               (ACCUMULATE: calls; REPLACE: one per rank that
                               has contributed at least once)                */
    int own_included;       /* this call's contribution is in the result      */
    int root;               /* rank that started the last round               */
    int synchronous;        /* the last round was synchronous (tau or flush)  */
    uint64_t parked;        /* covered rounds that counted this rank as arrived
                               while it was blocked in another pcoll call (see
                               pcoll_partial_config_t.sync_every)             */
    int group_size;         /* the ranks whose data the last round summed here:
                               this rank's group (GROUP), else all ranks      */
    const int *group;       /* their ranks, increasing; valid until the next
                               call on the object (NULL when rounds == 0)     */
    uint64_t last_contributions; /* contributions summed into the last round   */
    uint64_t left_out_rounds; /* covered rounds that went on without a silent
                               rank (see pcoll_round_t.left_out)             */
    uint64_t caught_up;     /* covered rounds kept for this rank while it was
                               silent, delivered when it answered again       */
    const int *left_out;    /* the ranks the last covered round went on
                               without, increasing; valid until the next call
                               on the object                                  */
    int n_left_out;         /* their number                                   */
    int unused_;            /* zero                                           */
    uint64_t reserved[PCOLL_RESERVED - 4]; /* zeros: future fields (see "ABI" above) */
} pcoll_partial_info_t;

/* Collective over the context (every rank, same order, same arguments).
 * count >= 1 elements of dtype. */
PCOLL_API int pcoll_partial_create(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype,
                         const pcoll_partial_config_t *cfg, pcoll_partial_t **p);

/*
 * Contribute and collect (docs/design.md, section 5):
 *  1. contribution is added (ACCUMULATE) or copied (REPLACE) into the pending
 *     buffer;
 *  2. if rounds completed since the previous call, return their results at
 *     once (own_included = 0: the contribution waits for a later round);
 *  3. else if a round is in progress here, wait for it;
 *  4. else this rank is active for the next round: SOLO starts it, MAJORITY
 *     starts it if this rank is its initiator, QUORUM reports the arrival to
 *     the leader; wait until it completes (own_included = 1).
 * out (count elements) receives in ACCUMULATE mode the sum of the results of
 * every round delivered, in REPLACE mode the latest one.  contribution may be
 * NULL to contribute nothing.  info may be NULL.
 */
PCOLL_API int pcoll_partial_allreduce(pcoll_partial_t *p, const void *contribution, void *out,
                            pcoll_partial_info_t *info);

/* Local: step 1 of pcoll_partial_allreduce alone.  contribution is added
 * (ACCUMULATE) or copied (REPLACE) into the pending buffer, and the call
 * returns at once: it starts no round, waits for none and delivers nothing.
 * The next round that takes this rank's part takes it (e.g. before a
 * flush: in REPLACE mode the flush then averages the current models, not
 * the ones last given to pcoll_partial_allreduce). */
PCOLL_API int pcoll_partial_deposit(pcoll_partial_t *p, const void *contribution);

/* Collective: runs a synchronous round that takes every pending contribution
 * and returns, like pcoll_partial_allreduce, every round not yet delivered. */
PCOLL_API int pcoll_partial_flush(pcoll_partial_t *p, void *out, pcoll_partial_info_t *info);

/* Collective: drains the rounds in flight, frees the object, sets *p = NULL.
 * Undelivered results are discarded (flush first to keep them). */
PCOLL_API int pcoll_partial_free(pcoll_partial_t **p);


/* Called at every completed round, in round order, on the thread progressing
 * pcoll (the progress thread, or an application thread blocked in a pcoll
 * call).  Keep it short; it must not call pcoll.  NULL removes the observer.
 * Rounds may complete at a rank before its first call on the object (other
 * ranks run them): to see every round from round 0, set cfg.observer at
 * create instead. */
PCOLL_API int pcoll_partial_set_observer(pcoll_partial_t *p, pcoll_round_observer_t fn, void *arg);

/* initiator(r) of a MAJORITY object: a seeded random permutation of the ranks
 * per block of P rounds, so every rank initiates equally often. */
PCOLL_API int pcoll_partial_initiator(const pcoll_partial_t *p, uint64_t round);

/* The ranks whose data round `round` of a GROUP object sums at this rank,
 * computed locally (every rank computes the same groups): members (room for
 * *n ints on entry) receive them in increasing order, *n their number.  A
 * synchronous round (every sync_every-th) and the other kinds: every rank.
 * (A flush or free round, whatever its number, sums over every rank.)
 * These are the groups of every rank; while rounds by messages go on
 * without a silent rank (PCOLL_EXCLUDE_MS), the groups form over the ranks
 * still in: the observer's and pcoll_partial_info_t's group name them.
 * PCOLL_ERR_ARG if *n is too small (*n is set to the size needed). */
PCOLL_API int pcoll_partial_group_of(const pcoll_partial_t *p, uint64_t round, int *members, int *n);

/* WAGMA-SGD's group model averaging (Algorithm 2 of Li et al., 2020), for a
 * REPLACE object whose contributions are models (a PCOLL_AVERAGE object
 * applies it in the call itself).  After
 *   pcoll_partial_allreduce(p, local, model, &info)
 * it turns the sum in `model` into the new model:
 *   own model in the sum (info.own_included):  model = sum / n
 *   else (the sum holds an older one):         model = (sum + local) / (n + 1)
 * with n = info.last_contributions (the group's size S' once every member
 * has contributed; P for a synchronous round).  If no round was delivered,
 * model = local.  Floating-point types only (PCOLL_ERR_DTYPE otherwise). */
PCOLL_API int pcoll_partial_average(const pcoll_partial_t *p, const pcoll_partial_info_t *info, const void *local,
                                    void *model);

/* How the object's rounds move data: "shared-memory" (every rank on one node
 * and at most PCOLL_PARTIAL_SHM_BYTES of data) or "messages"; NULL for NULL. */
PCOLL_API const char *pcoll_partial_data_phase(const pcoll_partial_t *p);


/* ---- partial reduce among dynamic groups (Partial Reduce, Ripples) ------- */

/*
 * A rank that is ready (finished its local step) asks for a group; a
 * controller on one rank forms groups of ready ranks on the fly, and each
 * group averages its models (an allreduce among its members only, every
 * group a fresh operation).  See docs/algorithms.md.
 *
 *   rank i: local step -> pcoll_preduce(obj, model, k, &info)
 *             READY(k) --> controller (a rank's progress engine; small
 *                          messages, no model data)
 *             <-- GROUP(id, members, weight, iteration)
 *           model = sum over members of weight_j * model_j   (allreduce)
 *             DONE(id) --> controller
 */
typedef enum pcoll_preduce_policy {
    PCOLL_PREDUCE_FIFO = 0,           /* Partial Reduce: the first group_size
                                         ready ranks, in arrival order       */
    PCOLL_PREDUCE_RIPPLES_RANDOM = 1, /* Ripples: the requester and S - 1
                                         random others; a lock vector and a
                                         pending queue serialize overlaps    */
    PCOLL_PREDUCE_RIPPLES_SMART = 2,  /* Ripples: group buffers, Global
                                         Division of the idle ranks, the
                                         slow-worker filter, inter-intra     */
    PCOLL_PREDUCE_RIPPLES_STATIC = 3  /* Ripples: no controller, a periodic
                                         conflict-free schedule by node      */
} pcoll_preduce_policy_t;

typedef struct pcoll_preduce_config {
    pcoll_preduce_policy_t policy;
    int group_size;      /* FIFO: P, ranks per group; RANDOM, SMART: S;
                            0 = 3 (at most the number of ranks)             */
    int dynamic_weights; /* FIFO: staleness-aware weights from the ranks'
                            iterations (Partial Reduce 3.3), else 1/n       */
    double alpha;        /* their decay, 0 <= alpha < 1 (default 0.5)       */
    int frozen_avoidance;/* FIFO: bridge disconnected groups (default 1)    */
    int window;          /* FIFO: T, the groups the sync graph covers;
                            0 = 2 ceil((N - 1) / (P - 1))                   */
    int slow_threshold;  /* SMART: C_thres, leave out ranks whose request
                            counter lags the requester's by this many or
                            more; 0 = no filter (default 4)                 */
    int inter_intra;     /* SMART: one head per node across nodes, then each
                            node's ranks together (default 0)               */
    int controller;      /* the controller's rank (default 0)               */
    uint64_t seed;       /* random groups (default 1)                       */
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_preduce_config_t;

/* FIFO, group_size 0, constant weights, alpha 0.5, frozen avoidance on,
 * window 0, slow_threshold 4, no inter-intra, controller 0, seed 1. */
PCOLL_API void pcoll_preduce_config_default(pcoll_preduce_config_t *cfg);

/* "fifo", "ripples:random", "ripples:smart", "ripples:static"; NULL for
 * another value. */
PCOLL_API const char *pcoll_preduce_policy_name(pcoll_preduce_policy_t policy);

/* Parse a spec into cfg (fields it does not name keep their values):
 *   fifo[:P][:const|:dyn][:noavoid][:window=T][:alpha=A]
 *   ripples:random[:S]
 *   ripples:smart[:S][:c=C][:ii]
 *   ripples:static
 * and, after any of them, [:ctl=RANK][:seed=N].  E.g. "fifo:3:dyn",
 * "ripples:smart:3". */
PCOLL_API int pcoll_preduce_config_parse(const char *spec, pcoll_preduce_config_t *cfg);

typedef struct pcoll_preduce pcoll_preduce_t;

typedef struct pcoll_preduce_info {
    uint64_t group_id;   /* the controller's number of the group (1, 2, ...;
                            static: the step)                                */
    int group_size;      /* members; 1: nobody to average with this time    */
    const int *members;  /* increasing; valid until the next call           */
    double weight;       /* this rank's weight in the average               */
    uint64_t iteration;  /* the group's iteration after the reduce: the
                            largest of its members' (FIFO: as they asked;
                            Ripples: as the controller knew them when it
                            formed the group, so it may be below yours)    */
    double wait_s;       /* from ready to the group's start                  */
    double reduce_s;     /* the group's allreduce                           */
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_preduce_info_t;

/* Collective (every rank, same arguments: they are checked).  count >= 1
 * elements of a floating-point dtype. */
PCOLL_API int pcoll_preduce_create(pcoll_t *ctx, size_t count, pcoll_dtype_t dtype,
                                   const pcoll_preduce_config_t *cfg, pcoll_preduce_t **obj);

/* This rank is ready: blocks until its group has averaged; then
 * model_inout holds the group's weighted average.  iteration: this rank's
 * iteration count (staleness-aware weights use it).  info may be NULL.
 * RIPPLES_STATIC: every rank must call equally often (the schedule pairs
 * their k-th calls). */
PCOLL_API int pcoll_preduce(pcoll_preduce_t *obj, void *model_inout, uint64_t iteration,
                            pcoll_preduce_info_t *info);

/* Controller statistics (meaningful at the controller's rank). */
typedef struct pcoll_preduce_stats {
    uint64_t requests, groups, bridges, holds, conflicts, divisions;
    double busy_s;       /* time spent in the controller's decisions        */
    double open_s;       /* since the object was created                    */
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_preduce_stats_t;
PCOLL_API int pcoll_preduce_get_stats(const pcoll_preduce_t *obj, pcoll_preduce_stats_t *stats);

/* Collective, at the end: this rank asks for no more groups; the groups the
 * controller planned with it already (Ripples' policies put ranks into
 * groups before they are ready) run now with model_inout, which then holds
 * the average of the last of them (unchanged if there was none).  So every
 * member of every group ends with its group's average.  Afterwards only
 * pcoll_preduce_free may be called. */
PCOLL_API int pcoll_preduce_drain(pcoll_preduce_t *obj, void *model_inout);

/* Collective: drains with the model of this rank's last call if
 * pcoll_preduce_drain was not called (the groups still planned with this
 * rank then average that model, but their results are not returned:
 * drain first to keep them), frees, sets *obj = NULL. */
PCOLL_API int pcoll_preduce_free(pcoll_preduce_t **obj);

/* ---- merged-gradient buckets overlapped with backprop (MG-WFBP) --------- */

/*
 * Backprop computes the gradients of the last layer first.  One allreduce
 * per layer (WFBP) starts each layer's exchange the moment it is ready but
 * pays the startup cost a of T(M) = a + bM per layer; one allreduce after
 * backprop (single) pays a once and hides nothing.  A plan merges
 * consecutive layers into buckets so that the iteration ends as early as
 * the cost model predicts it can; an executor starts each bucket's
 * allreduce the moment its last layer is ready.  docs/algorithms.md,
 * "Merged-gradient buckets".
 *
 *   calibrate (or a given a, b) -> cost model
 *   profile (bytes, backward time per layer) + model + strategy -> plan
 *   pcoll_fusion_create(plan, gradient buffer) -> per step:
 *     backprop: pcoll_fusion_ready(f, layer) as each layer is done
 *     pcoll_fusion_wait(f), then the update
 */

/* T(M) in microseconds for M bytes: a + bM, or piecewise by size range
 * (measured curves have protocol switches).  Up to PCOLL_COST_MAX_SEGMENTS
 * segments. */
#define PCOLL_COST_MAX_SEGMENTS 16
typedef struct pcoll_cost_segment {
    double from_bytes; /* the segment applies from this size up (segment 0: 0) */
    double a_us;       /* T(M) = a_us + b_us * M within the segment          */
    double b_us;
} pcoll_cost_segment_t;

typedef struct pcoll_cost_model {
    double a_us, b_us;   /* the linear model                                */
    int piecewise;       /* 1: predictions use segment[]; 0: a + bM         */
    int nsegments;
    pcoll_cost_segment_t segment[PCOLL_COST_MAX_SEGMENTS];
    /* how well each fitted the samples (0 when the model was given) */
    int nsamples;
    double linear_rms_us, linear_max_rel;       /* rms error; largest |error| / time */
    double piecewise_rms_us, piecewise_max_rel;
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_cost_model_t;

/* T(M) = a_us + b_us M (a_us >= 0, b_us >= 0, both finite). */
PCOLL_API int pcoll_cost_model_linear(double a_us, double b_us, pcoll_cost_model_t *model);
/* "A,B": a in microseconds, b in microseconds per byte. */
PCOLL_API int pcoll_cost_model_parse(const char *text, pcoll_cost_model_t *model);
/* Least squares over n >= 2 samples (bytes, microseconds): a + bM (a, b >=
 * 0), and a piecewise-linear model with the fewest segments (each over two
 * sizes or more, spanning a factor of two) whose rms relative error is
 * within 3% (or the most accurate); piecewise is set when there are 4
 * samples or more.  Beyond the largest sample the last segment is
 * extrapolated. */
PCOLL_API int pcoll_cost_model_fit(const double *bytes, const double *us, int n, pcoll_cost_model_t *model);
/* The predicted time of an allreduce of `bytes` (the model in use). */
PCOLL_API double pcoll_cost_predict(const pcoll_cost_model_t *model, double bytes);

typedef struct pcoll_calibrate_config {
    size_t min_bytes, max_bytes; /* sizes doubling from min to max (4, 64M) */
    int reps;                    /* per size (0: 50 for small sizes, fewer for
                                    large ones, at least 5)                 */
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_calibrate_config_t;
PCOLL_API void pcoll_calibrate_config_default(pcoll_calibrate_config_t *cfg);

/* Collective over the group (NULL: every rank): times the allreduce the
 * buckets use (float32 sum, in place) at each size (the median over reps of
 * the slowest member) and fits *model (pcoll_cost_model_fit).  Every
 * member gets the same model.  cfg NULL: the defaults. */
PCOLL_API int pcoll_calibrate(pcoll_t *ctx, const int *group, int group_size, const pcoll_calibrate_config_t *cfg,
                              pcoll_cost_model_t *model);

typedef enum pcoll_fusion_strategy {
    PCOLL_FUSION_OPTIMAL = 0, /* the least predicted iteration time over every
                                 way to merge consecutive layers (dynamic
                                 programming, exact under the model)        */
    PCOLL_FUSION_MGWFBP = 1,  /* MG-WFBP's Algorithm 1: merge layer l into
                                 l - 1 when the merged exchange of l - 1 ends
                                 sooner (a linear model: tau_b[l-2] - tau_c[l] < a) */
    PCOLL_FUSION_WFBP = 2,    /* one allreduce per layer                    */
    PCOLL_FUSION_SINGLE = 3,  /* one allreduce after backprop (SyncEASGD)   */
    PCOLL_FUSION_FIXED = 4    /* greedy buckets of at most fixed_bytes in
                                 backprop order (PyTorch DDP, Horovod)      */
} pcoll_fusion_strategy_t;

typedef struct pcoll_fusion_spec {
    pcoll_fusion_strategy_t strategy;
    size_t fixed_bytes;       /* FIXED: the bucket size cap               */
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_fusion_spec_t;

/* "optimal", "mgwfbp", "wfbp", "single", "fixed:BYTES" (K, M, G suffixes,
 * e.g. fixed:25M). */
PCOLL_API int pcoll_fusion_spec_parse(const char *text, pcoll_fusion_spec_t *spec);
/* "optimal", "mgwfbp", ..., "fixed:26214400" into buf. */
PCOLL_API void pcoll_fusion_spec_name(const pcoll_fusion_spec_t *spec, char *buf, size_t len);

/* A model's layers in forward order: index 0 is the first layer, whose
 * gradient backprop computes last. */
typedef struct pcoll_fusion_profile {
    int nlayers;
    const size_t *bytes;        /* each layer's gradient                    */
    const double *backward_us;  /* each layer's backward time               */
    double forward_us;          /* the forward pass                         */
    uint64_t reserved[PCOLL_RESERVED]; /* zeros: future fields (see "ABI" above) */
} pcoll_fusion_profile_t;

/* A plan: which layers share a bucket, and what the model predicts.
 * Buckets are numbered in the order they start (bucket 0 holds the last
 * layers); bucket b is layers first[b] .. last[b]. */
typedef struct pcoll_fusion_plan {
    pcoll_fusion_spec_t spec;
    int nlayers, nbuckets;
    int *bucket_of;      /* [nlayers]                                       */
    int *first, *last;   /* [nbuckets]                                      */
    size_t *bytes;       /* [nbuckets]                                      */
    double *start_us, *end_us; /* [nbuckets]: its allreduce, predicted, from
                                  the start of the forward pass             */
    double iter_us;      /* predicted iteration: until the last allreduce ends */
    double compute_us;   /* forward + backward                              */
    double comm_us;      /* every bucket's allreduce time                   */
    double exposed_us;   /* iter_us - compute_us: communication not hidden   */
} pcoll_fusion_plan_t;

/* Pure (no MPI): the plan of a strategy for a profile under a model. */
PCOLL_API int pcoll_fusion_plan_create(const pcoll_fusion_profile_t *profile, const pcoll_cost_model_t *model,
                                       const pcoll_fusion_spec_t *spec, pcoll_fusion_plan_t **plan);
/* The model's prediction for an existing plan (under another model, say). */
PCOLL_API int pcoll_fusion_plan_predict(pcoll_fusion_plan_t *plan, const pcoll_fusion_profile_t *profile,
                                        const pcoll_cost_model_t *model);
PCOLL_API void pcoll_fusion_plan_free(pcoll_fusion_plan_t **plan);

typedef struct pcoll_fusion pcoll_fusion_t;

/*
 * Collective over the group (NULL: every rank; the same plan and layout at
 * every member, or every member fails naming the difference).  Layer l's
 * gradient is layer_count[l] elements at grad + layer_offset[l] elements;
 * a bucket whose layers fill one stretch of grad, one after the other in
 * forward or in backprop order (a flat buffer that backprop fills from its
 * start), is reduced in place, another through a buffer of its own (a copy
 * in and out).  Each bucket's
 * allreduce is a persistent plan set up here: the steps allocate nothing.
 * Every bucket uses a tree-shaped algorithm (recursive doubling, or
 * Rabenseifner for large buckets: both add every element up in the same
 * order), so each element's result has the same bits whatever the plan: the
 * same as pcoll_allreduce of its layer alone with PCOLL_ALLREDUCE_ALGO=recdbl.
 */
PCOLL_API int pcoll_fusion_create(pcoll_t *ctx, const int *group, int group_size, void *grad, pcoll_dtype_t dtype,
                                  pcoll_op_t op, const size_t *layer_offset, const size_t *layer_count,
                                  const pcoll_fusion_plan_t *plan, pcoll_fusion_t **fusion);
/* Layer `layer`'s gradient is complete in grad (once per step, any order):
 * the buckets whose layers are all ready start, in plan order. */
PCOLL_API int pcoll_fusion_ready(pcoll_fusion_t *fusion, int layer);
/* Waits until every bucket of the step is reduced, then the next step may
 * begin.  A layer never marked ready fails the call (PCOLL_ERR_STATE,
 * naming it) after the buckets already started completed. */
PCOLL_API int pcoll_fusion_wait(pcoll_fusion_t *fusion);
/* Local, between steps.  Sets *fusion = NULL. */
PCOLL_API int pcoll_fusion_free(pcoll_fusion_t **fusion);

#ifdef __cplusplus
}
#endif

#endif /* PCOLL_H */
