/*
 * Tag layout: how a message names the operation it belongs to.  B is the
 * number of bits of MPI_TAG_UB (at least 23); every field is sized from it.
 *
 *   class 0, context channels:    | 0 | channel (C) | seq (Q) | step (S) |
 *   class 1, member-agreed ids:   | 1 |         id (B-1-S)     | step (S) |
 *
 * Context channels name things that every rank of the context creates in the
 * same order, so every rank assigns the same number without a message:
 * channel 0 is the context itself (allreduce over all ranks), channels >= 1
 * belong to persistent objects (partial collectives).  seq is the operation
 * (or round) number on the channel modulo 2^Q - 1; the value 2^Q - 1 marks
 * control messages, which carry what they are about in their payload
 * (channel 0's control tag is the context's service tag, core/service.h).
 *
 * Member-agreed ids name operations of a group of ranks (an allreduce on a
 * group map, a persistent plan): the members need not have posted them in the
 * same order as other groups' operations.  Every rank numbers the operations
 * whose messages it receives from a pool of its own (core/idpool.h) and tells
 * the members its number before they send (core/hello.c); a message to rank r
 * carries r's number.  Two operations in flight at r never have the same
 * number there, whatever the groups; a number returns to the pool once its
 * operation completed at r, when every message for it has been received.
 *
 * step is the algorithm's step modulo 2^S.  Wrap-around of seq and step is
 * safe because the callers keep equal tags in order: an operation with
 * sequence j starts only after operation j - (2^Q - 1) on the same channel
 * completed locally, and schedules issue the messages between one pair of
 * ranks in step order, so MPI's non-overtaking rule keeps equal tags apart.
 */
#ifndef PC_ENGINE_TAGS_H
#define PC_ENGINE_TAGS_H

#include <stdint.h>

#include "pcoll.h"

typedef struct pc_tags {
    int bits;                 /* B */
    int step_bits, seq_bits, chan_bits, id_bits;
    uint32_t step_mask;
    uint32_t seq_mod;         /* 2^Q - 1: sequence numbers of operations */
    uint32_t ctrl_seq;        /* 2^Q - 1: control messages */
    uint32_t nchannels;       /* 2^C */
    uint32_t nids;            /* 2^(B-1-S) */
    uint32_t class_bit;       /* 1 << (B-1) */
} pc_tags_t;

/* Smallest MPI_TAG_UB pcoll works with. */
#define PC_TAGS_MIN_BITS 23

/* Lays out the bits for MPI_TAG_UB = tag_ub. Returns PCOLL_SUCCESS, or
 * PCOLL_ERR_LIMIT when the MPI gives fewer than PC_TAGS_MIN_BITS bits. */
int pc_tags_init(pc_tags_t *t, long tag_ub);

/* Class 0: tag of step `step` of operation `seq` on a channel. */
static inline int pc_tag_chan(const pc_tags_t *t, uint32_t channel, uint32_t seq, uint32_t step)
{
    return (int)((channel << (t->seq_bits + t->step_bits)) | (seq << t->step_bits) | (step & t->step_mask));
}

/* Class 0: tag base (step 0) for operation `opnum` on a channel. */
static inline int pc_tag_base(const pc_tags_t *t, uint32_t channel, uint64_t opnum)
{
    return pc_tag_chan(t, channel, (uint32_t)(opnum % t->seq_mod), 0);
}

/* Class 0: tag of control messages of kind `kind` (< 2^S) on a channel. */
static inline int pc_tag_ctrl(const pc_tags_t *t, uint32_t channel, uint32_t kind)
{
    return pc_tag_chan(t, channel, t->ctrl_seq, kind);
}

/* Class 1: tag base (step 0) of messages to the rank that numbered its
 * operation `id` (id < nids). */
static inline int pc_tag_id_base(const pc_tags_t *t, uint32_t id)
{
    return (int)(t->class_bit | (id << t->step_bits));
}

#endif
