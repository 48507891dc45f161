/* The context: the library's state for one communicator. */
#ifndef PC_CORE_CONTEXT_H
#define PC_CORE_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>

#include "../algo/allreduce.h"
#include "../algo/tuning.h"
#include "../engine/progress.h"
#include "../engine/tags.h"
#include "../util/nodes.h"
#include "../util/recorder.h"
#include "config.h"
#include "groupmap.h"
#include "idpool.h"
#include "pcoll.h"

typedef struct pc_cache_entry pc_cache_entry_t;
typedef struct pc_object_link pc_object_link_t;
typedef struct pc_service pc_service_t;
typedef struct pc_stall_probe pc_stall_probe_t;
typedef struct pc_stall_state pc_stall_state_t;
typedef struct pc_shrink_state pc_shrink_state_t;

/* Operations on the whole communicator, channel 0 (engine/tags.h). */
typedef struct pc_world_ops {
    uint64_t next_seq;        /* next operation number (application, lock) */
    uint64_t broken_seq;      /* (lock) operations >= this fail: one timed out
                                 (UINT64_MAX: none) */
    unsigned char *busy;      /* holder: seq_mod slots, operation in flight */
    pcoll_request_t *wait_head, *wait_tail; /* holder: waiting for a slot */
} pc_world_ops_t;

/*
 * Blocking calls and persistent objects.  A rank blocked in a pcoll call
 * counts as arrived for the rounds of partial objects that wait for other
 * ranks (partial/park.c): the core tells the hook when a blocking call
 * begins (delta 1) and ends (-1), naming the object the call is about (its
 * id and channel, 0 for none), only while some live object wants to know.
 */
/* The node-shared allreduce's settings (shm_allreduce.h). */
typedef struct pc_shm_sizes {
    size_t max_bytes;   /* PCOLL_SHM_ALLREDUCE_BYTES: the largest message (0: never) */
    size_t slice_bytes; /* PCOLL_SHM_SLICE_BYTES: the latency path while (n - 1) x bytes is within */
    size_t chunk_bytes; /* PCOLL_SHM_CHUNK_BYTES: a slot's data, a piece of the slice path */
} pc_shm_sizes_t;

typedef void (*pc_block_hook_t)(pcoll_t *ctx, void *arg, int delta, uint64_t object, uint32_t channel);

struct pcoll_ctx {
    MPI_Comm comm; /* private duplicate of the user's communicator: data */
    MPI_Comm ctrl_comm; /* another one: the service channel (control) */
    int rank, size;
    int owns_mpi;  /* pcoll_init initialized MPI */
    int oversubscribed; /* this node runs more threads than it has CPUs */
    int id;         /* this process's context number (1, 2, ...): log lines */
    pc_nodes_t nodes;  /* which ranks share a node: MPI_COMM_TYPE_SHARED, split
                          into blocks by PCOLL_RANKS_PER_NODE (the one node map) */
    MPI_Comm node_comm; /* this rank's node (shared memory) */
    int check;      /* PCOLL_CHECK: world operations check their arguments first */
    atomic_int algo;
    _Atomic size_t direct_bytes, small_bytes;
    size_t partial_shm_bytes; /* partial rounds up to this size use node-shared memory */
    int exclude_ms;           /* PCOLL_EXCLUDE_MS: partial rounds go on without a rank silent this long */
    int node_deputy;          /* PCOLL_NODE_DEPUTY: a stopped node leader's deputy (partial/nodesums.h) */
    struct pc_shm_allreduce *shm; /* blocking world allreduces in node-shared memory, or NULL */
    struct pc_shm_group_calls *shm_calls; /* blocking group allreduces there (with shm), or NULL */
    pc_tuning_t *tuning;          /* PCOLL_TUNING_FILE's table (agreed), or NULL */
    pc_shm_sizes_t shm_sizes;     /* node-shared allreduces: blocking calls and plans */
    _Atomic double stall_warn_s, timeout_s;
    pc_tags_t tags;
    pc_engine_t *engine;
    pc_service_t *service;

