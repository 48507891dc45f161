/* Blocking waits, stall reports and timeouts: see stall.h. */
#include "stall.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/error.h"
#include "../util/log.h"
#include "context.h"
#include "timeline.h"

typedef struct responder {
    pc_respond_fn fn;
    void *arg;
} responder_t;

struct pc_stall_state {
    responder_t responders[PC_Q_NKINDS];
    pc_stall_probe_t *probes; /* waiting for answers */
    uint64_t next_qid;
};

struct pc_stall_probe {
    pcoll_t *ctx;
    const pc_wait_t *w;
    char what[200];
    const char **why;        /* by rank: why we wait for it (NULL: we do not) */
    unsigned char *level;    /* by rank: how strong that reason is (PC_WHY_*) */
    const char **fallback;   /* by rank: named only if nothing else is */
    unsigned char *asked, *answered;
    const char **ask_why;    /* by rank: the `why` of its question */
    unsigned char *ask_level;
    int nasked, nanswered;
    uint64_t qid;
    atomic_int settled;      /* described; every answer in (or none asked) */
    atomic_int retired;      /* the holder forgot the probe */
    pc_task_t task;
    pc_stall_probe_t *next;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- describers' calls (holder) ---- */

void pc_probe_what(pc_stall_probe_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->what, sizeof p->what, fmt, ap);
    va_end(ap);
}

void pc_probe_what_add(pc_stall_probe_t *p, const char *fmt, ...)
{
    size_t n = strlen(p->what);
    if (n + 2 >= sizeof p->what) return;
    memcpy(p->what + n, "; ", 3);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->what + n + 2, sizeof p->what - n - 2, fmt, ap);
    va_end(ap);
}

void pc_probe_suspect(pc_stall_probe_t *p, int rank, const char *why, int level)
{
    if (rank < 0 || rank >= p->ctx->size || (p->why[rank] && p->level[rank] >= level)) return;
    p->why[rank] = why;
    p->level[rank] = (unsigned char)level;
}

void pc_probe_fallback(pc_stall_probe_t *p, int rank, const char *why)
{
    if (rank >= 0 && rank < p->ctx->size && !p->fallback[rank]) p->fallback[rank] = why;
}

static void ask_one(pc_stall_probe_t *p, int rank, const void *msg, size_t bytes, const char *why, int level)
{
    pcoll_t *ctx = p->ctx;
    if (rank < 0 || rank >= ctx->size || pc_bit_get(p->asked, rank)) return;
    if (rank == ctx->rank) return; /* the describer knows about itself */
    if (pc_service_send(ctx, rank, msg, bytes, NULL, NULL) != PCOLL_SUCCESS) {
        pc_probe_suspect(p, rank, "cannot be asked (the question could not be sent)", PC_WHY_SILENT);
        return;
    }
    pc_bit_set(p->asked, rank);
    p->ask_why[rank] = why;
    p->ask_level[rank] = (unsigned char)level;
    p->nasked++;
}

void pc_probe_ask(pc_stall_probe_t *p, const int *ranks, int n, pc_query_t *q, const int *list, int n_list,
                  const char *why, int level)
{
    pcoll_t *ctx = p->ctx;
    size_t bytes = sizeof *q + sizeof(int32_t) * (size_t)n_list;
    if (bytes > pc_service_max_bytes(ctx)) return;
    unsigned char *msg = malloc(bytes);
    if (!msg) return;
    q->head.type = PC_SVC_QUERY;
    q->qid = p->qid;
    q->n = n_list;
    memcpy(msg, q, sizeof *q);
    int32_t *l = (int32_t *)(msg + sizeof *q);
    for (int i = 0; i < n_list; i++) l[i] = list[i];
    if (ranks)
        for (int i = 0; i < n; i++) ask_one(p, ranks[i], msg, bytes, why, level);
    else
        for (int r = 0; r < ctx->size; r++) ask_one(p, r, msg, bytes, why, level);
    free(msg);
}

