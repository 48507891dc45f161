/* Reading a merged trace (pcoll-trace merge's output) back for the report
 * and the picture: the library's events and the marks, each reduced to the
 * few fields they use, read one event at a time (a trace of millions of
 * events is never a tree in memory). */
#ifndef PCOLL_TRACE_MERGED_H
#define PCOLL_TRACE_MERGED_H

#include <stddef.h>
#include <stdint.h>

#include "strtab.h"

typedef enum tr_type {
    TR_ALLREDUCE,
    TR_PARTIAL_CALL,
    TR_ROUND_START,
    TR_ROUND,
    TR_PREDUCE,
    TR_FUSION_PLAN,
    TR_FUSION_READY,
    TR_FUSION_BUCKET,
    TR_FUSION_WAIT,
    TR_STALL,
    TR_MARK_B,
    TR_MARK_E,
    TR_PREDUCE_WAIT, /* the wait span nested in a preduce */
    TR_LEFT_OUT      /* rounds that went on without silent ranks, or a catch-up */
} tr_type_t;

typedef enum partial_fn { FN_ALLREDUCE, FN_DEPOSIT, FN_FLUSH } partial_fn_t;

typedef struct tr_event {
    double ts, dur; /* microseconds on rank 0's clock (dur 0 for instants) */
    int32_t rank, tid;
    int32_t obj;   /* interned `obj` JSON text; -1 without one */
    int32_t label; /* interned: allreduce algo, partial kind, preduce policy, mark name */
    int32_t group; /* allreduce: interned member list, -1 for every rank; left_out: the ranks */
    uint8_t type;  /* tr_type_t */
    uint8_t flag;  /* round, round_start: sync; partial_call: waited; preduce: failed; left_out: catch-up */
    uint8_t fn;    /* partial_call: partial_fn_t */
    union {
        struct {
            int64_t round, root;
        } round; /* round, round_start; partial_call: round (-1 for a flush); left_out: round, first (root) */
        struct {
            int64_t group_id, iteration; /* iteration: the rank's, as it called */
            double wait_us;
        } preduce;
        struct {
            int64_t bucket;
            double pred_start_us, pred_end_us, compute_us;
        } plan;
        struct {
            int64_t step, index; /* index: fusion_ready's layer, fusion_bucket's bucket */
        } fusion;
    } u;
} tr_event_t;

typedef struct trace {
    const char *path;
    int ranks;
    double bound_us; /* otherData.clock_error_bound_us */
    double *err_us;  /* [rank]: its clock's error bound (otherData.clocks) */
    tr_event_t *events;
    size_t n, cap;
    strtab_t strings;       /* obj texts, labels, member lists */
    int32_t **members;      /* [string id]: a member list's ranks (NULL for other strings) */
    int32_t *nmembers;      /* [string id] */
    size_t members_cap;
    double *first_us, *last_us; /* [rank]: its first event's start and last event's end */
    double start_us, end_us;    /* of the whole trace */
} trace_t;

/* 0, or -1 after a message naming the file and line. */
int trace_read(const char *path, trace_t *t);
void trace_free(trace_t *t);

#endif
