/*
 * Blocking waits, stall reports and timeouts.
 *
 * Every blocking pcoll call waits through pc_block.  After PCOLL_STALL_WARN_S
 * seconds (default 60, 0 = never) it prints one warning that names the
 * operation and the ranks it is still waiting for; after PCOLL_TIMEOUT_S
 * (default 0 = never) it gives up with PCOLL_ERR_TIMEOUT and the same report
 * in pcoll_last_error().
 *
 *   application thread            token holder            other ranks (holders)
 *   pc_block: wait ... deadline
 *     probe: post  ---------->  describe(op): what it is,
 *                               ranks known to be missing,
 *                               questions --QUERY-->  responder of the
 *                                                     query's kind: the
 *                               <--ANSWER (bitmap)--  ranks it knows we
 *     wait (answers, at most                          wait for
 *     PC_STALL_ANSWER_S)
 *     report: "<op>: waiting for rank 3 (has not started it), rank 5
 *              (did not answer)"
 *
 * A rank whose process is frozen or dead does not answer; that is reported
 * too.  The questions go through the context's service channel (service.h).
 */
#ifndef PC_CORE_STALL_H
#define PC_CORE_STALL_H

#include <stddef.h>
#include <stdint.h>

#include "../engine/progress.h"
#include "../util/bits.h"
#include "service.h"

/* How long a probe waits for answers. */
#define PC_STALL_ANSWER_S 1.0

typedef struct pc_stall_probe pc_stall_probe_t;

/* Question kinds; a responder per kind (pc_stall_respond). */
enum { PC_Q_WORLD = 1, PC_Q_GROUP = 2, PC_Q_PLAN = 3, PC_Q_OBJECT = 4, PC_Q_PREDUCE = 5, PC_Q_NKINDS = 6 };

typedef struct pc_query {
    pc_svc_head_t head; /* PC_SVC_QUERY; channel/object: of an object (PC_Q_OBJECT) */
    uint64_t qid;
    uint32_t kind;
    int32_t world;      /* PC_Q_GROUP/PLAN: the whole communicator */
    uint64_t seq;       /* PC_Q_WORLD: operation number; PC_Q_OBJECT: round */
    uint32_t what;      /* the kind's own detail */
    int32_t n;          /* PC_Q_GROUP/PLAN: members, listed after this */
} pc_query_t;

/* A responder (token holder): set in `missing` (P bits) the ranks that the
 * asker (src) is waiting for, as far as this rank knows. */
typedef void (*pc_respond_fn)(pcoll_t *ctx, void *arg, int src, const pc_query_t *q, const int32_t *ranks,
                              unsigned char *missing);
void pc_stall_respond(pcoll_t *ctx, uint32_t kind, pc_respond_fn fn, void *arg);

/* ---- for the describers (token holder) ----
 *
 * A report names the ranks of the strongest reason only, so that a root
 * cause is not drowned in its consequences:
 *   PC_WHY_SILENT  asked, did not answer (a stopped or dead process)
 *   PC_WHY_CAUSE   has not started / arrived / called what is waited for
 *   PC_WHY_PATH    has not passed something on (an activation, its part)
 *   fallbacks      the ranks whose messages are awaited, if nothing else
 */
enum { PC_WHY_PATH = 1, PC_WHY_CAUSE = 2, PC_WHY_SILENT = 3 };
void pc_probe_what(pc_stall_probe_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds to what is waited for (after a "; "). */
void pc_probe_what_add(pc_stall_probe_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A rank this rank knows it waits for, and why (a string literal). */
void pc_probe_suspect(pc_stall_probe_t *p, int rank, const char *why, int level);
/* Asks ranks (n of them; NULL: every other rank) question q, followed by
 * `list` (n_list ints, for group questions); their answers name ranks with
 * `why` at `level`.  A rank that does not answer is PC_WHY_SILENT. */
void pc_probe_ask(pc_stall_probe_t *p, const int *ranks, int n, pc_query_t *q, const int *list, int n_list,
                  const char *why, int level);
/* Named only if nothing else is: the ranks whose messages are awaited. */
void pc_probe_fallback(pc_stall_probe_t *p, int rank, const char *why);

typedef void (*pc_describe_fn)(void *arg, pc_stall_probe_t *p);

typedef struct pc_wait {
    const char *fn;          /* the public call */
    pc_pred_fn done;         /* the wait is over */
    void *arg;
    pc_describe_fn describe; /* on the token holder */
    void *describe_arg;
    uint64_t object;         /* the object the call is about (0: none) */
    uint32_t channel;        /* and its channel */
    int object_watches;      /* that object counts blocked calls itself */
    void (*nudge)(void *arg); /* NULL, or called every nudge_s while waiting */
    void *nudge_arg;
    double nudge_s;
} pc_wait_t;

/* Waits until done(arg), reporting a stall and giving up as described
 * above.  PCOLL_SUCCESS, or PCOLL_ERR_TIMEOUT (pcoll_last_error set). */
int pc_block(pcoll_t *ctx, const pc_wait_t *w);

/* At pcoll_init (holder): the service handlers of queries and answers. */
void pc_stall_open(pcoll_t *ctx);


#endif
