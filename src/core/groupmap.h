/*
 * Group maps: ordered lists of distinct ranks of the context's communicator.
 *
 * The registry keeps one record per list that something is using: the
 * operations and plans in flight on it, and the HELLOs (core/hello.h) its
 * members sent for operations this rank has not started yet.  A record
 * nobody uses is freed at once, so memory follows what is in flight, not
 * how many groups a run has seen.  No sequence number per group is kept:
 * operations on a group are matched by the order of HELLOs, which every
 * member sends in the order it starts the group's operations.
 *
 * HELLO queues, per member j of a record:
 *   hellos[j]   what j told about operations this rank has not yet started
 *               (or started without needing j's number);
 *   waiters[j]  operations started here that wait for j's number.
 * The k-th HELLO from j belongs to the k-th operation here that needs one
 * from j: both sides derive "needs" from the same schedule.
 *
 * Pure: no MPI, no locking (the context's lock guards the registry).
 */
#ifndef PC_CORE_GROUPMAP_H
#define PC_CORE_GROUPMAP_H

#include <stdint.h>

#include "pcoll.h"

/* What a member says about one operation of a group. */
typedef struct pc_hello {
    uint32_t id;      /* the member's receive id for it (engine/tags.h)  */
    uint32_t kind;    /* PC_HELLO_OP or PC_HELLO_PLAN                     */
    uint64_t count;   /* the arguments every member must agree on         */
    int32_t dtype, op, algo;
} pc_hello_t;

enum { PC_HELLO_OP = 1, PC_HELLO_PLAN = 2 };

typedef struct pc_hqueue pc_hqueue_t;
typedef struct pc_group pc_group_t;

struct pc_group {
    int n;
    int *ranks;    /* index -> rank */
    int me;        /* this rank's index */
    int world;     /* the whole communicator in rank order */
    uint64_t hash;
    long users;    /* operations and plans holding the record */
    long queued;   /* HELLOs received and not yet taken */
    long active;   /* operations and plan starts posted here, not complete
                      (for stall questions: "have you started it?") */
    int broken;    /* an operation on it was abandoned after a timeout */
    pc_hqueue_t **q; /* by member index; NULL until used */
    pc_group_t *next; /* hash chain */
};

typedef struct pc_group_registry {
    pc_group_t **buckets;
    int nbuckets, count;
    int size, rank; /* of the communicator */
} pc_group_registry_t;

int pc_groups_init(pc_group_registry_t *reg, int size, int rank);
void pc_groups_destroy(pc_group_registry_t *reg);

/* Checks a group list: PCOLL_ERR_GROUP with a message naming the problem
 * (under the name fn) when it is empty, has a rank out of [0, size) or
 * twice, or lacks `rank`.  *me: the caller's index. */
int pc_group_validate(const int *ranks, int n, int size, int rank, const char *fn, int *me);
/* "group [r, r, ...]" (the first 8 of a longer list, then its size), for
 * stall reports. */
void pc_group_text(const int *ranks, int n, char *buf, size_t len);

/* The hash of a member list (world: the whole communicator, ranks
 * ignored): group records' buckets, node-shared group calls' tags. */
uint64_t pc_group_hash(int world, const int *ranks, int n);

/* The calling rank's index in a group of the context (NULL: every rank, in
 * rank order), or the error of pc_group_validate. */
int pc_group_index(const pcoll_t *ctx, const int *group, int group_size, const char *fn, int *me);

/* The record of a list (NULL: the whole communicator), validated when it is
 * new; one more user.  Errors as pc_group_validate, or PCOLL_ERR_NOMEM. */
int pc_groups_get(pc_group_registry_t *reg, const int *ranks, int n, const char *fn, pc_group_t **out);
/* The record of a list if there is one (no user added). */
pc_group_t *pc_groups_find(const pc_group_registry_t *reg, int world, const int *ranks, int n);
/* One user less; the record goes when nothing uses it. */
void pc_groups_put(pc_group_registry_t *reg, pc_group_t *g);
/* Records alive. */
int pc_groups_live(const pc_group_registry_t *reg);

/* The member index of a rank, or -1. */
int pc_group_index_of(const pc_group_t *g, int rank);

/* A HELLO came from rank `from` about the list (ranks, n; world: ranks
 * ignored).  Finds or makes the record (a list that is invalid, or lacks
 * this rank or `from`, is refused: -1).  If an operation waits for it,
 * returns 1 with that operation (*waiter), the record and from's member
 * index (*j); else queues it and returns 0.  PCOLL_ERR_NOMEM: lost. */
int pc_groups_hello_in(pc_group_registry_t *reg, int world, const int *ranks, int n, int from,
                       const pc_hello_t *h, pc_group_t **g, int *j, void **waiter);
/* An operation here needs member j's HELLO: 1 and *out if one is queued
 * (and no earlier operation waits for one), else 0 and the operation waits
 * in line (returned by pc_groups_hello_in when it comes). */
int pc_group_hello_take(pc_group_registry_t *reg, pc_group_t *g, int j, void *waiter, pc_hello_t *out);

#endif
