#include "doorbell.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../util/log.h"
#include "nodemem.h"
#include "pcoll.h"

/* one cache line per rank: ringing one rank does not disturb another */
typedef struct bell {
    _Atomic uint32_t seq;      /* the futex word: bumped by every ring        */
    _Atomic uint32_t sleeping; /* per sleeper (pc_sleeper_t) two bits: its
                                  pc_sleep_mode_t, shifted by 2 * sleeper     */
    _Atomic uint32_t holder;   /* the pc_sleeper_t that answers rings         */
    _Atomic uint32_t ctrl;     /* control messages sent to this rank          */
    char pad[48];
    _Atomic uint64_t kick_summary; /* bit w: kick[w] may be nonzero          */
    char pad2[56];
    _Atomic uint64_t kick[PC_KICK_KEYS / 64];
} bell_t;
_Static_assert(PC_KICK_KEYS / 64 <= 64, "one summary word covers the kick words");

#define MODE_BITS(who, mode) ((uint32_t)(mode) << (2 * (who)))
#define ANY_MODE(who) MODE_BITS(who, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE)
#define FUTEX_BITS(who) (1u << (who))

struct pc_doorbells {
    bell_t *mine;
    int size, me;
    int shared;     /* the bells live in node-shared memory */
    int all_local;
    pc_nodemem_t mem; /* when shared: mem.seg[rank] is that rank's bell (NULL: not on this node) */
};

static bell_t *peer_bell(const pc_doorbells_t *d, int peer)
{
    return d->shared && peer >= 0 && peer < d->size ? d->mem.seg[peer] : NULL;
}

/* FUTEX_*_BITSET: a wake names the sleepers it is for (FUTEX_BITS) */
static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *timeout, uint32_t bits)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, timeout, NULL, bits);
}

int pc_doorbells_create(MPI_Comm comm, MPI_Comm node, pc_doorbells_t **out)
{
    pc_doorbells_t *d = calloc(1, sizeof *d);
    if (!d) return PCOLL_ERR_NOMEM;
    MPI_Comm_size(comm, &d->size);
    MPI_Comm_rank(comm, &d->me);
    int me = d->me;
    /* a zeroed bell: seq 0, nobody sleeping, the thread answers, no control messages */
    _Static_assert(PC_SLEEPER_THREAD == 0, "a zeroed bell must name the progress thread");
    if (pc_nodemem_create(comm, node, sizeof(bell_t), 1, &d->mem) == 0) {
        d->shared = 1;
        d->all_local = d->mem.local_size == d->size;
        d->mine = peer_bell(d, me);
    } else {
        pc_log(PCOLL_LOG_INFO, "no node-shared memory for doorbells: idle waits poll with pauses");
        d->mine = calloc(1, sizeof(bell_t));
        if (!d->mine) {
            free(d);
            return PCOLL_ERR_NOMEM;
        }
    }
    *out = d;
    return PCOLL_SUCCESS;
}

void pc_doorbells_destroy(pc_doorbells_t *d)
{
    if (!d) return;
    if (d->shared)
        pc_nodemem_destroy(&d->mem);
    else
        free(d->mine);
    free(d);
}

int pc_doorbells_all_local(const pc_doorbells_t *d) { return d->shared && d->all_local; }

int pc_doorbells_reachable(const pc_doorbells_t *d, int peer) { return peer_bell(d, peer) != NULL; }

uint32_t pc_doorbell_seq(const pc_doorbells_t *d) { return atomic_load(&d->mine->seq); }

void pc_doorbell_sleep(pc_doorbells_t *d, uint32_t seq, long timeout_us, pc_sleep_mode_t mode, pc_sleeper_t who)
{
    struct timespec ts, *tp = NULL;
    if (timeout_us >= 0) { /* the bitset wait takes an absolute CLOCK_MONOTONIC time */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long ns = ts.tv_nsec + (timeout_us % 1000000) * 1000;
        ts.tv_sec += timeout_us / 1000000 + ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        tp = &ts;
    }
    int op = d->shared ? FUTEX_WAIT_BITSET : FUTEX_WAIT_BITSET_PRIVATE;
    /* pairs with ring(): either it sees us sleeping and wakes us, or we see
     * its new seq and do not sleep (the kernel compares seq atomically) */
    atomic_fetch_or(&d->mine->sleeping, MODE_BITS(who, mode));
    if (atomic_load(&d->mine->seq) == seq) futex(&d->mine->seq, op, seq, tp, FUTEX_BITS(who));
    atomic_fetch_and(&d->mine->sleeping, ~ANY_MODE(who));
}

