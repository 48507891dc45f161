#include "shrink.h"

#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "../util/log.h"
#include "context.h"
#include "service.h"
#include "survivors.h"

/* A round's time: the survivors learn of a death by their own timeouts,
 * which start when each began to wait, so they come to pcoll_shrink up to
 * one PCOLL_TIMEOUT_S apart (more on a loaded machine): twice that, plus a
 * second; 10 s without a timeout. */
#define SHRINK_ROUND_S(timeout_s) ((timeout_s) > 0 ? 2 * (timeout_s) + 1.0 : 10.0)
/* MPI_Comm_create_group's tag (its own space: no clash with messages). */
#define SHRINK_TAG 0x5eed

typedef struct view_msg {
    pc_svc_head_t head; /* PC_SVC_SHRINK */
    uint32_t shrink;    /* which pcoll_shrink of this context */
    uint32_t round;
    uint32_t nbytes;    /* the view's bitmap, after this */
    uint32_t pad;
} view_msg_t;

typedef struct heard {
    struct heard *next;
    int src;
    uint32_t shrink, round;
    unsigned char view[];
} heard_t;

struct pc_shrink_state {
    pthread_mutex_t lock;
    heard_t *inbox; /* views not consumed yet, newest first */
};

/* ---- the holder ---- */

static void on_view(pcoll_t *ctx, void *arg, int src, const void *msg, size_t bytes)
{
    pc_shrink_state_t *st = arg;
    const view_msg_t *m = msg;
    size_t nb = pc_survivors_bytes(ctx->size);
    if (bytes < sizeof *m || m->nbytes != nb || bytes < sizeof *m + nb) return;
    heard_t *h = malloc(sizeof *h + nb);
    if (!h) return; /* counted as not heard: the sender is left out */
    h->src = src;
    h->shrink = m->shrink;
    h->round = m->round;
    memcpy(h->view, m + 1, nb);
    pthread_mutex_lock(&st->lock);
    h->next = st->inbox;
    st->inbox = h;
    pthread_mutex_unlock(&st->lock);
    pc_engine_notify(ctx->engine);
}

void pc_shrink_open(pcoll_t *ctx)
{
    pc_shrink_state_t *st = calloc(1, sizeof *st);
    if (!st) {
        pc_log(PCOLL_LOG_ERROR, "no memory for pcoll_shrink's messages: pcoll_shrink will leave the others out");
        return;
    }
    pthread_mutex_init(&st->lock, NULL);
    ctx->shrink = st;
    pc_service_handle(ctx, PC_SVC_SHRINK, on_view, st);
}

