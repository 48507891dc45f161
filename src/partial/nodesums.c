/* The node sums' exchange by direct messages: see nodesums.h. */
#include "nodesums.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/stall.h"
#include "../engine/reduce.h"
#include "../engine/tags.h"
#include "../util/log.h"

/* rounds done .. done + 2 may have sums here, and one slot to spare */
#define NSLOTS 4
/* sends to one candidate not yet received: more are skipped (a stopped
 * candidate would hold a copy of the object per round; its node's other
 * candidate has every sum, and takes a round over from a finisher that
 * lacks one: backend_shm.c).  A live finisher has received this node's sum
 * of round r before this node can send r + 2, so a healthy candidate has
 * at most two or three sends from here in flight (completions seen late) */
#define BACKLOG 4

/* what came for one round */
typedef struct round_in {
    uint64_t round; /* UINT64_MAX: free */
    void **sum;     /* per node: its sum of the round (NULL: not yet; own node: never) */
    int *from;      /* per node: the rank that sent it */
    void *total;    /* the round's total, from a node that had it (or NULL) */
    int got;
    int has_record, has_counted;
    int32_t root;
    uint32_t flags;
    unsigned char *counted;
} round_in_t;

/* one node sum on its way out: its copy goes once every send of it is done */
typedef struct outgoing {
    pc_nodesums_t *x;
    void *copy;
    int sends;
} outgoing_t;

/* one send of it */
typedef struct sending {
    outgoing_t *o;
    int peer; /* index in peers */
} sending_t;

/* one receive posted */
typedef struct incoming {
    pc_nodesums_t *x;
    uint64_t round;
    int node, src, is_total;
    void *buf;
} incoming_t;

/* where this rank sent its node's sum of one round: per node, the rank
 * (-1: both candidates) */
typedef struct round_out {
    uint64_t round; /* UINT64_MAX: none */
    int *to;
} round_out_t;

/* NODESUM's epoch field: what the data is */
enum { NS_SUM = 0, NS_TOTAL = 1 };

struct pc_nodesums {
    pc_backend_env_t env;
    pc_nodesums_hooks_t hooks;
    const pc_nodes_t *nodes;
    int n, node;        /* nodes; this rank's */
    int *peers, npeers; /* every other node's candidates */
    int *backlog;       /* per peer: sends to it in flight */
    int *list;          /* peers to send to (scratch) */
    round_in_t in[NSLOTS];
    round_out_t out[NSLOTS];
    int *finisher;      /* per node: the rank its latest sum came from (-1: not known) */
    uint64_t *finisher_round; /* ... of that round */
    uint64_t sent_next; /* the round after the last one this rank sent */
    uint64_t floor;     /* rounds < floor are done here */
    int recvs, sends;   /* in flight */
    void *acc;          /* a node-ordered total, for a node after the second */
    int closed, fins, drained;
};

int pc_nodesums_candidates(const pc_nodes_t *nodes, int node, int out[2])
{
    int k = pc_nodes_size(nodes, node) > 1 ? 2 : 1;
    for (int i = 0; i < k; i++) out[i] = pc_nodes_rank(nodes, node, i);
    return k;
}

/* the tag of round r's sums (the data; the NODESUM before it names r) */
static int sum_tag(const pc_nodesums_t *x, uint64_t r)
{
    const pc_tags_t *t = pc_engine_tags(x->env.engine);
    return pc_tag_chan(t, x->env.obj->channel, (uint32_t)(r % t->seq_mod), t->step_mask);
}

static void clear_round(pc_nodesums_t *x, round_in_t *s)
{
    for (int k = 0; k < x->n; k++)
        if (s->sum[k]) {
            x->env.release(x->env.owner, s->sum[k]);
            s->sum[k] = NULL;
        }
    if (s->total) x->env.release(x->env.owner, s->total);
    s->total = NULL;
    s->got = 0;
    s->has_record = 0;
    s->round = UINT64_MAX;
}

/* round r's entry, taken for it if it holds a round done (NULL: r is done
 * here, or a round in flight holds it: a bug) */
