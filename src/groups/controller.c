/* The group generator of dynamic-group partial reduce: see controller.h. */
#include "controller.h"

#include <stdlib.h>
#include <string.h>

#include "staleness.h"
#include "../util/bits.h"

typedef struct rank_state {
    int ready;                /* asked (or is freeing) and has no group yet */
    int queued;               /* FIFO: in the queue */
    int finishing, finished;  /* freeing; nothing more will want it */
    uint64_t iteration;       /* the last it reported */
    uint64_t requests;        /* SMART's counter */
    pc_gen_group_t *running;  /* sent, not reported done */
    pc_gen_group_t **buf;     /* the group buffer: activated, not yet sent */
    int head, len, cap;
    int pending_in;           /* pending groups it is in */
    int awaiting;             /* SMART: asked with an empty buffer when no
                                 other rank was idle: the next division
                                 takes it */
} rank_state_t;

struct pc_gen {
    pc_gen_config_t cfg;
    pc_gen_out_t out;
    int P;
    rank_state_t *st;
    uint64_t rng, next_id;
    int *queue, qhead, qlen;   /* FIFO: ready ranks, in arrival order */
    pc_gen_group_t *pending, *pending_tail;
    int npending;
    int *hist, *hist_n, hist_at, hist_count, window; /* FIFO: last window groups */
    int *scratch, *scratch2, *comp;                    /* P each */
    uint64_t *iters;
    int training; /* ranks not finishing */
    int awaiting; /* SMART: ranks awaiting a division */
    pc_gen_stats_t stats;
};

/* ---- small helpers ---- */

/* The lock vector: activated groups of a rank not done yet (buffered, or
 * the one it runs). */
static int locks(const rank_state_t *s) { return s->len + (s->running != NULL); }

