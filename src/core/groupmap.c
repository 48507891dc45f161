#include "groupmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "context.h"

/* ---- a FIFO of fixed-size items ---- */

typedef struct fifo {
    unsigned char *buf;
    size_t item, head, len, cap;
} fifo_t;

static int fifo_push(fifo_t *f, const void *x)
{
    if (f->len == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 4;
        unsigned char *b = malloc(f->item * cap);
        if (!b) return -1;
        for (size_t i = 0; i < f->len; i++)
            memcpy(b + i * f->item, f->buf + ((f->head + i) % f->cap) * f->item, f->item);
        free(f->buf);
        f->buf = b;
        f->head = 0;
        f->cap = cap;
    }
    memcpy(f->buf + ((f->head + f->len) % f->cap) * f->item, x, f->item);
    f->len++;
    return 0;
}

static void fifo_pop(fifo_t *f, void *x)
{
    memcpy(x, f->buf + f->head * f->item, f->item);
    f->head = (f->head + 1) % f->cap;
    f->len--;
}

struct pc_hqueue {
    fifo_t hellos;  /* pc_hello_t */
    fifo_t waiters; /* void * */
};

/* ---- records ---- */

uint64_t pc_group_hash(int world, const int *ranks, int n)
{
    /* the whole communicator is one list, whatever group_size came with it */
    uint64_t h = 1469598103934665603ULL ^ (world ? 1ULL << 40 : (uint64_t)n);
    if (!world)
        for (int i = 0; i < n; i++) {
            h ^= (uint64_t)(uint32_t)ranks[i];
            h *= 1099511628211ULL;
        }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static void free_group(pc_group_t *g)
{
    if (!g) return;
    if (g->q)
        for (int j = 0; j < g->n; j++)
            if (g->q[j]) {
                free(g->q[j]->hellos.buf);
                free(g->q[j]->waiters.buf);
                free(g->q[j]);
            }
    free(g->q);
    free(g->ranks);
    free(g);
}

int pc_groups_init(pc_group_registry_t *reg, int size, int rank)
{
    memset(reg, 0, sizeof *reg);
    reg->size = size;
    reg->rank = rank;
    reg->nbuckets = 64;
    reg->buckets = calloc((size_t)reg->nbuckets, sizeof *reg->buckets);
    return reg->buckets ? PCOLL_SUCCESS : PCOLL_ERR_NOMEM;
}

void pc_groups_destroy(pc_group_registry_t *reg)
{
    for (int b = 0; b < reg->nbuckets && reg->buckets; b++) {
        pc_group_t *g = reg->buckets[b];
        while (g) {
            pc_group_t *next = g->next;
            free_group(g);
            g = next;
        }
    }
    free(reg->buckets);
    memset(reg, 0, sizeof *reg);
}

int pc_group_validate(const int *ranks, int n, int size, int rank, const char *fn, int *me)
{
    if (n < 1) return pc_error(PCOLL_ERR_GROUP, fn, "group_size is %d; a group needs at least one rank", n);
    *me = -1;
    /* duplicates: sort a copy (no table of the communicator's size per
     * call); with more than `size` entries a repeat or a rank out of range
     * is among the first size + 1 */
    int m = n <= size ? n : size + 1;
    int *sorted = malloc(sizeof(int) * (size_t)m);
    if (!sorted) return pc_error(PCOLL_ERR_NOMEM, fn, "no memory to check the group");
    int rc = PCOLL_SUCCESS;
    for (int i = 0; i < m && rc == PCOLL_SUCCESS; i++) {
        int r = ranks[i];
        if (r < 0 || r >= size)
            rc = pc_error(PCOLL_ERR_GROUP, fn, "group[%d] = %d is not a rank of the communicator (0..%d)", i, r,
                          size - 1);
        if (r == rank) *me = i;
        /* insertion into the sorted prefix, finding a repeat on the way */
        int at = i;
        while (at > 0 && sorted[at - 1] > r) {
            sorted[at] = sorted[at - 1];
            at--;
        }
        sorted[at] = r;
        if (rc == PCOLL_SUCCESS && at > 0 && sorted[at - 1] == r)
            rc = pc_error(PCOLL_ERR_GROUP, fn, "rank %d appears twice in the group (again at group[%d])", r, i);
    }
    free(sorted);
    if (rc == PCOLL_SUCCESS && *me < 0)
        rc = pc_error(PCOLL_ERR_GROUP, fn, "the calling rank %d is not a member of the group", rank);
    return rc;
}

void pc_group_text(const int *ranks, int n, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "group [");
    for (int i = 0; i < n && at < len; i++) {
        if (i == 8 && n > 10) {
            at += (size_t)snprintf(buf + at, len - at, ", ... (%d ranks)", n);
            break;
        }
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : "", ranks[i]);
    }
    if (at < len) snprintf(buf + at, len - at, "]");
}

