/* The node-shared data phase of partial rounds: see shm_phase.h. */
#include "shm_phase.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/nodemem.h"
#include "../engine/reduce.h"

#define LINE 64

/* the head of every rank's segment */
typedef struct rank_ctl {
    atomic_uint want[2]; /* the application waits for the slot's round */
    char pad[LINE - 2 * sizeof(atomic_uint)];
} rank_ctl_t;

/* after rank 0's deposits: the rounds' shared state */
typedef struct round_ctl {
    atomic_uint arrived[2]; /* parts deposited for the slot's round */
    char pad1[LINE - 2 * sizeof(atomic_uint)];
    atomic_ullong done[2]; /* the slot's last round done, plus one */
    char pad2[LINE - 2 * sizeof(atomic_ullong)];
} round_ctl_t;

struct pc_shm_phase {
    pc_nodemem_t mem; /* mem.seg[rank]: that rank's segment */
    int P, me;
    size_t count, bytes, stride;
    pcoll_dtype_t dtype;
    round_ctl_t *rc;
    unsigned char *result[2];
};

static rank_ctl_t *ctl_of(const pc_shm_phase_t *s, int rank) { return s->mem.seg[rank]; }

static unsigned char *deposit_of(const pc_shm_phase_t *s, int rank, int slot)
{
    return (unsigned char *)s->mem.seg[rank] + sizeof(rank_ctl_t) + (size_t)slot * s->stride;
}

int pc_shm_phase_create(MPI_Comm comm, int use, size_t count, pcoll_dtype_t dtype, pc_shm_phase_t **out)
{
    *out = NULL;
    pc_shm_phase_t *s = calloc(1, sizeof *s);
    int P, me;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &me);
    size_t bytes = count * pcoll_dtype_size(dtype), stride = (bytes + LINE - 1) / LINE * LINE;
    /* rank 0's segment also holds the rounds' state and results (zeroed: no round done) */
    size_t mine = sizeof(rank_ctl_t) + 2 * stride + (me == 0 ? sizeof(round_ctl_t) + 2 * stride : 0);
    pc_nodemem_t mem; /* collective: taken part in even without memory for s */
    int made = pc_nodemem_create(comm, mine, use && s && P >= 2, &mem) == 0;
    /* every rank takes the same path: all of comm on one node, everywhere */
    int ok = made && mem.local_size == P, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        if (made) pc_nodemem_destroy(&mem);
        free(s);
        return PCOLL_SUCCESS;
    }
    s->mem = mem;
    s->P = P;
    s->me = me;
    s->count = count;
    s->dtype = dtype;
    s->bytes = bytes;
    s->stride = stride;
    s->rc = (round_ctl_t *)deposit_of(s, 0, 2);
    s->result[0] = (unsigned char *)(s->rc + 1);
    s->result[1] = s->result[0] + s->stride;
    *out = s;
    return PCOLL_SUCCESS;
}

void pc_shm_phase_destroy(pc_shm_phase_t *s)
{
    if (!s) return;
    pc_nodemem_destroy(&s->mem);
    free(s);
}

static void take_result(const pc_shm_phase_t *s, int slot, void *buf)
{
    memcpy(buf, s->result[slot], s->bytes);
    atomic_store_explicit(&ctl_of(s, s->me)->want[slot], 0, memory_order_relaxed);
}

int pc_shm_phase_start(pc_shm_phase_t *s, pc_engine_t *e, uint64_t round, void *buf)
{
    int slot = (int)(round % 2);
    memcpy(deposit_of(s, s->me, slot), buf, s->bytes);
    /* acq_rel: the last arrival sees every deposit */
    if (atomic_fetch_add_explicit(&s->rc->arrived[slot], 1, memory_order_acq_rel) + 1 != (unsigned)s->P) return 0;
    unsigned char *res = s->result[slot];
    pc_reduce_sum(res, deposit_of(s, 0, slot), deposit_of(s, 1, slot), s->count, s->dtype);
    for (int j = 2; j < s->P; j++) pc_reduce_sum(res, res, deposit_of(s, j, slot), s->count, s->dtype);
    atomic_store_explicit(&s->rc->arrived[slot], 0, memory_order_relaxed); /* for round + 2 */
    /* seq_cst store, then seq_cst loads of want: a waiter either sees done or
     * is seen here (it stores want before loading done) */
    atomic_store(&s->rc->done[slot], round + 1);
    for (int j = 0; j < s->P; j++)
        if (j != s->me && atomic_load(&ctl_of(s, j)->want[slot])) pc_engine_nudge(e, j);
    take_result(s, slot, buf);
    return 1;
}

int pc_shm_phase_poll(pc_shm_phase_t *s, uint64_t round, void *buf, int want)
{
    int slot = (int)(round % 2);
    if (atomic_load_explicit(&s->rc->done[slot], memory_order_acquire) > round) {
        take_result(s, slot, buf);
        return 1;
    }
    if (!want) return 0;
    atomic_store(&ctl_of(s, s->me)->want[slot], 1);
    if (atomic_load(&s->rc->done[slot]) > round) {
        take_result(s, slot, buf);
        return 1;
    }
    return 0;
}