static round_in_t *round_for(pc_nodesums_t *x, uint64_t r)
{
    if (r < x->floor) return NULL;
    round_in_t *s = &x->in[r % NSLOTS];
    if (s->round == r) return s;
    /* a later round holds it: r is done here, its sum late (this rank
     * was stopped); an earlier one is done (r <= done + 2) */
    if (s->round != UINT64_MAX && s->round > r) return NULL;
    clear_round(x, s);
    s->round = r;
    return s;
}

int pc_nodesums_create(const pc_backend_env_t *env, const pc_nodes_t *nodes, const pc_nodesums_hooks_t *hooks,
                       pc_nodesums_t **out)
{
    *out = NULL;
    pc_nodesums_t *x = calloc(1, sizeof *x);
    if (!x) return PCOLL_ERR_NOMEM;
    x->env = *env;
    x->hooks = *hooks;
    x->nodes = nodes;
    x->n = nodes->count;
    x->node = nodes->node_of[env->me];
    x->peers = malloc(sizeof(int) * 2 * (size_t)x->n);
    x->backlog = calloc(2 * (size_t)x->n, sizeof(int));
    x->list = malloc(sizeof(int) * 2 * (size_t)x->n);
    x->finisher = malloc(sizeof(int) * (size_t)x->n);
    x->finisher_round = calloc((size_t)x->n, sizeof(uint64_t));
    int ok = x->peers && x->backlog && x->list && x->finisher && x->finisher_round;
    for (int k = 0; ok && k < x->n; k++) x->finisher[k] = -1;
    for (int i = 0; ok && i < NSLOTS; i++) {
        x->out[i].round = UINT64_MAX;
        ok = (x->out[i].to = malloc(sizeof(int) * (size_t)x->n)) != NULL;
    }
    for (int i = 0; ok && i < NSLOTS; i++) {
        x->in[i].round = UINT64_MAX;
        x->in[i].sum = calloc((size_t)x->n, sizeof(void *));
        x->in[i].from = calloc((size_t)x->n, sizeof(int));
        x->in[i].counted = malloc(env->bitmap_bytes ? env->bitmap_bytes : 1);
        ok = x->in[i].sum && x->in[i].from && x->in[i].counted;
    }
    if (ok && x->node >= 2) ok = (x->acc = malloc(env->bytes)) != NULL;
    if (!ok) {
        pc_nodesums_destroy(x);
        return PCOLL_ERR_NOMEM;
    }
    for (int k = 0; k < x->n; k++)
        if (k != x->node) x->npeers += pc_nodesums_candidates(nodes, k, x->peers + x->npeers);
    *out = x;
    return PCOLL_SUCCESS;
}

void pc_nodesums_destroy(pc_nodesums_t *x)
{
    if (!x) return;
    for (int i = 0; i < NSLOTS; i++) {
        if (x->in[i].sum) clear_round(x, &x->in[i]);
        free(x->in[i].sum);
        free(x->in[i].from);
        free(x->in[i].counted);
        free(x->out[i].to);
    }
    free(x->finisher);
    free(x->finisher_round);
    free(x->list);
    free(x->acc);
    free(x->backlog);
    free(x->peers);
    free(x);
}

static void check_drained(pc_nodesums_t *x)
{
    if (x->closed && !x->drained && x->fins == x->npeers && x->recvs == 0 && x->sends == 0) {
        x->drained = 1;
        x->hooks.drained(x->hooks.arg);
    }
}

static void sent(pc_engine_t *e, void *arg, int status, const MPI_Status *st)
{
    (void)st;
    sending_t *one = arg;
    outgoing_t *o = one->o;
    pc_nodesums_t *x = o->x;
    x->sends--;
    x->backlog[one->peer]--;
    free(one);
    if (status != PCOLL_SUCCESS) {
        char what[300];
        snprintf(what, sizeof what, "a node sum could not be sent to another node: %s", pc_engine_msg_error(e));
        x->env.failed(x->env.owner, status, what);
    }
    if (--o->sends == 0) {
        x->env.release(x->env.owner, o->copy);
        free(o);
    }
    check_drained(x);
}

