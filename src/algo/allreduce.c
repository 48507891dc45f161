/*
 * Allreduce: algorithm choice, schedule assembly, and the pieces the three
 * algorithms share (folding a non-power-of-two group, averaging).
 *
 *   fold (n = 6 -> p = 4, r = 2):     i:  0   1   2   3   4   5
 *                                         |-->+   |-->+   |   |    pre-step
 *                                     v:      0       1   2   3
 *                                         ... allreduce among v ...
 *                                         +<--|   +<--|            post-step
 */
#include "allreduce.h"

pcoll_allreduce_algo_t pc_allreduce_choose(pc_algo_use_t use, pcoll_allreduce_algo_t forced,
                                           pcoll_allreduce_algo_t tuned, size_t direct_bytes, size_t small_bytes,
                                           size_t bytes, int n)
{
    /* Rabenseifner also for two ranks: each then adds up half the vector
     * (recursive doubling: all of it), and one addition per element has the
     * same bits either way */
    if (use == PC_USE_TREE) return bytes <= small_bytes ? PCOLL_ALGO_RECDBL : PCOLL_ALGO_RABENSEIFNER;
    if (forced != PCOLL_ALGO_AUTO) return forced;
    /* shm is the node-shared path's, which only blocking calls of all
     * ranks take (core/shm_allreduce.h): for the others, the rule */
    if (use == PC_USE_CALL && tuned != PCOLL_ALGO_AUTO && tuned != PCOLL_ALGO_SHM) return tuned;
    if (use == PC_USE_ROUND) direct_bytes = 0;
    /* direct sends n - 1 messages per rank: count each as its bytes plus
     * about 1 KiB of fixed cost, so that large groups fall back to log2(n)
     * messages per rank even for tiny vectors */
    if (n >= 3 && bytes + 1024 <= direct_bytes / (size_t)(n - 1)) return PCOLL_ALGO_DIRECT;
    if (n <= 2 || bytes <= small_bytes) return PCOLL_ALGO_RECDBL;
    if ((n & (n - 1)) == 0) return PCOLL_ALGO_RABENSEIFNER;
    return PCOLL_ALGO_RING;
}

int pc_allreduce_build(const pc_allreduce_spec_t *sp, pcoll_allreduce_algo_t algo, pc_sched_t **out)
{
    pc_sched_t *s = pc_sched_new();
    if (!s) return PCOLL_ERR_NOMEM;
    if (sp->no_data) pc_sched_set_virtual(s);
    size_t bytes = sp->count * pcoll_dtype_size(sp->dtype);
    if (sp->count == 0) {
        /* nothing to do: an empty schedule completes at once */
    } else if (sp->n == 1) {
        int last = sp->inplace ? -1 : pc_sched_copy(s, pc_ref(PC_SLOT_OUT, 0), pc_ref(PC_SLOT_IN, 0), bytes);
        (void)last; /* dividing by a group of one changes nothing */
    } else {
        switch (algo) {
        case PCOLL_ALGO_RABENSEIFNER: pc_build_rabenseifner(s, sp); break;
        case PCOLL_ALGO_RING: pc_build_ring(s, sp); break;
        case PCOLL_ALGO_DIRECT: pc_build_direct(s, sp); break;
        case PCOLL_ALGO_SHM: pc_build_shm(s, sp); break;
        default: pc_build_recdbl(s, sp); break;
        }
    }
    int rc = pc_sched_commit(s);
    if (rc != PCOLL_SUCCESS) {
        pc_sched_free(s);
        return rc;
    }
    *out = s;
    return PCOLL_SUCCESS;
}

void pc_fold_init(pc_fold_t *f, int n, int me)
{
    f->p = 1;
    f->k = 0;
    while (f->p * 2 <= n) {
        f->p *= 2;
        f->k++;
    }
    f->r = n - f->p;
    f->partner = -1;
    f->extra = 0;
    if (me < 2 * f->r) {
        f->extra = (me % 2 == 0);
        f->partner = f->extra ? me + 1 : me - 1;
        f->v = me / 2;
    } else {
        f->v = me - f->r;
    }
}

int pc_fold_index(const pc_fold_t *f, int v) { return v < f->r ? 2 * v + 1 : v + f->r; }

int pc_fold_pre(pc_sched_t *s, const pc_allreduce_spec_t *sp, const pc_fold_t *f, pc_ref_t *cur, int tagstep)
{
    size_t bytes = sp->count * pcoll_dtype_size(sp->dtype);
    if (f->partner < 0) return -1;
    int peer = f->partner;
    if (f->extra) return pc_sched_send(s, *cur, bytes, peer, tagstep);
    int tmp = pc_sched_scratch(s, bytes);
    int rcv = pc_sched_recv(s, pc_ref((uint32_t)tmp, 0), bytes, peer, tagstep);
    int red = pc_sched_reduce(s, pc_ref(PC_SLOT_OUT, 0), *cur, pc_ref((uint32_t)tmp, 0), sp->count, sp->dtype);
    pc_sched_dep(s, rcv, red);
    *cur = pc_ref(PC_SLOT_OUT, 0);
    return red;
}

int pc_fold_post(pc_sched_t *s, const pc_allreduce_spec_t *sp, const pc_fold_t *f, int after, int tagstep)
{
    size_t bytes = sp->count * pcoll_dtype_size(sp->dtype);
    if (f->partner < 0) return after;
    int peer = f->partner;
    int step = f->extra ? pc_sched_recv(s, pc_ref(PC_SLOT_OUT, 0), bytes, peer, tagstep)
                        : pc_sched_send(s, pc_ref(PC_SLOT_OUT, 0), bytes, peer, tagstep);
    /* an extra rank working in place must not overwrite its data before it left */
    pc_sched_dep(s, after, step);
    return step;
}

int pc_finish_avg(pc_sched_t *s, const pc_allreduce_spec_t *sp, int after)
{
    if (sp->op != PCOLL_AVG) return after;
    int sc = pc_sched_scale(s, pc_ref(PC_SLOT_OUT, 0), sp->count, sp->dtype, sp->n);
    pc_sched_dep(s, after, sc);
    return sc;
}
