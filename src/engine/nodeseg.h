/*
 * One segment of memory shared by the members of a communicator that all
 * live on one node, which each member unmaps on its own (no collective
 * free: a plan is freed by each member when it likes).
 *
 *   member 0: shm_open a fresh name, reserve it --name (MPI_Bcast)-->
 *   every member: shm_open + mmap; agree (MPI_Allreduce) that all did;
 *   member 0 unlinks the name: the memory lives while one member maps it
 */
#ifndef PC_ENGINE_NODESEG_H
#define PC_ENGINE_NODESEG_H

#include <mpi.h>
#include <stddef.h>

typedef struct pc_nodeseg {
    void *base; /* zeroed at creation, 64-byte aligned (page aligned) */
    size_t bytes;
} pc_nodeseg_t;

/* Collective over comm: PCOLL_SUCCESS with the segment at every member, or
 * PCOLL_ERR_LIMIT at every member (one could not map it, or use was 0
 * somewhere). */
int pc_nodeseg_create(MPI_Comm comm, size_t bytes, int use, pc_nodeseg_t *seg);
/* Local. */
void pc_nodeseg_destroy(pc_nodeseg_t *seg);

#endif
