#include "tags.h"

int pc_tags_init(pc_tags_t *t, long tag_ub)
{
    int bits = 0;
    while (bits < 31 && (1L << (bits + 1)) - 1 <= tag_ub) bits++;
    if (bits < PC_TAGS_MIN_BITS) return PCOLL_ERR_LIMIT;
    t->bits = bits;
    t->step_bits = 5;
    /* a window of 1023 operations in flight per channel; with few tag bits
     * (UCX gives 23) 255, leaving 512 channels */
    t->seq_bits = bits >= 27 ? 10 : 8;
    t->chan_bits = bits - 1 - t->seq_bits - t->step_bits;
    t->id_bits = bits - 1 - t->step_bits;
    t->step_mask = (1u << t->step_bits) - 1;
    t->ctrl_seq = (1u << t->seq_bits) - 1;
    t->seq_mod = t->ctrl_seq;
    t->nchannels = 1u << t->chan_bits;
    t->nids = 1u << t->id_bits;
    t->class_bit = 1u << (bits - 1);
    return 0;
}
