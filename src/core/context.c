/*
 * The context: pcoll_init / pcoll_finalize and the context's settings.
 *
 * pcoll_init is collective and fails everywhere or nowhere: each rank first
 * checks what it can alone (the thread level, its PCOLL_* variables), then
 * the ranks agree (agree.h: a rank's failure, or a variable that must be
 * equal and is not, fails every rank with a message naming it and the
 * ranks), then the collective steps run and the ranks agree once more.
 */
#include "context.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/error.h"
#include "../util/log.h"
#include "agree.h"
#include "shm_allreduce.h"
#include "shm_group_call.h"
#include "op.h"
#include "service.h"
#include "shrink.h"
#include "stall.h"
#include "timeline.h"

int pc_ctx_check(const pcoll_t *ctx, const char *fn)
{
    if (!ctx) return pc_error(PCOLL_ERR_NULL, fn, "ctx is NULL (call pcoll_init first)");
    pc_log_set_rank(ctx->rank, ctx->id); /* this thread's log lines are this context's */
    return pc_ctx_replaced(ctx, fn);
}

int pc_ctx_replaced(const pcoll_t *ctx, const char *fn)
{
    if (atomic_load(&ctx->shrunk))
        return pc_error(PCOLL_ERR_STATE, fn, "its context was replaced by pcoll_shrink: use the context it gave");
    return PCOLL_SUCCESS;
}

static int check_mpi_threads(int *owns_mpi)
{
    static const char *fn = "pcoll_init";
    int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Finalized(&finalized);
    if (finalized) return pc_error(PCOLL_ERR_STATE, fn, "MPI has already been finalized");
    MPI_Initialized(&initialized);
    *owns_mpi = 0;
    if (!initialized) {
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) return pc_mpi_error(rc, fn, "MPI_Init_thread");
        *owns_mpi = 1;
    }
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        static const char *levels[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED"};
        const char *have = provided >= 0 && provided <= 2 ? levels[provided] : "unknown";
        return pc_error(PCOLL_ERR_THREAD_LEVEL, fn,
                        "MPI provides %s; pcoll's progress thread needs MPI_THREAD_MULTIPLE "
                        "(initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...))",
                        have);
    }
    return PCOLL_SUCCESS;
}

pcoll_allreduce_algo_t pc_ctx_algo(const pcoll_t *ctx, pc_algo_use_t use, size_t bytes, int n)
{
    return pc_allreduce_choose(use, (pcoll_allreduce_algo_t)atomic_load(&ctx->algo),
                               pc_tuning_lookup(ctx->tuning, n, ctx->nodes.count, bytes),
                               atomic_load(&ctx->direct_bytes), atomic_load(&ctx->small_bytes), bytes, n);
}

/* labels[r] (the smallest rank of r's machine node) becomes the smallest
 * rank of r's part of that node inside its block of per_node consecutive
 * ranks: one label per (machine node, block); 0 or -1 without memory. */
static int split_blocks(int *labels, int size, int per_node)
{
    int *seen = malloc(sizeof(int) * (size_t)size), *first = malloc(sizeof(int) * (size_t)size);
    if (!seen || !first) {
        free(seen);
        free(first);
        return -1;
    }
    for (int i = 0; i < size; i++) seen[i] = -1;
    for (int r = 0; r < size; r++) {
        int node = labels[r], b = r / per_node;
        if (seen[node] != b) {
            seen[node] = b;
            first[node] = r;
        }
        labels[r] = first[node];
    }
    free(seen);
    free(first);
    return 0;
}

/* Collective: the node map.  Ranks share a node when MPI says they share
 * memory (MPI_COMM_TYPE_SHARED) and, with PCOLL_RANKS_PER_NODE = K, when
 * they are also in one block of K consecutive ranks: K can only split the
 * machine's nodes, never join them, so a node still shares memory.
 * *local: the ranks on this rank's machine node (for oversubscription). */