int pc_group_index(const pcoll_t *ctx, const int *group, int group_size, const char *fn, int *me)
{
    if (!group) {
        *me = ctx->rank;
        return PCOLL_SUCCESS;
    }
    return pc_group_validate(group, group_size, ctx->size, ctx->rank, fn, me);
}

static int same_list(const pc_group_t *g, int world, const int *ranks, int n)
{
    if (g->world || world) return g->world == world;
    return g->n == n && memcmp(g->ranks, ranks, sizeof(int) * (size_t)n) == 0;
}

static pc_group_t *find(const pc_group_registry_t *reg, int world, const int *ranks, int n, uint64_t h)
{
    for (pc_group_t *g = reg->buckets[h % (uint64_t)reg->nbuckets]; g; g = g->next)
        if (g->hash == h && same_list(g, world, ranks, n)) return g;
    return NULL;
}

static void grow(pc_group_registry_t *reg)
{
    int nb = reg->nbuckets * 2;
    pc_group_t **buckets = calloc((size_t)nb, sizeof *buckets);
    if (!buckets) return; /* longer chains, still correct */
    for (int b = 0; b < reg->nbuckets; b++) {
        pc_group_t *g = reg->buckets[b];
        while (g) {
            pc_group_t *next = g->next;
            int nbk = (int)(g->hash % (uint64_t)nb);
            g->next = buckets[nbk];
            buckets[nbk] = g;
            g = next;
        }
    }
    free(reg->buckets);
    reg->buckets = buckets;
    reg->nbuckets = nb;
}

static int add(pc_group_registry_t *reg, int world, const int *ranks, int n, int me, uint64_t h, pc_group_t **out)
{
    pc_group_t *g = calloc(1, sizeof *g);
    if (!g) return PCOLL_ERR_NOMEM;
    g->n = world ? reg->size : n;
    g->ranks = malloc(sizeof(int) * (size_t)g->n);
    g->q = calloc((size_t)g->n, sizeof *g->q);
    if (!g->ranks || !g->q) {
        free_group(g);
        return PCOLL_ERR_NOMEM;
    }
    for (int i = 0; i < g->n; i++) g->ranks[i] = world ? i : ranks[i];
    g->me = world ? reg->rank : me;
    g->world = world;
    g->hash = h;
    if (reg->count >= 2 * reg->nbuckets) grow(reg);
    int b = (int)(h % (uint64_t)reg->nbuckets);
    g->next = reg->buckets[b];
    reg->buckets[b] = g;
    reg->count++;
    *out = g;
    return PCOLL_SUCCESS;
}

int pc_groups_get(pc_group_registry_t *reg, const int *ranks, int n, const char *fn, pc_group_t **out)
{
    int world = ranks == NULL;
    if (!world && (n < 1 || n > reg->size)) { /* invalid for sure: let validate say why */
        int me;
        return pc_group_validate(ranks, n, reg->size, reg->rank, fn, &me);
    }
    uint64_t h = pc_group_hash(world, ranks, n);
    pc_group_t *g = find(reg, world, ranks, n, h);
    if (!g) {
        int me = reg->rank, rc;
        if (!world && (rc = pc_group_validate(ranks, n, reg->size, reg->rank, fn, &me)) != PCOLL_SUCCESS) return rc;
        if ((rc = add(reg, world, ranks, n, me, h, &g)) != PCOLL_SUCCESS)
            return pc_error(rc, fn, "no memory for the group's record");
    }
    g->users++;
    *out = g;
    return PCOLL_SUCCESS;
}

