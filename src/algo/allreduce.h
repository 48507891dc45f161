/* Builders that turn an allreduce over a group map into a schedule. */
#ifndef PC_ALGO_ALLREDUCE_H
#define PC_ALGO_ALLREDUCE_H

#include <stddef.h>

#include "../engine/sched.h"
#include "pcoll.h"

/* Schedules address peers by group index (engine/sched.h): the group map
 * that turns indices into ranks is bound when a schedule runs. */
typedef struct pc_allreduce_spec {
    int n;            /* group size                                       */
    int me;           /* the caller's index in the group                   */
    size_t count;
    pcoll_dtype_t dtype;
    pcoll_op_t op;
    int inplace;      /* the input is already in PC_SLOT_OUT                */
    /* PCOLL_ALGO_SHM only (shm.c): elements per piece (a slot's worth), and
     * 1 for the slice path (else the latency path: one piece, every
     * member adds up all of it) */
    size_t shm_piece;
    int shm_slice;
    int no_data;      /* a schedule without data (pc_sched_set_virtual): the
                         simulator's time-only mode                         */
} pc_allreduce_spec_t;

/* What an allreduce is for decides which algorithms it may use: the one
 * rule of the choice. */
typedef enum pc_algo_use {
    PC_USE_CALL,  /* a call (pcoll_allreduce, plans): any algorithm, by size
                     (pcoll_allreduce_algo_for documents the rule)          */
    PC_USE_ROUND, /* a partial round: ranks join it one by one as the
                     activation reaches them, and direct's n - 1 messages per
                     rank then slow the activation down (a round at P = 16
                     took about 25% longer): never direct unless forced     */
    PC_USE_TREE   /* merged-gradient buckets: recursive doubling, or
                     Rabenseifner above small_bytes, whatever is forced: both
                     add an element up in the same order wherever it lies,
                     so a layer's result does not depend on its bucket      */
} pc_algo_use_t;

/* The algorithm for `bytes` among n ranks (forced: the context's setting,
 * PCOLL_ALGO_AUTO for the choice; tuned: the tuning table's pick for this
 * call, algo/tuning.h, PCOLL_ALGO_AUTO for none).  A call takes the table's
 * message algorithm where it has one; partial rounds and buckets keep their
 * own rules (above); otherwise the built-in rule by size. */
pcoll_allreduce_algo_t pc_allreduce_choose(pc_algo_use_t use, pcoll_allreduce_algo_t forced,
                                           pcoll_allreduce_algo_t tuned, size_t direct_bytes, size_t small_bytes,
                                           size_t bytes, int n);

/* Builds and commits a schedule reading PC_SLOT_IN (unless inplace) and
 * writing PC_SLOT_OUT. */
int pc_allreduce_build(const pc_allreduce_spec_t *spec, pcoll_allreduce_algo_t algo, pc_sched_t **out);

/* ---- shared by the algorithm files ---- */

/* Appends the steps of one algorithm to s (not committed). */
void pc_build_recdbl(pc_sched_t *s, const pc_allreduce_spec_t *sp);
void pc_build_rabenseifner(pc_sched_t *s, const pc_allreduce_spec_t *sp);
void pc_build_ring(pc_sched_t *s, const pc_allreduce_spec_t *sp);
void pc_build_direct(pc_sched_t *s, const pc_allreduce_spec_t *sp);
void pc_build_shm(pc_sched_t *s, const pc_allreduce_spec_t *sp);

/* The node-shared schedule's external slots (pc_sched_external): member i's
 * slot q (q = 0, 1: the piece's parity within the run), bound per run. */
static inline uint32_t pc_shm_slot_id(int i, int q) { return (uint32_t)(PC_NUM_BOUND_SLOTS + 2 * i + q); }
/* Element where member r's slice of a piece of `count` elements of es bytes
 * begins on the slice path (r = n: the end): whole cache lines, so that no
 * two members write the same line. */
static inline size_t pc_shm_slice_start(size_t count, size_t es, int r, int n)
{
    if (r == n) return count;
    size_t per_line = 64 / es, lines = count / per_line;
    return lines * (size_t)r / (size_t)n * per_line;
}

/* Barriers per run of the node-shared schedule. */
static inline int pc_shm_barriers(const pc_allreduce_spec_t *sp)
{
    size_t pieces = sp->count ? (sp->count + sp->shm_piece - 1) / sp->shm_piece : 0;
    return sp->shm_slice ? 2 * (int)pieces : sp->count ? 1 : 0;
}

/*
 * Folding a group of n ranks onto p = 2^k survivors (the largest power of two
 * <= n): with r = n - p, among the first 2r indices the even index i sends its
 * vector to i + 1 and waits for the result; survivors are numbered v = i / 2
 * (i < 2r) or v = i - r.
 */
typedef struct pc_fold {
    int p, k, r;
    int extra;   /* this rank sends its data away and waits       */
    int v;       /* survivor number (valid when !extra)            */
    int partner; /* group index of the fold partner, or -1         */
} pc_fold_t;

void pc_fold_init(pc_fold_t *f, int n, int me);
/* Group index of survivor v. */
int pc_fold_index(const pc_fold_t *f, int v);

/* Pre-step: an extra rank sends `cur`; its partner receives it into scratch
 * and adds it into OUT.  Returns the step after which OUT holds this rank's
 * (folded) data, or -1 when nothing was needed; *cur becomes OUT when the
 * fold wrote it. For an extra rank it returns the send step. */
int pc_fold_pre(pc_sched_t *s, const pc_allreduce_spec_t *sp, const pc_fold_t *f, pc_ref_t *cur, int tagstep);

/* Post-step: the partner sends the final OUT back (after `after`), an extra
 * rank receives it (after its pre-step send `after`).  Returns the step. */
int pc_fold_post(pc_sched_t *s, const pc_allreduce_spec_t *sp, const pc_fold_t *f, int after, int tagstep);

/* For AVG, divides OUT by n after `after`; returns the new last step. */
int pc_finish_avg(pc_sched_t *s, const pc_allreduce_spec_t *sp, int after);

#endif