/* ---- the service handlers (holder) ---- */

typedef struct answer {
    pc_svc_head_t head;
    uint64_t qid;
    uint32_t nbytes; /* bitmap bytes that follow */
    uint32_t pad;
} answer_t;

static void on_query(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    pc_stall_state_t *st = arg;
    const pc_query_t *q = msg;
    if (bytes < sizeof *q || q->n < 0 || bytes < sizeof *q + sizeof(int32_t) * (size_t)q->n) return;
    size_t nb = ((size_t)ctx->size + 7) / 8;
    answer_t *a = calloc(1, sizeof *a + nb);
    if (!a) return;
    a->head.type = PC_SVC_ANSWER;
    a->qid = q->qid;
    a->nbytes = (uint32_t)nb;
    if (q->kind < PC_Q_NKINDS && st->responders[q->kind].fn)
        st->responders[q->kind].fn(ctx, st->responders[q->kind].arg, src, q, (const int32_t *)(q + 1),
                                   (unsigned char *)(a + 1));
    pc_service_send(ctx, src, a, sizeof *a + nb, NULL, NULL);
    free(a);
}

static void on_answer(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    pc_stall_state_t *st = arg;
    const answer_t *a = msg;
    if (bytes < sizeof *a || bytes < sizeof *a + a->nbytes) return;
    for (pc_stall_probe_t *p = st->probes; p; p = p->next) {
        if (p->qid != a->qid) continue;
        if (src < 0 || src >= ctx->size || !pc_bit_get(p->asked, src) || pc_bit_get(p->answered, src)) return;
        pc_bit_set(p->answered, src);
        p->nanswered++;
        const unsigned char *bits = (const unsigned char *)(a + 1);
        for (int r = 0; r < ctx->size && (size_t)(r / 8) < a->nbytes; r++)
            if (pc_bit_get(bits, r)) pc_probe_suspect(p, r, p->ask_why[src], p->ask_level[src]);
        if (p->nanswered == p->nasked) {
            atomic_store(&p->settled, 1);
            pc_engine_notify(ctx->engine);
        }
        return;
    }
    /* an answer that came after its probe was done: nothing to do */
}

void pc_stall_respond(pcoll_t *ctx, uint32_t kind, pc_respond_fn fn, void *arg)
{
    if (kind < PC_Q_NKINDS && ctx->stall) {
        ctx->stall->responders[kind].fn = fn;
        ctx->stall->responders[kind].arg = arg;
    }
}

void pc_stall_open(pcoll_t *ctx)
{
    if (!ctx->stall && !(ctx->stall = calloc(1, sizeof *ctx->stall))) {
        pc_log(PCOLL_LOG_ERROR, "no memory for stall reports: blocking calls will not name the ranks they wait for");
        return;
    }
    pc_service_handle(ctx, PC_SVC_QUERY, on_query, ctx->stall);
    pc_service_handle(ctx, PC_SVC_ANSWER, on_answer, ctx->stall);
}

/* ---- probes ---- */

static void probe_start(pc_engine_t *e, void *arg)
{
    (void)e;
    pc_stall_probe_t *p = arg;
    pc_stall_state_t *st = p->ctx->stall;
    p->qid = st ? ++st->next_qid : 0;
    p->w->describe(p->w->describe_arg, p);
    if (st && p->nasked > p->nanswered) {
        p->next = st->probes;
        st->probes = p;
    } else {
        atomic_store(&p->settled, 1);
        atomic_store(&p->retired, 1);
        pc_engine_notify(p->ctx->engine);
    }
}

