#include "doorbell.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../core/log.h"
#include "pcoll.h"

/* one cache line per rank: ringing one rank does not disturb another */
typedef struct bell {
    _Atomic uint32_t seq;      /* the futex word: bumped by every ring        */
    _Atomic uint32_t sleeping; /* per sleeper (pc_sleeper_t) two bits: its
                                  pc_sleep_mode_t, shifted by 2 * sleeper     */
    _Atomic uint32_t holder;   /* the pc_sleeper_t that answers rings         */
    _Atomic uint32_t ctrl;     /* control messages sent to this rank          */
    char pad[48];
} bell_t;

#define MODE_BITS(who, mode) ((uint32_t)(mode) << (2 * (who)))
#define ANY_MODE(who) MODE_BITS(who, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE)
#define FUTEX_BITS(who) (1u << (who))

struct pc_doorbells {
    bell_t *mine;
    bell_t **peer; /* by rank in comm; NULL: not on this node */
    int size;
    int shared;    /* the bells live in node-shared memory */
    int all_local;
    MPI_Win win;
    MPI_Comm node;
};

/* FUTEX_*_BITSET: a wake names the sleepers it is for (FUTEX_BITS) */
static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *timeout, uint32_t bits)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, timeout, NULL, bits);
}

/* Shared bells for the node's ranks; 0 on success. */
static int share(pc_doorbells_t *d, MPI_Comm comm)
{
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &d->node) != MPI_SUCCESS) return -1;
    int local_size, local_rank, ok = 1;
    MPI_Comm_size(d->node, &local_size);
    MPI_Comm_rank(d->node, &local_rank);
    void *base = NULL;
    if (MPI_Win_allocate_shared((MPI_Aint)sizeof(bell_t), (int)sizeof(bell_t), MPI_INFO_NULL, d->node, &base,
                                &d->win) != MPI_SUCCESS) {
        MPI_Comm_free(&d->node);
        return -1;
    }
    d->mine = base;
    atomic_store(&d->mine->seq, 0);
    atomic_store(&d->mine->sleeping, 0);
    atomic_store(&d->mine->holder, PC_SLEEPER_THREAD);
    atomic_store(&d->mine->ctrl, 0);
    MPI_Group g_comm, g_node;
    MPI_Comm_group(comm, &g_comm);
    MPI_Comm_group(d->node, &g_node);
    for (int lr = 0; lr < local_size && ok; lr++) {
        MPI_Aint bytes;
        int disp;
        void *ptr = NULL;
        int cr = MPI_UNDEFINED;
        if (MPI_Win_shared_query(d->win, lr, &bytes, &disp, &ptr) != MPI_SUCCESS || !ptr) ok = 0;
        MPI_Group_translate_ranks(g_node, 1, &lr, g_comm, &cr);
        if (ok && cr != MPI_UNDEFINED) d->peer[cr] = ptr;
    }
    MPI_Group_free(&g_comm);
    MPI_Group_free(&g_node);
    /* agree: if any rank failed, nobody uses shared bells */
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, d->node);
    MPI_Barrier(d->node); /* every bell initialized before anyone rings */
    if (!all_ok) {
        MPI_Win_free(&d->win);
        MPI_Comm_free(&d->node);
        memset(d->peer, 0, sizeof(bell_t *) * (size_t)d->size);
        return -1;
    }
    d->shared = 1;
    d->all_local = local_size == d->size;
    return 0;
}

int pc_doorbells_create(MPI_Comm comm, pc_doorbells_t **out)
{
    pc_doorbells_t *d = calloc(1, sizeof *d);
    if (!d) return PCOLL_ERR_NOMEM;
    MPI_Comm_size(comm, &d->size);
    d->peer = calloc((size_t)d->size, sizeof(bell_t *));
    if (!d->peer) {
        free(d);
        return PCOLL_ERR_NOMEM;
    }
    d->node = MPI_COMM_NULL;
    d->win = MPI_WIN_NULL;
    if (share(d, comm) != 0) {
        pc_log(PCOLL_LOG_INFO, "no node-shared memory for doorbells: idle waits poll with pauses");
        d->mine = calloc(1, sizeof(bell_t));
        if (!d->mine) {
            free(d->peer);
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
    if (d->shared) {
        MPI_Win_free(&d->win);
        MPI_Comm_free(&d->node);
    } else {
        free(d->mine);
    }
    free(d->peer);
    free(d);
}

int pc_doorbells_all_local(const pc_doorbells_t *d) { return d->shared && d->all_local; }

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
    if (peer < 0 || peer >= d->size || !d->peer[peer]) return;
    atomic_fetch_add(&d->peer[peer]->ctrl, 1);
    ring(d->peer[peer], 1, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE);
}

void pc_doorbell_nudge(pc_doorbells_t *d, int peer)
{
    if (peer >= 0 && peer < d->size && d->peer[peer]) ring(d->peer[peer], 1, PC_SLEEP_IDLE | PC_SLEEP_ACTIVE);
}

uint32_t pc_doorbell_ctrl_sent(const pc_doorbells_t *d) { return atomic_load(&d->mine->ctrl); }

void pc_doorbell_ring_data(pc_doorbells_t *d, int peer)
{
    if (peer < 0 || peer >= d->size || !d->peer[peer]) return;
    bell_t *b = d->peer[peer];
    pc_sleeper_t who = (pc_sleeper_t)atomic_load(&b->holder);
    /* nobody of an idle rank is woken for data it is not waiting for */
    if (atomic_load(&b->sleeping) & MODE_BITS(who, PC_SLEEP_ACTIVE)) ring(b, 1, PC_SLEEP_ACTIVE);
}
