/* pcoll-trace merge.  The events of every rank become records (an event
 * gives one record, a preduce three, a round with a flow arrow three more),
 * sorted by their time on rank 0's clock; one pass over the sorted records
 * per thread then settles what the Chrome format needs to stay well formed
 * (mark ends without a begin, marks left open at the stop, spans that
 * overlap on one thread), and a second pass writes them. */
#include "merge.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "input.h"
#include "json.h"
#include "util.h"

/* A span that does not nest in the spans and marks of its thread (a
 * nonblocking call still in flight when the next call or phase starts)
 * goes to the thread's first overlap track k where it nests: tid + k
 * OVERLAP_TID */
enum { OVERLAP_TID = 1 << 20, MAX_TRACKS = 32, SEQ_SHIFT = 16, MAX_MARK_DEPTH = (1 << SEQ_SHIFT) - 1 };
static const double ANCHOR_US = 1.0; /* the slices flow arrows bind to */

typedef enum out_kind {
    OUT_EVENT,  /* the event itself: X, B, E or i */
    OUT_WAIT,   /* preduce: its wait, nested */
    OUT_REDUCE, /* preduce: its reduce, nested */
    OUT_ANCHOR, /* a short slice at a round_start / round that a flow arrow binds to */
    OUT_FLOW_S,
    OUT_FLOW_F,
    OUT_CLOSE /* an E that closes a mark left open (aux: the mark's name) */
} out_kind_t;

typedef enum mark_action { MARK_WRITE, MARK_ORPHAN } mark_action_t;

/* At equal times: marks first (in file order, which is their order on
 * their thread), then spans (the longer first, so that the outer one of
 * two nested calls opens first: a call is recorded when it ends, so the
 * inner one comes first in the file), then instants */
typedef enum sort_class { CLS_MARK, CLS_SPAN, CLS_INSTANT } sort_class_t;

typedef struct out_rec {
    double ts;      /* microseconds on rank 0's clock from its start */
    uint64_t seq;   /* generation order << SEQ_SHIFT: equal times keep it */
    uint32_t rank;
    uint32_t index; /* the event of that rank */
    uint32_t aux;   /* flows: the flow's number; OUT_CLOSE: the mark's name */
    int32_t tid;
    double dur;     /* X records: their length (us) */
    uint8_t cls;    /* order among equal times: sort_class_t */
    uint8_t kind;
    uint8_t action; /* a mark's mark_action_t */
} out_rec_t;

typedef struct flow_src {
    int32_t obj;
    int64_t round;
    uint32_t rank, index; /* the root's round_start */
    uint32_t targets;     /* other ranks' rounds that point back at it */
} flow_src_t;

/* Which mark is innermost from ts on: the marks' nesting of a thread,
 * for placing its spans */
typedef struct mark_change {
    double ts;
    uint64_t mark; /* the innermost open mark's record seq + 1; 0: none */
} mark_change_t;

/* A track of a thread: the ends of its open spans, innermost last */
typedef struct track {
    double *ends;
    size_t n, cap;
} track_t;

typedef struct thread_state {
    int32_t *marks; /* names of the open marks, innermost last */
    uint64_t *mark_ids; /* their record seq + 1 */
    size_t nmarks, cap_marks, cap_ids;
    mark_change_t *changes;
    size_t nchanges, cap_changes;
    track_t tracks[MAX_TRACKS]; /* 0: the thread itself; k: its k-th overlap track */
    double last_ts;
    double next_slice; /* settle_anchors: the start of the next slice */
    uint8_t used;
    uint32_t tracks_used; /* bit k: track k has spans */
    int32_t name; /* from its `thread` event, -1 unknown */
} thread_state_t;

typedef struct merge {
    trace_input_t in;
    out_rec_t *recs, *closes;
    size_t nrecs, cap_recs, ncloses, cap_closes;
    flow_src_t *flows;
    size_t nflows, cap_flows;
    thread_state_t **threads; /* [rank][tid] */
    int32_t *nthreads;        /* [rank] */
    char **names_json;        /* [name id]: the name as a JSON string */
    uint64_t gen;
    warn_limit_t marks, clamped, crossing;
    size_t overlapping; /* spans put on an overlap track */
    double *end_ts; /* [rank]: its stop, or its last event's end */
} merge_t;

