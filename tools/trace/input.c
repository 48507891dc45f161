/* Per-rank timeline files: reading, checking, and the clock offset. */
#include "input.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "util.h"

enum { MAX_TID = 1 << 16, MAX_SIZE = 1 << 20 }; /* tid below the merge's overlap tracks (1 << 20) */

static const struct {
    const char *ev;
    ev_type_t type;
} known_events[] = {
    {"thread", EV_THREAD},           {"allreduce", EV_ALLREDUCE},       {"partial_call", EV_PARTIAL_CALL},
    {"round_start", EV_ROUND_START}, {"round", EV_ROUND},               {"preduce", EV_PREDUCE},
    {"fusion_plan", EV_FUSION_PLAN}, {"fusion_ready", EV_FUSION_READY}, {"fusion_bucket", EV_FUSION_BUCKET},
    {"fusion_wait", EV_FUSION_WAIT}, {"mark", EV_MARK},                 {"stall", EV_STALL},
    {"left_out", EV_LEFT_OUT},
};

int ev_is_span(ev_type_t type)
{
    return type == EV_ALLREDUCE || type == EV_PARTIAL_CALL || type == EV_PREDUCE || type == EV_FUSION_BUCKET ||
           type == EV_FUSION_WAIT;
}

/* State while one file is read */
typedef struct file_reader {
    trace_input_t *in;
    rank_file_t *file;
    uint32_t line;
    const char *line_text;
    strtab_t *unknown_seen; /* unknown `ev` names warned about already */
} file_reader_t;