static int make_node_map(pcoll_t *ctx, int per_node, int *local, const char *fn)
{
    MPI_Comm shm = MPI_COMM_NULL;
    int label = ctx->rank, rc = PCOLL_SUCCESS;
    *local = 1;
    if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm) == MPI_SUCCESS) {
        MPI_Comm_size(shm, local);
        MPI_Allreduce(MPI_IN_PLACE, &label, 1, MPI_INT, MPI_MIN, shm);
    } else { /* every rank a node of its own, alike at every rank */
        shm = MPI_COMM_NULL;
    }
    int *labels = malloc(sizeof(int) * (size_t)ctx->size);
    pc_agree_over_t over = pc_agree_comm(ctx->comm);
    rc = pc_agree_step(&over, fn, labels ? PCOLL_SUCCESS : pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the node map"));
    int mrc = rc == PCOLL_SUCCESS ? MPI_Allgather(&label, 1, MPI_INT, labels, 1, MPI_INT, ctx->comm) : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS) rc = pc_mpi_error(mrc, fn, "MPI_Allgather (the node map)");
    /* the block split, in the labels and in the node's communicator */
    int block = per_node > 0 ? ctx->rank / per_node : 0;
    if (rc == PCOLL_SUCCESS && per_node > 0 && split_blocks(labels, ctx->size, per_node) != 0)
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the node map");
    if (rc == PCOLL_SUCCESS && pc_nodes_init(&ctx->nodes, ctx->size, labels) != 0)
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the node map");
    free(labels);
    MPI_Comm base = shm != MPI_COMM_NULL ? shm : MPI_COMM_SELF;
    mrc = MPI_Comm_split(base, block, ctx->rank, &ctx->node_comm);
    if (mrc != MPI_SUCCESS) {
        ctx->node_comm = MPI_COMM_NULL;
        if (rc == PCOLL_SUCCESS) rc = pc_mpi_error(mrc, fn, "MPI_Comm_split (the node's communicator)");
    }
    if (shm != MPI_COMM_NULL) MPI_Comm_free(&shm);
    return rc;
}

/* Does this node run more threads (two per rank: application and progress)
 * than it has CPUs, or is this process bound to a single CPU? */
static int oversubscribed(int local)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t mask;
    int mine = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : (int)online;
    return 2L * local > online || mine < 2;
}

/* The tag upper bound.  MPI defines the attribute on MPI_COMM_WORLD; other
 * communicators (from MPI_Comm_split, MPI_Comm_create, MPI_COMM_SELF) may
 * not carry it, and the bound is the same for every communicator. */
static long tag_ub_of(MPI_Comm comm)
{
    int *ub = NULL, flag = 0;
    if (MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag && ub) return *ub;
    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag && ub) return *ub;
    return -1;
}

static void destroy(pcoll_t *ctx)
{
    pc_shm_group_call_close(ctx);
    pc_shm_allreduce_close(ctx);
    if (ctx->engine) pc_engine_destroy(ctx->engine);
    pc_service_destroy(ctx->service);
    free(ctx->stall);
    pc_shrink_close(ctx);
    if (ctx->partial_free) ctx->partial_free(ctx->partial);
    pc_cache_clear(ctx);
    pc_requests_clear(ctx);
    pc_groups_destroy(&ctx->groups);
    pc_idpool_destroy(&ctx->ids);
    free(ctx->world.busy);
    free(ctx->object_channels);
    free(ctx->all_ranks);
    free(ctx->tuning);
    pc_nodes_destroy(&ctx->nodes);
    if (ctx->node_comm != MPI_COMM_NULL) MPI_Comm_free(&ctx->node_comm);
    if (ctx->comm != MPI_COMM_NULL) MPI_Comm_free(&ctx->comm);
    if (ctx->ctrl_comm != MPI_COMM_NULL) MPI_Comm_free(&ctx->ctrl_comm);
    pthread_mutex_destroy(&ctx->lock);
    pc_rec_destroy(&ctx->rec);
    free(ctx);
}

/* task: the context's listeners and handlers, on the holder */
static void open_task(pc_engine_t *e, void *arg)
{
    pcoll_t *ctx = arg;
    pc_stall_open(ctx);
    pc_shrink_open(ctx);
    pc_collective_open(ctx);
    pc_service_open(ctx);
    atomic_fetch_sub(&ctx->inflight, 1);
    pc_engine_notify(e);
}

