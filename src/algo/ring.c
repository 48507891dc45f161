/*
 * Ring allreduce: reduce-scatter around the ring, then allgather around it
 * (bandwidth-bound messages on groups that are not a power of two).
 *
 *   n blocks, rank i sends to i+1 and receives from i-1:
 *
 *   reduce-scatter, s = 0 .. n-2:  send block (i - s), receive block
 *                                  (i - s - 1) and add it in; afterwards
 *                                  block (i + 1) is complete at i.
 *   allgather,      t = 0 .. n-2:  send block (i + 1 - t), receive block
 *                                  (i - t) into place.
 *
 *     0 --> 1 --> 2 --> ... --> n-1
 *     ^--------------------------'
 *
 *   Every block is added up along one path and then copied, so every rank
 *   ends with the same bits.  Blocks of size 0 (count < n) are skipped on
 *   both sides.  Messages between a pair go out and are received in step
 *   order. Tag steps: s (reduce-scatter), n - 1 + t (allgather).
 */
#include <stdlib.h>

#include "allreduce.h"

static size_t block_lo(size_t count, int n, int b)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    return (size_t)b * base + ((size_t)b < rem ? (size_t)b : rem);
}

static size_t block_len(size_t count, int n, int b) { return block_lo(count, n, b + 1) - block_lo(count, n, b); }

static int mod(int a, int n) { return ((a % n) + n) % n; }

void pc_build_ring(pc_sched_t *s, const pc_allreduce_spec_t *sp)
{
    int n = sp->n, me = sp->me;
    size_t es = pcoll_dtype_size(sp->dtype), count = sp->count;
    int right = mod(me + 1, n), left = mod(me - 1, n);
    pc_ref_t cur = sp->inplace ? pc_ref(PC_SLOT_OUT, 0) : pc_ref(PC_SLOT_IN, 0);
    int *rs_send = calloc((size_t)n, sizeof *rs_send);
    int *ends = calloc(2 * (size_t)n + 1, sizeof *ends);
    if (!rs_send || !ends) {
        pc_sched_fail(s, PCOLL_ERR_NOMEM);
        goto out;
    }
    size_t maxblk = block_len(count, n, 0); /* block 0 is never smaller than the rest */
    int tmp[2] = {pc_sched_scratch(s, maxblk * es), n > 2 ? pc_sched_scratch(s, maxblk * es) : -1};
    int reader[2] = {-1, -1};
    int last = -1; /* the latest reduce: reduces run in order */
    for (int st = 0; st < n - 1; st++) {
        int sb = mod(me - st, n), rb = mod(me - st - 1, n), x = st % 2;
        size_t sl = block_len(count, n, sb), rl = block_len(count, n, rb);
        rs_send[st] = -1;
        if (sl) {
            pc_ref_t src = st == 0 ? pc_ref(cur.slot, block_lo(count, n, sb) * es)
                                   : pc_ref(PC_SLOT_OUT, block_lo(count, n, sb) * es);
            rs_send[st] = pc_sched_send(s, src, sl * es, right, st);
            pc_sched_dep(s, last, rs_send[st]);
        }
        if (rl) {
            size_t off = block_lo(count, n, rb) * es;
            int rcv = pc_sched_recv(s, pc_ref((uint32_t)tmp[x], 0), rl * es, left, st);
            int red = pc_sched_reduce(s, pc_ref(PC_SLOT_OUT, off), pc_ref(cur.slot, off), pc_ref((uint32_t)tmp[x], 0),
                                      rl, sp->dtype);
            pc_sched_dep(s, reader[x], rcv);
            pc_sched_dep(s, rcv, red);
            pc_sched_dep(s, last, red);
            reader[x] = red;
            last = red;
        }
    }
    int nends = 0, prev = last;
    if (last >= 0) ends[nends++] = last;
    for (int t = 0; t < n - 1; t++) {
        int sb = mod(me + 1 - t, n), rb = mod(me - t, n);
        size_t sl = block_len(count, n, sb), rl = block_len(count, n, rb);
        int snd = -1;
        if (sl) {
            snd = pc_sched_send(s, pc_ref(PC_SLOT_OUT, block_lo(count, n, sb) * es), sl * es, right, n - 1 + t);
            pc_sched_dep(s, prev, snd);
            ends[nends++] = snd;
        }
        if (rl) {
            int rcv = pc_sched_recv(s, pc_ref(PC_SLOT_OUT, block_lo(count, n, rb) * es), rl * es, left, n - 1 + t);
            pc_sched_dep(s, prev, rcv);
            pc_sched_dep(s, rs_send[t], rcv); /* that reduce-scatter send read this block */
            ends[nends++] = rcv;
            prev = rcv;
        }
    }
    if (sp->op == PCOLL_AVG) {
        int join = pc_sched_nop(s);
        for (int a = 0; a < nends; a++) pc_sched_dep(s, ends[a], join);
        pc_finish_avg(s, sp, join);
    }
out:
    free(rs_send);
    free(ends);
}
