/*
 * Node-shared memory: one segment per rank, which every rank on the same
 * node can address (MPI_Win_allocate_shared).  Used by the doorbells and by
 * partial rounds that run in node-shared memory.
 */
#ifndef PC_ENGINE_NODEMEM_H
#define PC_ENGINE_NODEMEM_H

#include <mpi.h>
#include <stddef.h>

#include "pcoll.h"

typedef struct pc_nodemem {
    MPI_Comm node;  /* the node's communicator (the caller's: not freed here) */
    MPI_Win win;
    void **seg;     /* by rank of comm; NULL for ranks on other nodes */
    int local_size; /* ranks on this node */
} pc_nodemem_t;

/* Collective over node, the communicator of this rank's node (the
 * context's, made once: every rank of it must be able to share memory), a
 * part of comm: `bytes` (may differ by rank) of zeroed memory for this
 * rank, shared with its node, visible to all of them on return, addressed
 * by rank of comm.  The ranks of a node agree: unless every one of them
 * asks for it (use) and the window works, none gets one, and the call
 * returns PCOLL_ERR_LIMIT (PCOLL_SUCCESS otherwise). */
int pc_nodemem_create(MPI_Comm comm, MPI_Comm node, size_t bytes, int use, pc_nodemem_t *m);
/* Collective over the node's ranks that created one. */
void pc_nodemem_destroy(pc_nodemem_t *m);

#endif