static int nothing_inflight(void *arg) { return atomic_load(&((pcoll_t *)arg)->inflight) == 0; }

/* ---- pcoll_init, step by step: each step is collective, and the ranks
 * agree after each, so that a failure at one rank fails them all ---- */

/* The context's memory and its two duplicates of comm (MPI_ERRORS_RETURN). */
static int init_comms(MPI_Comm comm, int owns_mpi, pcoll_t **out, const char *fn)
{
    /* aligned: the recorder's flags keep a cache line to themselves */
    size_t bytes = (sizeof(pcoll_t) + 63) / 64 * 64;
    pcoll_t *ctx = aligned_alloc(64, bytes);
    int rc = ctx ? PCOLL_SUCCESS : pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the context");
    if (ctx) {
        memset(ctx, 0, sizeof *ctx);
        static atomic_int contexts = 0;
        ctx->id = atomic_fetch_add(&contexts, 1) + 1;
        ctx->owns_mpi = owns_mpi;
        ctx->comm = ctx->ctrl_comm = ctx->node_comm = MPI_COMM_NULL;
        pthread_mutex_init(&ctx->lock, NULL);
        pc_rec_init(&ctx->rec);
        ctx->world.broken_seq = UINT64_MAX;
        atomic_init(&ctx->inflight, 0);
    }
    MPI_Comm dup[2] = {MPI_COMM_NULL, MPI_COMM_NULL};
    for (int k = 0; k < 2; k++) { /* collective: taken part in even without memory */
        int mrc = MPI_Comm_dup(comm, &dup[k]);
        if (mrc == MPI_SUCCESS) mrc = MPI_Comm_set_errhandler(dup[k], MPI_ERRORS_RETURN);
        if (mrc != MPI_SUCCESS && rc == PCOLL_SUCCESS) rc = pc_mpi_error(mrc, fn, "MPI_Comm_dup");
    }
    if (ctx) {
        ctx->comm = dup[0];
        ctx->ctrl_comm = dup[1];
    } else {
        for (int k = 0; k < 2; k++)
            if (dup[k] != MPI_COMM_NULL) MPI_Comm_free(&dup[k]);
    }
    *out = ctx;
    return rc;
}

/* The node map, the settings (whose defaults depend on the machine), the
 * tag space and the tables of channels, groups and receive ids. */
static int init_tables(pcoll_t *ctx, pc_config_t *cfg, const char *fn)
{
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->size);
    pc_log_set_rank(ctx->rank, ctx->id);
    int local = 1;
    int rc = make_node_map(ctx, cfg->ranks_per_node, &local, fn);
    ctx->oversubscribed = oversubscribed(local);
    pc_config_for_machine(cfg, ctx->oversubscribed, rc == PCOLL_SUCCESS ? ctx->nodes.count : 1);
    atomic_init(&ctx->algo, (int)cfg->algo);
    atomic_init(&ctx->direct_bytes, cfg->direct_bytes);
    atomic_init(&ctx->small_bytes, cfg->small_bytes);
    atomic_init(&ctx->stall_warn_s, cfg->stall_warn_s);
    ctx->rec.shift_ns = (int64_t)cfg->timeline_shift_ns * ctx->rank;
    atomic_init(&ctx->timeout_s, cfg->timeout_s);
    ctx->partial_shm_bytes = cfg->partial_shm_bytes;
    ctx->exclude_ms = cfg->exclude_ms;
    ctx->node_deputy = cfg->node_deputy;
    ctx->shm_sizes = (pc_shm_sizes_t){cfg->shm_allreduce_bytes, cfg->shm_slice_bytes, cfg->shm_chunk_bytes};
    if (cfg->tuning.nrows > 0 && rc == PCOLL_SUCCESS) {
        if ((ctx->tuning = malloc(sizeof *ctx->tuning)))
            memcpy(ctx->tuning, &cfg->tuning, sizeof *ctx->tuning);
        else
            rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the tuning table");
    }
    ctx->check = cfg->check;
    long ub = tag_ub_of(ctx->comm);
    if (rc == PCOLL_SUCCESS && pc_tags_init(&ctx->tags, ub) != 0)
        rc = pc_error(PCOLL_ERR_LIMIT, fn, "MPI_TAG_UB is %ld; pcoll needs at least 2^%d - 1", ub, PC_TAGS_MIN_BITS);
    if (rc == PCOLL_SUCCESS && !(ctx->object_channels = calloc(ctx->tags.nchannels, 1)))
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the channel table");
    if (rc == PCOLL_SUCCESS && !(ctx->all_ranks = malloc(sizeof(int) * (size_t)ctx->size)))
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the list of ranks");
    for (int i = 0; rc == PCOLL_SUCCESS && i < ctx->size; i++) ctx->all_ranks[i] = i;
    if (rc == PCOLL_SUCCESS && pc_groups_init(&ctx->groups, ctx->size, ctx->rank) != PCOLL_SUCCESS)
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the group registry");
    if (rc == PCOLL_SUCCESS) pc_idpool_init(&ctx->ids, ctx->tags.nids);
    /* the largest service message: a HELLO or question listing every rank,
     * or an answer or activation carrying a bitmap of them */
    if (rc == PCOLL_SUCCESS && pc_service_create(ctx, 128 + 4 * (size_t)ctx->size, &ctx->service) != PCOLL_SUCCESS)
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the service channel");
    return rc;
}

