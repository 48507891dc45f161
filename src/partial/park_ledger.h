/*
 * The leader's ledger of blocked calls (park.h moves the messages; this is
 * the counting, pure: no MPI, no engine, no locking -- the holder owns it).
 *
 *   blocked[rank]   blocking calls rank is in, about any object or none
 *   w->own[rank]    those of them about watch w's object
 *   rank is parked for w's object  <=>  blocked[rank] > w->own[rank]
 *
 * A watch is one object's view (registered by channel; the object's id
 * tells a channel reused by a later object apart).  Watches with a rank
 * waiting for a round are on the waiting list: each change of the counts
 * asks them to decide again (a decision may take its own watch off the
 * list).
 */
#ifndef PC_PARTIAL_PARK_LEDGER_H
#define PC_PARTIAL_PARK_LEDGER_H

#include <stdint.h>

typedef struct pc_park_watch {
    uint64_t object;
    uint32_t channel;
    int *own;                  /* blocking calls of each rank about this object */
    int waiting;               /* a rank waits for a round the leader decides */
    void (*decide)(void *arg); /* decide again: parked ranks changed */
    void *arg;
    struct pc_park_watch *next_waiting;
} pc_park_watch_t;

typedef struct pc_park_ledger {
    int size;                  /* ranks */
    uint32_t nchannels;
    int *blocked;              /* NULL until the first watch */
    pc_park_watch_t **watches; /* by channel */
    pc_park_watch_t *waiting;  /* watches with a rank waiting */
} pc_park_ledger_t;

void pc_park_ledger_init(pc_park_ledger_t *l, int size, uint32_t nchannels);
void pc_park_ledger_destroy(pc_park_ledger_t *l);

/* Registers w (w->object, w->channel < nchannels, w->decide set):
 * PCOLL_SUCCESS or PCOLL_ERR_NOMEM. */
int pc_park_ledger_watch(pc_park_ledger_t *l, pc_park_watch_t *w);
/* Forgets w (off the waiting list too); nothing if w is not registered. */
void pc_park_ledger_unwatch(pc_park_ledger_t *l, pc_park_watch_t *w);
void pc_park_ledger_set_waiting(pc_park_ledger_t *l, pc_park_watch_t *w, int on);

/* A blocking call of rank src begins (delta 1) or ends (-1), about the
 * object `object` on `channel` (object 0: none); counts never go below 0.
 * Then every waiting watch decides again.  src must be in [0, size). */
void pc_park_ledger_apply(pc_park_ledger_t *l, int src, int delta, uint64_t object, uint32_t channel);

/* 1 if rank is blocked in a call not about w's object. */
int pc_park_ledger_elsewhere(const pc_park_ledger_t *l, const pc_park_watch_t *w, int rank);

#endif
