/* Reading a merged trace: the top-level object by hand, traceEvents one
 * element at a time into a scratch arena, otherData kept. */
#include "merged.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

typedef struct reader {
    trace_t *t;
    json_parser_t p;
    const json_value_t *ev; /* the event being read, for messages */
    strbuf_t scratch;
} reader_t;

static int bad_event(const reader_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad_event(const reader_t *r, const char *fmt, ...)
{
    long line, column;
    json_position(&r->p, r->ev->begin, &line, &column);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: %s:%ld: ", TRACE_PROG, r->t->path, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

static const struct {
    const char *name, *ph;
    tr_type_t type;
} wanted[] = {
    {"allreduce", "X", TR_ALLREDUCE},       {"partial_call", "X", TR_PARTIAL_CALL}, {"preduce", "X", TR_PREDUCE},
    {"fusion_bucket", "X", TR_FUSION_BUCKET}, {"fusion_wait", "X", TR_FUSION_WAIT}, {"wait", "X", TR_PREDUCE_WAIT},
    {"round_start", "i", TR_ROUND_START},   {"round", "i", TR_ROUND},               {"fusion_plan", "i", TR_FUSION_PLAN},
    {"fusion_ready", "i", TR_FUSION_READY}, {"stall", "i", TR_STALL},           {"left_out", "i", TR_LEFT_OUT},
};

/* The type of an event the report or the picture uses; -1 for the others */
static int classify(const char *name, const char *ph, const char *cat)
{
    if (strcmp(cat, "flow") == 0) return -1; /* arrows and their anchors */
    if (strcmp(cat, "mark") == 0) return strcmp(ph, "B") == 0 ? TR_MARK_B : strcmp(ph, "E") == 0 ? TR_MARK_E : -1;
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
        if (strcmp(name, wanted[i].name) == 0 && strcmp(ph, wanted[i].ph) == 0) return (int)wanted[i].type;
    return -1;
}

static int arg_int(const reader_t *r, const json_value_t *args, const char *name, const char *key, int64_t *out)
{
    if (json_get_int(args, key, out) == 0) return 0;
    return bad_event(r, "\"%s\" event: args.%s missing or not an integer", name, key);
}

static int arg_number(const reader_t *r, const json_value_t *args, const char *name, const char *key, double *out)
{
    if (json_get_number(args, key, out) == 0) return 0;
    return bad_event(r, "\"%s\" event: args.%s missing or not a number", name, key);
}

/* A string argument interned with a prefix ("allreduce:" + algo); "?" when absent */
static int32_t arg_label(reader_t *r, const json_value_t *args, const char *prefix, const char *key)
{
    const char *value = "?";
    json_get_string(args, key, &value);
    r->scratch.len = 0;
    sb_printf(&r->scratch, "%s%s", prefix, value);
    return strtab_intern(&r->t->strings, r->scratch.data, r->scratch.len);
}

static int arg_obj(reader_t *r, const json_value_t *args, const char *name, int32_t *out)
{
    const json_value_t *o = json_get(args, "obj");
    if (!o) return bad_event(r, "\"%s\" event: no args.obj", name);
    r->scratch.len = 0;
    json_write_value(&r->scratch, o);
    *out = strtab_intern(&r->t->strings, r->scratch.data, r->scratch.len);
    return 0;
}

/* members[] and nmembers[] cover every string id */
static void members_fit(trace_t *t)
{
    size_t old = t->members_cap, cap = old, cap2 = old;
    if (t->strings.count <= old) return;
    GROW(t->members, cap, t->strings.count);
    GROW(t->nmembers, cap2, t->strings.count);
    for (size_t i = old; i < cap; i++) {
        t->members[i] = NULL;
        t->nmembers[i] = 0;
    }
    t->members_cap = cap;
}

/* A list of ranks (an allreduce's members, the ranks a round left out):
 * interned as its JSON text, its ranks kept the first time it is seen */
static int arg_ranks(reader_t *r, const json_value_t *args, const char *name, const char *key, int32_t *out)
{
    const json_value_t *g = json_get(args, key);
    *out = -1;
    if (!g || g->type == JSON_NULL) return 0;
    if (g->type != JSON_ARRAY) return bad_event(r, "\"%s\" event: args.%s is not a list of ranks", name, key);
    r->scratch.len = 0;
    json_write_value(&r->scratch, g);
    trace_t *t = r->t;
    int32_t id = strtab_intern(&t->strings, r->scratch.data, r->scratch.len);
    *out = id;
    members_fit(t);
    if (t->members[id]) return 0;
    int32_t *ranks = xmalloc((g->u.arr.n ? g->u.arr.n : 1) * sizeof *ranks);
    for (size_t i = 0; i < g->u.arr.n; i++) {
        const json_value_t *m = g->u.arr.items[i];
        if (m->type != JSON_NUMBER || !m->u.num.is_int || m->u.num.i < 0 || m->u.num.i > INT32_MAX) {
            free(ranks);
            return bad_event(r, "\"%s\" event: args.%s holds something that is not a rank", name, key);
        }
        ranks[i] = (int32_t)m->u.num.i;
    }
    t->members[id] = ranks;
    t->nmembers[id] = (int32_t)g->u.arr.n;
    return 0;
}

static int partial_fields(reader_t *r, const json_value_t *args, tr_event_t *e)
{
    const char *fn = "allreduce";
    int64_t waited = 0;
    e->label = arg_label(r, args, "partial:", "kind");
    json_get_string(args, "fn", &fn);
    e->fn = strcmp(fn, "flush") == 0 ? FN_FLUSH : strcmp(fn, "deposit") == 0 ? FN_DEPOSIT : FN_ALLREDUCE;
    json_get_int(args, "waited", &waited);
    e->flag = waited != 0;
    return arg_obj(r, args, "partial_call", &e->obj) || arg_int(r, args, "partial_call", "round", &e->u.round.round);
}

static int round_fields(reader_t *r, const json_value_t *args, const char *name, tr_event_t *e)
{
    int64_t sync = 0;
    json_get_int(args, "sync", &sync);
    e->flag = sync != 0;
    e->label = arg_label(r, args, "partial:", "kind");
    return arg_obj(r, args, name, &e->obj) || arg_int(r, args, name, "round", &e->u.round.round) ||
           arg_int(r, args, name, "root", &e->u.round.root);
}

static int plan_fields(reader_t *r, const json_value_t *args, tr_event_t *e)
{
    const char *n = "fusion_plan";
    double start, end, compute;
    if (arg_obj(r, args, n, &e->obj) || arg_int(r, args, n, "bucket", &e->u.plan.bucket) ||
        arg_number(r, args, n, "pred_start_ns", &start) || arg_number(r, args, n, "pred_end_ns", &end) ||
        arg_number(r, args, n, "compute_ns", &compute))
        return -1;
    e->u.plan.pred_start_us = start / 1000.0;
    e->u.plan.pred_end_us = end / 1000.0;
    e->u.plan.compute_us = compute / 1000.0;
    return 0;
}

/* The fields each type needs from its args */
static int type_fields(reader_t *r, const json_value_t *args, const char *name, tr_event_t *e)
{
    double wait_ns;
    switch ((tr_type_t)e->type) {
    case TR_ALLREDUCE:
        e->label = arg_label(r, args, "allreduce:", "algo");
        return arg_ranks(r, args, name, "group", &e->group);
    case TR_PARTIAL_CALL: return partial_fields(r, args, e);
    case TR_ROUND_START:
    case TR_ROUND: return round_fields(r, args, name, e);
    case TR_PREDUCE:
        e->label = arg_label(r, args, "preduce:", "policy");
        if (arg_obj(r, args, name, &e->obj) || arg_int(r, args, name, "group_id", &e->u.preduce.group_id) ||
            arg_int(r, args, name, "iteration", &e->u.preduce.iteration) ||
            arg_number(r, args, name, "wait_ns", &wait_ns))
            return -1;
        e->u.preduce.wait_us = wait_ns / 1000.0;
        int64_t status = 0;
        json_get_int(args, "status", &status);
        e->flag = status != 0; /* failed: it was in no group */
        return 0;
    case TR_FUSION_PLAN: return plan_fields(r, args, e);
    case TR_FUSION_READY:
        return arg_obj(r, args, name, &e->obj) || arg_int(r, args, name, "step", &e->u.fusion.step) ||
               arg_int(r, args, name, "layer", &e->u.fusion.index);
    case TR_FUSION_BUCKET:
        return arg_obj(r, args, name, &e->obj) || arg_int(r, args, name, "step", &e->u.fusion.step) ||
               arg_int(r, args, name, "bucket", &e->u.fusion.index);
    case TR_FUSION_WAIT: return arg_obj(r, args, name, &e->obj) || arg_int(r, args, name, "step", &e->u.fusion.step);
    case TR_LEFT_OUT: {
        int64_t catch_up = 0;
        json_get_int(args, "catch_up", &catch_up);
        e->flag = catch_up != 0;
        return arg_obj(r, args, name, &e->obj) || arg_int(r, args, name, "round", &e->u.round.round) ||
               arg_int(r, args, name, "first", &e->u.round.root) || arg_ranks(r, args, name, "ranks", &e->group);
    }
    case TR_MARK_B:
    case TR_MARK_E: e->label = strtab_intern(&r->t->strings, name, strlen(name)); return 0;
    default: return 0;
    }
}

static int read_event(reader_t *r, const json_value_t *ev)
{
    r->ev = ev;
    if (ev->type != JSON_OBJECT) return bad_event(r, "an element of traceEvents is %s, not an object", json_type_name(ev->type));
    const char *name, *ph, *cat = "";
    int64_t pid, tid;
    if (json_get_string(ev, "name", &name) || json_get_string(ev, "ph", &ph))
        return bad_event(r, "an event without a name or ph string");
    if (strcmp(ph, "M") == 0) return 0;
    double ts, dur = 0;
    if (json_get_int(ev, "pid", &pid) || json_get_int(ev, "tid", &tid) || json_get_number(ev, "ts", &ts))
        return bad_event(r, "event \"%s\" without integer pid and tid and a number ts", name);
    if (strcmp(ph, "X") == 0 && (json_get_number(ev, "dur", &dur) || dur < 0))
        return bad_event(r, "X event \"%s\" without a dur >= 0", name);
    json_get_string(ev, "cat", &cat);
    int type = classify(name, ph, cat);
    trace_t *t = r->t;
    if (pid < 0 || pid > INT32_MAX) return bad_event(r, "pid %lld is not a rank", (long long)pid);
    if (type < 0) return 0;
    const json_value_t *args = json_get(ev, "args");
    tr_event_t e;
    memset(&e, 0, sizeof e);
    e.ts = ts;
    e.dur = dur;
    e.rank = (int32_t)pid;
    e.tid = (int32_t)tid;
    e.type = (uint8_t)type;
    e.obj = e.label = e.group = -1;
    if (type_fields(r, args, name, &e)) return -1;
    GROW(t->events, t->cap, t->n + 1);
    t->events[t->n++] = e;
    return 0;
}

static int parse_error(const reader_t *r)
{
    long line, column;
    json_position(&r->p, r->p.error_pos, &line, &column);
    errorf("%s:%ld:%ld: malformed JSON: %s", r->t->path, line, column, r->p.error);
    return -1;
}

/* "traceEvents": [ ... ], one element at a time */
static int read_events(reader_t *r, json_arena_t *scratch)
{
    json_parser_t *p = &r->p;
    json_arena_t *keep = p->arena;
    p->arena = scratch;
    int rc = json_expect(p, '[');
    if (rc == 0 && json_peek(p) == ']') p->pos++;
    else
        while (rc == 0) {
            json_arena_reset(scratch);
            const json_value_t *ev = json_parse_value(p);
            if (!ev) return parse_error(r);
            if (read_event(r, ev)) return -1;
            int c = json_peek(p);
            p->pos++;
            if (c == ']') break;
            if (c != ',') rc = (p->pos--, json_expect(p, ','));
        }
    p->arena = keep;
    return rc ? parse_error(r) : 0;
}

/* The top-level object: traceEvents read as they come, otherData kept */
static int read_top(reader_t *r, json_arena_t *scratch, const json_value_t **other)
{
    json_parser_t *p = &r->p;
    if (json_expect(p, '{')) return parse_error(r);
    int seen_events = 0;
    if (json_peek(p) == '}') p->pos++;
    else
        for (;;) {
            const char *key;
            size_t len;
            if (json_parse_string(p, &key, &len) || json_expect(p, ':')) return parse_error(r);
            if (strcmp(key, "traceEvents") == 0) {
                if (read_events(r, scratch)) return -1;
                seen_events = 1;
            } else {
                const json_value_t *v = json_parse_value(p);
                if (!v) return parse_error(r);
                if (strcmp(key, "otherData") == 0) *other = v;
            }
            int c = json_peek(p);
            p->pos++;
            if (c == '}') break;
            if (c != ',') return p->pos--, json_expect(p, ','), parse_error(r);
        }
    if (json_peek(p) >= 0) {
        long line, column;
        json_position(p, p->pos, &line, &column);
        return errorf("%s:%ld:%ld: text after the trace's object", r->t->path, line, column), -1;
    }
    if (!seen_events) return errorf("%s: no traceEvents: not a trace", r->t->path), -1;
    return 0;
}

/* otherData: a merged pcoll trace says so, with its ranks and clock bounds */
static int read_other(trace_t *t, const json_value_t *other)
{
    int64_t version, ranks;
    if (!other || json_get_int(other, "pcoll_trace", &version) || version != 1) {
        errorf("%s: not a merged pcoll trace (no otherData.pcoll_trace 1): make one with pcoll-trace merge", t->path);
        return -1;
    }
    if (json_get_int(other, "ranks", &ranks) || ranks < 1 || ranks > (1 << 20) ||
        json_get_number(other, "clock_error_bound_us", &t->bound_us)) {
        errorf("%s: otherData without ranks or clock_error_bound_us", t->path);
        return -1;
    }
    t->ranks = (int)ranks;
    t->err_us = xcalloc((size_t)ranks, sizeof *t->err_us);
    const json_value_t *clocks = json_get(other, "clocks");
    for (int r = 0; r < t->ranks; r++) t->err_us[r] = t->bound_us;
    for (size_t i = 0; clocks && clocks->type == JSON_ARRAY && i < clocks->u.arr.n; i++) {
        int64_t rank;
        double err_ns;
        const json_value_t *c = clocks->u.arr.items[i];
        if (json_get_int(c, "rank", &rank) == 0 && rank >= 0 && rank < ranks && json_get_number(c, "err_ns", &err_ns) == 0)
            t->err_us[rank] = err_ns / 1000.0;
    }
    return 0;
}

/* Every event on a rank of the trace; each rank's first and last moments */
static int finish(trace_t *t)
{
    t->first_us = xmalloc((size_t)t->ranks * sizeof *t->first_us);
    t->last_us = xmalloc((size_t)t->ranks * sizeof *t->last_us);
    for (int r = 0; r < t->ranks; r++) {
        t->first_us[r] = INFINITY;
        t->last_us[r] = -INFINITY;
    }
    t->start_us = INFINITY;
    t->end_us = -INFINITY;
    for (size_t i = 0; i < t->n; i++) {
        const tr_event_t *e = &t->events[i];
        if (e->rank >= t->ranks) {
            errorf("%s: an event of pid %d, but the trace has %d ranks", t->path, e->rank, t->ranks);
            return -1;
        }
        if (e->ts < t->first_us[e->rank]) t->first_us[e->rank] = e->ts;
        if (e->ts + e->dur > t->last_us[e->rank]) t->last_us[e->rank] = e->ts + e->dur;
    }
    for (int r = 0; r < t->ranks; r++) {
        if (t->first_us[r] < t->start_us) t->start_us = t->first_us[r];
        if (t->last_us[r] > t->end_us) t->end_us = t->last_us[r];
    }
    if (t->n == 0) t->start_us = t->end_us = 0;
    return 0;
}

int trace_read(const char *path, trace_t *t)
{
    memset(t, 0, sizeof *t);
    t->path = path;
    strtab_init(&t->strings);
    char *text;
    size_t len;
    if (read_whole_file(path, &text, &len)) return -1;
    json_arena_t *keep = json_arena_new(), *scratch = json_arena_new();
    reader_t r;
    memset(&r, 0, sizeof r);
    r.t = t;
    json_parser_init(&r.p, text, len, keep);
    const json_value_t *other = NULL;
    int rc = read_top(&r, scratch, &other);
    if (rc == 0) rc = read_other(t, other);
    if (rc == 0) rc = finish(t);
    json_parser_done(&r.p);
    json_arena_free(keep);
    json_arena_free(scratch);
    sb_free(&r.scratch);
    free(text);
    return rc;
}

void trace_free(trace_t *t)
{
    for (size_t i = 0; i < t->members_cap; i++) free(t->members[i]);
    free(t->members);
    free(t->nmembers);
    free(t->err_us);
    free(t->events);
    free(t->first_us);
    free(t->last_us);
    strtab_free(&t->strings);
    memset(t, 0, sizeof *t);
}
