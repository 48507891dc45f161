/* The timeline recorder: see recorder.h. */
#include "recorder.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct pc_rec_buf {
    pc_rec_t *rec;
    uint64_t session;     /* the session the buffer's events belong to */
    int tid;
    uint64_t owner;       /* the thread's number (my_thread) */
    _Atomic size_t head;  /* owner: events published up to here */
    size_t flushed;       /* (rec->lock) written up to here */
    pc_rec_buf_t *next;
    pc_ev_t ev[PC_REC_BUF_EVENTS];
};

/* ---- what each type's fields are called (docs/timeline.md) ---- */

typedef struct ev_desc {
    const char *name;
    const char *key[PC_EV_FIELDS];
    char kind[PC_EV_FIELDS + 1]; /* i: integer, s: static string, d: double, p: two 32-bit integers
                                    (pc_ev_pair; the key names both: "low,high"), -: none */
    const char *list_key, *text_key;
} ev_desc_t;

static const ev_desc_t descs[PC_EV_NTYPES] = {
    [PC_EV_ALLREDUCE] = {"allreduce", {"call", "algo", "bytes", "n", "status"}, "ssiii----", "group", NULL},
    /* the frequent events of partial rounds in one line: small integers paired */
    [PC_EV_PARTIAL_CALL] = {"partial_call",
                            {"obj,round", "kind", "fn", "waited,status", "rounds"},
                            "psspi----",
                            NULL,
                            NULL},
    [PC_EV_ROUND_START] = {"round_start", {"obj", "round", "root", "sync"}, "iiii-----", NULL, NULL},
    [PC_EV_ROUND] = {"round",
                     {"obj,round", "kind", "root,active", "contributions,stale", "sync,standin"},
                     "psppp----",
                     "group",
                     NULL},
    [PC_EV_PREDUCE] = {"preduce",
                       {"obj", "policy", "group_id", "weight", "iteration", "group_iteration", "wait_ns", "reduce_ns",
                        "status"},
                       "isidiiiii",
                       "members",
                       NULL},
    [PC_EV_FUSION_PLAN] = {"fusion_plan",
                           {"obj", "bucket", "first", "last", "bytes", "pred_start_ns", "pred_end_ns", "compute_ns",
                            "iter_ns"},
                           "iiiiiiiii",
                           NULL,
                           NULL},
    [PC_EV_FUSION_READY] = {"fusion_ready", {"obj", "step", "layer"}, "iii------", NULL, NULL},
    [PC_EV_FUSION_BUCKET] = {"fusion_bucket", {"obj", "step", "bucket", "bytes"}, "iiii-----", NULL, NULL},
    [PC_EV_FUSION_WAIT] = {"fusion_wait", {"obj", "step"}, "ii-------", NULL, NULL},
    [PC_EV_MARK] = {"mark", {"ph"}, "s--------", NULL, "name"},
    [PC_EV_STALL] = {"stall", {"fn", "timeout"}, "si-------", "ranks", "what"},
    [PC_EV_THREAD] = {"thread", {"name"}, "s--------", NULL, NULL},
    [PC_EV_LEFT_OUT] = {"left_out", {"obj,round", "first", "catch_up"}, "pii------", "ranks", NULL},
};

static unsigned char field_count[PC_EV_NTYPES]; /* nfields of each type (pc_rec_init) */

/* how many fields a type has */
static int nfields(const ev_desc_t *d)
{
    int n = 0;
    while (n < PC_EV_FIELDS && d->kind[n] != '-' && d->kind[n]) n++;
    return n;
}

/* ---- writing (rec->lock held) ---- */

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 if
 * there is none */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80            ? 1
                 : (s[0] & 0xe0) == 0xc0 ? 2
                 : (s[0] & 0xf0) == 0xe0 ? 3
                 : (s[0] & 0xf8) == 0xf0 ? 4
                                         : 0;
    if (len == 0 || len > n || (len == 2 && s[0] < 0xc2)) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return len;
}

/* A JSON string: quotes, backslashes and control characters escaped,
 * bytes that are not UTF-8 as U+FFFD (JSON is UTF-8) */
static void put_text(FILE *f, const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    fputc('"', f);
    for (size_t i = 0; i < n && s[i];) {
        size_t len = utf8_length(s + i, n - i);
        if (len == 0) {
            fputs("\\ufffd", f);
            i++;
        } else if (s[i] == '"' || s[i] == '\\') {
            fprintf(f, "\\%c", s[i++]);
        } else if (s[i] < 0x20) {
            fprintf(f, "\\u%04x", s[i++]);
        } else {
            fwrite(s + i, 1, len, f);
            i += len;
        }
    }
    fputc('"', f);
}

