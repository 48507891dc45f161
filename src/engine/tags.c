#include "tags.h"

int pc_tags_init(pc_tags_t *t, long tag_ub)
{
    int bits = 0;
    while (bits < 31 && (1L << (bits + 1)) - 1 <= tag_ub) bits++;
    if (bits < 23) return -1;
    t->step_bits = 5;
    t->seq_bits = 10;
    t->chan_bits = bits - t->step_bits - t->seq_bits;
    t->step_mask = (1u << t->step_bits) - 1;
    t->ctrl_seq = (1u << t->seq_bits) - 1;
    t->seq_mod = t->ctrl_seq;
    t->nchannels = 1u << t->chan_bits;
    t->first_object_chan = t->nchannels / 2;
    return 0;
}

uint32_t pc_tags_group_channel(const pc_tags_t *t, uint64_t hash)
{
    return 1 + (uint32_t)(hash % (uint64_t)(t->first_object_chan - 1));
}
