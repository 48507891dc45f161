/*
 * Barriers in node-shared memory: n members on one node count their
 * arrivals on one shared counter.  Barrier p (numbered alike by every
 * member, from 1) is reached when the counter says n x p.
 *
 *   member i:  arrived[i] = p  (its own line: stall reports)
 *              counter += 1; the one that makes it n x p is the last
 *              (it wakes the others: pc_engine_nudge, or only the ones
 *              that said they sleep)
 *   everyone:  done when counter >= n x p
 *
 * Used by the blocking node-shared allreduce (core/shm_allreduce.c, its own
 * waiting) and by schedules' barrier steps (sched.h, PC_STEP_BARRIER: the
 * engine arrives when the step is issued and completes it when reached).
 */
#ifndef PC_ENGINE_NODEBAR_H
#define PC_ENGINE_NODEBAR_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct pc_nodebar {
    _Atomic uint64_t *counter;  /* shared by the members */
    _Atomic uint64_t **arrived; /* member i's mark (on a line of its own) */
    const int *ranks;           /* member -> rank of the engine (wake-ups); NULL: i */
    int n, me;
    uint64_t base;              /* barriers before the current run (schedules) */
} pc_nodebar_t;

/* This member arrives at barrier p: returns 1 if it was the last. */
static inline int pc_nodebar_arrive(pc_nodebar_t *b, uint64_t p)
{
    atomic_store_explicit(b->arrived[b->me], p, memory_order_release);
    return atomic_fetch_add(b->counter, 1) + 1 == p * (uint64_t)b->n;
}

/* 1 once every member arrived at barrier p. */
static inline int pc_nodebar_reached(const pc_nodebar_t *b, uint64_t p)
{
    return atomic_load(b->counter) >= p * (uint64_t)b->n;
}

/* 1 if member i has not arrived at barrier p yet (stall reports). */
static inline int pc_nodebar_missing(const pc_nodebar_t *b, int i, uint64_t p)
{
    return atomic_load_explicit(b->arrived[i], memory_order_acquire) < p;
}

static inline int pc_nodebar_rank(const pc_nodebar_t *b, int i) { return b->ranks ? b->ranks[i] : i; }

#endif
