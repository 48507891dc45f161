/*
 * Receive ids (engine/tags.h, class 1): each rank numbers the group
 * operations and plans whose messages it receives.  A number is in use from
 * the operation's start to its completion at this rank; two operations in
 * use never share one.  Numbers never used come first; after that the one
 * freed longest ago is reused (a number is free only when every message for
 * its operation has been received, so any order would do: this one leaves
 * the most room for mistakes to show).  Pure: no MPI, no locking (the
 * context's lock guards it).
 */
#ifndef PC_CORE_IDPOOL_H
#define PC_CORE_IDPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct pc_idpool {
    uint32_t limit; /* ids are < limit */
    uint32_t next;  /* ids >= next were never used */
    uint32_t *ring; /* freed ids, oldest first */
    size_t head, len, cap;
} pc_idpool_t;

void pc_idpool_init(pc_idpool_t *p, uint32_t limit);
void pc_idpool_destroy(pc_idpool_t *p);
/* 0 and *id, or -1 when every id is in use (or no memory). */
int pc_idpool_get(pc_idpool_t *p, uint32_t *id);
void pc_idpool_put(pc_idpool_t *p, uint32_t id);
/* Ids in use. */
uint32_t pc_idpool_in_use(const pc_idpool_t *p);

#endif
