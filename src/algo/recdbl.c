/*
 * Recursive doubling allreduce, any group size (latency-bound messages).
 *
 *   fold the extra ranks (allreduce.c), then for j = 0 .. k-1 every survivor
 *   v swaps its whole vector with v XOR 2^j and adds:
 *
 *     v:  0   1   2   3          j=0: 0<->1, 2<->3
 *         |<->|   |<->|          j=1: 0<->2, 1<->3
 *         |<----->|              after k steps every survivor holds the sum
 *             |<----->|
 *
 *   then send the result back to the folded ranks.  Both sides of a swap add
 *   the same two vectors (a + b == b + a in IEEE arithmetic), so every rank
 *   ends with the same bits.  Tag steps: 0 fold, 1 + j swap j, k + 1 unfold.
 */
#include "allreduce.h"

void pc_build_recdbl(pc_sched_t *s, const pc_allreduce_spec_t *sp)
{
    size_t bytes = sp->count * pcoll_dtype_size(sp->dtype);
    pc_fold_t f;
    pc_fold_init(&f, sp->n, sp->me);
    pc_ref_t cur = sp->inplace ? pc_ref(PC_SLOT_OUT, 0) : pc_ref(PC_SLOT_IN, 0);
    int last = pc_fold_pre(s, sp, &f, &cur, 0);
    if (f.extra) {
        pc_fold_post(s, sp, &f, last, f.k + 1);
        return;
    }
    int tmp[2] = {-1, -1};    /* two receive buffers, so swap j+1 can be posted early */
    int reader[2] = {-1, -1}; /* the last reduce that read each of them */
    for (int j = 0; j < f.k; j++) {
        int x = j % 2;
        if (tmp[x] < 0) tmp[x] = pc_sched_scratch(s, bytes);
        int peer = pc_rank_of(sp, pc_fold_index(&f, f.v ^ (1 << j)));
        int cur_is_out = cur.slot == PC_SLOT_OUT;
        int snd = pc_sched_send(s, cur, bytes, peer, 1 + j);
        int rcv = pc_sched_recv(s, pc_ref((uint32_t)tmp[x], 0), bytes, peer, 1 + j);
        int red = pc_sched_reduce(s, pc_ref(PC_SLOT_OUT, 0), cur, pc_ref((uint32_t)tmp[x], 0), sp->count, sp->dtype);
        pc_sched_dep(s, last, snd);
        pc_sched_dep(s, reader[x], rcv);
        pc_sched_dep(s, rcv, red);
        pc_sched_dep(s, last, red);
        if (cur_is_out) pc_sched_dep(s, snd, red); /* the send reads what the reduce overwrites */
        reader[x] = red;
        last = red;
        cur = pc_ref(PC_SLOT_OUT, 0);
    }
    last = pc_finish_avg(s, sp, last);
    pc_fold_post(s, sp, &f, last, f.k + 1);
}
