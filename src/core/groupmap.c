#include "groupmap.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

static uint64_t hash_ranks(const int *ranks, int n)
{
    /* FNV-1a over the ranks, then a final mix */
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)ranks[i];
        h *= 1099511628211ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static pc_group_t *new_group(const int *ranks, int n, int me, uint64_t hash, uint32_t channel)
{
    pc_group_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->ranks = malloc(sizeof(int) * (size_t)n);
    if (!g->ranks) {
        free(g);
        return NULL;
    }
    memcpy(g->ranks, ranks, sizeof(int) * (size_t)n);
    g->n = n;
    g->me = me;
    g->hash = hash;
    g->channel = channel;
    return g;
}

static void free_group(pc_group_t *g)
{
    if (!g) return;
    free(g->ranks);
    free(g->busy);
    free(g);
}

int pc_groups_init(pc_group_registry_t *reg, int size, int rank, const pc_tags_t *tags)
{
    (void)tags;
    memset(reg, 0, sizeof *reg);
    reg->nbuckets = 64;
    reg->buckets = calloc((size_t)reg->nbuckets, sizeof *reg->buckets);
    int *all = malloc(sizeof(int) * (size_t)size);
    if (!reg->buckets || !all) {
        free(all);
        free(reg->buckets);
        return PCOLL_ERR_NOMEM;
    }
    for (int i = 0; i < size; i++) all[i] = i;
    reg->world = new_group(all, size, rank, 0, 0);
    free(all);
    return reg->world ? PCOLL_SUCCESS : PCOLL_ERR_NOMEM;
}

void pc_groups_destroy(pc_group_registry_t *reg)
{
    for (int b = 0; b < reg->nbuckets; b++) {
        pc_group_t *g = reg->buckets ? reg->buckets[b] : NULL;
        while (g) {
            pc_group_t *next = g->next;
            free_group(g);
            g = next;
        }
    }
    free(reg->buckets);
    free_group(reg->world);
    memset(reg, 0, sizeof *reg);
}

static int validate(const int *ranks, int n, int size, int rank, const char *fn, int *me)
{
    if (n < 1) return pc_error(PCOLL_ERR_GROUP, fn, "group_size is %d; a group needs at least one rank", n);
    unsigned char *seen = calloc((size_t)size, 1);
    if (!seen) return pc_error(PCOLL_ERR_NOMEM, fn, "no memory to check the group");
    int rc = PCOLL_SUCCESS;
    *me = -1;
    for (int i = 0; i < n && rc == PCOLL_SUCCESS; i++) {
        int r = ranks[i];
        if (r < 0 || r >= size)
            rc = pc_error(PCOLL_ERR_GROUP, fn, "group[%d] = %d is not a rank of the communicator (0..%d)", i, r,
                          size - 1);
        else if (seen[r])
            rc = pc_error(PCOLL_ERR_GROUP, fn, "rank %d appears twice in the group (again at group[%d])", r, i);
        else {
            seen[r] = 1;
            if (r == rank) *me = i;
        }
    }
    free(seen);
    if (rc == PCOLL_SUCCESS && *me < 0)
        rc = pc_error(PCOLL_ERR_GROUP, fn, "the calling rank %d is not a member of the group", rank);
    return rc;
}

static int grow(pc_group_registry_t *reg)
{
    int nb = reg->nbuckets * 2;
    pc_group_t **buckets = calloc((size_t)nb, sizeof *buckets);
    if (!buckets) return PCOLL_ERR_NOMEM;
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
    return PCOLL_SUCCESS;
}

int pc_groups_lookup(pc_group_registry_t *reg, const pc_tags_t *tags, int size, int rank, const int *ranks, int n,
                     const char *fn, pc_group_t **out)
{
    if (!ranks) {
        *out = reg->world;
        return PCOLL_SUCCESS;
    }
    if (n < 1 || n > size) { /* invalid for sure: let validate say why */
        int me;
        return validate(ranks, n, size, rank, fn, &me);
    }
    uint64_t h = hash_ranks(ranks, n);
    for (pc_group_t *g = reg->buckets[h % (uint64_t)reg->nbuckets]; g; g = g->next)
        if (g->hash == h && g->n == n && memcmp(g->ranks, ranks, sizeof(int) * (size_t)n) == 0) {
            *out = g;
            return PCOLL_SUCCESS;
        }
    int me;
    int rc = validate(ranks, n, size, rank, fn, &me);
    if (rc != PCOLL_SUCCESS) return rc;
    if (reg->count >= reg->nbuckets && grow(reg) != PCOLL_SUCCESS) return PCOLL_ERR_NOMEM;
    pc_group_t *g = new_group(ranks, n, me, h, pc_tags_group_channel(tags, h));
    if (!g) return PCOLL_ERR_NOMEM;
    int b = (int)(h % (uint64_t)reg->nbuckets);
    g->next = reg->buckets[b];
    reg->buckets[b] = g;
    reg->count++;
    *out = g;
    return PCOLL_SUCCESS;
}
