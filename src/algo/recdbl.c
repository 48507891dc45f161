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
 *
 *   The sums alternate between OUT and a scratch vector, ending in OUT:
 *   step j overwrites what step j - 1 sent, never what step j sends, so a
 *   send need not have completed before the next addition (above MPI's
 *   eager limit a send completes only once the peer has taken the data).
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
    if (f.k == 0) return;
    pc_ref_t out = pc_ref(PC_SLOT_OUT, 0), acc = pc_ref((uint32_t)pc_sched_scratch(s, bytes), 0);
    /* step j writes OUT when k - 1 - j is even; step 0 must not write what it sends */
    if (cur.slot == PC_SLOT_OUT && (f.k - 1) % 2 == 0) {
        int cp = pc_sched_copy(s, acc, out, bytes);
        pc_sched_dep(s, last, cp);
        last = cp;
        cur = acc;
    }
    int tmp[2] = {-1, -1};    /* two receive buffers, so swap j+1 can be posted early */
    int reader[2] = {-1, -1}; /* the last reduce that read each of them */
    int prev_send = -1;       /* it reads what this step's addition overwrites */
    for (int j = 0; j < f.k; j++) {
        int x = j % 2;
        if (tmp[x] < 0) tmp[x] = pc_sched_scratch(s, bytes);
        pc_ref_t dst = (f.k - 1 - j) % 2 == 0 ? out : acc;
        int peer = pc_fold_index(&f, f.v ^ (1 << j));
        int snd = pc_sched_send(s, cur, bytes, peer, 1 + j);
        int rcv = pc_sched_recv(s, pc_ref((uint32_t)tmp[x], 0), bytes, peer, 1 + j);
        int red = pc_sched_reduce(s, dst, cur, pc_ref((uint32_t)tmp[x], 0), sp->count, sp->dtype);
        pc_sched_dep(s, last, snd);
        pc_sched_dep(s, reader[x], rcv);
        pc_sched_dep(s, rcv, red);
        pc_sched_dep(s, last, red);
        pc_sched_dep(s, prev_send, red);
        reader[x] = red;
        last = red;
        prev_send = snd;
        cur = dst;
    }
    last = pc_finish_avg(s, sp, last);
    pc_fold_post(s, sp, &f, last, f.k + 1);
}