/* The progress engine, its handlers on the holder, and a barrier: every
 * rank listens before anyone sends. */
static int init_engine(pcoll_t *ctx, const pc_config_t *cfg, const char *fn)
{
    pc_agree_over_t over = pc_agree_comm(ctx->comm);
    int rc = pc_engine_create(ctx->comm, ctx->ctrl_comm, ctx->node_comm, &ctx->tags, &cfg->policy, ctx->id,
                              &ctx->engine);
    if ((rc = pc_agree_step(&over, fn, rc)) != PCOLL_SUCCESS) return rc;
    atomic_fetch_add(&ctx->inflight, 1);
    if (pc_engine_post(ctx->engine, open_task, ctx) != PCOLL_SUCCESS)
        open_task(ctx->engine, ctx); /* no memory for the task: the progress thread is idle, nothing races */
    pc_engine_wait(ctx->engine, nothing_inflight, ctx);
    if ((rc = pc_agree_step(&over, fn, pc_shm_allreduce_open(ctx))) != PCOLL_SUCCESS)
        return rc;
    /* without it a group's members would disagree on the path: all or none */
    if ((rc = pc_agree_step(&over, fn, pc_shm_group_call_open(ctx))) != PCOLL_SUCCESS) return rc;
    int mrc = MPI_Barrier(ctx->comm);
    return mrc == MPI_SUCCESS ? PCOLL_SUCCESS : pc_mpi_error(mrc, fn, "MPI_Barrier");
}

/* PCOLL_TIMELINE: the process's first context records into PREFIX.R.jsonl,
 * its N-th into PREFIX.ctxN.R.jsonl (contexts created in the same order
 * at every rank get the same N) */
static int timeline_from_env(pcoll_t *ctx, const char *prefix, const char *fn)
{
    char name[300];
    if (ctx->id > 1)
        snprintf(name, sizeof name, "%s.ctx%d", prefix, ctx->id);
    else
        snprintf(name, sizeof name, "%s", prefix);
    if (pc_timeline_begin(ctx, name, fn) == PCOLL_SUCCESS) return PCOLL_SUCCESS;
    char why[512];
    snprintf(why, sizeof why, "%s", pcoll_last_error());
    return pc_error(PCOLL_ERR_CONFIG, fn, "PCOLL_TIMELINE=%s: %s", prefix, why);
}

