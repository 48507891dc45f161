/*
 * The leader's ledger of blocked calls (partial/park_ledger.c):
 *   - a rank is parked for an object exactly when it is in a blocking call
 *     about something else (another object, or none): checked against a
 *     model that keeps every open call, over random begins and ends of 6
 *     ranks about 4 objects, with objects freed and their channels reused
 *     by new objects (a call about the old object counts as elsewhere);
 *   - counts never go below zero (an end whose begin was not seen);
 *   - every change asks each waiting watch, and only those, to decide
 *     again, once; a decision may take its own watch off the list; an
 *     unwatched object is never asked;
 *   - nothing is counted before the first watch.
 */
#include <string.h>

#include "partial/park_ledger.h"
#include "pcoll.h"
#include "unit_check.h"

#define RANKS 6
#define CHANNELS 4

typedef struct watcher {
    pc_park_watch_t w;
    pc_park_ledger_t *ledger;
    int asked;
    int leave; /* take the watch off the waiting list when asked */
} watcher_t;

static void decide(void *arg)
{
    watcher_t *x = arg;
    x->asked++;
    if (x->leave) pc_park_ledger_set_waiting(x->ledger, &x->w, 0);
}

static void watch(pc_park_ledger_t *l, watcher_t *x, uint64_t object, uint32_t channel)
{
    memset(x, 0, sizeof *x);
    x->w.object = object;
    x->w.channel = channel;
    x->w.decide = decide;
    x->w.arg = x;
    x->ledger = l;
    CHECK(pc_park_ledger_watch(l, &x->w) == PCOLL_SUCCESS);
}

static void basics(void)
{
    pc_park_ledger_t l;
    pc_park_ledger_init(&l, RANKS, CHANNELS);
    pc_park_ledger_apply(&l, 1, 1, 0, 0); /* before any watch: not counted */
    watcher_t a, b;
    watch(&l, &a, 11, 2);
    watch(&l, &b, 12, 3);
    CHECK(!pc_park_ledger_elsewhere(&l, &a.w, 1));
    pc_park_ledger_apply(&l, 1, 1, 11, 2); /* rank 1 waits for a */
    CHECK(!pc_park_ledger_elsewhere(&l, &a.w, 1) && pc_park_ledger_elsewhere(&l, &b.w, 1));
    pc_park_ledger_apply(&l, 1, 1, 0, 0); /* and in a call about nothing */
    CHECK(pc_park_ledger_elsewhere(&l, &a.w, 1));
    pc_park_ledger_apply(&l, 1, -1, 0, 0);
    pc_park_ledger_apply(&l, 1, -1, 11, 2);
    CHECK(!pc_park_ledger_elsewhere(&l, &a.w, 1) && !pc_park_ledger_elsewhere(&l, &b.w, 1));
    /* an end without its begin: the counts stay at zero */
    pc_park_ledger_apply(&l, 2, -1, 12, 3);
    pc_park_ledger_apply(&l, 2, 1, 11, 2);
    CHECK(pc_park_ledger_elsewhere(&l, &b.w, 2) && !pc_park_ledger_elsewhere(&l, &a.w, 2));
    pc_park_ledger_apply(&l, 2, -1, 11, 2);
    /* out-of-range ranks are ignored */
    pc_park_ledger_apply(&l, RANKS, 1, 0, 0);
    pc_park_ledger_apply(&l, -1, 1, 0, 0);
    CHECK(!pc_park_ledger_elsewhere(&l, &a.w, RANKS) && !pc_park_ledger_elsewhere(&l, &a.w, -1));

    /* the waiting list */
    pc_park_ledger_set_waiting(&l, &a.w, 1);
    pc_park_ledger_set_waiting(&l, &a.w, 1); /* twice: once on the list */
    pc_park_ledger_apply(&l, 0, 1, 0, 0);
    CHECK(a.asked == 1 && b.asked == 0);
    pc_park_ledger_set_waiting(&l, &b.w, 1);
    a.leave = 1;
    pc_park_ledger_apply(&l, 0, -1, 0, 0);
    CHECK(a.asked == 2 && b.asked == 1 && !a.w.waiting && b.w.waiting);
    pc_park_ledger_apply(&l, 3, 1, 0, 0);
    CHECK(a.asked == 2 && b.asked == 2);
    b.leave = 1; /* the only one on the list leaves */
    pc_park_ledger_apply(&l, 3, -1, 0, 0);
    CHECK(b.asked == 3 && !b.w.waiting && l.waiting == NULL);
    /* unwatch takes a waiting watch off the list */
    pc_park_ledger_set_waiting(&l, &b.w, 1);
    b.leave = 0;
    pc_park_ledger_unwatch(&l, &b.w);
    pc_park_ledger_unwatch(&l, &b.w); /* twice: nothing */
    pc_park_ledger_apply(&l, 3, 1, 0, 0);
    CHECK(b.asked == 3 && b.w.own == NULL && l.waiting == NULL);
    pc_park_ledger_unwatch(&l, &a.w);
    pc_park_ledger_destroy(&l);
}

