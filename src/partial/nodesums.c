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
/* sends of parts and chunks to one candidate not yet received: more are
 * skipped (a stopped candidate would hold a copy of the object per round;
 * its node's other candidate finishes the rounds, and gets what was
 * skipped as the answer to its own part).  A live candidate has received
 * this node's part and chunk of round r before this node can send its part
 * of r + 2, so a healthy one has at most four or five sends from here in
 * flight (completions seen late).  Answers go to one that asked: always. */
#define BACKLOG 8

/* what came for one round */
typedef struct round_in {
    uint64_t round; /* UINT64_MAX: free */
    void **part;    /* per node: its part of this node's chunk, in place (NULL: not yet; own node: never) */
    int *from;      /* per node: the rank that sent it */
    unsigned char *heard; /* per node: the candidates a part came from (a mask, as round_out_t's) */
    void *chunks;   /* the total's chunks as they come, each in place (NULL: none yet) */
    unsigned char *has_chunk; /* per node: its chunk is in chunks (this node's: reduced here) */
    void *total;    /* the round's whole total, from a node that had it (or NULL) */
    int parts, got_chunks; /* other nodes' */
    int has_record, has_counted;
    int32_t root;
    uint32_t flags;
    unsigned char *counted;
} round_in_t;

/* one copy of data on its way out: it goes once every send of it is done */
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
    int node, src;
    uint32_t what;
    void *buf;
} incoming_t;

/* where this rank sent what of one round, per node: a mask of its
 * candidates (bit 0 its leader, bit 1 its deputy; 0: not yet) */
typedef struct round_out {
    uint64_t round;           /* UINT64_MAX: none */
    unsigned char *part_to;   /* this node's part of that node's chunk */
    unsigned char *chunk_to;  /* this node's chunk of the total */
} round_out_t;

/* NODESUM's epoch field: what the data is */
enum { NS_PART = 0, NS_TOTAL = 1, NS_CHUNK = 2 };

