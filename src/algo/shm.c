/*
 * Node-shared allreduce as a schedule (plans of members on one node): the
 * layout and the sums of core/shm_allreduce.c, driven by the engine.
 * Member i's two slots are external slots (pc_shm_slot_id), bound per run;
 * barriers are PC_STEP_BARRIER steps on the members' shared counter.
 *
 *   latency path (one piece):
 *     copy IN -> slot(me) --> barrier 1 --> OUT = slot(0) + slot(1) + ... (/ n)
 *
 *   slice path, piece j in slot q = j % 2 (slices: whole cache lines):
 *     copy IN[piece] -> slot(me,q) ---> barrier 2j+1 ---> OUT[slice me] =
 *       ^ after barrier 2j-1                ^ after my       slot(0,q)[me] + ... (/ n)
 *         (I write slot q again only          copy-outs of          |
 *         when all passed the first           piece j-1             v
 *         barrier of piece j-1)                          slot(me,q)[me] = OUT[slice me]
 *                                                                   |
 *     copy slot(r,q)[r] -> OUT[slice r], r != me  <--- barrier 2j+2 -+
 *
 * A member writes slot q for piece j only after every member passed the
 * first barrier of piece j - 1, which each reaches only after it read the
 * last of piece j - 2 (its copy-outs): two slots suffice, within a run and
 * from one run to the next (a run starts after the previous one ended).
 * Every element is added up in rank order: the direct algorithm's bits.
 */
#include "allreduce.h"

/* OUT[at .. at + count) = the rank-order sum of elements [from, from +
 * count) of every member's slot q (/ n for AVG), after `after`; returns the
 * last step. */
static int add_up(pc_sched_t *s, const pc_allreduce_spec_t *sp, int q, size_t at, size_t from, size_t count,
                  int after)
{
    size_t es = pcoll_dtype_size(sp->dtype);
    pc_ref_t out = pc_ref(PC_SLOT_OUT, at * es);
    int last = pc_sched_reduce(s, out, pc_ref(pc_shm_slot_id(0, q), from * es), pc_ref(pc_shm_slot_id(1, q), from * es),
                               count, sp->dtype);
    pc_sched_dep(s, after, last);
    for (int i = 2; i < sp->n; i++) {
        int r = pc_sched_reduce(s, out, out, pc_ref(pc_shm_slot_id(i, q), from * es), count, sp->dtype);
        pc_sched_dep(s, last, r);
        last = r;
    }
    if (sp->op == PCOLL_AVG) {
        int d = pc_sched_scale(s, out, count, sp->dtype, sp->n);
        pc_sched_dep(s, last, d);
        last = d;
    }
    return last;
}

void pc_build_shm(pc_sched_t *s, const pc_allreduce_spec_t *sp)
{
    for (int i = 0; i < 2 * sp->n; i++) pc_sched_external(s); /* pc_shm_slot_id(i, q) */
    size_t es = pcoll_dtype_size(sp->dtype);
    uint32_t in = sp->inplace ? PC_SLOT_OUT : PC_SLOT_IN;
    if (!sp->shm_slice) {
        int put = pc_sched_copy(s, pc_ref(pc_shm_slot_id(sp->me, 0), 0), pc_ref(in, 0), sp->count * es);
        int bar = pc_sched_barrier(s, 1);
        pc_sched_dep(s, put, bar);
        add_up(s, sp, 0, 0, 0, sp->count, bar);
        return;
    }
    int prev_first = -1;  /* first barrier of the previous piece */
    int prev_outs = -1;   /* a no-op after the previous piece's copy-outs */
    int index = 0;        /* barriers so far */
    for (size_t first = 0; first < sp->count; first += sp->shm_piece) {
        size_t piece = sp->count - first < sp->shm_piece ? sp->count - first : sp->shm_piece;
        int q = (int)((first / sp->shm_piece) % 2);
        int put = pc_sched_copy(s, pc_ref(pc_shm_slot_id(sp->me, q), 0), pc_ref(in, first * es), piece * es);
        pc_sched_dep(s, prev_first, put);
        int bar1 = pc_sched_barrier(s, ++index);
        pc_sched_dep(s, put, bar1);
        pc_sched_dep(s, prev_outs, bar1);
        size_t lo = pc_shm_slice_start(piece, es, sp->me, sp->n), hi = pc_shm_slice_start(piece, es, sp->me + 1, sp->n);
        int sum = add_up(s, sp, q, first + lo, lo, hi - lo, bar1);
        int publish = pc_sched_copy(s, pc_ref(pc_shm_slot_id(sp->me, q), lo * es), pc_ref(PC_SLOT_OUT, (first + lo) * es),
                                    (hi - lo) * es);
        pc_sched_dep(s, sum, publish);
        int bar2 = pc_sched_barrier(s, ++index);
        pc_sched_dep(s, publish, bar2);
        int outs = pc_sched_nop(s);
        for (int r = 0; r < sp->n; r++) {
            if (r == sp->me) continue;
            size_t a = pc_shm_slice_start(piece, es, r, sp->n), b = pc_shm_slice_start(piece, es, r + 1, sp->n);
            int c = pc_sched_copy(s, pc_ref(PC_SLOT_OUT, (first + a) * es), pc_ref(pc_shm_slot_id(r, q), a * es),
                                  (b - a) * es);
            pc_sched_dep(s, bar2, c);
            pc_sched_dep(s, c, outs);
        }
        prev_first = bar1;
        prev_outs = outs;
    }
}
