/*
 * Rabenseifner allreduce: reduce-scatter by recursive halving, then allgather
 * by recursive doubling (bandwidth-bound messages), any group size.
 *
 *   after folding (allreduce.c), p = 2^k survivors, vector of count elements:
 *
 *   halving, mask m = 1 .. p/2       v keeps one half of its current range,
 *     [.......|.......]               sends the other half to v XOR m and adds
 *     [...|...]   (v & m) == 0        what it receives into the half it keeps;
 *     [.|.]                           after k steps v owns ~count/p reduced
 *                                     elements.
 *   doubling, mask m = p/2 .. 1      v sends its reduced range to v XOR m and
 *                                     receives the partner's range next to it.
 *
 *   The nearest partners exchange the largest halves.  When the ranks of
 *   a node are next to each other in the group (MPI places ranks node by
 *   node by default), with L ranks per node (a power of two) the first
 *   log2 L halving steps and the last doubling steps stay inside the node,
 *   and what crosses a node's link is 2 (N - 1) / N of the vector for N
 *   nodes, as if one rank per node took part (farthest partners first
 *   sent twice that at 4 nodes x 2 ranks).
 *
 *   Each element is added up at exactly one rank and then copied, so every
 *   rank ends with the same bits.  Ranges of size 0 (count < p) send nothing
 *   on either side.  Tag steps: 0 fold, 1..k halving, k+1..2k doubling,
 *   2k+1 unfold.
 */
#include <stdlib.h>

#include "allreduce.h"

typedef struct range {
    size_t lo, hi;
} range_t;

void pc_build_rabenseifner(pc_sched_t *s, const pc_allreduce_spec_t *sp)
{
    size_t es = pcoll_dtype_size(sp->dtype);
    pc_fold_t f;
    pc_fold_init(&f, sp->n, sp->me);
    pc_ref_t cur = sp->inplace ? pc_ref(PC_SLOT_OUT, 0) : pc_ref(PC_SLOT_IN, 0);
    int last = pc_fold_pre(s, sp, &f, &cur, 0);
    if (f.extra) {
        pc_fold_post(s, sp, &f, last, 2 * f.k + 1);
        return;
    }
    int k = f.k;
    range_t *keep = calloc((size_t)k + 1, sizeof *keep);
    range_t *sent = calloc((size_t)k + 1, sizeof *sent);
    int *sent_step = calloc((size_t)k + 1, sizeof *sent_step);
    int *ag_steps = calloc(2 * (size_t)k + 1, sizeof *ag_steps);
    if (!keep || !sent || !sent_step || !ag_steps) {
        pc_sched_fail(s, PCOLL_ERR_NOMEM);
        goto out;
    }

    /* plan the halving ranges first, to size the two receive buffers */
    size_t lo = 0, hi = sp->count, tmp_elems[2] = {0, 0};
    for (int i = 0; i < k; i++) {
        int m = 1 << i;
        size_t mid = lo + (hi - lo) / 2;
        if ((f.v & m) == 0) {
            keep[i] = (range_t){lo, mid};
            sent[i] = (range_t){mid, hi};
        } else {
            keep[i] = (range_t){mid, hi};
            sent[i] = (range_t){lo, mid};
        }
        size_t ks = keep[i].hi - keep[i].lo;
        if (ks > tmp_elems[i % 2]) tmp_elems[i % 2] = ks;
        lo = keep[i].lo;
        hi = keep[i].hi;
    }
    int tmp[2] = {-1, -1}, reader[2] = {-1, -1};
    for (int x = 0; x < 2; x++)
        if (tmp_elems[x]) tmp[x] = pc_sched_scratch(s, tmp_elems[x] * es);

    for (int i = 0; i < k; i++) {
        int x = i % 2;
        int peer = pc_fold_index(&f, f.v ^ (1 << i));
        size_t ss = sent[i].hi - sent[i].lo, ks = keep[i].hi - keep[i].lo;
        sent_step[i] = -1;
        if (ss) {
            sent_step[i] = pc_sched_send(s, pc_ref(cur.slot, sent[i].lo * es), ss * es, peer, 1 + i);
            pc_sched_dep(s, last, sent_step[i]);
        }
        if (ks) {
            int rcv = pc_sched_recv(s, pc_ref((uint32_t)tmp[x], 0), ks * es, peer, 1 + i);
            int red = pc_sched_reduce(s, pc_ref(PC_SLOT_OUT, keep[i].lo * es), pc_ref(cur.slot, keep[i].lo * es),
                                      pc_ref((uint32_t)tmp[x], 0), ks, sp->dtype);
            pc_sched_dep(s, reader[x], rcv);
            pc_sched_dep(s, rcv, red);
            pc_sched_dep(s, last, red);
            reader[x] = red;
            last = red;
        }
        cur = pc_ref(PC_SLOT_OUT, 0);
    }

    /* doubling: undo the halving in reverse order */
    int nag = 0, prev = last;
    for (int j = 0; j < k; j++) {
        int i = k - 1 - j;
        int peer = pc_fold_index(&f, f.v ^ (1 << i));
        size_t mine = hi - lo, theirs = sent[i].hi - sent[i].lo;
        int snd = -1, rcv = -1;
        if (mine) {
            snd = pc_sched_send(s, pc_ref(PC_SLOT_OUT, lo * es), mine * es, peer, 1 + k + j);
            pc_sched_dep(s, prev, snd);
            ag_steps[nag++] = snd;
        }
        if (theirs) {
            rcv = pc_sched_recv(s, pc_ref(PC_SLOT_OUT, sent[i].lo * es), theirs * es, peer, 1 + k + j);
            pc_sched_dep(s, sent_step[i], rcv); /* that halving send read this region */
            pc_sched_dep(s, prev, rcv);
            ag_steps[nag++] = rcv;
            prev = rcv;
        }
        if (sent[i].lo < lo) lo = sent[i].lo;
        if (sent[i].hi > hi) hi = sent[i].hi;
    }
    int join = pc_sched_nop(s);
    pc_sched_dep(s, last, join);
    for (int a = 0; a < nag; a++) pc_sched_dep(s, ag_steps[a], join);
    last = pc_finish_avg(s, sp, join);
    pc_fold_post(s, sp, &f, last, 2 * k + 1);
out:
    free(keep);
    free(sent);
    free(sent_step);
    free(ag_steps);
}