static void put_field(FILE *f, const char *key, char kind, int64_t v)
{
    if (kind == 'p') { /* two 32-bit integers, "low,high" */
        const char *comma = strchr(key, ',');
        fprintf(f, ",\"%.*s\":%d,\"%s\":%d", (int)(comma - key), key, pc_ev_low(v), comma + 1, pc_ev_high(v));
        return;
    }
    fprintf(f, ",\"%s\":", key);
    if (kind == 'i') {
        fprintf(f, "%lld", (long long)v);
    } else if (kind == 'd') {
        union {
            int64_t i;
            double d;
        } u = {.i = v};
        if (isfinite(u.d))
            fprintf(f, "%.9g", u.d);
        else
            fputs("null", f); /* JSON has no NaN or infinity */
    } else {
        const char *s = (const char *)(intptr_t)v;
        put_text(f, s ? s : "", s ? strlen(s) : 0);
    }
}

/* Writes event e (its extra slots follow it) of thread tid. */
static void write_event(pc_rec_t *r, const pc_ev_t *e, int tid)
{
    FILE *f = r->file;
    const ev_desc_t *d = &descs[e->type];
    /* ticks to the file's nanoseconds */
    uint64_t since_open = e->t - atomic_load_explicit(&r->tick0, memory_order_relaxed);
    uint64_t t = r->mono0 + (uint64_t)r->shift_ns + (uint64_t)(int64_t)((double)since_open * r->ns_per_tick);
    uint64_t dur = (uint64_t)((double)e->dur * r->ns_per_tick);
    fprintf(f, "{\"ev\":\"%s\",\"t\":%llu,\"tid\":%d", d->name, (unsigned long long)t, tid);
    if (e->dur) fprintf(f, ",\"dur\":%llu", (unsigned long long)(dur ? dur : 1));
    int nf = nfields(d);
    int64_t field[PC_EV_FIELDS];
    memcpy(field, e->data, sizeof(int64_t) * (size_t)nf);
    for (int i = 0; i < nf; i++) put_field(f, d->key[i], d->kind[i], field[i]);
    int list[PC_EV_LIST_MAX];
    memcpy(list, e->data + sizeof(int64_t) * (size_t)nf, sizeof(int) * e->nlist);
    if (d->list_key && e->nlist) {
        fprintf(f, ",\"%s\":[", d->list_key);
        for (int i = 0; i < e->nlist; i++) fprintf(f, "%s%d", i ? "," : "", list[i]);
        fputc(']', f);
    }
    if (d->text_key) {
        fprintf(f, ",\"%s\":", d->text_key);
        put_text(f, (const char *)e->data + sizeof(int64_t) * (size_t)nf + sizeof(int) * e->nlist, e->ntext);
    }
    fputs("}\n", f);
    r->written++;
}

static void note_error(pc_rec_t *r, FILE *f)
{
    if (ferror(f) && !r->write_failed) r->write_failed = errno ? errno : EIO;
}

/* A buffer's events [from, to) into the spill file as they are: a chunk
 * header (tid, slots), the slots.  Formatting them is left to the close,
 * so that a full buffer costs its thread a copy, not a printf per event. */
typedef struct chunk {
    int32_t tid;
    uint32_t slots;
} chunk_t;

static void spill_range(pc_rec_t *r, pc_rec_buf_t *b, size_t from, size_t to)
{
    if (to <= from) return;
    chunk_t c = {b->tid, (uint32_t)(to - from)};
    int ok = fwrite(&c, sizeof c, 1, r->spill) == 1;
    if (!ok || fwrite(&b->ev[from], sizeof(pc_ev_t), to - from, r->spill) != to - from) note_error(r, r->spill);
}

/* The spill file's events as JSON lines into the timeline file. */
static void write_spilled(pc_rec_t *r)
{
    if (fflush(r->spill) != 0 || fseek(r->spill, 0, SEEK_SET) != 0) {
        note_error(r, r->spill);
        return;
    }
    pc_ev_t *ev = malloc(sizeof(pc_ev_t) * PC_REC_BUF_EVENTS);
    chunk_t c;
    while (ev && fread(&c, sizeof c, 1, r->spill) == 1) {
        if (c.slots > PC_REC_BUF_EVENTS || fread(ev, sizeof *ev, c.slots, r->spill) != c.slots) {
            if (!r->write_failed) r->write_failed = EIO;
            break;
        }
        for (uint32_t i = 0; i < c.slots; i += 1u + ev[i].extra) write_event(r, &ev[i], c.tid);
    }
    if (!ev && !r->write_failed) r->write_failed = ENOMEM;
    free(ev);
    note_error(r, r->file);
}

/* ---- the buffers ---- */

/* The buffer this thread used last, and its session.  Sessions are
 * numbered across every recorder of the process, so a match means the
 * buffer is the one of a recorder that is recording now (a recorder
 * destroyed since, even one whose memory a new one took, cannot match). */
