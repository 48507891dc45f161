/*
 * Allreduce operations in flight (requests) and how they get their identity
 * (engine/tags.h).
 *
 *   world (group NULL)        channel 0, operation number seq: the tags are
 *                             known to every rank without a message; at most
 *                             seq_mod in flight, the rest wait in line here
 *   group list, or a plan     member-agreed ids: HELLO first
 *
 *   rank x, group g, operation k on g        rank y (a member x sends to)
 *   allocate id_x from the pool
 *   HELLO(g, id_x, arguments) to every  ---> queued in y's record of g until
 *     member that sends to x                 y's k-th operation on g that
 *   wait for id_y of every member x          needs x's number takes it
 *     sends to (its HELLO, queued or
 *     awaited in x's record of g)
 *   run the schedule: receives tagged id_x, a send to y tagged id_y
 *   done: id_x back to the pool
 *
 * A HELLO also carries the arguments: a member that calls with a different
 * count, type, operation or algorithm fails the operation with
 * PCOLL_ERR_ARG instead of exchanging messages of the wrong size.
 */
#ifndef PC_CORE_OP_H
#define PC_CORE_OP_H

#include <stdatomic.h>

#include "../engine/progress.h"
#include "context.h"

/* A committed schedule and the peers its identity needs (cached together). */
typedef struct pc_built {
    pc_sched_t *sched;
    int *send_peers, nsend; /* member indices this rank sends to */
    int *recv_peers, nrecv; /* member indices it receives from */
} pc_built_t;

typedef struct pc_op_args {
    int n, me;
    size_t count;
    pcoll_dtype_t dtype;
    pcoll_op_t op;
    pcoll_allreduce_algo_t algo;
    int inplace;
    size_t shm_piece; /* PCOLL_ALGO_SHM: see algo/allreduce.h */
    int shm_slice;
} pc_op_args_t;

/* Builds the schedule of args and its peer lists. */
int pc_built_make(const pc_op_args_t *args, pc_built_t *b);
void pc_built_free(pc_built_t *b);

typedef enum { PC_OP_WORLD, PC_OP_GROUP, PC_OP_PLAN_INIT, PC_OP_PLAN_START } pc_op_kind_t;

/* A world operation that runs among some of the ranks: one column of a
 * hierarchical allreduce (core/shm_allreduce.c: the ranks with the same
 * place on every node).  Every rank of the context runs one such operation
 * in the same order, the other columns theirs, so the operation numbers
 * (channel 0) stay in step at every rank and need no message.  The numbers
 * of a call's parts are reserved when the call begins, so that a rank that
 * has begun it counts as started in stall reports even before it reaches
 * its parts. */
typedef struct pc_world_part {
    const int *ranks; /* index -> rank, n of them (must outlive the run) */
    int n, me;
    uint64_t seq;     /* its operation number (pc_world_reserve) */
} pc_world_part_t;

struct pcoll_request {
    pcoll_t *ctx;
    pc_op_kind_t kind;
    const char *fn;         /* the public call that made it */
    pc_op_args_t args;
    pc_built_t b;           /* the schedule (a plan's: its own) */
    pc_group_t *group;      /* GROUP, PLAN_*: the record */
    uint64_t seq;           /* WORLD: the operation number */
    const int *ranks;       /* WORLD: index -> rank of a part (NULL: index = rank) */
    uint32_t my_id;         /* GROUP, PLAN_*: this rank's receive id */
    int *send_bases;        /* GROUP, PLAN_*: tag base of each member, -1 unknown */
    int missing;            /* holder: HELLOs still needed */
    int queued;             /* holder: WORLD, waiting for its slot */
    int running;            /* holder: the schedule runs */
    int abandoned;          /* holder: given up after a timeout */
    atomic_int abandon_done; /* the holder ran the abandon task */
    pc_fault_t fault;
    atomic_int done;
    int persistent;         /* a plan's own request: never freed by wait */
    int outstanding;        /* plan: started, and no wait or test has returned it yet */
    pc_task_t task;
    struct pc_shm_group *shm; /* a plan's node-shared segment (algo shm), or NULL */
    uint64_t tl_t0;         /* a public call's start, recorded in the timeline at
                               completion (0: not recorded) */
    const char *tl_call;    /* "iallreduce" or "start" */
    uint64_t tl_end;        /* when it completed (recorded ones) */
    pcoll_request_t *next;  /* world line, free list, zombies */
};

/* The arguments of an allreduce call, as far as one rank can check them. */
int pc_op_check_args(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                     pcoll_op_t op, const char *fn);

/* Application thread: checks the arguments and gives req its identity
 * (world: a sequence number; a group: the record and a receive id) and its
 * schedule (from the cache, or built; plan: always its own).  algo: the
 * algorithm (PCOLL_ALGO_AUTO: the context's choice).  part: a world
 * operation (group NULL, not a plan) among those ranks only, or NULL. */
int pc_op_prepare(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype, pcoll_op_t op,
                  const int *group, int group_size, int plan, const pc_world_part_t *part,
                  pcoll_allreduce_algo_t algo, const char *fn, pcoll_request_t *req);
/* A part (pc_world_part_t) of a world operation: count x dtype summed in
 * place in buf among part's ranks, posted at once (the progress thread runs
 * it while the caller goes on).  Wait for it with pc_request_wait. */
int pc_world_part_start(pcoll_t *ctx, void *buf, size_t count, pcoll_dtype_t dtype, const pc_world_part_t *part,
                        const char *fn, pcoll_request_t **out);
/* n operation numbers on channel 0 for the parts of one call, from
 * *first on (every rank reserves as many, in the same order); fails with
 * PCOLL_ERR_STATE after an earlier timeout, as a world operation does. */
int pc_world_reserve(pcoll_t *ctx, uint64_t n, uint64_t *first, const char *fn);
/* pcoll_wait under another call's name (plan.h: pc_request_give_up). */
int pc_request_wait(pcoll_request_t **req, const char *fn);

/* Application thread: blocks until req is done (pc_block: stall report,
 * timeout); PCOLL_ERR_TIMEOUT when it was given up instead. */
int pc_op_wait(pcoll_request_t *req, const char *fn);
/* A request given up after a timeout: kept until pcoll_finalize, as MPI may
 * still use its schedule's buffers. */
void pc_op_zombie(pcoll_request_t *req);
/* Application thread: hands a prepared request to the holder (quiet: the
 * caller waits next). */
void pc_op_post(pcoll_request_t *req, int quiet);
/* Application thread, after a timeout: the holder gives the operation up
 * (unless it completed meanwhile: then 0 is returned). */
int pc_op_abandon(pcoll_request_t *req);
/* Stall describer of an operation (holder). */
void pc_op_describe(void *req, pc_stall_probe_t *p);

/* The library's own agreements (agree.c): a blocking int64 sum over the
 * member list that takes the same path at every member whatever
 * algorithm a rank forces (node-shared memory where a group call could
 * take it, else pcoll_allreduce). */
int pc_allreduce_agreed(pcoll_t *ctx, int64_t *buf, size_t count, const int *group, int group_size);

#endif
