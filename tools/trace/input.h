/* Reading the per-rank timeline files PREFIX.R.jsonl (docs/timeline.md):
 * every line checked, each event kept as its line's text (written out again
 * as the merged event's args) plus the few fields the merge needs. */
#ifndef PCOLL_TRACE_INPUT_H
#define PCOLL_TRACE_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "strtab.h"

typedef enum ev_type {
    EV_THREAD,
    EV_ALLREDUCE,
    EV_PARTIAL_CALL,
    EV_ROUND_START,
    EV_ROUND,
    EV_PREDUCE,
    EV_FUSION_PLAN,
    EV_FUSION_READY,
    EV_FUSION_BUCKET,
    EV_FUSION_WAIT,
    EV_MARK,
    EV_STALL,
    EV_LEFT_OUT,
    EV_UNKNOWN /* an `ev` this version does not know: kept as an instant */
} ev_type_t;

/* Whether events of this type are spans (they have `dur`). */
int ev_is_span(ev_type_t type);

typedef struct rank_event {
    int64_t t;        /* the rank's clock, ns */
    int64_t dur;      /* spans: ns; else 0 */
    size_t text_off;  /* the object's JSON text within the file */
    uint32_t text_len;
    uint32_t line;    /* 1-based, for messages */
    int32_t tid;
    int32_t name;     /* interned: the `ev`; a mark's or thread's `name` */
    uint8_t type;     /* ev_type_t */
    uint8_t mark_end; /* a mark with ph E */
    uint8_t has_rank; /* the object has a "rank" key of its own */
    uint8_t moved;    /* merge: the overlap track of a span that does not nest on its thread (0: none) */
    union {
        struct {
            int32_t obj; /* interned JSON text of `obj` */
            int64_t round, root;
        } round; /* round_start, round */
        struct {
            int64_t wait_ns, reduce_ns;
        } preduce;
    } u;
} rank_event_t;

typedef struct rank_file {
    char *path;
    char *text; /* the whole file: events point into it */
    size_t len;
    int rank, size;
    int64_t start_t, start_offset, start_err; /* the header's t, offset_ns, offset_err_ns */
    int has_stop;
    int64_t stop_t, stop_offset, stop_err; /* the stop's, or the header's without one */
    char *host;     /* "" when the header has none */
    int64_t pid;    /* -1 when the header has none */
    rank_event_t *events;
    size_t nevents, cap;
} rank_file_t;

typedef struct trace_input {
    int size;
    rank_file_t *ranks; /* [size] */
    strtab_t names;     /* event, mark and thread names */
    strtab_t objs;      /* `obj` values as JSON text */
} trace_input_t;

/* Reads PREFIX.0.jsonl .. PREFIX.(size-1).jsonl.  0, or -1 after a message
 * naming the file and line. */
int input_read(const char *prefix, trace_input_t *in);
void input_free(trace_input_t *in);

/* The rank's clock minus rank 0's at its reading t, interpolated between
 * the header and the stop (the header's alone without a stop). */
double input_offset_ns(const rank_file_t *r, int64_t t);

#endif