static void probe_retire(pc_engine_t *e, void *arg)
{
    pc_stall_probe_t *p = arg;
    pc_stall_state_t *st = p->ctx->stall;
    for (pc_stall_probe_t **pp = st ? &st->probes : NULL; pp && *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    atomic_store(&p->retired, 1);
    pc_engine_notify(e);
}

typedef struct probe_wait {
    pc_stall_probe_t *p;
    const pc_wait_t *w;
    int field; /* 0: settled (or done), 1: retired */
} probe_wait_t;

static int probe_ready(void *arg)
{
    probe_wait_t *pw = arg;
    if (pw->field) return atomic_load(&pw->p->retired);
    return atomic_load(&pw->p->settled) || pw->w->done(pw->w->arg);
}

static void free_probe(pc_stall_probe_t *p)
{
    if (!p) return;
    free(p->why);
    free(p->level);
    free(p->fallback);
    free(p->ask_why);
    free(p->ask_level);
    free(p->asked);
    free(p->answered);
    free(p);
}

/* Appends "rank r (why)" for every rank with a reason, grouping ranks that
 * share one: "ranks 3, 5 (has not started it)". */
static void list_reasons(const pcoll_t *ctx, const char **why, char *out, size_t len, int *named)
{
    for (int r = 0; r < ctx->size; r++) {
        if (!why[r]) continue;
        int first = 1;
        for (int q = 0; q < r && first; q++) first = !why[q] || strcmp(why[q], why[r]) != 0;
        if (!first) continue;
        int n = 0, shown = 0;
        char ranks[200] = "";
        for (int q = r; q < ctx->size; q++)
            if (why[q] && strcmp(why[q], why[r]) == 0) {
                n++;
                if (shown < 12) {
                    size_t at = strlen(ranks);
                    snprintf(ranks + at, sizeof ranks - at, "%s%d", shown ? ", " : "", q);
                    shown++;
                }
            }
        size_t at = strlen(out);
        snprintf(out + at, len > at ? len - at : 0, "%s%s %s%s (%s)", *named ? "; " : "", n > 1 ? "ranks" : "rank",
                 ranks, n > shown ? " and more" : "", why[r]);
        (*named)++;
    }
}

/* The ranks a report names, for the timeline. */
#define NAMED_MAX 64
typedef struct named {
    int n;
    int rank[NAMED_MAX];
} named_t;

static void collect_named(const pcoll_t *ctx, const char **why, named_t *named)
{
    for (int r = 0; r < ctx->size && named->n < NAMED_MAX; r++)
        if (why[r]) named->rank[named->n++] = r;
}

/* Runs a probe and writes the report into out, and the ranks it names into
 * *named.  Returns 1 if the wait ended meanwhile (nothing to report). */
static int probe(pcoll_t *ctx, const pc_wait_t *w, char *out, size_t len, named_t *names)
{
    names->n = 0;
    int P = ctx->size;
    size_t nb = ((size_t)P + 7) / 8;
    pc_stall_probe_t *p = calloc(1, sizeof *p);
    if (p) {
        p->ctx = ctx;
        p->w = w;
        p->why = calloc((size_t)P, sizeof *p->why);
        p->level = calloc((size_t)P, 1);
        p->fallback = calloc((size_t)P, sizeof *p->fallback);
        p->ask_why = calloc((size_t)P, sizeof *p->ask_why);
        p->ask_level = calloc((size_t)P, 1);
        p->asked = calloc(nb, 1);
        p->answered = calloc(nb, 1);
    }
    if (!p || !p->why || !p->level || !p->fallback || !p->ask_why || !p->ask_level || !p->asked || !p->answered) {
        free_probe(p);
        snprintf(out, len, "(no memory to find out what it waits for)");
        return 0;
    }
    snprintf(p->what, sizeof p->what, "the operation");
    p->task.fn = probe_start;
    p->task.arg = p;
    pc_engine_post_task(ctx->engine, &p->task, 1);
    probe_wait_t pw = {p, w, 0};
    pc_engine_wait_for(ctx->engine, probe_ready, &pw, PC_STALL_ANSWER_S * 1e6, NULL);
    if (!atomic_load(&p->retired)) {
        p->task.fn = probe_retire;
        pc_engine_post_task(ctx->engine, &p->task, 1);
        pw.field = 1;
        pc_engine_wait(ctx->engine, probe_ready, &pw);
    }
    if (w->done(w->arg)) {
        free_probe(p);
        return 1;
    }
    /* the ranks asked that did not answer */
    for (int r = 0; r < P; r++)
        if (pc_bit_get(p->asked, r) && !pc_bit_get(p->answered, r))
            pc_probe_suspect(p, r, "did not answer: its process may be stopped or dead", PC_WHY_SILENT);
    /* only the strongest reason: the others follow from it */
    int top = 0;
    for (int r = 0; r < P; r++)
        if (p->why[r] && p->level[r] > top) top = p->level[r];
    for (int r = 0; r < P; r++)
        if (p->level[r] < top) p->why[r] = NULL;
    int named = 0;
    snprintf(out, len, "%s: waiting for ", p->what);
    list_reasons(ctx, p->why, out, len, &named);
    collect_named(ctx, p->why, names);
    if (!named) {
        list_reasons(ctx, p->fallback, out, len, &named);
        collect_named(ctx, p->fallback, names);
    }
    if (!named) {
        size_t at = strlen(out);
        snprintf(out + at, len > at ? len - at : 0, "no rank that this rank can name");
    }
    free_probe(p);
    return 0;
}

int pc_block(pcoll_t *ctx, const pc_wait_t *w)
{
    if (w->done(w->arg)) return PCOLL_SUCCESS;
    int told = pc_ctx_block(ctx, w->object, w->channel, w->object_watches);
    double warn = atomic_load(&ctx->stall_warn_s), timeout = atomic_load(&ctx->timeout_s);
    /* the clock is read here only once a deadline has passed: a call that
     * completes in time pays for no reading of its own */
    double t0 = -1;
    int warned = warn <= 0, status = PCOLL_SUCCESS;
    double nudge = w->nudge ? w->nudge_s : 0, nudge_at = nudge;
    char report[1024];
    named_t names;
    for (;;) {
        double next = -1; /* seconds after the start */
        if (!warned) next = warn;
        if (timeout > 0 && (next < 0 || timeout < next)) next = timeout;
        if (nudge > 0 && (next < 0 || nudge_at < next)) next = nudge_at;
        double left_us = next < 0 ? -1.0 : t0 < 0 ? next * 1e6 : (t0 + next - now_s()) * 1e6;
        if (next >= 0 && left_us < 1) left_us = 1; /* a deadline passed (a probe or a nudge took long): look now */
        double began_us;
        if (pc_engine_wait_for(ctx->engine, w->done, w->arg, left_us, &began_us)) break;
        double now = now_s();
        if (t0 < 0) t0 = began_us >= 0 ? began_us * 1e-6 : now - next; /* when the first wait's clock started */
        if (nudge > 0 && now >= t0 + nudge_at) {
            w->nudge(w->nudge_arg);
            nudge_at = now - t0 + nudge;
        }
        if (timeout > 0 && now >= t0 + timeout) {
            if (probe(ctx, w, report, sizeof report, &names)) break;
            status = pc_error(PCOLL_ERR_TIMEOUT, w->fn, "gave up after %.3g s (PCOLL_TIMEOUT_S): %s", now - t0,
                              report);
            pc_tl_stall(ctx, w->fn, 1, names.rank, names.n, report);
            break;
        }
        if (!warned && now >= t0 + warn) {
            warned = 1;
            if (probe(ctx, w, report, sizeof report, &names)) break;
            pc_log(PCOLL_LOG_WARN, "%s: stalled for %.3g s (PCOLL_STALL_WARN_S): %s", w->fn, now - t0, report);
            pc_tl_stall(ctx, w->fn, 0, names.rank, names.n, report);
        }
    }
    pc_ctx_unblock(ctx, w->object, w->channel, told);
    return status;
}