struct pc_nodesums {
    pc_backend_env_t env;
    pc_nodesums_hooks_t hooks;
    const pc_nodes_t *nodes;
    int n, node;        /* nodes; this rank's */
    int *peers, npeers; /* every other node's candidates */
    int *backlog;       /* per peer: sends to it in flight */
    round_in_t in[NSLOTS];
    round_out_t out[NSLOTS];
    uint64_t *deputy_seen; /* per node: round + 1 of the latest part or chunk from its deputy */
    uint64_t floor;     /* rounds < floor are done here */
    int recvs, sends;   /* in flight */
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

/* Node k's chunk of a round's data: elements [E k / n, E (k + 1) / n) of
 * its E (the object's and the trailer). */
static size_t chunk_at(const pc_nodesums_t *x, int k)
{
    return (x->env.count + PC_TRAILER) * (size_t)k / (size_t)x->n * x->env.esize;
}
static size_t chunk_bytes(const pc_nodesums_t *x, int k) { return chunk_at(x, k + 1) - chunk_at(x, k); }

static void release(pc_nodesums_t *x, void **buf)
{
    if (*buf) x->env.release(x->env.owner, *buf);
    *buf = NULL;
}

static void clear_round(pc_nodesums_t *x, round_in_t *s)
{
    for (int k = 0; k < x->n; k++) release(x, &s->part[k]);
    release(x, &s->chunks);
    release(x, &s->total);
    memset(s->has_chunk, 0, (size_t)x->n);
    memset(s->heard, 0, (size_t)x->n);
    s->parts = s->got_chunks = 0;
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
    size_t n = (size_t)x->n;
    x->peers = malloc(sizeof(int) * 2 * n);
    x->backlog = calloc(2 * n, sizeof(int));
    x->deputy_seen = calloc(n, sizeof(uint64_t));
    int ok = x->peers && x->backlog && x->deputy_seen;
    for (int i = 0; ok && i < NSLOTS; i++) {
        round_out_t *o = &x->out[i];
        round_in_t *s = &x->in[i];
        o->round = s->round = UINT64_MAX;
        o->part_to = malloc(n);
        o->chunk_to = malloc(n);
        s->part = calloc(n, sizeof(void *));
        s->from = calloc(n, sizeof(int));
        s->has_chunk = calloc(n, 1);
        s->heard = calloc(n, 1);
        s->counted = malloc(env->bitmap_bytes ? env->bitmap_bytes : 1);
        ok = o->part_to && o->chunk_to && s->part && s->from && s->has_chunk && s->heard && s->counted;
    }
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
        round_in_t *s = &x->in[i];
        if (s->part && s->has_chunk && s->heard) clear_round(x, s);
        free(s->part);
        free(s->from);
        free(s->has_chunk);
        free(s->heard);
        free(s->counted);
        free(x->out[i].part_to);
        free(x->out[i].chunk_to);
    }
    free(x->deputy_seen);
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

/* where the data of `what` from node `from` to node `to` lies, and its bytes */
static size_t place_of(const pc_nodesums_t *x, uint32_t what, int from, int to, size_t *bytes)
{
    if (what == NS_TOTAL) {
        *bytes = x->env.bytes;
        return 0;
    }
    int k = what == NS_PART ? to : from; /* a part of the receiver's chunk, or the sender's chunk */
    *bytes = chunk_bytes(x, k);
    return chunk_at(x, k);
}

/* rank's bit among its node's candidates (0: not one) */
static unsigned bit_of(const pc_nodesums_t *x, int rank)
{
    int c[2], nc = pc_nodesums_candidates(x->nodes, x->nodes->node_of[rank], c);
    for (int i = 0; i < nc; i++)
        if (c[i] == rank) return 1u << i;
    return 0;
}

/* Sends data (a copy) with its NODESUM, to each peer the bytes that
 * `what` gives for it: to the candidates that to[] names (masks per node;
 * one far behind is skipped, and its bit cleared), or, with to NULL, to
 * peers[answer] (an answer: always). */
static int send_data(pc_nodesums_t *x, uint64_t r, uint32_t what, int root, uint32_t flags,
                     const unsigned char *counted, const void *data, uint64_t back, unsigned char *to, int answer)
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
    size_t mine_bytes, mine = place_of(x, what, x->node, x->node, &mine_bytes);
    if (what == NS_CHUNK) memcpy((char *)copy + mine, (const char *)data + mine, mine_bytes);
    else memcpy(copy, data, env->bytes);
    pc_obj_msg_fill(h, PC_MSG_NODESUM, r, root, flags, what, counted, env->bitmap_bytes);
    h->back = back > r && back - r <= UINT32_MAX ? (uint32_t)(back - r) : 0;
    *o = (outgoing_t){x, copy, 1}; /* (held here until every send is posted) */
    int tag = sum_tag(x, r), rc = PCOLL_SUCCESS;
    for (int i = to ? 0 : answer; i < (to ? x->npeers : answer + 1) && rc == PCOLL_SUCCESS; i++) {
        int k = x->nodes->node_of[x->peers[i]];
        unsigned b = bit_of(x, x->peers[i]);
        if (to && !(to[k] & b)) continue;
        if (to && x->backlog[i] >= BACKLOG) { /* silent, or far behind */
            to[k] &= (unsigned char)~b;
            continue;
        }
        sending_t *one = malloc(sizeof *one);
        if (!one) {
            rc = PCOLL_ERR_NOMEM;
            env->failed(env->owner, rc, "no memory to send a node sum to the other nodes");
            break;
        }
        *one = (sending_t){o, i};
        size_t bytes, at = place_of(x, what, x->node, k, &bytes);
        env->send(env->owner, x->peers[i], h, hb); /* a failure is reported there */
        rc = pc_engine_isend(env->engine, (char *)copy + at, bytes, x->peers[i], tag, sent, one);
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

/* Where this rank's chunk of round r goes at node k: to each candidate a
 * part of r came from (the node's finishers of r so far), else to both. */
static unsigned char chunk_targets(const pc_nodesums_t *x, int k, uint64_t r)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    return s->round == r && s->heard[k] ? s->heard[k] : 3;
}

int pc_nodesums_send(pc_nodesums_t *x, uint64_t r, int fresh, int root, uint32_t flags,
                     const unsigned char *counted, const void *sum, uint64_t back)
{
    /* to a node's leader, which finishes its rounds; to its deputy too if
     * that sent a part or chunk of r or r - 1 (it stands in), or if this
     * rank did not finish r - 1 here (it stands in, or takes over: its
     * part reaches whoever finishes r there, which answers with what this
     * rank lacks) */
    round_out_t *o = &x->out[r % NSLOTS];
    o->round = r;
    for (int k = 0; k < x->n; k++) {
        o->part_to[k] = k == x->node ? 0 : fresh || x->deputy_seen[k] >= r ? 3 : 1;
        o->chunk_to[k] = 0;
    }
    return send_data(x, r, NS_PART, root, flags, counted, sum, back, o->part_to, -1);
}

int pc_nodesums_reduce(pc_nodesums_t *x, uint64_t r, const void *sum, uint64_t back)
{
    round_in_t *s = &x->in[r % NSLOTS];
    round_out_t *o = &x->out[r % NSLOTS];
    if (s->round != r || o->round != r) return 0;
    if (s->has_chunk[x->node]) return 1;
    if (!s->total && s->parts < x->n - 1) return 0;
    if (!s->chunks && !(s->chunks = x->env.buffer(x->env.owner))) {
        x->env.failed(x->env.owner, PCOLL_ERR_NOMEM, "no memory for a chunk of a round's total");
        return 0;
    }
    size_t at = chunk_at(x, x->node), bytes = chunk_bytes(x, x->node), count = bytes / x->env.esize;
    char *mine = (char *)s->chunks + at;
    if (s->total) { /* a node that had the total (by the leaders' allreduce) */
        memcpy(mine, (const char *)s->total + at, bytes);
    } else { /* in node order, so that whoever finishes it here has it to the bit */
#define PART_OF(k) ((k) == x->node ? (const char *)sum + at : (const char *)s->part[k] + at)
        pc_reduce_sum(mine, PART_OF(0), PART_OF(1), count, x->env.dtype);
        for (int k = 2; k < x->n; k++) pc_reduce_sum(mine, mine, PART_OF(k), count, x->env.dtype);
#undef PART_OF
    }
    s->has_chunk[x->node] = 1;
    /* to each node's finisher of round r: the rank(s) its part came from */
    for (int k = 0; k < x->n; k++)
        o->chunk_to[k] = k == x->node ? 0 : chunk_targets(x, k, r);
    send_data(x, r, NS_CHUNK, -1, 0, NULL, s->chunks, back, o->chunk_to, -1);
    return 1;
}

int pc_nodesums_lacks(const pc_nodesums_t *x, uint64_t r, int rank)
{
    const round_out_t *o = &x->out[r % NSLOTS];
    int k = rank >= 0 && rank < x->env.P ? x->nodes->node_of[rank] : x->node;
    unsigned b = rank >= 0 && rank < x->env.P ? bit_of(x, rank) : 0;
    return k != x->node && (o->round != r || !(o->part_to[k] & b) || !(o->chunk_to[k] & b));
}

int pc_nodesums_resend(pc_nodesums_t *x, uint64_t r, int rank, int root, uint32_t flags, const unsigned char *counted,
                       const void *sum, uint64_t back)
{
    round_out_t *o = &x->out[r % NSLOTS];
    const round_in_t *s = &x->in[r % NSLOTS];
    int i = peer_index(x, rank), rc = PCOLL_SUCCESS;
    if (o->round != r || i < 0) return rc;
    int k = x->nodes->node_of[rank];
    unsigned b = bit_of(x, rank);
    if (!(o->part_to[k] & b)) {
        o->part_to[k] |= (unsigned char)b;
        pc_log(PCOLL_LOG_DEBUG, "partial ch%u: round %llu's part again, to rank %d (it finishes the round at its "
               "node now)", x->env.obj->channel, (unsigned long long)r, rank);
        rc = send_data(x, r, NS_PART, root, flags, counted, sum, back, NULL, i);
    }
    if (rc == PCOLL_SUCCESS && s->round == r && s->has_chunk[x->node] && !(o->chunk_to[k] & b)) {
        o->chunk_to[k] |= (unsigned char)b;
        pc_log(PCOLL_LOG_DEBUG, "partial ch%u: round %llu's chunk of the total again, to rank %d",
               x->env.obj->channel, (unsigned long long)r, rank);
        rc = send_data(x, r, NS_CHUNK, -1, 0, NULL, s->chunks, back, NULL, i);
    }
    return rc;
}

int pc_nodesums_send_total(pc_nodesums_t *x, uint64_t r, int rank, const void *total, uint64_t back)
{
    int i = peer_index(x, rank);
    return i < 0 ? PCOLL_SUCCESS : send_data(x, r, NS_TOTAL, -1, 0, NULL, total, back, NULL, i);
}

int pc_nodesums_ready(const pc_nodesums_t *x, uint64_t r)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    return s->round == r && (s->total || (s->has_chunk[x->node] && s->got_chunks == x->n - 1));
}

