/*
 * Tag layout.  Every library message carries a tag
 *
 *      | channel (C bits) | seq (Q bits) | step (S bits) |
 *
 * channel: who the message belongs to.  0 = allreduce on the whole context;
 *          [1, 2^(C-1)) = allreduce on a group map (hash of its member list);
 *          [2^(C-1), 2^C) = persistent objects (allocated collectively).
 * seq:     operation number on the channel (or round of a persistent object)
 *          modulo 2^Q - 1; the value 2^Q - 1 is reserved for control messages,
 *          which carry their round number in the payload.
 * step:    the algorithm step, modulo 2^S.
 *
 * Wrap-around is made safe by the callers: an operation with sequence j starts
 * only after operation j - (2^Q - 1) on the same channel completed locally, and
 * schedules issue the messages between one pair of ranks in step order, so MPI's
 * non-overtaking rule keeps equal tags apart.
 */
#ifndef PC_ENGINE_TAGS_H
#define PC_ENGINE_TAGS_H

#include <stdint.h>

typedef struct pc_tags {
    int step_bits, seq_bits, chan_bits;
    uint32_t step_mask, seq_mod, ctrl_seq;
    uint32_t nchannels;        /* 2^C */
    uint32_t first_object_chan; /* 2^(C-1) */
} pc_tags_t;

/* Lays out the bits for MPI_TAG_UB = tag_ub. Returns 0, or -1 when the MPI
 * gives too few tag bits (fewer than 23). */
int pc_tags_init(pc_tags_t *t, long tag_ub);

static inline int pc_tag(const pc_tags_t *t, uint32_t channel, uint32_t seq, uint32_t step)
{
    return (int)((channel << (t->seq_bits + t->step_bits)) | (seq << t->step_bits) | (step & t->step_mask));
}

/* Tag base (step 0) for operation `opnum` on a channel. */
static inline int pc_tag_base(const pc_tags_t *t, uint32_t channel, uint64_t opnum)
{
    return pc_tag(t, channel, (uint32_t)(opnum % t->seq_mod), 0);
}

/* Tag of control messages of kind `kind` (< 2^S) on a channel. */
static inline int pc_tag_ctrl(const pc_tags_t *t, uint32_t channel, uint32_t kind)
{
    return pc_tag(t, channel, t->ctrl_seq, kind);
}

/* Channel of a group map from a 64-bit hash of its ordered member list. */
uint32_t pc_tags_group_channel(const pc_tags_t *t, uint64_t hash);

#endif