static void maybe_free(pc_group_registry_t *reg, pc_group_t *g)
{
    if (g->users > 0 || g->queued > 0) return;
    for (pc_group_t **pp = &reg->buckets[g->hash % (uint64_t)reg->nbuckets]; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            reg->count--;
            free_group(g);
            return;
        }
}

void pc_groups_put(pc_group_registry_t *reg, pc_group_t *g)
{
    if (!g) return;
    g->users--;
    maybe_free(reg, g);
}

int pc_groups_live(const pc_group_registry_t *reg) { return reg->count; }

int pc_group_index_of(const pc_group_t *g, int rank)
{
    if (g->world) return rank >= 0 && rank < g->n ? rank : -1;
    for (int i = 0; i < g->n; i++)
        if (g->ranks[i] == rank) return i;
    return -1;
}

static pc_hqueue_t *queue_of(pc_group_t *g, int j)
{
    if (!g->q[j] && (g->q[j] = calloc(1, sizeof *g->q[j]))) {
        g->q[j]->hellos.item = sizeof(pc_hello_t);
        g->q[j]->waiters.item = sizeof(void *);
    }
    return g->q[j];
}

pc_group_t *pc_groups_find(const pc_group_registry_t *reg, int world, const int *ranks, int n)
{
    if (!world && (n < 1 || n > reg->size)) return NULL;
    return find(reg, world, ranks, n, pc_group_hash(world, ranks, n));
}

int pc_groups_hello_in(pc_group_registry_t *reg, int world, const int *ranks, int n, int from, const pc_hello_t *h,
                       pc_group_t **out, int *jout, void **waiter)
{
    uint64_t hash = pc_group_hash(world, ranks, n);
    pc_group_t *g = find(reg, world, ranks, n, hash);
    if (!g) {
        int me = reg->rank;
        if (!world) {
            /* a list that is not a valid group with this rank in it: refused
             * without a message to the application (it called nothing) */
            if (n < 1 || n > reg->size) return -1;
            int seen_me = 0, ok = 1;
            for (int i = 0; i < n && ok; i++) {
                ok = ranks[i] >= 0 && ranks[i] < reg->size;
                for (int k = 0; k < i && ok; k++) ok = ranks[k] != ranks[i];
                if (ranks[i] == reg->rank) {
                    seen_me = 1;
                    me = i;
                }
            }
            if (!ok || !seen_me) return -1;
        }
        if (add(reg, world, ranks, n, me, hash, &g) != PCOLL_SUCCESS) return PCOLL_ERR_NOMEM;
    }
    int j = pc_group_index_of(g, from);
    if (j < 0 || j == g->me) {
        maybe_free(reg, g);
        return -1;
    }
    pc_hqueue_t *q = queue_of(g, j);
    if (!q) {
        maybe_free(reg, g);
        return PCOLL_ERR_NOMEM;
    }
    *out = g;
    *jout = j;
    if (q->waiters.len > 0) {
        fifo_pop(&q->waiters, waiter);
        return 1;
    }
    if (fifo_push(&q->hellos, h) != 0) {
        maybe_free(reg, g);
        return PCOLL_ERR_NOMEM;
    }
    g->queued++;
    return 0;
}

int pc_group_hello_take(pc_group_registry_t *reg, pc_group_t *g, int j, void *waiter, pc_hello_t *out)
{
    (void)reg;
    pc_hqueue_t *q = queue_of(g, j);
    if (!q) return PCOLL_ERR_NOMEM;
    if (q->hellos.len > 0 && q->waiters.len == 0) {
        fifo_pop(&q->hellos, out);
        g->queued--;
        return 1;
    }
    return fifo_push(&q->waiters, &waiter) == 0 ? 0 : PCOLL_ERR_NOMEM;
}