static _Thread_local uint64_t my_session;
static _Thread_local pc_rec_buf_t *my_buf;
static _Thread_local const char *my_name;       /* pc_rec_thread_name */
static atomic_ullong sessions;                  /* numbers handed out */
/* Threads are told apart by a number of their own (a pthread_t may be
 * reused by a new thread once one has exited). */
static _Thread_local uint64_t my_thread;
static atomic_ullong threads;

void pc_rec_thread_name(const char *name) { my_name = name; }

static void push(pc_rec_buf_t *b, pc_ev_type_t type, uint64_t t, uint64_t dur, const int64_t f[PC_EV_FIELDS],
                 const int *list, int nlist, const char *text, size_t ntext);

/* This thread's buffer for the current session: a new one the first time;
 * NULL without memory (the event is then not recorded). */
static pc_rec_buf_t *buffer_of_thread(pc_rec_t *r, uint64_t session, uint64_t t)
{
    if (!my_thread) my_thread = atomic_fetch_add(&threads, 1) + 1;
    uint64_t self = my_thread;
    pthread_mutex_lock(&r->lock);
    pc_rec_buf_t *b = r->bufs;
    while (b && b->owner != self) b = b->next;
    if (!b && (b = malloc(sizeof *b)) != NULL) {
        b->rec = r;
        b->owner = self;
        b->session = 0;
        atomic_init(&b->head, 0);
        b->flushed = 0;
        b->next = r->bufs;
        r->bufs = b;
    }
    int fresh = b && b->session != session;
    if (fresh) { /* the thread's first event of this session */
        b->session = session;
        b->tid = r->nthreads++;
        b->flushed = atomic_load(&b->head); /* events of an older session are dropped */
    }
    pthread_mutex_unlock(&r->lock);
    if (fresh) {
        int64_t name[PC_EV_FIELDS] = {pc_ev_str(my_name ? my_name : "application")};
        push(b, PC_EV_THREAD, t, 0, name, NULL, 0, NULL, 0);
    }
    if (b) {
        my_buf = b;
        my_session = session;
    }
    return b;
}

/* The owner, with no room for `slots` more: writes the buffer out. */
static void make_room(pc_rec_buf_t *b)
{
    pc_rec_t *r = b->rec;
    pthread_mutex_lock(&r->lock);
    if (r->spill) spill_range(r, b, b->flushed, atomic_load(&b->head));
    b->flushed = 0;
    atomic_store_explicit(&b->head, 0, memory_order_release);
    pthread_mutex_unlock(&r->lock);
}

/* The owner: the event into its buffer (published by `head`). */
static void push(pc_rec_buf_t *b, pc_ev_type_t type, uint64_t t, uint64_t dur, const int64_t f[PC_EV_FIELDS],
                 const int *list, int nlist, const char *text, size_t ntext)
{
    size_t nf = (size_t)field_count[type];
    size_t payload = nf * sizeof(int64_t) + (size_t)nlist * sizeof(int) + ntext;
    size_t extra = payload > PC_EV_DATA ? (payload - PC_EV_DATA + sizeof(pc_ev_t) - 1) / sizeof(pc_ev_t) : 0;
    size_t h = atomic_load_explicit(&b->head, memory_order_relaxed);
    if (h + 1 + extra > PC_REC_BUF_EVENTS) {
        make_room(b);
        h = 0;
    }
    pc_ev_t *e = &b->ev[h];
    e->t = t;
    e->dur = dur;
    e->type = (uint16_t)type;
    e->extra = (uint16_t)extra;
    e->nlist = (uint16_t)nlist;
    e->ntext = (uint16_t)ntext;
    unsigned char *x = e->data; /* runs on into the extra slots */
    memcpy(x, f, nf * sizeof(int64_t));
    x += nf * sizeof(int64_t);
    if (nlist) memcpy(x, list, (size_t)nlist * sizeof(int));
    if (ntext) memcpy(x + (size_t)nlist * sizeof(int), text, ntext);
    atomic_store_explicit(&b->head, h + 1 + extra, memory_order_release);
}

void pc_rec_event(pc_rec_t *r, pc_ev_type_t type, uint64_t t, uint64_t dur, const int64_t f[PC_EV_FIELDS],
                  const int *list, int nlist, const char *text)
{
    uint64_t session = atomic_load_explicit(&r->session, memory_order_acquire);
    if (t < atomic_load_explicit(&r->tick0, memory_order_relaxed)) return; /* a span begun before this
                                                                               session (a stop and a start
                                                                               during it) */
    pc_rec_buf_t *b = my_session == session && session ? my_buf : buffer_of_thread(r, session, t);
    if (!b) return;
    if (nlist < 0 || !list) nlist = 0;
    if (nlist > PC_EV_LIST_MAX) nlist = PC_EV_LIST_MAX;
    push(b, type, t, dur, f, list, nlist, text, text ? strnlen(text, PC_EV_TEXT_MAX) : 0);
}