static uint64_t next_rand(pc_gen_t *g)
{
    uint64_t z = (g->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void shuffle(pc_gen_t *g, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(next_rand(g) % (uint64_t)(i + 1));
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

int pc_gen_default_window(int P, int group_size)
{
    if (group_size < 2 || P < 2) return 1;
    return 2 * ((P - 1 + group_size - 2) / (group_size - 1));
}

static int buf_push(rank_state_t *s, pc_gen_group_t *grp)
{
    if (s->len == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        pc_gen_group_t **nb = malloc(sizeof *nb * (size_t)cap);
        if (!nb) return PCOLL_ERR_NOMEM;
        for (int i = 0; i < s->len; i++) nb[i] = s->buf[(s->head + i) % s->cap];
        free(s->buf);
        s->buf = nb;
        s->cap = cap;
        s->head = 0;
    }
    s->buf[(s->head + s->len) % s->cap] = grp;
    s->len++;
    return 0;
}

static pc_gen_group_t *buf_pop(rank_state_t *s)
{
    pc_gen_group_t *grp = s->buf[s->head];
    s->head = (s->head + 1) % s->cap;
    s->len--;
    return grp;
}

static void free_group(pc_gen_group_t *grp)
{
    if (!grp) return;
    free(grp->members);
    free(grp->weights);
    free(grp);
}

/* A group of the n ranks in m (any order), with weights: the FIFO rule's
 * or 1/n; members sorted (weights with them). */
static pc_gen_group_t *new_group(pc_gen_t *g, const int *m, int n)
{
    pc_gen_group_t *grp = calloc(1, sizeof *grp);
    if (!grp) return NULL;
    grp->members = malloc(sizeof(int) * (size_t)n);
    grp->weights = malloc(sizeof(double) * (size_t)n);
    if (!grp->members || !grp->weights) {
        free_group(grp);
        return NULL;
    }
    grp->n = n;
    memcpy(grp->members, m, sizeof(int) * (size_t)n);
    /* sort members (insertion: groups are small) */
    for (int i = 1; i < n; i++) {
        int x = grp->members[i], j = i;
        while (j > 0 && grp->members[j - 1] > x) {
            grp->members[j] = grp->members[j - 1];
            j--;
        }
        grp->members[j] = x;
    }
    for (int i = 0; i < n; i++) g->iters[i] = g->st[grp->members[i]].iteration;
    if (g->cfg.kind == PC_GEN_FIFO && g->cfg.dynamic)
        grp->iteration = pc_staleness_weights(n, g->iters, g->cfg.alpha, grp->weights);
    else
        grp->iteration = pc_constant_weights(n, g->iters, grp->weights);
    return grp;
}

/* Sends rank its buffer's first group if it is ready for it. */
static void try_send(pc_gen_t *g, int rank)
{
    rank_state_t *s = &g->st[rank];
    if (!s->ready || s->running || s->len == 0) return;
    pc_gen_group_t *grp = buf_pop(s);
    s->running = grp;
    s->ready = 0;
    if (s->awaiting) {
        s->awaiting = 0;
        g->awaiting--;
    }
    int index = 0;
    while (grp->members[index] != rank) index++;
    g->out.assign(g->out.arg, rank, grp, index);
}

/* A freeing rank with nothing left to do is finished. */
static void check_finished(pc_gen_t *g, int rank)
{
    rank_state_t *s = &g->st[rank];
    if (!s->finishing || s->finished || s->running || s->len > 0 || s->pending_in > 0) return;
    s->finished = 1;
    s->ready = 0;
    g->out.finished(g->out.arg, rank);
}

static int activate(pc_gen_t *g, pc_gen_group_t *grp)
{
    grp->left = grp->n;
    grp->id = ++g->next_id;
    g->stats.groups++;
    for (int i = 0; i < grp->n; i++) {
        rank_state_t *s = &g->st[grp->members[i]];
        if (buf_push(s, grp) != 0) return PCOLL_ERR_NOMEM;
    }
    for (int i = 0; i < grp->n; i++) try_send(g, grp->members[i]);
    return 0;
}

/* ---- FIFO ---- */

static int find(int *parent, int x)
{
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
}

/* Components of the last `window` groups into g->comp (a root per rank);
 * returns how many. */
static int components(pc_gen_t *g)
{
    int *parent = g->comp, count = g->P;
    for (int r = 0; r < g->P; r++) parent[r] = r;
    int gs = g->cfg.group_size;
    for (int k = 0; k < g->hist_count; k++) {
        const int *m = g->hist + (size_t)k * (size_t)gs;
        for (int i = 1; i < g->hist_n[k]; i++) {
            int a = find(parent, m[0]), b = find(parent, m[i]);
            if (a != b) {
                parent[a] = b;
                count--;
            }
        }
    }
    for (int r = 0; r < g->P; r++) parent[r] = find(parent, r);
    return count;
}

static void remember(pc_gen_t *g, const int *m, int n)
{
    int gs = g->cfg.group_size;
    memcpy(g->hist + (size_t)g->hist_at * (size_t)gs, m, sizeof(int) * (size_t)n);
    g->hist_n[g->hist_at] = n;
    g->hist_at = (g->hist_at + 1) % g->window;
    if (g->hist_count < g->window) g->hist_count++;
}

static int queue_at(const pc_gen_t *g, int i) { return g->queue[(g->qhead + i) % g->P]; }

/* Removes the chosen ranks (sel[0..n)) from the queue, keeping its order. */
static void dequeue(pc_gen_t *g, const int *sel, int n)
{
    int kept = 0;
    for (int i = 0; i < g->qlen; i++) {
        int r = queue_at(g, i), taken = 0;
        for (int j = 0; j < n; j++) taken |= sel[j] == r;
        if (taken)
            g->st[r].queued = 0;
        else
            g->scratch2[kept++] = r;
    }
    g->qhead = 0;
    g->qlen = kept;
    memcpy(g->queue, g->scratch2, sizeof(int) * (size_t)kept);
}

static int fifo_form(pc_gen_t *g)
{
    int gs = g->cfg.group_size;
    while (g->qlen > 0) {
        int waiting_elsewhere = g->training - g->qlen; /* still training, not queued */
        if (g->qlen < gs && waiting_elsewhere > 0) return 0;
        int take = g->qlen < gs ? g->qlen : gs, n = 0, bridge = 0;
        int *sel = g->scratch;
        if (g->cfg.avoid_frozen && take >= 2 && g->hist_count >= g->window && components(g) > 1) {
            /* a bridge: the first queued rank, then the first of every
             * other component, then the rest in queue order */
            sel[n++] = queue_at(g, 0);
            for (int i = 1; i < g->qlen && n < take; i++) {
                int r = queue_at(g, i), seen = 0;
                for (int j = 0; j < n; j++) seen |= g->comp[sel[j]] == g->comp[r];
                if (!seen) sel[n++] = r;
            }
            if (n == 1) {
                /* every queued rank in one component: wait for a rank of
                 * another one, if one is still training */
                int other = 0;
                for (int r = 0; r < g->P && !other; r++)
                    other = !g->st[r].finishing && !g->st[r].queued && g->comp[r] != g->comp[sel[0]];
                if (other) {
                    g->stats.holds++;
                    return 0;
                }
            } else {
                bridge = 1;
            }
            for (int i = 1; i < g->qlen && n < take; i++) {
                int r = queue_at(g, i), in = 0;
                for (int j = 0; j < n; j++) in |= sel[j] == r;
                if (!in) sel[n++] = r;
            }
        } else {
            for (int i = 0; i < take; i++) sel[n++] = queue_at(g, i);
        }
        dequeue(g, sel, n);
        pc_gen_group_t *grp = new_group(g, sel, n);
        if (!grp) return PCOLL_ERR_NOMEM;
        g->stats.bridges += (uint64_t)bridge;
        if (n >= 2) remember(g, grp->members, n);
        if (activate(g, grp) != 0) return PCOLL_ERR_NOMEM;
    }
    return 0;
}

/* ---- RANDOM ---- */

static int conflicts(const pc_gen_t *g, const pc_gen_group_t *grp)
{
    for (int i = 0; i < grp->n; i++)
        if (locks(&g->st[grp->members[i]]) > 0) return 1;
    return 0;
}

static int retry_pending(pc_gen_t *g)
{
    pc_gen_group_t **pp = &g->pending;
    g->pending_tail = NULL;
    while (*pp) {
        pc_gen_group_t *grp = *pp;
        if (conflicts(g, grp)) {
            g->pending_tail = grp;
            pp = &grp->next;
            continue;
        }
        *pp = grp->next;
        grp->next = NULL;
        g->npending--;
        for (int i = 0; i < grp->n; i++) g->st[grp->members[i]].pending_in--;
        /* the iteration after: as the members stand now */
        for (int i = 0; i < grp->n; i++) g->iters[i] = g->st[grp->members[i]].iteration;
        grp->iteration = pc_constant_weights(grp->n, g->iters, grp->weights);
        if (activate(g, grp) != 0) return PCOLL_ERR_NOMEM;
    }
    return 0;
}

static int random_group(pc_gen_t *g, int rank)
{
    int *m = g->scratch, n = 0;
    m[n++] = rank;
    int *others = g->scratch2, k = 0;
    for (int r = 0; r < g->P; r++)
        if (r != rank && !g->st[r].finishing) others[k++] = r;
    /* S - 1 of them at random (a partial shuffle) */
    for (int i = 0; i < k && n < g->cfg.group_size; i++) {
        int j = i + (int)(next_rand(g) % (uint64_t)(k - i));
        int t = others[i];
        others[i] = others[j];
        others[j] = t;
        m[n++] = others[i];
    }
    pc_gen_group_t *grp = new_group(g, m, n);
    if (!grp) return PCOLL_ERR_NOMEM;
    int behind = 0; /* a member already waits in a pending group: this one comes after it */
    for (int i = 0; i < n; i++) behind |= g->st[grp->members[i]].pending_in > 0;
    if (!behind && !conflicts(g, grp)) return activate(g, grp);
    /* it waits in the pending queue */
    g->stats.conflicts++;
    for (int i = 0; i < n; i++) g->st[grp->members[i]].pending_in++;
    if (g->pending_tail)
        g->pending_tail->next = grp;
    else
        g->pending = grp;
    g->pending_tail = grp;
    if (++g->npending > g->stats.pending_max) g->stats.pending_max = g->npending;
    return 0;
}

/* ---- SMART ---- */

/* Deals the n ranks in m (shuffled here) into groups of S, a single rank
 * left over joining the last group, and activates them in order. */
static int deal(pc_gen_t *g, int *m, int n)
{
    int S = g->cfg.group_size;
    shuffle(g, m, n);
    for (int at = 0; at < n;) {
        int size = n - at <= S ? n - at : S;
        if (n - at - size == 1) size++;
        if (size >= 2) {
            pc_gen_group_t *grp = new_group(g, m + at, size);
            if (!grp || activate(g, grp) != 0) return PCOLL_ERR_NOMEM;
        }
        at += size;
    }
    return 0;
}

static int idle_for(const pc_gen_t *g, int r, int requester)
{
    const rank_state_t *s = &g->st[r];
    if (r == requester) return 1;
    if (s->finishing || locks(s) > 0 || (s->ready && !s->awaiting)) return 0;
    int64_t lag = (int64_t)g->st[requester].requests - (int64_t)s->requests;
    return g->cfg.slow_threshold <= 0 || lag < g->cfg.slow_threshold;
}

/* The idle ranks of node `node` (marked in idle[]) into out; their number. */
static int idle_on(const pc_gen_t *g, const int *idle, int node, int *out)
{
    int k = 0;
    for (int l = 0; l < pc_nodes_size(g->cfg.nodes, node); l++) {
        int r = pc_nodes_rank(g->cfg.nodes, node, l);
        if (idle[r]) out[k++] = r;
    }
    return k;
}

static int global_division(pc_gen_t *g, int rank)
{
    const uint64_t groups_before = g->stats.groups;
    int *idle = g->comp; /* marks (FIFO's components are not used here) */
    int *list = g->scratch2, n = 0;
    for (int r = 0; r < g->P; r++)
        if ((idle[r] = idle_for(g, r, rank))) list[n++] = r;
    const pc_nodes_t *nodes = g->cfg.nodes;
    if (!nodes || nodes->count < 2) {
        if (deal(g, list, n) != 0) return PCOLL_ERR_NOMEM;
    } else {
        /* inter: one head per node, the heads across nodes, the others in
         * groups inside their node */
        int *heads = g->scratch, nh = 0;
        for (int node = 0; node < nodes->count; node++) {
            int k = idle_on(g, idle, node, list);
            if (k == 0) continue;
            int h = (int)(next_rand(g) % (uint64_t)k);
            heads[nh++] = list[h];
            list[h] = list[k - 1];
            if (k - 1 >= 2 && deal(g, list, k - 1) != 0) return PCOLL_ERR_NOMEM;
        }
        if (nh >= 2) {
            /* deal() uses scratch2 only through its argument: copy the heads there */
            memcpy(list, heads, sizeof(int) * (size_t)nh);
            if (deal(g, list, nh) != 0) return PCOLL_ERR_NOMEM;
        }
        /* intra: each node's ranks of this division together */
        for (int node = 0; node < nodes->count; node++) {
            int k = idle_on(g, idle, node, list);
            if (k < 2) continue;
            pc_gen_group_t *grp = new_group(g, list, k);
            if (!grp || activate(g, grp) != 0) return PCOLL_ERR_NOMEM;
        }
    }
    rank_state_t *s = &g->st[rank];
    if (s->len == 0 && !s->running) {
        /* nobody idle to reduce with: wait for the next division (when a
         * rank's groups are done, or another rank asks), unless nobody else
         * trains: then a group of one */
        if (g->cfg.group_size >= 2 && g->training - !s->finishing > 0) {
            if (!s->awaiting) {
                s->awaiting = 1;
                g->awaiting++;
            }
            return 0;
        }
        pc_gen_group_t *grp = new_group(g, &rank, 1);
        if (!grp || activate(g, grp) != 0) return PCOLL_ERR_NOMEM;
    }
    if (g->stats.groups > groups_before) g->stats.divisions++; /* one that formed groups */
    return 0;
}

/* SMART: a rank became idle or stopped training: divisions for the ranks
 * that await one (the first division usually takes them all). */
static int serve_awaiting(pc_gen_t *g)
{
    for (int r = 0; r < g->P && g->awaiting > 0; r++)
        if (g->st[r].awaiting && global_division(g, r) != 0) return PCOLL_ERR_NOMEM;
    return 0;
}

/* ---- events ---- */

pc_gen_t *pc_gen_create(const pc_gen_config_t *cfg, const pc_gen_out_t *out)
{
    pc_gen_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = *cfg;
    g->out = *out;
    g->P = cfg->P;
    if (g->cfg.group_size < 1) g->cfg.group_size = 1;
    if (g->cfg.group_size > g->P) g->cfg.group_size = g->P;
    g->window = cfg->window > 0 ? cfg->window : pc_gen_default_window(g->P, g->cfg.group_size);
    g->rng = cfg->seed ^ 0x5eedc0ffee1234ull;
    g->training = g->P;
    size_t P = (size_t)g->P;
    g->st = calloc(P, sizeof *g->st);
    g->queue = malloc(sizeof(int) * P);
    g->scratch = malloc(sizeof(int) * P);
    g->scratch2 = malloc(sizeof(int) * P);
    g->comp = malloc(sizeof(int) * P);
    g->iters = malloc(sizeof(uint64_t) * P);
    g->hist = malloc(sizeof(int) * (size_t)g->window * (size_t)g->cfg.group_size);
    g->hist_n = calloc((size_t)g->window, sizeof(int));
    if (!g->st || !g->queue || !g->scratch || !g->scratch2 || !g->comp || !g->iters || !g->hist ||
        !g->hist_n) {
        pc_gen_destroy(g);
        return NULL;
    }
    return g;
}

void pc_gen_destroy(pc_gen_t *g)
{
    if (!g) return;
    /* every group once: a group is in its members' buffers or running at
     * them (active), or pending */
    if (g->st) {
        for (int r = 0; r < g->P; r++) {
            rank_state_t *s = &g->st[r];
            if (s->running && --s->running->left == 0) free_group(s->running);
            while (s->len > 0) {
                pc_gen_group_t *grp = buf_pop(s);
                if (--grp->left == 0) free_group(grp);
            }
            free(s->buf);
        }
    }
    while (g->pending) {
        pc_gen_group_t *grp = g->pending;
        g->pending = grp->next;
        free_group(grp);
    }
    free(g->st);
    free(g->queue);
    free(g->scratch);
    free(g->scratch2);
    free(g->comp);
    free(g->iters);
    free(g->hist);
    free(g->hist_n);
    free(g);
}

int pc_gen_request(pc_gen_t *g, int rank, uint64_t iteration)
{
    if (rank < 0 || rank >= g->P) return PCOLL_ERR_INTERNAL;
    rank_state_t *s = &g->st[rank];
    if (s->ready || s->running || s->finishing) return PCOLL_ERR_INTERNAL;
    s->ready = 1;
    s->iteration = iteration;
    s->requests++;
    g->stats.requests++;
    switch (g->cfg.kind) {
    case PC_GEN_FIFO:
        s->queued = 1;
        g->queue[(g->qhead + g->qlen++) % g->P] = rank;
        return fifo_form(g);
    case PC_GEN_RANDOM:
        if (s->len > 0) {
            try_send(g, rank);
            return 0;
        }
        if (s->pending_in > 0) return 0; /* its group waits for locks */
        return random_group(g, rank);
    case PC_GEN_SMART:
        if (s->len == 0 && global_division(g, rank) != 0) return PCOLL_ERR_NOMEM;
        try_send(g, rank);
        return 0;
    }
    return PCOLL_ERR_INTERNAL;
}

int pc_gen_done(pc_gen_t *g, int rank, uint64_t group_id)
{
    if (rank < 0 || rank >= g->P) return PCOLL_ERR_INTERNAL;
    rank_state_t *s = &g->st[rank];
    if (!s->running || s->running->id != group_id) return PCOLL_ERR_INTERNAL;
    pc_gen_group_t *grp = s->running;
    s->running = NULL;
    if (--grp->left == 0) free_group(grp);
    if (g->cfg.kind == PC_GEN_RANDOM && g->pending && retry_pending(g) != 0) return PCOLL_ERR_NOMEM;
    if (s->finishing) {
        s->ready = 1; /* it waits in its free for what is left */
        try_send(g, rank);
        check_finished(g, rank);
    }
    /* SMART: it is idle now, a partner for a rank awaiting a division */
    if (g->awaiting > 0 && locks(s) == 0 && !s->finishing) return serve_awaiting(g);
    return 0;
}

int pc_gen_finish(pc_gen_t *g, int rank)
{
    if (rank < 0 || rank >= g->P) return PCOLL_ERR_INTERNAL;
    rank_state_t *s = &g->st[rank];
    if (s->finishing || s->ready || s->running) return PCOLL_ERR_INTERNAL;
    s->finishing = 1;
    s->ready = 1;
    g->training--;
    try_send(g, rank);
    check_finished(g, rank);
    /* FIFO: the queue may now be all that trains */
    if (g->cfg.kind == PC_GEN_FIFO) return fifo_form(g);
    /* SMART: a rank awaiting a division may now be all that trains */
    if (g->awaiting > 0) return serve_awaiting(g);
    return 0;
}

int pc_gen_all_finished(const pc_gen_t *g)
{
    for (int r = 0; r < g->P; r++)
        if (!g->st[r].finished) return 0;
    return 1;
}

int pc_gen_missing(const pc_gen_t *g, int rank, unsigned char *bits)
{
    if (rank < 0 || rank >= g->P) return 0;
    const rank_state_t *s = &g->st[rank];
    int count = 0;
#define MARK(r)                                                                                                      \
    do {                                                                                                             \
        pc_bit_set(bits, (r));                                                                                       \
        count++;                                                                                                     \
    } while (0)
    if (s->queued) { /* FIFO: whoever still trains and is not queued */
        for (int r = 0; r < g->P; r++)
            if (!g->st[r].queued && !g->st[r].finishing) MARK(r);
    } else if (s->len > 0) { /* its next group: members not at it yet */
        const pc_gen_group_t *grp = s->buf[s->head];
        for (int i = 0; i < grp->n; i++) {
            int r = grp->members[i];
            if (r != rank && g->st[r].running != grp) MARK(r);
        }
    } else if (s->awaiting) { /* SMART: a partner: whoever trains and is busy or lags */
        for (int r = 0; r < g->P; r++)
            if (r != rank && !g->st[r].finishing && !idle_for(g, r, rank)) MARK(r);
    } else if (s->pending_in > 0) { /* its pending group: members holding locks */
        for (const pc_gen_group_t *grp = g->pending; grp; grp = grp->next) {
            int in = 0;
            for (int i = 0; i < grp->n; i++) in |= grp->members[i] == rank;
            if (!in) continue;
            for (int i = 0; i < grp->n; i++)
                if (grp->members[i] != rank && locks(&g->st[grp->members[i]]) > 0) MARK(grp->members[i]);
            break;
        }
    }
#undef MARK
    return count;
}

void pc_gen_stats(const pc_gen_t *g, pc_gen_stats_t *stats) { *stats = g->stats; }
int pc_gen_buffered(const pc_gen_t *g, int rank) { return g->st[rank].len; }
int pc_gen_locks(const pc_gen_t *g, int rank) { return locks(&g->st[rank]); }
int pc_gen_pending(const pc_gen_t *g) { return g->npending; }