void pc_doorbell_set_holder(pc_doorbells_t *d, pc_sleeper_t who) { atomic_store(&d->mine->holder, (uint32_t)who); }

static void wake_if_sleeping(bell_t *b, int shared, pc_sleeper_t who, uint32_t modes)
{
    if (atomic_load(&b->sleeping) & MODE_BITS(who, modes))
        futex(&b->seq, shared ? FUTEX_WAKE_BITSET : FUTEX_WAKE_BITSET_PRIVATE, 1, NULL, FUTEX_BITS(who));
}

/* Bumps seq, then wakes the holder if it sleeps in one of `modes` (for the
 * order see pc_doorbell_sleep).  Should the holder change meanwhile, the
 * one handing the token back compares seq afterwards and wakes the thread
 * (progress.c): the bump comes before the holder is read for that. */
static void ring(bell_t *b, int shared, uint32_t modes)
{
    atomic_fetch_add(&b->seq, 1);
    wake_if_sleeping(b, shared, (pc_sleeper_t)atomic_load(&b->holder), modes);
}

void pc_doorbell_ring_self(pc_doorbells_t *d) { ring(d->mine, d->shared, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE); }

void pc_doorbell_wake_thread(pc_doorbells_t *d)
{
    atomic_fetch_add(&d->mine->seq, 1);
    wake_if_sleeping(d->mine, d->shared, PC_SLEEPER_THREAD, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE);
}

void pc_doorbell_ring(pc_doorbells_t *d, int peer)
{
    bell_t *b = peer_bell(d, peer);
    if (!b) return;
    atomic_fetch_add(&b->ctrl, 1);
    ring(b, 1, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE);
}

void pc_doorbell_nudge(pc_doorbells_t *d, int peer)
{
    bell_t *b = peer_bell(d, peer);
    if (b) ring(b, 1, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE);
}

uint32_t pc_doorbell_ctrl_sent(const pc_doorbells_t *d) { return atomic_load(&d->mine->ctrl); }

void pc_doorbell_ring_data(pc_doorbells_t *d, int peer)
{
    bell_t *b = peer_bell(d, peer);
    if (!b) return;
    pc_sleeper_t who = (pc_sleeper_t)atomic_load(&b->holder);
    /* nobody of an idle rank is woken for data it is not waiting for */
    if (atomic_load(&b->sleeping) & MODE_BITS(who, PC_SLEEP_ACTIVE)) ring(b, 1, PC_SLEEP_ACTIVE);
}

int pc_doorbell_kick(pc_doorbells_t *d, int peer, int key, int do_ring)
{
    bell_t *b = peer_bell(d, peer);
    if (!b && peer == d->me) b = d->mine;
    if (!b || key < 0 || key >= PC_KICK_KEYS) return 0;
    atomic_fetch_or(&b->kick[key / 64], 1ULL << (key % 64));
    atomic_fetch_or(&b->kick_summary, 1ULL << (key / 64));
    if (do_ring) ring(b, d->shared, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE);
    return 1;
}

int pc_doorbell_kicked(const pc_doorbells_t *d) { return atomic_load(&d->mine->kick_summary) != 0; }

int pc_doorbell_take_kicks(pc_doorbells_t *d, void (*fn)(void *arg, int key), void *arg)
{
    bell_t *b = d->mine;
    if (!atomic_load_explicit(&b->kick_summary, memory_order_relaxed)) return 0;
    /* a kick that sets its word after we took it sets the summary again */
    uint64_t words = atomic_exchange(&b->kick_summary, 0);
    int n = 0;
    for (int w = 0; words; w++, words >>= 1) {
        if (!(words & 1)) continue;
        uint64_t bits = atomic_exchange(&b->kick[w], 0);
        for (int k = 0; bits; k++, bits >>= 1)
            if (bits & 1) {
                fn(arg, w * 64 + k);
                n++;
            }
    }
    return n;
}