static int bad(const file_reader_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const file_reader_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: %s:%u: ", TRACE_PROG, r->file->path, r->line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

static int need_int(const file_reader_t *r, const json_value_t *obj, const char *ev, const char *key, int64_t *out)
{
    const json_value_t *v = json_get(obj, key);
    if (!v) return bad(r, "\"%s\" line without \"%s\"", ev, key);
    if (v->type != JSON_NUMBER || !v->u.num.is_int)
        return bad(r, "\"%s\" line: \"%s\" is %s, not an integer", ev, key, json_type_name(v->type));
    *out = v->u.num.i;
    return 0;
}

static int need_string(const file_reader_t *r, const json_value_t *obj, const char *ev, const char *key,
                       const char **out)
{
    const json_value_t *v = json_get(obj, key);
    if (!v) return bad(r, "\"%s\" line without \"%s\"", ev, key);
    if (v->type != JSON_STRING) return bad(r, "\"%s\" line: \"%s\" is %s, not a string", ev, key, json_type_name(v->type));
    *out = v->u.str.s;
    return 0;
}

static int parse_header(file_reader_t *r, const json_value_t *obj, int expect_rank)
{
    rank_file_t *f = r->file;
    int64_t version = 0, rank = 0, size = 0;
    if (need_int(r, obj, "header", "pcoll_timeline", &version)) return -1;
    if (version != 1) return bad(r, "pcoll_timeline %lld: this pcoll-trace reads version 1", (long long)version);
    if (need_int(r, obj, "header", "rank", &rank) || need_int(r, obj, "header", "size", &size) ||
        need_int(r, obj, "header", "t", &f->start_t) || need_int(r, obj, "header", "offset_ns", &f->start_offset) ||
        need_int(r, obj, "header", "offset_err_ns", &f->start_err))
        return -1;
    if (size < 1 || size > MAX_SIZE) return bad(r, "header: size %lld out of range", (long long)size);
    if (f->start_t < 0 || f->start_t > INT64_MAX / 4 || llabs(f->start_offset) > INT64_MAX / 4)
        return bad(r, "header: t or offset_ns out of range");
    if (rank != expect_rank)
        return bad(r, "header says rank %lld, but the file name says rank %d", (long long)rank, expect_rank);
    if (f->start_err < 0) return bad(r, "header: offset_err_ns %lld is negative", (long long)f->start_err);
    f->rank = (int)rank;
    f->size = (int)size;
    const char *host = "";
    json_get_string(obj, "host", &host);
    f->host = xstrdup(host);
    if (json_get_int(obj, "pid", &f->pid)) f->pid = -1;
    f->stop_t = f->start_t;
    f->stop_offset = f->start_offset;
    f->stop_err = f->start_err;
    return 0;
}

static int parse_stop(file_reader_t *r, const json_value_t *obj, int64_t *counted)
{
    rank_file_t *f = r->file;
    if (need_int(r, obj, "stop", "t", &f->stop_t) || need_int(r, obj, "stop", "offset_ns", &f->stop_offset) ||
        need_int(r, obj, "stop", "offset_err_ns", &f->stop_err))
        return -1;
    if (f->stop_t < f->start_t) return bad(r, "stop: t is before the header's t");
    if (f->stop_t > INT64_MAX / 4 || llabs(f->stop_offset) > INT64_MAX / 4) return bad(r, "stop: t or offset_ns out of range");
    /* a clock whose offset to rank 0's changed by more than the time that
     * passed would map later events before earlier ones */
    if (f->stop_err >= 0 && llabs(f->stop_offset - f->start_offset) >= f->stop_t - f->start_t)
        return bad(r, "stop: offset_ns moved by %lld ns in %lld ns since the header: not a clock's drift",
                   (long long)(f->stop_offset - f->start_offset), (long long)(f->stop_t - f->start_t));
    if (json_get_int(obj, "events", counted)) *counted = -1;
    f->has_stop = 1;
    if (f->stop_err < 0) { /* the recorder could not measure it */
        warnf("%s:%u: stop: no clock offset (offset_err_ns %lld): the header's alone is used", f->path, r->line,
              (long long)f->stop_err);
        f->stop_offset = f->start_offset;
        f->stop_err = f->start_err;
    }
    return 0;
}

static ev_type_t event_type(file_reader_t *r, const char *ev)
{
    for (size_t i = 0; i < sizeof known_events / sizeof known_events[0]; i++)
        if (strcmp(ev, known_events[i].ev) == 0) return known_events[i].type;
    size_t seen = r->unknown_seen->count;
    if (strtab_intern(r->unknown_seen, ev, strlen(ev)) == (int32_t)seen)
        warnf("%s:%u: unknown event \"%s\": kept as an instant (and so are the others like it)", r->file->path,
              r->line, ev);
    return EV_UNKNOWN;
}

/* round_start / round: the object (as JSON text), round and root */
static int parse_round_fields(file_reader_t *r, const json_value_t *obj, const char *ev, rank_event_t *e)
{
    const json_value_t *o = json_get(obj, "obj");
    if (!o) return bad(r, "\"%s\" line without \"obj\"", ev);
    if (o->type == JSON_ARRAY || o->type == JSON_OBJECT) return bad(r, "\"%s\" line: \"obj\" is %s", ev, json_type_name(o->type));
    strbuf_t text = {0};
    json_write_value(&text, o);
    e->u.round.obj = strtab_intern(&r->in->objs, text.data, text.len);
    sb_free(&text);
    return need_int(r, obj, ev, "round", &e->u.round.round) || need_int(r, obj, ev, "root", &e->u.round.root) ? -1 : 0;
}

/* What each type needs beyond ev, t and tid */
static int parse_type_fields(file_reader_t *r, const json_value_t *obj, const char *ev, rank_event_t *e)
{
    const char *text = NULL;
    if (ev_is_span(e->type)) {
        if (need_int(r, obj, ev, "dur", &e->dur)) return -1;
        if (e->dur < 0) return bad(r, "\"%s\": dur %lld is negative", ev, (long long)e->dur);
        if (e->dur > INT64_MAX / 4 - e->t) return bad(r, "\"%s\": t + dur is out of range", ev);
    }
    switch ((ev_type_t)e->type) {
    case EV_PREDUCE:
        if (need_int(r, obj, ev, "wait_ns", &e->u.preduce.wait_ns) || need_int(r, obj, ev, "reduce_ns", &e->u.preduce.reduce_ns))
            return -1;
        if (e->u.preduce.wait_ns < 0 || e->u.preduce.reduce_ns < 0) return bad(r, "\"preduce\": negative wait_ns or reduce_ns");
        return 0;
    case EV_MARK:
        if (need_string(r, obj, ev, "name", &text)) return -1;
        e->name = strtab_intern(&r->in->names, text, strlen(text));
        if (need_string(r, obj, ev, "ph", &text)) return -1;
        if (strcmp(text, "B") != 0 && strcmp(text, "E") != 0) return bad(r, "\"mark\": ph \"%s\" is neither B nor E", text);
        e->mark_end = text[0] == 'E';
        return 0;
    case EV_THREAD:
        if (need_string(r, obj, ev, "name", &text)) return -1;
        e->name = strtab_intern(&r->in->names, text, strlen(text));
        return 0;
    case EV_ROUND_START:
    case EV_ROUND: return parse_round_fields(r, obj, ev, e);
    default: return 0;
    }
}

static int parse_event(file_reader_t *r, const json_value_t *obj, const char *ev)
{
    rank_file_t *f = r->file;
    rank_event_t e;
    memset(&e, 0, sizeof e);
    int64_t tid = 0;
    if (need_int(r, obj, ev, "t", &e.t) || need_int(r, obj, ev, "tid", &tid)) return -1;
    if (tid < 0 || tid >= MAX_TID) return bad(r, "\"%s\": tid %lld out of range", ev, (long long)tid);
    if (e.t < 0 || e.t > INT64_MAX / 4) return bad(r, "\"%s\": t %lld out of range", ev, (long long)e.t);
    if (obj->end - obj->begin > UINT32_MAX) return bad(r, "line too long");
    e.tid = (int32_t)tid;
    e.type = (uint8_t)event_type(r, ev);
    e.name = strtab_intern(&r->in->names, ev, strlen(ev));
    e.line = r->line;
    e.text_off = (size_t)(r->line_text - f->text) + obj->begin;
    e.text_len = (uint32_t)(obj->end - obj->begin);
    e.has_rank = json_get(obj, "rank") != NULL;
    if (parse_type_fields(r, obj, ev, &e)) return -1;
    GROW(f->events, f->cap, f->nevents + 1);
    f->events[f->nevents++] = e;
    return 0;
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

/* One line: the header first, the stop last, events between */
static int read_line(file_reader_t *r, json_parser_t *p, int expect_rank, int *seen_header, int64_t *counted)
{
    json_value_t *obj = json_parse_document(p);
    if (!obj) {
        long line, column;
        json_position(p, p->error_pos, &line, &column);
        return bad(r, "malformed JSON at column %ld: %s", column, p->error);
    }
    if (obj->type != JSON_OBJECT) return bad(r, "a line is %s, not a JSON object", json_type_name(obj->type));
    const char *ev;
    if (json_get_string(obj, "ev", &ev)) return bad(r, "line without an \"ev\" string");
    if (r->file->has_stop) return bad(r, "a line after the stop line");
    if (!*seen_header) {
        if (strcmp(ev, "header") != 0) return bad(r, "the first line is \"%s\", not the header", ev);
        *seen_header = 1;
        return parse_header(r, obj, expect_rank);
    }
    if (strcmp(ev, "header") == 0) return bad(r, "a second header");
    if (strcmp(ev, "stop") == 0) return parse_stop(r, obj, counted);
    return parse_event(r, obj, ev);
}

static int read_lines(file_reader_t *r, int expect_rank, int64_t *counted)
{
    rank_file_t *f = r->file;
    json_arena_t *arena = json_arena_new();
    int seen_header = 0, rc = 0;
    size_t at = 0;
    while (rc == 0 && at < f->len) {
        const char *nl = memchr(f->text + at, '\n', f->len - at);
        size_t n = nl ? (size_t)(nl - (f->text + at)) : f->len - at;
        r->line++;
        r->line_text = f->text + at;
        if (!blank(r->line_text, n)) {
            json_parser_t p;
            json_parser_init(&p, r->line_text, n, arena);
            rc = read_line(r, &p, expect_rank, &seen_header, counted);
            json_parser_done(&p);
            json_arena_reset(arena);
        }
        at += n + 1;
    }
    json_arena_free(arena);
    if (rc == 0 && !seen_header) {
        errorf("%s: empty: no header line", f->path);
        rc = -1;
    }
    return rc;
}

static int read_rank_file(trace_input_t *in, rank_file_t *f, const char *path, int expect_rank, strtab_t *unknown)
{
    f->path = xstrdup(path);
    f->pid = -1;
    if (read_whole_file(path, &f->text, &f->len)) return -1;
    file_reader_t r = {.in = in, .file = f, .line = 0, .line_text = NULL, .unknown_seen = unknown};
    int64_t counted = -1;
    if (read_lines(&r, expect_rank, &counted)) return -1;
    if (!f->has_stop)
        warnf("%s: no stop line (the run ended without pcoll_timeline_stop or pcoll_finalize?): its clock offset "
              "is the header's alone", path);
    else if (counted >= 0 && (size_t)counted != f->nevents)
        warnf("%s: the stop line counts %lld events, the file holds %zu", path, (long long)counted, f->nevents);
    return 0;
}

static char *rank_path(const char *prefix, int rank)
{
    strbuf_t sb = {0};
    sb_printf(&sb, "%s.%d.jsonl", prefix, rank);
    return sb.data;
}

int input_read(const char *prefix, trace_input_t *in)
{
    memset(in, 0, sizeof *in);
    strtab_init(&in->names);
    strtab_init(&in->objs);
    strtab_t unknown;
    strtab_init(&unknown);
    rank_file_t first;
    memset(&first, 0, sizeof first);
    char *path = rank_path(prefix, 0);
    int rc = read_rank_file(in, &first, path, 0, &unknown);
    free(path);
    in->size = first.size > 0 ? first.size : 1;
    in->ranks = xcalloc((size_t)in->size, sizeof *in->ranks);
    in->ranks[0] = first;
    for (int r = 1; rc == 0 && r < in->size; r++) {
        path = rank_path(prefix, r);
        rc = read_rank_file(in, &in->ranks[r], path, r, &unknown);
        if (rc == 0 && in->ranks[r].size != in->size) {
            errorf("%s:1: size %d, but %s.0.jsonl says %d", path, in->ranks[r].size, prefix, in->size);
            rc = -1;
        }
        free(path);
    }
    path = rank_path(prefix, in->size);
    if (rc == 0 && access(path, F_OK) == 0)
        warnf("%s: ignored: the run had %d ranks (a file of an earlier run?)", path, in->size);
    free(path);
    strtab_free(&unknown);
    return rc;
}

void input_free(trace_input_t *in)
{
    for (int r = 0; in->ranks && r < in->size; r++) {
        free(in->ranks[r].path);
        free(in->ranks[r].text);
        free(in->ranks[r].host);
        free(in->ranks[r].events);
    }
    free(in->ranks);
    strtab_free(&in->names);
    strtab_free(&in->objs);
    memset(in, 0, sizeof *in);
}

double input_offset_ns(const rank_file_t *r, int64_t t)
{
    if (!r->has_stop || r->stop_t == r->start_t) return (double)r->start_offset;
    double frac = (double)(t - r->start_t) / (double)(r->stop_t - r->start_t);
    return (double)r->start_offset + (double)(r->stop_offset - r->start_offset) * frac;
}
