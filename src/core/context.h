/* The context: the library's state for one communicator. */
#ifndef PC_CORE_CONTEXT_H
#define PC_CORE_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>

#include "../engine/progress.h"
#include "../engine/tags.h"
#include "config.h"
#include "groupmap.h"
#include "pcoll.h"

typedef struct pc_cache_entry pc_cache_entry_t;
typedef struct pc_partial_link pc_partial_link_t;

struct pcoll_ctx {
    MPI_Comm comm; /* private duplicate of the user's communicator */
    int rank, size;
    int owns_mpi;  /* pcoll_init initialized MPI */
    int oversubscribed; /* this node runs more threads than it has CPUs */
    atomic_int algo;
    _Atomic size_t direct_bytes, small_bytes;
    size_t partial_shm_bytes; /* partial rounds up to this size use node-shared memory */
    pc_tags_t tags;
    pc_engine_t *engine;

    pthread_mutex_t lock; /* guards everything below */
    pc_group_registry_t groups;
    pc_cache_entry_t *cache;
    int ncache;
    uint64_t cache_clock;
    unsigned char *object_channels; /* 1 = in use, indexed from tags.first_object_chan */
    uint32_t next_object_channel;
    long live_requests;
    pc_partial_link_t *partials; /* live partial objects, newest first */
    int nparkers;                /* of them, those with a park_fn */

    atomic_long inflight; /* operations started and not completed */
};

/* Channel for a new persistent object. Collective by contract: every rank
 * calls it in the same order, so every rank gets the same channel. */
int pc_ctx_alloc_channel(pcoll_t *ctx, uint32_t *channel);
void pc_ctx_free_channel(pcoll_t *ctx, uint32_t channel);

/* Checks ctx is usable from the public API. */
int pc_ctx_check(const pcoll_t *ctx, const char *fn);

/*
 * Live persistent objects.  free_fn frees one collectively (finalize frees
 * what the application left).  park_fn, if set, is called on the progress
 * thread whenever the application blocks in (parked = 1) or leaves (0) a
 * pcoll call that is not about this object: objects whose rounds wait for
 * other ranks' arrivals count such a rank as arrived (see partial/leader.c).
 */
struct pc_partial_link {
    void *object;
    void (*free_fn)(void *object);
    void (*park_fn)(void *object, int parked);
    pc_partial_link_t *next;
};
void pc_ctx_register_object(pcoll_t *ctx, pc_partial_link_t *link);
void pc_ctx_unregister_object(pcoll_t *ctx, pc_partial_link_t *link);

/* Application thread, around a blocking wait: tells every other live object
 * with a park_fn (none: nothing is posted).  except may be NULL. */
void pc_ctx_park(pcoll_t *ctx, const pc_partial_link_t *except, int parked);

/* Schedule cache (collective.c). */
void pc_cache_clear(pcoll_t *ctx);

#endif
