/* The leader's ledger of blocked calls: see park_ledger.h. */
#include "park_ledger.h"

#include <stdlib.h>

#include "pcoll.h"

void pc_park_ledger_init(pc_park_ledger_t *l, int size, uint32_t nchannels)
{
    l->size = size;
    l->nchannels = nchannels;
    l->blocked = NULL;
    l->watches = NULL;
    l->waiting = NULL;
}

void pc_park_ledger_destroy(pc_park_ledger_t *l)
{
    free(l->blocked);
    free(l->watches);
    l->blocked = NULL;
    l->watches = NULL;
    l->waiting = NULL;
}

int pc_park_ledger_watch(pc_park_ledger_t *l, pc_park_watch_t *w)
{
    if (!l->blocked && !(l->blocked = calloc((size_t)l->size, sizeof(int)))) return PCOLL_ERR_NOMEM;
    if (!l->watches && !(l->watches = calloc(l->nchannels, sizeof *l->watches))) return PCOLL_ERR_NOMEM;
    if (!(w->own = calloc((size_t)l->size, sizeof(int)))) return PCOLL_ERR_NOMEM;
    w->waiting = 0;
    w->next_waiting = NULL;
    l->watches[w->channel] = w;
    return PCOLL_SUCCESS;
}

void pc_park_ledger_unwatch(pc_park_ledger_t *l, pc_park_watch_t *w)
{
    if (!l->watches || w->channel >= l->nchannels || l->watches[w->channel] != w) return;
    pc_park_ledger_set_waiting(l, w, 0);
    l->watches[w->channel] = NULL;
    free(w->own);
    w->own = NULL;
}

void pc_park_ledger_set_waiting(pc_park_ledger_t *l, pc_park_watch_t *w, int on)
{
    if (w->waiting == (on != 0)) return;
    if (on) {
        w->next_waiting = l->waiting;
        l->waiting = w;
    } else {
        for (pc_park_watch_t **pp = &l->waiting; *pp; pp = &(*pp)->next_waiting)
            if (*pp == w) {
                *pp = w->next_waiting;
                break;
            }
        w->next_waiting = NULL;
    }
    w->waiting = on != 0;
}

static void add(int *count, int delta)
{
    *count += delta;
    if (*count < 0) *count = 0;
}

void pc_park_ledger_apply(pc_park_ledger_t *l, int src, int delta, uint64_t object, uint32_t channel)
{
    if (!l->blocked || src < 0 || src >= l->size) return; /* no object ever watched here */
    add(&l->blocked[src], delta);
    /* a call about an object that is gone here (freed since) counts only
     * in blocked[]: the id tells a reused channel apart */
    pc_park_watch_t *w = object && l->watches && channel < l->nchannels ? l->watches[channel] : NULL;
    if (w && w->object == object) add(&w->own[src], delta);
    /* only objects with a rank waiting can decide differently now */
    for (pc_park_watch_t *x = l->waiting, *next; x; x = next) {
        next = x->next_waiting; /* a decision may take x off the list */
        x->decide(x->arg);
    }
}

int pc_park_ledger_elsewhere(const pc_park_ledger_t *l, const pc_park_watch_t *w, int rank)
{
    return l->blocked && w->own && rank >= 0 && rank < l->size && l->blocked[rank] > w->own[rank];
}