/* Sends data (a copy) with its NODESUM to the peers listed (indices). */
static int send_data(pc_nodesums_t *x, uint64_t r, uint32_t what, int root, uint32_t flags,
                     const unsigned char *counted, const void *sum, uint64_t back, const int *list, int n)
{
    const pc_backend_env_t *env = &x->env;
    size_t hb = sizeof(pc_obj_msg_t) + (counted ? env->bitmap_bytes : 0);
    pc_obj_msg_t *h = calloc(1, hb);
    outgoing_t *o = malloc(sizeof *o);
    void *copy = env->buffer(env->owner);
    if (!h || !o || !copy) {
        free(h);
        free(o);
        if (copy) env->release(env->owner, copy);
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory to send a node sum to the other nodes");
        return PCOLL_ERR_NOMEM;
    }
    /* a copy: the node's buffer becomes the total while the sends may
     * still read (a candidate of another node stopped: until it goes on) */
    memcpy(copy, sum, env->bytes);
    pc_obj_msg_fill(h, PC_MSG_NODESUM, r, root, flags, what, counted, env->bitmap_bytes);
    h->back = back > r && back - r <= UINT32_MAX ? (uint32_t)(back - r) : 0;
    *o = (outgoing_t){x, copy, 1}; /* (held here until every send is posted) */
    int tag = sum_tag(x, r), rc = PCOLL_SUCCESS;
    for (int j = 0; j < n && rc == PCOLL_SUCCESS; j++) {
        int i = list[j];
        if (x->backlog[i] >= BACKLOG) continue; /* silent, or far behind: its node's other candidate has it */
        sending_t *one = malloc(sizeof *one);
        if (!one) {
            rc = PCOLL_ERR_NOMEM;
            env->failed(env->owner, rc, "no memory to send a node sum to the other nodes");
            break;
        }
        *one = (sending_t){o, i};
        env->send(env->owner, x->peers[i], h, hb); /* a failure is reported there */
        rc = pc_engine_isend(env->engine, copy, env->bytes, x->peers[i], tag, sent, one);
        if (rc != PCOLL_SUCCESS) {
            free(one);
            env->failed(env->owner, rc, "a node sum could not be sent to another node");
            break;
        }
        o->sends++;
        x->sends++;
        x->backlog[i]++;
    }
    free(h);
    o->sends--;
    if (o->sends == 0) {
        env->release(env->owner, copy);
        free(o);
    }
    return rc;
}

/* the index in peers of rank (-1: none) */
static int peer_index(const pc_nodesums_t *x, int rank)
{
    for (int i = 0; i < x->npeers; i++)
        if (x->peers[i] == rank) return i;
    return -1;
}

int pc_nodesums_send(pc_nodesums_t *x, uint64_t r, int root, uint32_t flags, const unsigned char *counted,
                     const void *sum, uint64_t back)
{
    /* a finisher that sent the round before knows every other node's
     * finisher from its latest sum; after a gap (it takes a round over, or
     * the rounds come back from the leaders' allreduce) both candidates */
    int fresh = x->sent_next != r, n = 0;
    round_out_t *o = &x->out[r % NSLOTS];
    o->round = r;
    for (int k = 0; k < x->n; k++) {
        int f = fresh || k == x->node ? -1 : x->finisher[k], i = f >= 0 ? peer_index(x, f) : -1;
        /* one far behind (BACKLOG) may have stopped since: both */
        o->to[k] = i >= 0 && x->backlog[i] < BACKLOG ? f : -1;
    }
    for (int i = 0; i < x->npeers; i++) {
        int to = o->to[x->nodes->node_of[x->peers[i]]];
        if (to < 0 || to == x->peers[i]) x->list[n++] = i;
    }
    x->sent_next = r + 1;
    return send_data(x, r, NS_SUM, root, flags, counted, sum, back, x->list, n);
}

