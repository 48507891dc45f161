/*
 * Blocked calls, counted once per context at the leader.
 *
 * A rank blocked in a pcoll call counts as arrived for the rounds of the
 * partial objects the call is not about: its contribution is as fresh as it
 * gets until it returns, and without counting it a rank waiting for one
 * object while the others are blocked in another object's call (a flush, a
 * majority round waiting for this rank) would wait forever.
 *
 *   any rank, application thread                 the leader (PC_LEADER), holder
 *   blocking call begins/ends (core's hook) --->  blocked[rank] += 1 / -= 1;
 *     one PARK message (delta, the object          own[rank] of that object too;
 *     the call is about, if any)                   the objects that have a rank
 *                                                  waiting decide again
 *
 * One message per blocking call and direction, whatever the number of
 * objects (the old way told every object's leader separately); only while
 * some live object has rounds that wait for others (not SOLO without
 * sync_every).  A rank is parked for object O when it has a blocking call
 * that is not about O: blocked[rank] > own_O[rank].
 */
#ifndef PC_PARTIAL_PARK_H
#define PC_PARTIAL_PARK_H

#include <stdint.h>

#include "../core/context.h"
#include "park_ledger.h"

/* Application thread, at create/free of an object that needs it (every
 * rank, collectively): the first attach sets up the context's state. */
int pc_park_attach(pcoll_t *ctx, const char *fn);
void pc_park_detach(pcoll_t *ctx);
/* Holder: the PARK handler (once per context, at every rank). */
void pc_park_open(pcoll_t *ctx);

/* Holder, at the leader: the context's ledger (park_ledger.h). */
int pc_park_watch(pcoll_t *ctx, pc_park_watch_t *w); /* PCOLL_SUCCESS or PCOLL_ERR_NOMEM */
void pc_park_unwatch(pcoll_t *ctx, pc_park_watch_t *w);
void pc_park_set_waiting(pcoll_t *ctx, pc_park_watch_t *w, int on);
/* 1 if rank is blocked in a call not about w's object. */
int pc_park_elsewhere(pcoll_t *ctx, const pc_park_watch_t *w, int rank);

#endif
