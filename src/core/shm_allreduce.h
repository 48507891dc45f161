/*
 * Blocking allreduces of every rank of a context through node-shared
 * memory instead of messages inside each node (docs/algorithms.md,
 * "Node-shared allreduce": a latency path for small messages, a slice path
 * for larger ones), and across nodes hierarchically: each member of a node
 * takes its slice of the node's sum across the nodes with its column, the
 * slices of several pieces in flight at once.
 *
 * Used by pcoll_allreduce (blocking, all ranks, no forced algorithm) when
 * the context has the segments (pcoll_init made them: every node holds as
 * many ranks, PCOLL_SHM_ALLREDUCE_BYTES > 0, shared memory and doorbells
 * at hand on every node) and the message is at most
 * PCOLL_SHM_ALLREDUCE_BYTES (with one rank per node, only where the slice
 * path applies).  Persistent plans whose members share a node run the same
 * layout as a schedule (algo/shm.c, in a segment of their own:
 * shm_group.h); blocking group calls on one node use areas of the same
 * segments (shm_group_call.h); nonblocking calls keep the message
 * algorithms.  On one node its sums are those of the direct algorithm, bit
 * for bit (the n vectors added in rank order at every rank), on either
 * path; across nodes the node sums are combined in the column algorithm's
 * order, the same bits at every rank.
 */
#ifndef PC_CORE_SHM_ALLREDUCE_H
#define PC_CORE_SHM_ALLREDUCE_H

#include <stddef.h>

#include "context.h"
#include "stall.h"

/* Pieces whose parts across nodes are in flight at once (several nodes):
 * the links stay busy while this node adds up the next pieces.  Measured
 * on the emulated cluster at 1 Gbit/s, 2 to 32 MiB, 256 KiB slots: 4 in
 * flight reached 79 to 94% of the link at 4 x 2, 8 reached 91 to 98% (16
 * no more; 8 of 1 MiB less: 85 to 94%). */
#define PC_SHM_PIPELINE_DEPTH 8

/* Collective over the context's ranks (pcoll_init, after the engine, with
 * ctx->shm_sizes set): ctx->shm is set when every rank can take the path,
 * else left NULL.  PCOLL_SUCCESS, or an MPI failure. */
int pc_shm_allreduce_open(pcoll_t *ctx);

/* The shape of a node-shared allreduce of count x dtype among n members
 * on each of `nodes` nodes, the same for the blocking path and for plans'
 * schedules (one node): *slice = 1 for the slice path (the message is
 * larger than a slot, or too large for the latency path: on one node
 * (n - 1) x bytes above PCOLL_SHM_SLICE_BYTES, across nodes n x bytes
 * above 8 KiB), *piece = elements per piece (the slot's worth; the whole
 * message on the latency path, at least 1). */
void pc_shm_shape(const pcoll_t *ctx, size_t count, pcoll_dtype_t dtype, int n, int nodes, size_t *piece,
                  int *slice);
/* The same decisions from the sizes alone (pure: pcoll-sim takes them
 * with the defaults of pc_config_defaults): the data bytes of a slot (a
 * slice-path piece); 1 for the slice path of `bytes` among n members on
 * each of `nodes` nodes; 1 if a blocking all-ranks call of that shape
 * takes the node-shared path at all (one rank per node: the slice path
 * only). */
size_t pc_shm_slot_bytes(const pc_shm_sizes_t *z);
int pc_shm_slice_shape(const pc_shm_sizes_t *z, size_t bytes, int n, int nodes);
int pc_shm_blocking_shape(const pc_shm_sizes_t *z, size_t bytes, int n, int nodes);
/* Collective (at finalize, and when pcoll_init fails after opening it). */
void pc_shm_allreduce_close(pcoll_t *ctx);

/* 1 if an allreduce of `bytes` among n ranks may take a node-shared path
 * by the settings: at most PCOLL_SHM_ALLREDUCE_BYTES, no forced algorithm,
 * and (tuned) no tuning table row against it.  The same at every rank. */
int pc_shm_allowed(const pcoll_t *ctx, int n, size_t bytes, int tuned);
/* The same whatever algorithm this rank forces (the library's own
 * agreements, which must take one path at every member). */
int pc_shm_allowed_any_algo(const pcoll_t *ctx, int n, size_t bytes, int tuned);
/* 1 if a blocking all-ranks allreduce of this size takes the path (one
 * rank per node: the slice path only; the latency path would be the
 * message algorithm and a copy). */
int pc_shm_allreduce_fits(const pcoll_t *ctx, size_t bytes);
/* The same for count elements of dtype (0 for a type that is not one). */
int pc_shm_allreduce_takes(const pcoll_t *ctx, size_t count, pcoll_dtype_t dtype);

/* Group calls' areas (shm_group_call.h), one per rank of this node in its
 * segment: 1 if the context has the segments, with area[k] set for node
 * rank k (area may be NULL) and *slot_bytes the data a slot holds; else 0. */
int pc_shm_group_areas(const pcoll_t *ctx, char **area, size_t *slot_bytes);

/* Waits until ready(arg), as the node-shared paths wait: a short spin (a
 * CPU per rank of the node), yields, then asleep with *sleeps = mark (the
 * rank that makes it ready nudges a sleeper it sees marked; *sleeps is 0
 * again after), stall reports and the timeout as any blocking call. */
int pc_shm_wait(pcoll_t *ctx, pc_pred_fn ready, void *arg, pc_describe_fn report, _Atomic uint64_t *sleeps,
                uint64_t mark, const char *fn);

/* The operation (arguments already checked, the path fits): PCOLL_SUCCESS,
 * or PCOLL_ERR_TIMEOUT naming the ranks that have not started it. */
int pc_shm_allreduce(pcoll_t *ctx, const void *sendbuf, void *recvbuf, size_t count, pcoll_dtype_t dtype,
                     pcoll_op_t op, const char *fn);

#endif