int pc_nodesums_lacks(const pc_nodesums_t *x, uint64_t r, int rank)
{
    const round_out_t *o = &x->out[r % NSLOTS];
    int k = rank >= 0 && rank < x->env.P ? x->nodes->node_of[rank] : x->node;
    return k != x->node && (o->round != r || (o->to[k] >= 0 && o->to[k] != rank));
}

int pc_nodesums_resend(pc_nodesums_t *x, uint64_t r, int rank, int root, uint32_t flags, const unsigned char *counted,
                       const void *sum, uint64_t back)
{
    round_out_t *o = &x->out[r % NSLOTS];
    int i = peer_index(x, rank);
    if (o->round != r || i < 0 || !pc_nodesums_lacks(x, r, rank)) return PCOLL_SUCCESS;
    o->to[x->nodes->node_of[rank]] = -1; /* both have it now (or had it) */
    pc_log(PCOLL_LOG_DEBUG, "partial ch%u: round %llu's node sum again, to rank %d (it finishes the round at its "
           "node now)", x->env.obj->channel, (unsigned long long)r, rank);
    return send_data(x, r, NS_SUM, root, flags, counted, sum, back, &i, 1);
}

int pc_nodesums_send_total(pc_nodesums_t *x, uint64_t r, int rank, const void *total, uint64_t back)
{
    int i = peer_index(x, rank);
    return i < 0 ? PCOLL_SUCCESS : send_data(x, r, NS_TOTAL, -1, 0, NULL, total, back, &i, 1);
}

int pc_nodesums_ready(const pc_nodesums_t *x, uint64_t r)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    return s->round == r && (s->total || s->got == x->n - 1);
}

void pc_nodesums_add(const pc_nodesums_t *x, uint64_t r, void *sum)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    size_t count = x->env.count + PC_TRAILER;
    pcoll_dtype_t t = x->env.dtype;
    if (s->total) { /* a node that had the total (by the leaders' allreduce) */
        memcpy(sum, s->total, x->env.bytes);
        return;
    }
    /* in node order, so that every node has the same total to the bit
     * (the first two in either order: a sum of two is) */
    if (x->node <= 1) {
        for (int k = 0; k < x->n; k++)
            if (k != x->node) pc_reduce_sum(sum, sum, s->sum[k], count, t);
        return;
    }
    pc_reduce_sum(x->acc, s->sum[0], s->sum[1], count, t);
    for (int k = 2; k < x->n; k++) pc_reduce_sum(x->acc, x->acc, k == x->node ? sum : s->sum[k], count, t);
    memcpy(sum, x->acc, x->env.bytes);
}

int pc_nodesums_by_leaders(const pc_nodesums_t *x, uint64_t r)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    if (s->round != r || s->total || s->got != x->n - 1) return 0;
    for (int k = 0; k < x->n; k++)
        if (k != x->node && s->from[k] != pc_nodes_rank(x->nodes, k, 0)) return 0;
    return 1;
}

int pc_nodesums_record(const pc_nodesums_t *x, uint64_t r, int *root, uint32_t *flags, const unsigned char **counted)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    if (s->round != r || !s->has_record) return 0;
    *root = s->root;
    *flags = s->flags;
    *counted = s->has_counted ? s->counted : NULL;
    return 1;
}

void pc_nodesums_forget(pc_nodesums_t *x, uint64_t done)
{
    if (done <= x->floor) return;
    x->floor = done;
    for (int i = 0; i < NSLOTS; i++)
        if (x->in[i].round != UINT64_MAX && x->in[i].round < done) clear_round(x, &x->in[i]);
}