/* the model: every open call of every rank */
typedef struct call {
    int rank;
    uint64_t object;
    uint32_t channel;
} call_t;

static unsigned rng = 7;
static int pick(int n)
{
    rng = rng * 1103515245u + 12345u;
    return (int)((rng >> 8) % (unsigned)n);
}

static void against_model(void)
{
    pc_park_ledger_t l;
    pc_park_ledger_init(&l, RANKS, CHANNELS);
    watcher_t x[CHANNELS];
    uint64_t next_object = 100;
    for (uint32_t c = 0; c < CHANNELS; c++) watch(&l, &x[c], next_object++, c);
    call_t open[4096];
    int nopen = 0;
    for (int step = 0; step < 30000; step++) {
        int what = pick(10);
        if (what < 4 && nopen < 4096) { /* a call begins: about a live object, an old one, or none */
            call_t k = {pick(RANKS), 0, 0};
            int about = pick(6);
            if (about < CHANNELS) {
                k.channel = (uint32_t)about;
                k.object = x[about].w.object - (uint64_t)(pick(4) == 0); /* sometimes the freed one before */
            }
            open[nopen++] = k;
            pc_park_ledger_apply(&l, k.rank, 1, k.object, k.channel);
        } else if (what < 9 && nopen > 0) { /* a call ends */
            int i = pick(nopen);
            call_t k = open[i];
            open[i] = open[--nopen];
            pc_park_ledger_apply(&l, k.rank, -1, k.object, k.channel);
        } else if (what == 9) { /* an object is freed, a new one takes its channel */
            uint32_t c = (uint32_t)pick(CHANNELS);
            uint64_t old = x[c].w.object;
            pc_park_ledger_unwatch(&l, &x[c].w);
            watch(&l, &x[c], next_object++, c);
            /* the calls about the freed object count as calls about
             * something else from now on, for every object */
            for (int i = 0; i < nopen; i++)
                if (open[i].channel == c && open[i].object == old) open[i].object = 0;
        }
        for (int c = 0; c < CHANNELS; c++)
            for (int r = 0; r < RANKS; r++) {
                int blocked = 0, own = 0;
                for (int i = 0; i < nopen; i++)
                    if (open[i].rank == r) {
                        blocked++;
                        own += open[i].object == x[c].w.object && open[i].channel == (uint32_t)c;
                    }
                CHECK(pc_park_ledger_elsewhere(&l, &x[c].w, r) == (blocked > own));
            }
    }
    for (int c = 0; c < CHANNELS; c++) pc_park_ledger_unwatch(&l, &x[c].w);
    pc_park_ledger_destroy(&l);
}

int main(void)
{
    basics();
    against_model();
    printf("test_park: %ld checks passed\n", checks);
    return 0;
}