void pc_shrink_close(pcoll_t *ctx)
{
    pc_shrink_state_t *st = ctx->shrink;
    if (!st) return;
    for (heard_t *h = st->inbox, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    pthread_mutex_destroy(&st->lock);
    free(st);
    ctx->shrink = NULL;
}

typedef struct send_task {
    pcoll_t *ctx;
    int n;
    size_t bytes;
    int *peers;
    view_msg_t *msg;
} send_task_t;

static void send_view(pc_engine_t *e, void *arg)
{
    (void)e;
    send_task_t *t = arg;
    for (int i = 0; i < t->n; i++) pc_service_send(t->ctx, t->peers[i], t->msg, t->bytes, NULL, NULL);
    free(t->peers);
    free(t->msg);
    free(t);
}

/* ---- the application thread ---- */

typedef struct round_wait {
    pcoll_t *ctx;
    pc_survivors_t *s;
    uint32_t shrink;
} round_wait_t;

/* the inbox's views of this round into the agreement; older ones dropped,
 * later ones kept */
static int round_heard(void *arg)
{
    round_wait_t *w = arg;
    pc_shrink_state_t *st = w->ctx->shrink;
    pthread_mutex_lock(&st->lock);
    for (heard_t **pp = &st->inbox; *pp;) {
        heard_t *h = *pp;
        int old = h->shrink < w->shrink || (h->shrink == w->shrink && h->round < w->s->round);
        if (old || (h->shrink == w->shrink && h->round == w->s->round)) {
            if (!old) pc_survivors_hear(w->s, h->src, h->view);
            *pp = h->next;
            free(h);
        } else {
            pp = &h->next;
        }
    }
    pthread_mutex_unlock(&st->lock);
    return pc_survivors_complete(w->s);
}

static int send_round(pcoll_t *ctx, const pc_survivors_t *s, uint32_t shrink)
{
    size_t nb = pc_survivors_bytes(ctx->size);
    send_task_t *t = calloc(1, sizeof *t);
    if (t) {
        t->ctx = ctx;
        t->bytes = sizeof *t->msg + nb;
        t->msg = calloc(1, t->bytes);
        t->peers = malloc(sizeof(int) * (size_t)ctx->size);
    }
    if (!t || !t->msg || !t->peers) {
        if (t) free(t->msg), free(t->peers);
        free(t);
        return PCOLL_ERR_NOMEM;
    }
    t->msg->head.type = PC_SVC_SHRINK;
    t->msg->shrink = shrink;
    t->msg->round = s->round;
    t->msg->nbytes = (uint32_t)nb;
    memcpy(t->msg + 1, s->view, nb);
    int n = pc_survivors_list(s, t->peers), k = 0;
    for (int i = 0; i < n; i++)
        if (t->peers[i] != ctx->rank) t->peers[k++] = t->peers[i];
    t->n = k;
    return pc_engine_post(ctx->engine, send_view, t);
}

/* The agreed survivors into ranks (room for P); returns how many, or an
 * error status. */
static int agree_survivors(pcoll_t *ctx, int *ranks, const char *fn)
{
    uint32_t shrink = ctx->shrinks;
    double t = atomic_load(&ctx->timeout_s);
    double round_us = SHRINK_ROUND_S(t) * 1e6;
    pc_survivors_t s;
    if (pc_survivors_init(&s, ctx->size, ctx->rank) != 0) return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the views");
    int rc = PCOLL_SUCCESS;
    for (;;) {
        if ((rc = send_round(ctx, &s, shrink)) != PCOLL_SUCCESS) {
            rc = pc_error(rc, fn, "could not send this rank's view to the others");
            break;
        }
        round_wait_t w = {ctx, &s, shrink};
        pc_engine_wait_for(ctx->engine, round_heard, &w, round_us, NULL);
        round_heard(&w);
        if (pc_survivors_end_round(&s)) break;
        if (s.round > (uint32_t)ctx->size + 2) { /* each round but the last leaves a rank out */
            rc = pc_error(PCOLL_ERR_INTERNAL, fn, "the survivors did not agree after %u rounds", s.round);
            break;
        }
    }
    int n = rc == PCOLL_SUCCESS ? pc_survivors_list(&s, ranks) : 0;
    pc_survivors_destroy(&s);
    return rc == PCOLL_SUCCESS ? n : rc;
}

/* "0, 2, 3" (at most 16 ranks, then "and N more") */
static void list_ranks(const int *ranks, int n, char *out, size_t len)
{
    out[0] = '\0';
    for (int i = 0; i < n && i < 16; i++) {
        size_t at = strlen(out);
        snprintf(out + at, len - at, "%s%d", i ? ", " : "", ranks[i]);
    }
    if (n > 16) {
        size_t at = strlen(out);
        snprintf(out + at, len - at, " and %d more", n - 16);
    }
}

int pcoll_shrink(pcoll_t *ctx, MPI_Comm *survivors, pcoll_t **newctx)
{
    static const char *fn = "pcoll_shrink";
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!survivors) return pc_error(PCOLL_ERR_NULL, fn, "survivors (where the new communicator goes) is NULL");
    if (!newctx) return pc_error(PCOLL_ERR_NULL, fn, "newctx (where the new context goes) is NULL");
    *survivors = MPI_COMM_NULL;
    *newctx = NULL;
    if (!ctx->shrink) return pc_error(PCOLL_ERR_NOMEM, fn, "pcoll_init had no memory for pcoll_shrink's messages");
    int P = ctx->size;
    int *ranks = malloc(sizeof(int) * (size_t)P);
    if (!ranks) return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the list of ranks");
    int n = agree_survivors(ctx, ranks, fn);
    ctx->shrinks++;
    if (n < 0) {
        free(ranks);
        return n;
    }
    char list[200];
    list_ranks(ranks, n, list, sizeof list);
    if (2 * n <= P) {
        rc = pc_error(PCOLL_ERR_STATE, fn,
                      "only %d of the %d ranks agreed (%s): no majority, so these may be cut off from the others; "
                      "this rank cannot go on",
                      n, P, list);
        free(ranks);
        return rc;
    }
    pc_log(PCOLL_LOG_INFO, "pcoll_shrink: %d of %d ranks go on: %s", n, P, list);
    MPI_Group all, left;
    MPI_Comm comm = MPI_COMM_NULL;
    int mrc = MPI_Comm_group(ctx->comm, &all);
    if (mrc == MPI_SUCCESS) {
        mrc = MPI_Group_incl(all, n, ranks, &left);
        if (mrc == MPI_SUCCESS) {
            mrc = MPI_Comm_create_group(ctx->comm, left, SHRINK_TAG, &comm);
            MPI_Group_free(&left);
        }
        MPI_Group_free(&all);
    }
    free(ranks);
    if (mrc != MPI_SUCCESS) return pc_mpi_error(mrc, fn, "MPI_Comm_create_group among the survivors");
    atomic_store(&ctx->shrunk, 1);
    if ((rc = pcoll_init(comm, newctx)) != PCOLL_SUCCESS) {
        MPI_Comm_free(&comm);
        return rc;
    }
    *survivors = comm;
    return PCOLL_SUCCESS;
}