int pcoll_init(MPI_Comm comm, pcoll_t **out)
{
    static const char *fn = "pcoll_init";
    if (out) *out = NULL;
    int owns_mpi = 0;
    int rc = check_mpi_threads(&owns_mpi);
    if (rc == PCOLL_ERR_STATE) return rc; /* no MPI to agree with */
    if (comm == MPI_COMM_NULL) {
        if (owns_mpi) MPI_Finalize();
        return pc_error(PCOLL_ERR_ARG, fn, "comm is MPI_COMM_NULL");
    }
    /* what each rank can check alone; then the ranks agree before anything
     * else collective happens, so a failure at one rank fails them all */
    pc_config_t cfg;
    pc_config_defaults(&cfg);
    int bad = -1;
    if (rc == PCOLL_SUCCESS && !out) rc = pc_error(PCOLL_ERR_NULL, fn, "ctx (the output pointer) is NULL");
    if (rc == PCOLL_SUCCESS) rc = pc_config_from_env(&cfg, fn, &bad);
    pc_agree_field_t fields[PC_CONFIG_MAX_VARS];
    int nfields = pc_config_fields(&cfg, fields);
    pc_agree_over_t over = pc_agree_comm(comm);
    if ((rc = pc_agree(&over, fn, rc, bad, fields, nfields, PCOLL_ERR_CONFIG)) != PCOLL_SUCCESS) {
        if (owns_mpi) MPI_Finalize();
        return rc;
    }
    pcoll_set_log_level((pcoll_log_level_t)cfg.log_level);
    pcoll_t *ctx = NULL;
    rc = pc_agree_step(&over, fn, init_comms(comm, owns_mpi, &ctx, fn));
    if (rc == PCOLL_SUCCESS) rc = pc_agree_step(&over, fn, init_tables(ctx, &cfg, fn));
    if (rc == PCOLL_SUCCESS) rc = init_engine(ctx, &cfg, fn);
    if (rc == PCOLL_SUCCESS && cfg.timeline[0]) rc = timeline_from_env(ctx, cfg.timeline, fn);
    if (rc != PCOLL_SUCCESS) {
        if (ctx) destroy(ctx);
        if (owns_mpi) MPI_Finalize();
        return rc;
    }
    pc_log(PCOLL_LOG_INFO,
           "initialized: %d ranks on %d nodes, algo %s, %d tag bits (%u channels, %u ids), %s, spin idle/active/wait "
           "%d/%d/%d us, max sleep %d us, stall warning %g s, timeout %g s%s",
           ctx->size, ctx->nodes.count, pcoll_allreduce_algo_name(cfg.algo), ctx->tags.bits, ctx->tags.nchannels,
           ctx->tags.nids, ctx->oversubscribed ? "oversubscribed" : "not oversubscribed", cfg.policy.idle_spin_us,
           cfg.policy.active_spin_us, cfg.policy.wait_spin_us, cfg.policy.max_sleep_us, cfg.stall_warn_s,
           cfg.timeout_s, cfg.check ? ", checking every operation's arguments (PCOLL_CHECK)" : "");
    *out = ctx;
    return PCOLL_SUCCESS;
}

int pcoll_finalize(pcoll_t **pctx)
{
    if (!pctx) return PC_ERR(PCOLL_ERR_NULL, "ctx (the pointer to the context) is NULL");
    pcoll_t *ctx = *pctx;
    if (ctx && atomic_load(&ctx->shrunk)) {
        /* what it shares with a dead rank cannot be freed collectively: its
         * progress thread stops, its memory stays until the process ends
         * (on a list, where it is still reachable) */
        static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
        static pcoll_t *retired;
        pc_engine_halt(ctx->engine);
        pthread_mutex_lock(&retired_lock);
        if (!ctx->retired) { /* a second finalize of it: nothing more to do */
            ctx->retired = 1;
            ctx->retired_next = retired;
            retired = ctx;
        }
        pthread_mutex_unlock(&retired_lock);
        *pctx = NULL;
        return PCOLL_SUCCESS;
    }
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    /* objects still alive are freed collectively, newest first (the list is
     * the same at every rank because creation and free are collective) */
    for (;;) {
        pthread_mutex_lock(&ctx->lock);
        pc_object_link_t *link = ctx->objects;
        pthread_mutex_unlock(&ctx->lock);
        if (!link) break;
        pc_log(PCOLL_LOG_WARN, "pcoll_finalize: freeing a persistent object that was not freed");
        if (link->free_fn(link->object) != PCOLL_SUCCESS) {
            /* it could not drain (a timeout): forget it, leaking it */
            pc_log(PCOLL_LOG_WARN, "pcoll_finalize: %s; the object is left as it is", pcoll_last_error());
            pc_ctx_unregister_object(ctx, link);
        }
    }
    pc_engine_wait(ctx->engine, nothing_inflight, ctx);
    if (pc_tl_on(ctx) && pc_timeline_end(ctx, __func__) != PCOLL_SUCCESS)
        pc_log(PCOLL_LOG_WARN, "pcoll_finalize: %s", pcoll_last_error());
    if (ctx->live_requests)
        pc_log(PCOLL_LOG_WARN, "pcoll_finalize: %ld requests were never completed with pcoll_wait/pcoll_test",
               ctx->live_requests);
    int owns = ctx->owns_mpi;
    destroy(ctx);
    *pctx = NULL;
    if (owns) MPI_Finalize();
    return PCOLL_SUCCESS;
}

