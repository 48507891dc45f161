/* The timeline recorder: see recorder.h. */
#include "recorder.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct pc_rec_buf {
    pc_rec_t *rec;
    uint64_t session;     /* the session the buffer's events belong to */
    int tid;
    pthread_t owner;
    _Atomic size_t head;  /* owner: events published up to here */
    size_t flushed;       /* (rec->lock) written up to here */
    pc_rec_buf_t *next;
    pc_ev_t ev[PC_REC_BUF_EVENTS];
};

/* ---- what each type's fields are called (docs/timeline.md) ---- */

typedef struct ev_desc {
    const char *name;
    const char *key[PC_EV_FIELDS];
    char kind[PC_EV_FIELDS + 1]; /* i: integer, s: static string, d: double, -: none */
    const char *list_key, *text_key;
} ev_desc_t;

static const ev_desc_t descs[PC_EV_NTYPES] = {
    [PC_EV_ALLREDUCE] = {"allreduce", {"call", "algo", "bytes", "dtype", "n", "status"}, "ssisii---", "group", NULL},
    [PC_EV_PARTIAL_CALL] = {"partial_call",
                            {"obj", "kind", "fn", "round", "waited", "rounds", "status"},
                            "issiiii--",
                            NULL,
                            NULL},
    [PC_EV_ROUND_START] = {"round_start", {"obj", "round", "root", "sync"}, "iiii-----", NULL, NULL},
    [PC_EV_ROUND] = {"round",
                     {"obj", "kind", "round", "root", "active", "contributions", "stale", "sync", "standin"},
                     "isiiiiiii",
                     "group",
                     NULL},
    [PC_EV_PREDUCE] = {"preduce",
                       {"obj", "policy", "group_id", "weight", "iteration", "wait_ns", "reduce_ns", "status"},
                       "isidiiii-",
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
};

/* ---- writing (rec->lock held) ---- */

static void put_text(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_field(FILE *f, const char *key, char kind, int64_t v)
{
    fprintf(f, ",\"%s\":", key);
    if (kind == 'i') {
        fprintf(f, "%lld", (long long)v);
    } else if (kind == 'd') {
        union {
            int64_t i;
            double d;
        } u = {.i = v};
        fprintf(f, "%.9g", u.d);
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
    fprintf(f, "{\"ev\":\"%s\",\"t\":%llu,\"tid\":%d", d->name, (unsigned long long)e->t, tid);
    if (e->dur) fprintf(f, ",\"dur\":%llu", (unsigned long long)e->dur);
    for (int i = 0; i < PC_EV_FIELDS && d->kind[i] != '-'; i++) put_field(f, d->key[i], d->kind[i], e->f[i]);
    const int *list = (const int *)(e + 1);
    if (d->list_key && e->nlist) {
        fprintf(f, ",\"%s\":[", d->list_key);
        for (int i = 0; i < e->nlist; i++) fprintf(f, "%s%d", i ? "," : "", list[i]);
        fputc(']', f);
    }
    if (d->text_key) {
        fprintf(f, ",\"%s\":", d->text_key);
        put_text(f, (const char *)(list + e->nlist), e->ntext);
    }
    fputs("}\n", f);
    r->written++;
}

static void write_range(pc_rec_t *r, pc_rec_buf_t *b, size_t from, size_t to)
{
    for (size_t i = from; i < to; i += 1 + b->ev[i].extra) write_event(r, &b->ev[i], b->tid);
    if (ferror(r->file) && !r->write_failed) r->write_failed = errno ? errno : EIO;
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

void pc_rec_thread_name(const char *name) { my_name = name; }

/* This thread's buffer for the current session: a new one the first time;
 * NULL without memory (the event is then not recorded). */
static pc_rec_buf_t *buffer_of_thread(pc_rec_t *r, uint64_t session, uint64_t t)
{
    pthread_t self = pthread_self();
    pthread_mutex_lock(&r->lock);
    pc_rec_buf_t *b = r->bufs;
    while (b && !pthread_equal(b->owner, self)) b = b->next;
    if (!b && (b = malloc(sizeof *b)) != NULL) {
        b->rec = r;
        b->owner = self;
        b->session = 0;
        atomic_init(&b->head, 0);
        b->flushed = 0;
        b->next = r->bufs;
        r->bufs = b;
    }
    if (b && b->session != session) { /* the thread's first event of this session */
        b->session = session;
        b->tid = r->nthreads++;
        b->flushed = atomic_load(&b->head); /* events of an older session are dropped */
        pc_ev_t e = {.t = t, .type = PC_EV_THREAD};
        e.f[0] = pc_ev_str(my_name ? my_name : "application");
        write_event(r, &e, b->tid);
    }
    pthread_mutex_unlock(&r->lock);
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
    if (r->file) write_range(r, b, b->flushed, atomic_load(&b->head));
    b->flushed = 0;
    atomic_store_explicit(&b->head, 0, memory_order_release);
    pthread_mutex_unlock(&r->lock);
}

void pc_rec_event(pc_rec_t *r, pc_ev_type_t type, uint64_t t, uint64_t dur, const int64_t f[PC_EV_FIELDS],
                  const int *list, int nlist, const char *text)
{
    uint64_t session = atomic_load_explicit(&r->session, memory_order_relaxed);
    pc_rec_buf_t *b = my_session == session && session ? my_buf : buffer_of_thread(r, session, t);
    if (!b) return;
    if (nlist < 0 || !list) nlist = 0;
    if (nlist > PC_EV_LIST_MAX) nlist = PC_EV_LIST_MAX;
    size_t ntext = text ? strnlen(text, PC_EV_TEXT_MAX) : 0;
    size_t extra_bytes = (size_t)nlist * sizeof(int) + ntext;
    size_t extra = (extra_bytes + sizeof(pc_ev_t) - 1) / sizeof(pc_ev_t);
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
    memcpy(e->f, f, sizeof e->f);
    if (extra) {
        char *x = (char *)(e + 1);
        if (nlist) memcpy(x, list, (size_t)nlist * sizeof(int));
        if (ntext) memcpy(x + (size_t)nlist * sizeof(int), text, ntext);
    }
    atomic_store_explicit(&b->head, h + 1 + extra, memory_order_release);
}

/* ---- sessions ---- */

int pc_rec_init(pc_rec_t *r)
{
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

void pc_rec_open(pc_rec_t *r, FILE *file, const char *header)
{
    pthread_mutex_lock(&r->lock);
    r->file = file;
    r->nthreads = 0;
    r->written = 0;
    r->write_failed = 0;
    setvbuf(file, NULL, _IOFBF, 1 << 20);
    fprintf(file, "{\"ev\":\"header\",%s}\n", header);
    atomic_store(&r->session, atomic_fetch_add(&sessions, 1) + 1);
    pthread_mutex_unlock(&r->lock);
    atomic_store(&r->on, 1);
}

int pc_rec_close(pc_rec_t *r, const char *stop_keys)
{
    atomic_store(&r->on, 0);
    uint64_t t = pc_rec_now();
    uint64_t session = atomic_load(&r->session);
    pthread_mutex_lock(&r->lock);
    for (pc_rec_buf_t *b = r->bufs; b; b = b->next) {
        if (b->session != session) continue;
        size_t h = atomic_load_explicit(&b->head, memory_order_acquire);
        write_range(r, b, b->flushed, h);
        b->flushed = h;
    }
    fprintf(r->file, "{\"ev\":\"stop\",\"t\":%llu,\"events\":%llu,%s}\n", (unsigned long long)t,
            (unsigned long long)r->written, stop_keys);
    if (fflush(r->file) != 0 && !r->write_failed) r->write_failed = errno ? errno : EIO;
    if (fclose(r->file) != 0 && !r->write_failed) r->write_failed = errno ? errno : EIO;
    r->file = NULL;
    int failed = r->write_failed;
    pthread_mutex_unlock(&r->lock);
    return failed;
}
