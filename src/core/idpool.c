#include "idpool.h"

#include <stdlib.h>

void pc_idpool_init(pc_idpool_t *p, uint32_t limit)
{
    p->limit = limit;
    p->next = 0;
    p->ring = NULL;
    p->head = p->len = p->cap = 0;
}

void pc_idpool_destroy(pc_idpool_t *p)
{
    free(p->ring);
    p->ring = NULL;
    p->head = p->len = p->cap = 0;
}

int pc_idpool_get(pc_idpool_t *p, uint32_t *id)
{
    if (p->next < p->limit) {
        *id = p->next++;
        return 0;
    }
    if (p->len == 0) return -1;
    *id = p->ring[p->head];
    p->head = (p->head + 1) % p->cap;
    p->len--;
    return 0;
}

void pc_idpool_put(pc_idpool_t *p, uint32_t id)
{
    if (p->len == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        uint32_t *r = malloc(sizeof *r * cap);
        if (!r) return; /* the id is lost: fewer ids, never a wrong one */
        for (size_t i = 0; i < p->len; i++) r[i] = p->ring[(p->head + i) % p->cap];
        free(p->ring);
        p->ring = r;
        p->head = 0;
        p->cap = cap;
    }
    p->ring[(p->head + p->len) % p->cap] = id;
    p->len++;
}

uint32_t pc_idpool_in_use(const pc_idpool_t *p) { return p->next - (uint32_t)p->len; }