int pcoll_rank(const pcoll_t *ctx) { return ctx ? ctx->rank : -1; }
int pcoll_size(const pcoll_t *ctx) { return ctx ? ctx->size : -1; }

int pcoll_get_stats(const pcoll_t *ctx, pcoll_stats_t *stats)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!stats) return PC_ERR(PCOLL_ERR_NULL, "stats is NULL");
    pc_engine_stats_t e;
    pc_engine_stats(ctx->engine, &e);
    memset(stats, 0, sizeof *stats);
    stats->data_bytes_sent = e.data_bytes;
    stats->data_messages_sent = e.data_msgs;
    stats->control_bytes_sent = e.ctrl_bytes;
    stats->control_messages_sent = e.ctrl_msgs;
    stats->given_up_messages = e.stale_requests;
    stats->stale_messages_dropped = e.stale_dropped;
    return PCOLL_SUCCESS;
}

int pcoll_get_progress_policy(const pcoll_t *ctx, pcoll_progress_policy_t *policy)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!policy) return PC_ERR(PCOLL_ERR_NULL, "policy is NULL");
    pc_engine_get_policy(ctx->engine, policy);
    memset(policy->reserved, 0, sizeof policy->reserved); /* what the library returns has a zero tail */
    return PCOLL_SUCCESS;
}

int pcoll_set_progress_policy(pcoll_t *ctx, const pcoll_progress_policy_t *p)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!p) return PC_ERR(PCOLL_ERR_NULL, "policy is NULL");
    if (p->idle_spin_us < 0 || p->active_spin_us < 0 || p->wait_spin_us < 0)
        return PC_ERR(PCOLL_ERR_ARG, "spin times must be >= 0 (idle_spin_us %d, active_spin_us %d, wait_spin_us %d)",
                      p->idle_spin_us, p->active_spin_us, p->wait_spin_us);
    if (p->max_sleep_us < 1) return PC_ERR(PCOLL_ERR_ARG, "max_sleep_us is %d; it must be >= 1", p->max_sleep_us);
    pc_engine_set_policy(ctx->engine, p);
    return PCOLL_SUCCESS;
}

int pcoll_set_allreduce_algo(pcoll_t *ctx, pcoll_allreduce_algo_t algo)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if ((int)algo < PCOLL_ALGO_AUTO || algo > PCOLL_ALGO_DIRECT)
        return PC_ERR(PCOLL_ERR_ARG, "algo %d is not a pcoll_allreduce_algo_t", (int)algo);
    atomic_store(&ctx->algo, (int)algo);
    return PCOLL_SUCCESS;
}

int pcoll_set_allreduce_thresholds(pcoll_t *ctx, size_t direct_bytes, size_t small_bytes)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    atomic_store(&ctx->direct_bytes, direct_bytes);
    atomic_store(&ctx->small_bytes, small_bytes);
    return PCOLL_SUCCESS;
}

int pcoll_set_timeouts(pcoll_t *ctx, double stall_warn_s, double timeout_s)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!(stall_warn_s >= 0 && stall_warn_s <= 1e6))
        return PC_ERR(PCOLL_ERR_ARG, "stall_warn_s is %g; it must be 0 (off) to 1000000 seconds", stall_warn_s);
    if (!(timeout_s >= 0 && timeout_s <= 1e6))
        return PC_ERR(PCOLL_ERR_ARG, "timeout_s is %g; it must be 0 (never) to 1000000 seconds", timeout_s);
    atomic_store(&ctx->stall_warn_s, stall_warn_s);
    atomic_store(&ctx->timeout_s, timeout_s);
    return PCOLL_SUCCESS;
}