static double ts_of(const merge_t *m, int rank, int64_t t)
{
    const rank_file_t *r = &m->in.ranks[rank];
    return ((double)(t - m->in.ranks[0].start_t) - input_offset_ns(r, t)) / 1000.0;
}

static out_rec_t *add_rec(merge_t *m, out_kind_t kind, int rank, size_t index, double ts)
{
    GROW(m->recs, m->cap_recs, m->nrecs + 1);
    out_rec_t *o = &m->recs[m->nrecs++];
    memset(o, 0, sizeof *o);
    o->ts = ts;
    o->seq = m->gen++ << SEQ_SHIFT;
    o->rank = (uint32_t)rank;
    o->index = (uint32_t)index;
    o->tid = m->in.ranks[rank].events[index].tid;
    o->kind = (uint8_t)kind;
    o->cls = CLS_INSTANT;
    return o;
}

static int cmp_flow(const void *a, const void *b)
{
    const flow_src_t *x = a, *y = b;
    if (x->obj != y->obj) return x->obj < y->obj ? -1 : 1;
    if (x->round != y->round) return x->round < y->round ? -1 : 1;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static flow_src_t *find_flow(const merge_t *m, int32_t obj, int64_t round)
{
    flow_src_t key = {.obj = obj, .round = round, .rank = 0, .index = 0, .targets = 0};
    size_t lo = 0, hi = m->nflows;
    while (lo < hi) { /* the first source not below key */
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_flow(&m->flows[mid], &key) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < m->nflows && m->flows[lo].obj == obj && m->flows[lo].round == round) return &m->flows[lo];
    return NULL;
}

/* A flow per (obj, round) whose root recorded its round_start (the first, if
 * it did more than once), and how many other ranks completed that round */
static void collect_flows(merge_t *m)
{
    for (int r = 0; r < m->in.size; r++) {
        const rank_file_t *f = &m->in.ranks[r];
        for (size_t i = 0; i < f->nevents; i++) {
            const rank_event_t *e = &f->events[i];
            if (e->type != EV_ROUND_START || e->u.round.root != r) continue;
            GROW(m->flows, m->cap_flows, m->nflows + 1);
            m->flows[m->nflows++] = (flow_src_t){e->u.round.obj, e->u.round.round, (uint32_t)r, (uint32_t)i, 0};
        }
    }
    if (m->nflows) qsort(m->flows, m->nflows, sizeof *m->flows, cmp_flow);
    size_t kept = 0;
    for (size_t i = 0; i < m->nflows; i++)
        if (kept == 0 || m->flows[kept - 1].obj != m->flows[i].obj || m->flows[kept - 1].round != m->flows[i].round)
            m->flows[kept++] = m->flows[i];
    m->nflows = kept;
    for (int r = 0; r < m->in.size; r++) {
        const rank_file_t *f = &m->in.ranks[r];
        for (size_t i = 0; i < f->nevents; i++) {
            const rank_event_t *e = &f->events[i];
            if (e->type != EV_ROUND) continue;
            flow_src_t *src = find_flow(m, e->u.round.obj, e->u.round.round);
            if (src && src->rank != (uint32_t)r) src->targets++;
        }
    }
}

static void add_flow_records(merge_t *m, int rank, size_t i, double ts)
{
    const rank_event_t *e = &m->in.ranks[rank].events[i];
    flow_src_t *src = find_flow(m, e->u.round.obj, e->u.round.round);
    if (!src || src->targets == 0) return;
    int is_source = e->type == EV_ROUND_START && src->rank == (uint32_t)rank && src->index == i;
    int is_target = e->type == EV_ROUND && src->rank != (uint32_t)rank;
    if (!is_source && !is_target) return;
    out_rec_t *o = add_rec(m, OUT_ANCHOR, rank, i, ts);
    o->cls = CLS_SPAN;
    o->dur = ANCHOR_US;
    add_rec(m, is_source ? OUT_FLOW_S : OUT_FLOW_F, rank, i, ts)->aux = (uint32_t)(src - m->flows) + 1;
}

static void add_event_records(merge_t *m, int rank, size_t i)
{
    const rank_event_t *e = &m->in.ranks[rank].events[i];
    thread_state_t *th = &m->threads[rank][e->tid];
    th->used = 1;
    if (e->type == EV_THREAD) {
        if (th->name < 0) th->name = e->name;
        return; /* its name goes into the metadata */
    }
    double ts = ts_of(m, rank, e->t);
    out_rec_t *o = add_rec(m, OUT_EVENT, rank, i, ts);
    if (e->type == EV_MARK) {
        o->cls = CLS_MARK;
    } else if (ev_is_span((ev_type_t)e->type)) {
        o->cls = CLS_SPAN;
        o->dur = ts_of(m, rank, e->t + e->dur) - ts;
    }
    if (e->type == EV_PREDUCE) {
        int64_t wait = e->u.preduce.wait_ns < e->dur ? e->u.preduce.wait_ns : e->dur;
        int64_t reduce = e->u.preduce.reduce_ns < e->dur - wait ? e->u.preduce.reduce_ns : e->dur - wait;
        if (wait != e->u.preduce.wait_ns || reduce != e->u.preduce.reduce_ns)
            warn_limited(&m->clamped, "%s:%u: preduce: wait_ns + reduce_ns exceed dur: cut to fit in the call",
                         m->in.ranks[rank].path, e->line);
        if (wait > 0) { /* a part of no length says nothing the args do not */
            o = add_rec(m, OUT_WAIT, rank, i, ts);
            o->cls = CLS_SPAN;
            o->dur = ts_of(m, rank, e->t + wait) - ts;
        }
        if (reduce > 0) {
            double reduce_ts = ts_of(m, rank, e->t + e->dur - reduce);
            o = add_rec(m, OUT_REDUCE, rank, i, reduce_ts);
            o->cls = CLS_SPAN;
            o->dur = ts_of(m, rank, e->t + e->dur) - reduce_ts;
        }
    }
    if (e->type == EV_ROUND_START || e->type == EV_ROUND) add_flow_records(m, rank, i, ts);
}

static void add_all_records(merge_t *m)
{
    m->threads = xcalloc((size_t)m->in.size, sizeof *m->threads);
    m->nthreads = xcalloc((size_t)m->in.size, sizeof *m->nthreads);
    m->end_ts = xcalloc((size_t)m->in.size, sizeof *m->end_ts);
    for (int r = 0; r < m->in.size; r++) {
        const rank_file_t *f = &m->in.ranks[r];
        int32_t max_tid = 0;
        int64_t end = f->stop_t;
        for (size_t i = 0; i < f->nevents; i++) {
            if (f->events[i].tid > max_tid) max_tid = f->events[i].tid;
            if (!f->has_stop && f->events[i].t + f->events[i].dur > end) end = f->events[i].t + f->events[i].dur;
        }
        m->end_ts[r] = ts_of(m, r, end);
        m->nthreads[r] = max_tid + 1;
        m->threads[r] = xcalloc((size_t)max_tid + 1, sizeof **m->threads);
        for (int32_t t = 0; t <= max_tid; t++) m->threads[r][t].name = -1;
        for (size_t i = 0; i < f->nevents; i++) add_event_records(m, r, i);
    }
}

static int cmp_rec(const void *a, const void *b)
{
    const out_rec_t *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
    if (x->cls == CLS_SPAN && x->dur != y->dur) return x->dur > y->dur ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static out_rec_t *add_close(merge_t *m, const out_rec_t *at, int32_t tid, int32_t name, double ts, uint64_t seq)
{
    GROW(m->closes, m->cap_closes, m->ncloses + 1);
    out_rec_t *c = &m->closes[m->ncloses++];
    *c = *at;
    c->kind = OUT_CLOSE;
    c->cls = CLS_MARK;
    c->tid = tid;
    c->aux = (uint32_t)name;
    c->ts = ts;
    c->seq = seq;
    return c;
}

static void push_change(thread_state_t *th, double ts)
{
    GROW(th->changes, th->cap_changes, th->nchanges + 1);
    th->changes[th->nchanges++] = (mark_change_t){ts, th->nmarks ? th->mark_ids[th->nmarks - 1] : 0};
}

/* The number of changes of the marks at or before ts (before, strictly) */
static size_t changes_up_to(const thread_state_t *th, double ts, int strictly)
{
    size_t lo = 0, hi = th->nchanges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (th->changes[mid].ts < ts || (!strictly && th->changes[mid].ts == ts)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The innermost open mark at ts (just before ts, when strictly) */
static uint64_t innermost_mark(const thread_state_t *th, double ts, int strictly)
{
    size_t n = changes_up_to(th, ts, strictly);
    return n ? th->changes[n - 1].mark : 0;
}

/* The first change of the marks after ts; INFINITY if none */
static double next_change(const thread_state_t *th, double ts)
{
    size_t n = changes_up_to(th, ts, 0);
    return n < th->nchanges ? th->changes[n].ts : INFINITY;
}

/* A mark's end: it closes the innermost open mark of its name; marks opened
 * inside that one and still open are closed with it (just before it), and
 * an end with no open mark of its name becomes an instant */
static void end_mark(merge_t *m, thread_state_t *th, out_rec_t *o, const rank_event_t *e)
{
    const rank_file_t *f = &m->in.ranks[o->rank];
    size_t at = th->nmarks;
    while (at > 0 && th->marks[at - 1] != e->name) at--;
    if (at == 0) {
        o->action = MARK_ORPHAN;
        warn_limited(&m->marks, "%s:%u: mark \"%s\" ends without a begin on thread %d: kept as an instant", f->path,
                     e->line, strtab_get(&m->in.names, e->name), e->tid);
        return;
    }
    size_t inner = th->nmarks - at;
    for (size_t k = 0; k < inner; k++) {
        int32_t name = th->marks[th->nmarks - 1 - k];
        warn_limited(&m->marks, "%s:%u: mark \"%s\" ends while \"%s\" inside it is open: that one is closed there",
                     f->path, e->line, strtab_get(&m->in.names, e->name), strtab_get(&m->in.names, name));
        add_close(m, o, o->tid, name, o->ts, o->seq - inner + k);
    }
    th->nmarks = at - 1;
    push_change(th, o->ts);
}

static void begin_mark(merge_t *m, thread_state_t *th, out_rec_t *o, const rank_event_t *e)
{
    if (th->nmarks >= MAX_MARK_DEPTH) {
        o->action = MARK_ORPHAN;
        warn_limited(&m->marks, "%s:%u: marks nested deeper than %d: this one kept as an instant",
                     m->in.ranks[o->rank].path, e->line, MAX_MARK_DEPTH);
        return;
    }
    GROW(th->marks, th->cap_marks, th->nmarks + 1);
    GROW(th->mark_ids, th->cap_ids, th->nmarks + 1);
    th->marks[th->nmarks] = e->name;
    th->mark_ids[th->nmarks++] = o->seq + 1;
    push_change(th, o->ts);
}

/* Marks still open at the end of a thread close at the rank's stop */
static void close_open_marks(merge_t *m)
{
    for (int r = 0; r < m->in.size; r++)
        for (int32_t t = 0; t < m->nthreads[r]; t++) {
            thread_state_t *th = &m->threads[r][t];
            double ts = th->last_ts > m->end_ts[r] ? th->last_ts : m->end_ts[r];
            out_rec_t at = {.rank = (uint32_t)r, .tid = t};
            while (th->nmarks > 0) {
                int32_t name = th->marks[--th->nmarks];
                warn_limited(&m->marks, "%s: mark \"%s\" on thread %d is still open at the end: closed there",
                             m->in.ranks[r].path, strtab_get(&m->in.names, name), t);
                add_close(m, &at, t, name, ts, m->gen++ << SEQ_SHIFT);
            }
            push_change(th, ts);
        }
}

/* Pass 1: the marks of each thread, paired (end_mark, begin_mark) */
static void settle_marks(merge_t *m)
{
    for (size_t i = 0; i < m->nrecs; i++) {
        out_rec_t *o = &m->recs[i];
        const rank_event_t *e = &m->in.ranks[o->rank].events[o->index];
        thread_state_t *th = &m->threads[o->rank][e->tid];
        th->last_ts = o->ts;
        if (o->kind != OUT_EVENT || e->type != EV_MARK) continue;
        if (e->mark_end) end_mark(m, th, o, e);
        else begin_mark(m, th, o, e);
    }
    close_open_marks(m);
}

/* Whether [ts, end] nests in track k: in its open spans and, on the
 * thread itself, in its marks (the same mark innermost at both ends) */
static int nests(thread_state_t *th, int k, double ts, double end)
{
    track_t *tr = &th->tracks[k];
    while (tr->n > 0 && tr->ends[tr->n - 1] <= ts) tr->n--;
    if (tr->n > 0 && end > tr->ends[tr->n - 1]) return 0;
    return k > 0 || innermost_mark(th, ts, 0) == innermost_mark(th, end, 1);
}

/* A span on the first track of its thread, from track `from` on, where it
 * nests; the track's number */
static int place_span(merge_t *m, thread_state_t *th, out_rec_t *o, int from)
{
    double end = o->ts + o->dur;
    int k = from;
    while (k < MAX_TRACKS - 1 && !nests(th, k, o->ts, end)) k++;
    if (k == MAX_TRACKS - 1 && !nests(th, k, o->ts, end))
        warn_limited(&m->crossing, "rank %u thread %d: more than %d spans in flight at %.3f us cross each other: the "
                                   "last track's do not nest",
                     o->rank, (int)o->tid, MAX_TRACKS, o->ts);
    track_t *tr = &th->tracks[k];
    GROW(tr->ends, tr->cap, tr->n + 1);
    tr->ends[tr->n++] = end;
    th->tracks_used |= (uint32_t)1u << k;
    o->tid += k * OVERLAP_TID;
    m->overlapping += k > 0;
    return k;
}

/* A flow's anchor: at most ANCHOR_US, inside the span or mark open at its
 * time (settle_anchors also ends it before the thread's next slice) */
static void fit_anchor(thread_state_t *th, out_rec_t *o)
{
    track_t *tr = &th->tracks[0];
    while (tr->n > 0 && tr->ends[tr->n - 1] <= o->ts) tr->n--;
    double limit = next_change(th, o->ts);
    if (tr->n > 0 && tr->ends[tr->n - 1] < limit) limit = tr->ends[tr->n - 1];
    if (limit - o->ts < o->dur) o->dur = limit - o->ts;
}

/* Pass 2: the spans onto tracks (a preduce's parts from its track on), the
 * anchors inside what is open */
static void settle_spans(merge_t *m)
{
    for (size_t i = 0; i < m->nrecs; i++) {
        out_rec_t *o = &m->recs[i];
        rank_event_t *e = &m->in.ranks[o->rank].events[o->index];
        thread_state_t *th = &m->threads[o->rank][e->tid];
        if (o->kind == OUT_EVENT && ev_is_span((ev_type_t)e->type)) e->moved = (uint8_t)place_span(m, th, o, 0);
        else if (o->kind == OUT_WAIT || o->kind == OUT_REDUCE) place_span(m, th, o, e->moved);
        else if (o->kind == OUT_ANCHOR) fit_anchor(th, o);
    }
}

static int is_slice(const merge_t *m, const out_rec_t *o)
{
    const rank_event_t *e = &m->in.ranks[o->rank].events[o->index];
    if (o->kind == OUT_EVENT) return e->type == EV_MARK || ev_is_span((ev_type_t)e->type);
    return o->kind == OUT_WAIT || o->kind == OUT_REDUCE || o->kind == OUT_ANCHOR;
}

/* Pass 3, backwards: an anchor ends before the next slice of its thread
 * begins, so that no call is pushed off its thread by an anchor */
static void settle_anchors(merge_t *m)
{
    for (int r = 0; r < m->in.size; r++)
        for (int32_t t = 0; t < m->nthreads[r]; t++) m->threads[r][t].next_slice = INFINITY;
    for (size_t i = m->nrecs; i-- > 0;) {
        out_rec_t *o = &m->recs[i];
        thread_state_t *th = &m->threads[o->rank][m->in.ranks[o->rank].events[o->index].tid];
        if (o->kind == OUT_ANCHOR && th->next_slice - o->ts < o->dur) o->dur = th->next_slice - o->ts;
        if (is_slice(m, o)) th->next_slice = o->ts;
    }
}

static void settle_all(merge_t *m)
{
    settle_marks(m);
    settle_spans(m);
    settle_anchors(m);
    if (m->ncloses) qsort(m->closes, m->ncloses, sizeof *m->closes, cmp_rec);
}

/* ---- writing ---- */

static void write_args(const merge_t *m, FILE *out, const out_rec_t *o, const char *extra)
{
    const rank_file_t *f = &m->in.ranks[o->rank];
    const rank_event_t *e = &f->events[o->index];
    /* the line's object, its closing brace replaced by the added keys */
    fwrite(f->text + e->text_off, 1, e->text_len - 1, out);
    if (!e->has_rank) fprintf(out, ",\"rank\":%u", o->rank);
    fprintf(out, "%s}", extra);
}

static void write_head(const merge_t *m, FILE *out, const char *name_json, const char *cat, const char *ph,
                       const out_rec_t *o)
{
    fprintf(out, "{\"name\":%s,\"cat\":\"%s\",\"ph\":\"%s\",\"pid\":%u,\"tid\":%d,\"ts\":%.3f", name_json, cat, ph,
            o->rank, o->tid, o->ts);
    (void)m;
}

static void write_event(const merge_t *m, FILE *out, const out_rec_t *o)
{
    const rank_event_t *e = &m->in.ranks[o->rank].events[o->index];
    const char *name = m->names_json[e->name];
    if (e->type == EV_MARK && o->action == MARK_WRITE) {
        write_head(m, out, name, "mark", e->mark_end ? "E" : "B", o);
        fputs(",\"args\":", out);
        write_args(m, out, o, "");
    } else if (e->type == EV_MARK) {
        write_head(m, out, name, "mark", "i", o);
        fputs(",\"s\":\"t\",\"args\":", out);
        write_args(m, out, o, ",\"unmatched\":true");
    } else if (ev_is_span((ev_type_t)e->type)) {
        write_head(m, out, name, "pcoll", "X", o);
        fprintf(out, ",\"dur\":%.3f,\"args\":", o->dur);
        write_args(m, out, o, "");
    } else {
        write_head(m, out, name, "pcoll", "i", o);
        fputs(",\"s\":\"t\",\"args\":", out);
        write_args(m, out, o, "");
    }
    fputc('}', out);
}

static void write_flow(const merge_t *m, FILE *out, const out_rec_t *o)
{
    const rank_event_t *e = &m->in.ranks[o->rank].events[o->index];
    const char *obj = strtab_get(&m->in.objs, e->u.round.obj);
    const char *name = e->type == EV_ROUND_START ? "\"round_start\"" : "\"round\"";
    if (o->kind == OUT_ANCHOR) {
        write_head(m, out, name, "flow", "X", o);
        fprintf(out, ",\"dur\":%.3f", o->dur);
    } else {
        write_head(m, out, "\"round\"", "flow", o->kind == OUT_FLOW_S ? "s" : "f", o);
        fprintf(out, ",\"id\":%u%s", o->aux, o->kind == OUT_FLOW_F ? ",\"bp\":\"e\"" : "");
    }
    fprintf(out, ",\"args\":{\"obj\":%s,\"round\":%lld,\"root\":%lld,\"rank\":%u}}", obj,
            (long long)e->u.round.round, (long long)e->u.round.root, o->rank);
}

static void write_record(const merge_t *m, FILE *out, const out_rec_t *o)
{
    switch ((out_kind_t)o->kind) {
    case OUT_EVENT: write_event(m, out, o); break;
    case OUT_WAIT:
    case OUT_REDUCE:
        write_head(m, out, o->kind == OUT_WAIT ? "\"wait\"" : "\"reduce\"", "pcoll", "X", o);
        fprintf(out, ",\"dur\":%.3f,\"args\":{\"rank\":%u}}", o->dur, o->rank);
        break;
    case OUT_ANCHOR:
    case OUT_FLOW_S:
    case OUT_FLOW_F: write_flow(m, out, o); break;
    case OUT_CLOSE:
        write_head(m, out, m->names_json[o->aux], "mark", "E", o);
        fprintf(out, ",\"args\":{\"rank\":%u,\"closed_by\":\"pcoll-trace\"}}", o->rank);
        break;
    }
}

/* The separator before every item of traceEvents but the first */
static void next_item(FILE *out, int *first)
{
    if (!*first) fputs(",\n", out);
    *first = 0;
}

static void write_meta(FILE *out, int *first, const char *what, int rank, int tid, const char *key,
                       const char *value_json)
{
    next_item(out, first);
    fprintf(out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"%s\":%s}}", what, rank, tid, key,
            value_json);
}

static void write_thread_meta(const merge_t *m, FILE *out, int *first, int rank, int32_t tid)
{
    const thread_state_t *th = &m->threads[rank][tid];
    strbuf_t name = {0}, value = {0};
    if (th->name >= 0) sb_puts(&name, strtab_get(&m->in.names, th->name));
    else sb_printf(&name, "thread %d", tid);
    char sort[32];
    if (th->used) {
        json_write_string(&value, name.data, name.len);
        write_meta(out, first, "thread_name", rank, tid, "name", value.data);
        snprintf(sort, sizeof sort, "%d", MAX_TRACKS * tid);
        write_meta(out, first, "thread_sort_index", rank, tid, "sort_index", sort);
    }
    for (int k = 1; k < MAX_TRACKS; k++) {
        if (!(th->tracks_used & (1u << k))) continue;
        strbuf_t track = {0};
        sb_printf(&track, "%s (overlapping calls%s", name.data, k > 1 ? " " : ")");
        if (k > 1) sb_printf(&track, "%d)", k);
        value.len = 0;
        json_write_string(&value, track.data, track.len);
        write_meta(out, first, "thread_name", rank, tid + k * OVERLAP_TID, "name", value.data);
        snprintf(sort, sizeof sort, "%d", MAX_TRACKS * tid + k);
        write_meta(out, first, "thread_sort_index", rank, tid + k * OVERLAP_TID, "sort_index", sort);
        sb_free(&track);
    }
    sb_free(&name);
    sb_free(&value);
}

static void write_metadata(const merge_t *m, FILE *out, int *first)
{
    for (int r = 0; r < m->in.size; r++) {
        char text[64];
        snprintf(text, sizeof text, "\"rank %d\"", r);
        write_meta(out, first, "process_name", r, 0, "name", text);
        snprintf(text, sizeof text, "%d", r);
        write_meta(out, first, "process_sort_index", r, 0, "sort_index", text);
        if (m->in.ranks[r].host[0]) {
            strbuf_t label = {0}, value = {0};
            sb_printf(&label, "host %s", m->in.ranks[r].host);
            json_write_string(&value, label.data, label.len);
            write_meta(out, first, "process_labels", r, 0, "labels", value.data);
            sb_free(&label);
            sb_free(&value);
        }
        for (int32_t t = 0; t < m->nthreads[r]; t++) write_thread_meta(m, out, first, r, t);
    }
}

static void write_clock(const merge_t *m, FILE *out, int r)
{
    const rank_file_t *f = &m->in.ranks[r];
    int64_t err = f->start_err > f->stop_err ? f->start_err : f->stop_err;
    double drift = f->has_stop && f->stop_t > f->start_t
                       ? (double)(f->stop_offset - f->start_offset) / (double)(f->stop_t - f->start_t) * 1e6
                       : 0.0;
    strbuf_t host = {0};
    json_write_string(&host, f->host, strlen(f->host));
    fprintf(out,
            "%s\n  {\"rank\":%d,\"offset_start_ns\":%lld,\"offset_stop_ns\":%lld,\"err_ns\":%lld,\"drift_ppm\":%.6f,"
            "\"stop\":%s,\"host\":%s,\"pid\":%lld,\"events\":%zu}",
            r ? "," : "", r, (long long)f->start_offset, (long long)f->stop_offset, (long long)err, drift,
            f->has_stop ? "true" : "false", host.data, (long long)f->pid, f->nevents);
    sb_free(&host);
}

static void write_other_data(const merge_t *m, FILE *out, const char *prefix)
{
    int64_t bound = 0;
    for (int r = 0; r < m->in.size; r++) {
        const rank_file_t *f = &m->in.ranks[r];
        if (f->start_err > bound) bound = f->start_err;
        if (f->stop_err > bound) bound = f->stop_err;
    }
    strbuf_t source = {0};
    json_write_string(&source, prefix, strlen(prefix));
    fprintf(out, "\"otherData\":{\"pcoll_trace\":1,\"ranks\":%d,\"clock_error_bound_us\":%.3f,\"source\":%s,\"clocks\":[",
            m->in.size, (double)bound / 1000.0, source.data);
    for (int r = 0; r < m->in.size; r++) write_clock(m, out, r);
    fputs("]}}\n", out);
    sb_free(&source);
}

static void write_trace(const merge_t *m, FILE *out, const char *prefix)
{
    fputs("{\"traceEvents\":[\n", out);
    int first = 1;
    write_metadata(m, out, &first);
    size_t i = 0, j = 0;
    while (i < m->nrecs || j < m->ncloses) {
        const out_rec_t *o;
        if (j == m->ncloses || (i < m->nrecs && cmp_rec(&m->recs[i], &m->closes[j]) < 0)) o = &m->recs[i++];
        else o = &m->closes[j++];
        next_item(out, &first);
        write_record(m, out, o);
    }
    fputs("\n],\n\"displayTimeUnit\":\"ms\",\n", out);
    write_other_data(m, out, prefix);
}

static void names_to_json(merge_t *m)
{
    m->names_json = xcalloc(m->in.names.count, sizeof *m->names_json);
    for (size_t i = 0; i < m->in.names.count; i++) {
        strbuf_t sb = {0};
        json_write_string(&sb, m->in.names.strings[i], m->in.names.lengths[i]);
        m->names_json[i] = sb.data;
    }
}

static void merge_free(merge_t *m)
{
    for (int r = 0; m->threads && r < m->in.size; r++) {
        for (int32_t t = 0; t < m->nthreads[r]; t++) {
            thread_state_t *th = &m->threads[r][t];
            free(th->marks);
            free(th->mark_ids);
            free(th->changes);
            for (int k = 0; k < MAX_TRACKS; k++) free(th->tracks[k].ends);
        }
        free(m->threads[r]);
    }
    for (size_t i = 0; m->names_json && i < m->in.names.count; i++) free(m->names_json[i]);
    free(m->names_json);
    free(m->threads);
    free(m->nthreads);
    free(m->end_ts);
    free(m->recs);
    free(m->closes);
    free(m->flows);
    input_free(&m->in);
}

/* Writes to a temporary file renamed into place, so that a failed merge
 * leaves no half-written trace */
static int write_output(const merge_t *m, const char *prefix, const char *out_path)
{
    int to_stdout = strcmp(out_path, "-") == 0;
    strbuf_t tmp = {0};
    sb_printf(&tmp, "%s.tmp%ld", out_path, (long)getpid());
    FILE *out = to_stdout ? stdout : fopen(tmp.data, "wb");
    if (!out) {
        errorf("%s: cannot create: %s", tmp.data, strerror(errno));
        sb_free(&tmp);
        return 1;
    }
    char *buffer = NULL; /* a large buffer for a file: millions of short writes */
    if (!to_stdout) {
        buffer = xmalloc(1 << 20);
        setvbuf(out, buffer, _IOFBF, 1 << 20);
    }
    write_trace(m, out, prefix);
    int failed = fflush(out) != 0 || ferror(out);
    if (!to_stdout) {
        failed |= fclose(out) != 0;
        free(buffer);
        if (!failed && rename(tmp.data, out_path) != 0) failed = 1;
        if (failed) unlink(tmp.data);
    }
    if (failed) errorf("%s: cannot write: %s", to_stdout ? "standard output" : out_path, strerror(errno));
    sb_free(&tmp);
    return failed;
}

int merge_run(const char *prefix, const char *out_path)
{
    merge_t m;
    memset(&m, 0, sizeof m);
    m.marks.what = "unbalanced marks";
    m.clamped.what = "preduce lines whose parts exceed the call";
    m.crossing.what = "spans with no track to nest in";
    if (input_read(prefix, &m.in)) {
        merge_free(&m);
        return 1;
    }
    names_to_json(&m);
    collect_flows(&m);
    add_all_records(&m);
    if (m.nrecs) qsort(m.recs, m.nrecs, sizeof *m.recs, cmp_rec);
    settle_all(&m);
    warn_limit_done(&m.marks);
    if (m.overlapping) /* nonblocking calls and background buckets do this: not a problem of the input */
        fprintf(stderr, "%s: note: %zu spans overlap a call or mark of their thread: they are on overlap tracks "
                        "(tid + k x %d, \"... (overlapping calls)\")\n", TRACE_PROG, m.overlapping, OVERLAP_TID);
    warn_limit_done(&m.clamped);
    warn_limit_done(&m.crossing);
    int rc = write_output(&m, prefix, out_path);
    merge_free(&m);
    return rc;
}