static void received(pc_engine_t *e, void *arg, int status, const MPI_Status *st)
{
    (void)st;
    incoming_t *in = arg;
    pc_nodesums_t *x = in->x;
    x->recvs--;
    if (status != PCOLL_SUCCESS) {
        char what[300];
        snprintf(what, sizeof what, "a node sum from another node could not be received: %s",
                 pc_engine_msg_error(e));
        x->env.failed(x->env.owner, status, what);
    } else {
        round_in_t *s = x->closed ? NULL : round_for(x, in->round);
        if (s && in->is_total && !s->total) {
            s->total = in->buf;
            in->buf = NULL;
            x->hooks.arrived(x->hooks.arg);
        } else if (s && !in->is_total && !s->sum[in->node]) {
            /* the first of the node's (a deputy's and its leader's are the same) */
            s->sum[in->node] = in->buf;
            s->from[in->node] = in->src;
            s->got++;
            in->buf = NULL;
            x->hooks.arrived(x->hooks.arg);
        }
    }
    if (in->buf) x->env.release(x->env.owner, in->buf);
    free(in);
    check_drained(x);
}

void pc_nodesums_message(pc_nodesums_t *x, int src, const void *msg, size_t bytes)
{
    const pc_backend_env_t *env = &x->env;
    const pc_obj_msg_t *h = msg;
    if (h->type == PC_MSG_XFIN) {
        x->fins++;
        check_drained(x);
        return;
    }
    int node = src >= 0 && src < env->P ? x->nodes->node_of[src] : x->node;
    if (node == x->node || (h->counted && bytes < sizeof *h + env->bitmap_bytes)) {
        pc_log(PCOLL_LOG_ERROR, "partial: a malformed node sum from rank %d (dropped)", src);
        return;
    }
    /* the data follows whatever becomes of it: always received */
    incoming_t *in = malloc(sizeof *in);
    void *buf = env->buffer(env->owner);
    if (!in || !buf) {
        free(in);
        if (buf) env->release(env->owner, buf);
        env->failed(env->owner, PCOLL_ERR_NOMEM, "no memory to receive a node sum");
        return;
    }
    *in = (incoming_t){x, h->round, node, src, h->epoch == NS_TOTAL, buf};
    int rc = pc_engine_irecv(env->engine, buf, env->bytes, src, sum_tag(x, h->round), 0, received, in);
    if (rc != PCOLL_SUCCESS) {
        env->release(env->owner, buf);
        free(in);
        env->failed(env->owner, rc, "a receive of a node sum could not be posted");
        return;
    }
    x->recvs++;
    if (h->back) x->hooks.back(x->hooks.arg, h->round + h->back);
    if (h->epoch == NS_TOTAL) return; /* an answer: this node has the record */
    if (h->round >= x->finisher_round[node]) { /* its node's finisher now */
        x->finisher[node] = src;
        x->finisher_round[node] = h->round;
    }
    x->hooks.heard(x->hooks.arg, src, h->round);
    round_in_t *s = x->closed ? NULL : round_for(x, h->round);
    if (s && !s->has_record) { /* the round's activation, for a node that has not had it */
        s->has_record = 1;
        s->root = h->root;
        s->flags = h->flags;
        s->has_counted = h->counted != 0;
        if (h->counted) memcpy(s->counted, h + 1, env->bitmap_bytes);
        x->hooks.arrived(x->hooks.arg);
    }
}

int pc_nodesums_close(pc_nodesums_t *x)
{
    pc_obj_msg_t fin = pc_obj_msg(PC_MSG_XFIN, 0, x->env.me);
    for (int i = 0; i < x->npeers; i++) x->env.send(x->env.owner, x->peers[i], &fin, sizeof fin);
    x->closed = 1;
    for (int i = 0; i < NSLOTS; i++) clear_round(x, &x->in[i]);
    if (x->fins == x->npeers && x->recvs == 0 && x->sends == 0) x->drained = 1;
    return x->drained;
}

void pc_nodesums_describe(const pc_nodesums_t *x, uint64_t r, pc_stall_probe_t *p)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    for (int k = 0; k < x->n; k++) {
        if (k == x->node || (s->round == r && s->sum[k])) continue;
        int c[2], nc = pc_nodesums_candidates(x->nodes, k, c);
        for (int i = 0; i < nc; i++)
            pc_probe_fallback(p, c[i],
                              "its node's sum of the round has not arrived (it leads its node, or stands in for "
                              "its leader; its progress thread may be stopped)");
    }
}