    pthread_mutex_t lock; /* guards everything below but the holder-only fields */
    pc_group_registry_t groups;
    pc_idpool_t ids;            /* receive ids (class 1 tags) */
    pc_world_ops_t world;
    pc_cache_entry_t *cache;
    int ncache;
    uint64_t cache_clock;
    unsigned char *object_channels; /* 1 = in use, by channel (0: the context's) */
    int *all_ranks;                 /* 0 .. size - 1: every rank as a group list (agree.c) */
    uint32_t next_object_channel;
    uint64_t objects_created;   /* object ids: 1, 2, ... in creation order */
    long live_requests;
    pcoll_request_t *free_requests; /* recycled request memory */
    pcoll_request_t *zombies;       /* abandoned after a timeout: kept until finalize */
    pc_object_link_t *objects;      /* live persistent objects, newest first */
    atomic_int block_watchers;      /* of them, those that want pc_block_hook calls */
    pc_block_hook_t block_hook;
    void *block_hook_arg;
    void *partial;                  /* the partial layer's context-wide state (partial/park.c), */
    void (*partial_free)(void *);   /* and how pcoll_finalize frees it */
    pc_stall_state_t *stall;        /* holder: probes waiting for answers, responders */
    pc_shrink_state_t *shrink;      /* pcoll_shrink's inbox (core/shrink.c) */
    uint32_t shrinks;               /* pcoll_shrink calls so far (application) */
    atomic_int shrunk;              /* pcoll_shrink replaced this context */
    int retired;                    /* finalized after it: kept until exit, */
    pcoll_t *retired_next;          /* on a list */

    atomic_long inflight; /* operations started and not completed */
    pc_rec_t rec;         /* the timeline recorder (core/timeline.h) */
    char tl_path[4096];   /* its file while it records */
};

/* Channel for a new persistent object, and the object's id (both the same
 * at every rank: collective by contract, every rank calls in the same
 * order). */
int pc_ctx_alloc_channel(pcoll_t *ctx, const char *fn, uint32_t *channel, uint64_t *object_id);
void pc_ctx_free_channel(pcoll_t *ctx, uint32_t channel);

/* Checks ctx is usable from the public API (and makes the calling thread's
 * log lines this context's). */
int pc_ctx_check(const pcoll_t *ctx, const char *fn);
/* PCOLL_ERR_STATE (message set) once pcoll_shrink replaced ctx: the calls
 * of its objects and requests refuse, instead of waiting for the dead. */
int pc_ctx_replaced(const pcoll_t *ctx, const char *fn);

/* The algorithm for `bytes` among n ranks with the context's settings
 * (algo/allreduce.h: what the allreduce is for decides). */
pcoll_allreduce_algo_t pc_ctx_algo(const pcoll_t *ctx, pc_algo_use_t use, size_t bytes, int n);

/* Live persistent objects: free_fn frees one collectively (finalize frees
 * what the application left). */
struct pc_object_link {
    void *object;
    int (*free_fn)(void *object);
    int watches_blocks; /* counts in block_watchers */
    pc_object_link_t *next;
};
void pc_ctx_register_object(pcoll_t *ctx, pc_object_link_t *link);
void pc_ctx_unregister_object(pcoll_t *ctx, pc_object_link_t *link);
void pc_ctx_set_block_hook(pcoll_t *ctx, pc_block_hook_t hook, void *arg);

/* Application thread, around a blocking wait: tells the hook when an
 * object other than the one the call is about watches (self_watches: that
 * object is a watcher itself).  Returns whether it told, to pass to the
 * unblock. */
int pc_ctx_block(pcoll_t *ctx, uint64_t object, uint32_t channel, int self_watches);
void pc_ctx_unblock(pcoll_t *ctx, uint64_t object, uint32_t channel, int told);

/* Schedule cache and requests (collective.c). */
void pc_cache_clear(pcoll_t *ctx);
void pc_requests_clear(pcoll_t *ctx);
/* At pcoll_init (holder): handlers of group operations' messages. */
void pc_collective_open(pcoll_t *ctx);

#endif
