/*
 * Direct allreduce: one round for small messages on small groups.
 *
 *   every member sends its vector to every other member and receives theirs;
 *   then each rank adds the n vectors in group order:
 *
 *       0 ----> 1, 2, ... n-1        out = ((v0 + v1) + v2) + ... + v(n-1)
 *       1 ----> 0, 2, ... n-1
 *       ...
 *
 *   The same additions in the same order at every rank give the same bits.
 *   One message per pair, so a single tag step (0).  (n - 1) * bytes are sent
 *   per rank: the choice in allreduce.c limits it to latency-bound sizes, where
 *   one round beats log2(n) rounds of recursive doubling (each round costs a
 *   scheduling interval when ranks share cores).
 */
#include <stdlib.h>

#include "allreduce.h"

void pc_build_direct(pc_sched_t *s, const pc_allreduce_spec_t *sp)
{
    int n = sp->n, me = sp->me;
    size_t bytes = sp->count * pcoll_dtype_size(sp->dtype);
    pc_ref_t cur = sp->inplace ? pc_ref(PC_SLOT_OUT, 0) : pc_ref(PC_SLOT_IN, 0);
    /* all n vectors side by side; our own is copied in so that OUT is free */
    uint32_t all = (uint32_t)pc_sched_scratch(s, (size_t)n * bytes);
    int own = pc_sched_copy(s, pc_ref(all, (size_t)me * bytes), cur, bytes);
    int *rcv = calloc((size_t)n, sizeof *rcv);
    if (!rcv) {
        pc_sched_fail(s, PCOLL_ERR_NOMEM);
        return;
    }
    int join_sends = pc_sched_nop(s);
    for (int k = 1; k < n; k++) { /* post receives first, then send, both starting after our neighbour */
        int from = (me - k + n) % n;
        rcv[from] = pc_sched_recv(s, pc_ref(all, (size_t)from * bytes), bytes, from, 0);
    }
    rcv[me] = own;
    for (int k = 1; k < n; k++) {
        int to = (me + k) % n;
        int snd = pc_sched_send(s, pc_ref(all, (size_t)me * bytes), bytes, to, 0);
        pc_sched_dep(s, own, snd);
        pc_sched_dep(s, snd, join_sends);
    }
    int last = pc_sched_reduce(s, pc_ref(PC_SLOT_OUT, 0), pc_ref(all, 0), pc_ref(all, bytes), sp->count, sp->dtype);
    pc_sched_dep(s, rcv[0], last);
    pc_sched_dep(s, rcv[1], last);
    if (sp->inplace) pc_sched_dep(s, own, last); /* the copy read OUT */
    for (int i = 2; i < n; i++) {
        int red = pc_sched_reduce(s, pc_ref(PC_SLOT_OUT, 0), pc_ref(PC_SLOT_OUT, 0), pc_ref(all, (size_t)i * bytes),
                                  sp->count, sp->dtype);
        pc_sched_dep(s, last, red);
        pc_sched_dep(s, rcv[i], red);
        last = red;
    }
    int join = pc_sched_nop(s);
    pc_sched_dep(s, last, join);
    pc_sched_dep(s, join_sends, join); /* the sends read the scratch we own */
    pc_finish_avg(s, sp, join);
    free(rcv);
}
