/*
 * The driver of a partial object: owns its rounds and control messages on
 * the token holder.  It acts on the rules of policy.h and moves data
 * through the backend (backend.h); the public calls (partial.c) reach it
 * through tasks.
 *
 *   partial.c            driver.c (holder)                  backend / leader
 *   pc_driver_arrive --> WAIT for r: policy says start  --> backend.activate
 *                          it, or tell the leader       --> WAIT / FLUSH / FREE
 *                        leader (PC_LEADER): arrivals,      (service message)
 *                          parked ranks (park.h) -> policy
 *                          decides -> activate
 *                        backend events: activated (the
 *                          leader learns), completed (the
 *                          result is delivered: observer,
 *                          delivered buffer, waiters woken),
 *                          drained, failed
 *
 * Dependencies run one way: partial.c -> driver -> policy, backend, park.
 */
#ifndef PC_PARTIAL_DRIVER_H
#define PC_PARTIAL_DRIVER_H

#include "object.h"

/* The environment a backend of p gets (the driver's callbacks). */
void pc_driver_env(pcoll_partial_t *p, pc_backend_env_t *env);

/* Application thread: sets the object up on the holder (its messages, the
 * leader's state, the backend's listeners) and waits until it is done. */
int pc_driver_open(pcoll_partial_t *p, const char *fn);
/* Application thread, once drained: forgets the object on the holder. */
void pc_driver_close(pcoll_partial_t *p);

/* Application thread: an arrival, run on the holder.  type 0: the
 * application waits for `round` (which the policy starts here or the
 * leader decides); PC_ARR_FLUSH, PC_ARR_FREE: for the leader.  quiet: the
 * caller waits next (it runs the task itself). */
int pc_driver_arrive(pcoll_partial_t *p, int type, uint64_t round, int quiet);
/* Application thread, waiting for a round every PC_SILENCE_NUDGES-th of PCOLL_EXCLUDE_MS:
 * the backend looks for rounds held up by a silent rank; a MAJORITY leader
 * asks the initiator it waits for whether it is alive (and stands in for it
 * once it has been silent that long); another MAJORITY or QUORUM rank asks
 * whether the leader is (and, once it is silent, counts arrivals itself:
 * driver.c, "without the leader"). */
void pc_driver_nudge(pcoll_partial_t *p);

/* Stall report (holder): what a call waiting for `round` (type 0), a
 * flush or the free (PC_ARR_*) of p is waiting for. */
void pc_driver_describe(pcoll_partial_t *p, int type, uint64_t round, pc_stall_probe_t *probe);

#endif