/* ---- sessions ---- */

/* A reading of both clocks at (nearly) one instant: of three tries, the
 * one whose two TSC readings around the CLOCK_MONOTONIC one are closest (a
 * preemption between them would skew the mapping).  Without the TSC the
 * two are the same reading. */
static void read_clocks(uint64_t *tick, uint64_t *mono)
{
    if (!pc_rec_use_tsc) {
        *tick = *mono = pc_rec_mono_ns();
        return;
    }
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < 3; k++) {
        uint64_t a = pc_rec_now(), m = pc_rec_mono_ns(), b = pc_rec_now();
        if (b - a < best) {
            best = b - a;
            *tick = a + (b - a) / 2;
            *mono = m;
        }
    }
}

int pc_rec_use_tsc;

/* x86-64 whose time-stamp counter runs at one rate in every state */
static int invariant_tsc(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    char line[4096];
    int ok = 0;
    /* the kernel's own clock source must be the TSC: not marked unstable */
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (!f) return 0;
    ok = fgets(line, sizeof line, f) && strncmp(line, "tsc", 3) == 0;
    fclose(f);
    if (!ok || !(f = fopen("/proc/cpuinfo", "r"))) return 0;
    ok = 0;
    while (!ok && fgets(line, sizeof line, f))
        ok = strncmp(line, "flags", 5) == 0 && strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

static void once_per_process(void)
{
    for (int t = 0; t < PC_EV_NTYPES; t++) field_count[t] = (unsigned char)nfields(&descs[t]);
    pc_rec_use_tsc = invariant_tsc();
}

int pc_rec_init(pc_rec_t *r)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, once_per_process);
    memset(r, 0, sizeof *r);
    atomic_init(&r->on, 0);
    atomic_init(&r->session, 0);
    return pthread_mutex_init(&r->lock, NULL) == 0 ? 0 : -1;
}

void pc_rec_destroy(pc_rec_t *r)
{
    pc_rec_buf_t *b = r->bufs;
    while (b) {
        pc_rec_buf_t *next = b->next;
        free(b);
        b = next;
    }
    r->bufs = NULL;
    pthread_mutex_destroy(&r->lock);
}

void pc_rec_open(pc_rec_t *r, FILE *file, FILE *spill, const char *header)
{
    pthread_mutex_lock(&r->lock);
    r->file = file;
    r->spill = spill;
    r->nthreads = 0;
    r->written = 0;
    r->write_failed = 0;
    setvbuf(file, NULL, _IOFBF, 1 << 20);
    setvbuf(spill, NULL, _IOFBF, 1 << 20);
    uint64_t tick0;
    read_clocks(&tick0, &r->mono0);
    atomic_store_explicit(&r->tick0, tick0, memory_order_relaxed);
    fprintf(file, "{\"ev\":\"header\",%s}\n", header);
    fflush(file); /* a process that dies before the stop leaves at least this */
    atomic_store(&r->session, atomic_fetch_add(&sessions, 1) + 1);
    pthread_mutex_unlock(&r->lock);
    atomic_store(&r->on, 1);
}

int pc_rec_close(pc_rec_t *r, const char *stop_keys)
{
    atomic_store(&r->on, 0);
    uint64_t tick1, t, tick0 = atomic_load_explicit(&r->tick0, memory_order_relaxed);
    read_clocks(&tick1, &t);
    r->ns_per_tick = pc_rec_use_tsc && tick1 > tick0 && t > r->mono0 ? (double)(t - r->mono0) / (double)(tick1 - tick0)
                                                                   : 1.0;
    uint64_t session = atomic_load(&r->session);
    pthread_mutex_lock(&r->lock);
    for (pc_rec_buf_t *b = r->bufs; b; b = b->next) {
        if (b->session != session) continue;
        size_t h = atomic_load_explicit(&b->head, memory_order_acquire);
        spill_range(r, b, b->flushed, h);
        b->flushed = h;
    }
    write_spilled(r);
    fclose(r->spill);
    r->spill = NULL;
    fprintf(r->file, "{\"ev\":\"stop\",\"t\":%llu,\"events\":%llu,%s}\n",
            (unsigned long long)(t + (uint64_t)r->shift_ns), (unsigned long long)r->written, stop_keys);
    if (fflush(r->file) != 0 && !r->write_failed) r->write_failed = errno ? errno : EIO;
    if (fclose(r->file) != 0 && !r->write_failed) r->write_failed = errno ? errno : EIO;
    r->file = NULL;
    int failed = r->write_failed;
    pthread_mutex_unlock(&r->lock);
    return failed;
}
