/*
 * Group maps: ordered lists of distinct ranks of the context's communicator.
 * The registry interns each list seen so far, validated once, with the
 * channel of its messages and the sequence number of its next operation.
 * Entries live as long as the context (a forgotten sequence number would put
 * this rank out of step with the other members).
 */
#ifndef PC_CORE_GROUPMAP_H
#define PC_CORE_GROUPMAP_H

#include <stdint.h>

#include "../engine/tags.h"

typedef struct pc_group pc_group_t;
typedef struct pcoll_request pc_op_t;

struct pc_group {
    int n;
    int *ranks;      /* index -> rank */
    int me;          /* this rank's index */
    uint64_t hash;
    uint32_t channel;
    uint64_t next_seq; /* next operation number (application side, under ctx->lock) */
    /* progress thread only: the sequence-number window (tags.h) */
    unsigned char *busy; /* seq_mod flags: operation j in flight at slot j % seq_mod */
    pc_op_t *wait_head, *wait_tail; /* operations waiting for their slot */
    pc_group_t *next;  /* hash chain */
};

typedef struct pc_group_registry {
    pc_group_t **buckets;
    int nbuckets, count;
    pc_group_t *world; /* the NULL group: every rank in order, channel 0 */
} pc_group_registry_t;

int pc_groups_init(pc_group_registry_t *reg, int size, int rank, const pc_tags_t *tags);
void pc_groups_destroy(pc_group_registry_t *reg);

/* Finds or validates and adds the group (NULL ranks: the world group).
 * Returns PCOLL_ERR_GROUP with a message naming the problem when the list is
 * empty, has a rank out of [0, size) or twice, or lacks the caller. */
int pc_groups_lookup(pc_group_registry_t *reg, const pc_tags_t *tags, int size, int rank, const int *ranks,
                     int n, const char *fn, pc_group_t **out);

#endif