void pc_nodesums_add(const pc_nodesums_t *x, uint64_t r, void *sum)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    memcpy(sum, s->total ? s->total : s->chunks, x->env.bytes);
}

int pc_nodesums_by_leaders(const pc_nodesums_t *x, uint64_t r)
{
    const round_in_t *s = &x->in[r % NSLOTS];
    if (s->round != r || s->total || s->parts != x->n - 1) return 0;
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
        int k = in->node;
        if (s && in->what == NS_TOTAL && !s->total) {
            s->total = in->buf;
            in->buf = NULL;
            x->hooks.arrived(x->hooks.arg);
        } else if (s && in->what == NS_PART && !s->part[k]) {
            /* the first of the node's (a deputy's and its leader's are the same) */
            s->part[k] = in->buf;
            s->from[k] = in->src;
            s->parts++;
            in->buf = NULL;
            x->hooks.arrived(x->hooks.arg);
        } else if (s && in->what == NS_CHUNK && !s->has_chunk[k] &&
                   (s->chunks || (s->chunks = x->env.buffer(x->env.owner)))) {
            size_t at = chunk_at(x, k);
            memcpy((char *)s->chunks + at, (char *)in->buf + at, chunk_bytes(x, k));
            s->has_chunk[k] = 1;
            s->got_chunks++;
            x->hooks.arrived(x->hooks.arg);
        } else if (s && in->what == NS_CHUNK && !s->chunks) {
            x->env.failed(x->env.owner, PCOLL_ERR_NOMEM, "no memory for a chunk of a round's total");
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
    if (node == x->node || h->epoch > NS_CHUNK || (h->counted && bytes < sizeof *h + env->bitmap_bytes)) {
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
    *in = (incoming_t){x, h->round, node, src, h->epoch, buf};
    size_t len, at = place_of(x, h->epoch, node, x->node, &len);
    int rc = pc_engine_irecv(env->engine, (char *)buf + at, len, src, sum_tag(x, h->round), 0, received, in);
    if (rc != PCOLL_SUCCESS) {
        env->release(env->owner, buf);
        free(in);
        env->failed(env->owner, rc, "a receive of a node sum could not be posted");
        return;
    }
    x->recvs++;
    if (h->back) x->hooks.back(x->hooks.arg, h->round + h->back);
    if (h->epoch != NS_TOTAL && bit_of(x, src) == 2 && x->deputy_seen[node] < h->round + 1)
        x->deputy_seen[node] = h->round + 1;
    if (h->epoch != NS_PART) return; /* an answer, or a chunk: this node has the record */
    round_in_t *s = x->closed ? NULL : round_for(x, h->round);
    if (s) s->heard[node] |= (unsigned char)bit_of(x, src);
    x->hooks.heard(x->hooks.arg, src, h->round);
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
    int here = s->round == r;
    if (here && s->total) return;
    for (int k = 0; k < x->n; k++) {
        if (k == x->node || (here && s->has_chunk[k] && (s->part[k] || s->has_chunk[x->node]))) continue;
        int c[2], nc = pc_nodesums_candidates(x->nodes, k, c);
        for (int i = 0; i < nc; i++)
            pc_probe_fallback(p, c[i],
                              "its node's part or chunk of the round has not arrived (it leads its node, or stands "
                              "in for its leader; its progress thread may be stopped)");
    }
}