int pcoll_get_timeouts(const pcoll_t *ctx, double *stall_warn_s, double *timeout_s)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!stall_warn_s || !timeout_s) return PC_ERR(PCOLL_ERR_NULL, "%s is NULL", !stall_warn_s ? "stall_warn_s" : "timeout_s");
    *stall_warn_s = atomic_load(&((pcoll_t *)ctx)->stall_warn_s);
    *timeout_s = atomic_load(&((pcoll_t *)ctx)->timeout_s);
    return PCOLL_SUCCESS;
}

int pc_ctx_alloc_channel(pcoll_t *ctx, const char *fn, uint32_t *channel, uint64_t *object_id)
{
    uint32_t n = ctx->tags.nchannels;
    pthread_mutex_lock(&ctx->lock);
    /* round robin over 1 .. n-1 (0 is the context's): a freed channel is
     * reused as late as possible */
    for (uint32_t tries = 0; tries + 1 < n; tries++) {
        uint32_t c = 1 + ctx->next_object_channel % (n - 1);
        ctx->next_object_channel = c % (n - 1);
        if (!ctx->object_channels[c]) {
            ctx->object_channels[c] = 1;
            *object_id = ++ctx->objects_created;
            pthread_mutex_unlock(&ctx->lock);
            *channel = c;
            return PCOLL_SUCCESS;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return pc_error(PCOLL_ERR_LIMIT, fn, "all %u object channels are in use (MPI_TAG_UB allows no more); free some objects",
                    n - 1);
}

void pc_ctx_free_channel(pcoll_t *ctx, uint32_t channel)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->object_channels[channel] = 0;
    pthread_mutex_unlock(&ctx->lock);
}

void pc_ctx_register_object(pcoll_t *ctx, pc_object_link_t *link)
{
    pthread_mutex_lock(&ctx->lock);
    link->next = ctx->objects;
    ctx->objects = link;
    atomic_fetch_add(&ctx->block_watchers, link->watches_blocks != 0);
    pthread_mutex_unlock(&ctx->lock);
}

void pc_ctx_unregister_object(pcoll_t *ctx, pc_object_link_t *link)
{
    pthread_mutex_lock(&ctx->lock);
    for (pc_object_link_t **pp = &ctx->objects; *pp; pp = &(*pp)->next)
        if (*pp == link) {
            *pp = link->next;
            atomic_fetch_sub(&ctx->block_watchers, link->watches_blocks != 0);
            break;
        }
    pthread_mutex_unlock(&ctx->lock);
}

void pc_ctx_set_block_hook(pcoll_t *ctx, pc_block_hook_t hook, void *arg)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->block_hook = hook;
    ctx->block_hook_arg = arg;
    pthread_mutex_unlock(&ctx->lock);
}

int pc_ctx_block(pcoll_t *ctx, uint64_t object, uint32_t channel, int self_watches)
{
    /* the common case without the lock: no object (but this call's own)
     * watches blocked calls.  An object registered just now sees this call
     * as not blocked, as if it had come a moment earlier. */
    if (atomic_load(&ctx->block_watchers) - (self_watches != 0) <= 0) return 0;
    pthread_mutex_lock(&ctx->lock);
    /* the object a call is about does not count its own blocked calls */
    pc_block_hook_t hook = atomic_load(&ctx->block_watchers) - (self_watches != 0) > 0 ? ctx->block_hook : NULL;
    void *arg = ctx->block_hook_arg;
    pthread_mutex_unlock(&ctx->lock);
    if (!hook) return 0; /* the common case: nobody to tell, nothing sent */
    hook(ctx, arg, 1, object, channel);
    return 1;
}

void pc_ctx_unblock(pcoll_t *ctx, uint64_t object, uint32_t channel, int told)
{
    if (!told) return;
    pthread_mutex_lock(&ctx->lock);
    pc_block_hook_t hook = ctx->block_hook;
    void *arg = ctx->block_hook_arg;
    pthread_mutex_unlock(&ctx->lock);
    if (hook) hook(ctx, arg, -1, object, channel);
}
