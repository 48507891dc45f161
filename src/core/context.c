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
#include "op.h"
#include "service.h"
#include "stall.h"

int pc_ctx_check(const pcoll_t *ctx, const char *fn)
{
    if (!ctx) return pc_error(PCOLL_ERR_NULL, fn, "ctx is NULL (call pcoll_init first)");
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

/* Collective: which ranks share a node (MPI_COMM_TYPE_SHARED), as
 * ctx->node_of; returns the number of ranks on this one (1 if MPI cannot
 * say: every rank is then a node of its own, alike at every rank). */
static int detect_nodes(pcoll_t *ctx, const char *fn, int *rc)
{
    MPI_Comm node;
    int local = 1, label = ctx->rank;
    if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Allreduce(MPI_IN_PLACE, &label, 1, MPI_INT, MPI_MIN, node);
        MPI_Comm_free(&node);
    }
    int mrc = MPI_Allgather(&label, 1, MPI_INT, ctx->node_of, 1, MPI_INT, ctx->comm);
    if (mrc != MPI_SUCCESS && *rc == PCOLL_SUCCESS) *rc = pc_mpi_error(mrc, fn, "MPI_Allgather");
    return local;
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
    if (ctx->engine) pc_engine_destroy(ctx->engine);
    pc_service_destroy(ctx->service);
    free(ctx->stall);
    if (ctx->partial_free) ctx->partial_free(ctx->partial);
    pc_cache_clear(ctx);
    pc_requests_clear(ctx);
    pc_groups_destroy(&ctx->groups);
    pc_idpool_destroy(&ctx->ids);
    free(ctx->world.busy);
    free(ctx->object_channels);
    free(ctx->node_of);
    if (ctx->comm != MPI_COMM_NULL) MPI_Comm_free(&ctx->comm);
    if (ctx->ctrl_comm != MPI_COMM_NULL) MPI_Comm_free(&ctx->ctrl_comm);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* task: the context's listeners and handlers, on the holder */
static void open_task(pc_engine_t *e, void *arg)
{
    pcoll_t *ctx = arg;
    pc_stall_open(ctx);
    pc_collective_open(ctx);
    pc_service_open(ctx);
    atomic_fetch_sub(&ctx->inflight, 1);
    pc_engine_notify(e);
}

static int nothing_inflight(void *arg) { return atomic_load(&((pcoll_t *)arg)->inflight) == 0; }

static const char *algo_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return pcoll_allreduce_algo_name((pcoll_allreduce_algo_t)v);
}

/* The variables that must be equal everywhere, with this rank's values. */
static int config_fields(const pc_config_t *cfg, pc_agree_field_t *f)
{
    int n = 0;
    for (int i = 0; i < pc_config_nvars(); i++) {
        f[n].name = pc_config_var_name(i);
        f[n].value = (int64_t)pc_config_var_value(cfg, i);
        f[n].must_agree = pc_config_var_must_agree(i);
        f[n].text = strcmp(f[n].name, "PCOLL_ALLREDUCE_ALGO") == 0 ? algo_text : NULL;
        n++;
    }
    return n;
}

/* One init step at every rank; the others learn if it failed here. */
static int agree_step(MPI_Comm comm, int rc)
{
    struct {
        int status, rank;
    } in = {rc, 0}, worst = {0, 0};
    MPI_Comm_rank(comm, &in.rank);
    int mrc = MPI_Allreduce(&in, &worst, 1, MPI_2INT, MPI_MINLOC, comm);
    if (rc != PCOLL_SUCCESS) return rc; /* our own message says why */
    if (mrc != MPI_SUCCESS) return pc_mpi_error(mrc, "pcoll_init", "MPI_Allreduce");
    if (worst.status != PCOLL_SUCCESS)
        return pc_error(worst.status, "pcoll_init", "rank %d failed (%s); every rank fails", worst.rank,
                        pcoll_strerror(worst.status));
    return PCOLL_SUCCESS;
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
    pc_config_defaults(&cfg, 0);
    int bad = -1;
    if (rc == PCOLL_SUCCESS && !out) rc = pc_error(PCOLL_ERR_NULL, fn, "ctx (the output pointer) is NULL");
    if (rc == PCOLL_SUCCESS) rc = pc_config_from_env(&cfg, fn, &bad);
    pc_agree_field_t fields[32];
    int nfields = config_fields(&cfg, fields);
    rc = pc_agree(comm, fn, rc, bad, fields, nfields, PCOLL_ERR_CONFIG);
    if (rc != PCOLL_SUCCESS) {
        if (owns_mpi) MPI_Finalize();
        return rc;
    }

    int size = 0;
    MPI_Comm_size(comm, &size);
    pcoll_t *ctx = calloc(1, sizeof *ctx);
    int *node_of = malloc(sizeof(int) * (size_t)(size > 0 ? size : 1));
    if (ctx && node_of) {
        ctx->owns_mpi = owns_mpi;
        ctx->comm = MPI_COMM_NULL;
        ctx->ctrl_comm = MPI_COMM_NULL;
        pthread_mutex_init(&ctx->lock, NULL);
        ctx->world.broken_seq = UINT64_MAX;
        atomic_init(&ctx->inflight, 0);
        ctx->node_of = node_of;
    } else { /* no memory: every rank fails at the next agreement */
        free(ctx);
        free(node_of);
        ctx = NULL;
    }
    /* the duplicate: collective; its failure at any rank fails all */
    int mrc = MPI_Comm_dup(comm, ctx ? &ctx->comm : &(MPI_Comm){MPI_COMM_NULL});
    if (!ctx)
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the context");
    else if (mrc != MPI_SUCCESS) {
        ctx->comm = MPI_COMM_NULL;
        rc = pc_mpi_error(mrc, fn, "MPI_Comm_dup");
    } else if ((mrc = MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
        rc = pc_mpi_error(mrc, fn, "MPI_Comm_set_errhandler");
    if ((rc = agree_step(comm, rc)) != PCOLL_SUCCESS) goto fail;
    /* the control traffic's own communicator (collective) */
    if ((mrc = MPI_Comm_dup(ctx->comm, &ctx->ctrl_comm)) != MPI_SUCCESS) {
        ctx->ctrl_comm = MPI_COMM_NULL;
        rc = pc_mpi_error(mrc, fn, "MPI_Comm_dup");
    } else if ((mrc = MPI_Comm_set_errhandler(ctx->ctrl_comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
        rc = pc_mpi_error(mrc, fn, "MPI_Comm_set_errhandler");
    }
    if ((rc = agree_step(comm, rc)) != PCOLL_SUCCESS) goto fail;
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->size);
    pc_log_set_rank(ctx->rank);
    /* the policy defaults depend on the machine (collective); the variables
     * still win */
    ctx->oversubscribed = oversubscribed(detect_nodes(ctx, fn, &rc));
    pc_config_defaults(&cfg, ctx->oversubscribed);
    pc_config_from_env(&cfg, fn, &bad); /* parsed fine above */
    atomic_init(&ctx->algo, (int)cfg.algo);
    atomic_init(&ctx->direct_bytes, cfg.direct_bytes);
    atomic_init(&ctx->small_bytes, cfg.small_bytes);
    atomic_init(&ctx->stall_warn_s, cfg.stall_warn_s);
    atomic_init(&ctx->timeout_s, cfg.timeout_s);
    ctx->partial_shm_bytes = cfg.partial_shm_bytes;

    long ub = tag_ub_of(ctx->comm);
    if (pc_tags_init(&ctx->tags, ub) != 0)
        rc = pc_error(PCOLL_ERR_LIMIT, fn, "MPI_TAG_UB is %ld; pcoll needs at least 2^%d - 1", ub, PC_TAGS_MIN_BITS);
    if (rc == PCOLL_SUCCESS && !(ctx->object_channels = calloc(ctx->tags.nchannels, 1)))
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the channel table");
    if (rc == PCOLL_SUCCESS && pc_groups_init(&ctx->groups, ctx->size, ctx->rank) != PCOLL_SUCCESS)
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the group registry");
    pc_idpool_init(&ctx->ids, ctx->tags.nids);
    if (rc == PCOLL_SUCCESS) {
        /* the largest service message: a HELLO or question listing every
         * rank, or an answer or activation carrying a bitmap of them */
        size_t max = 128 + 4 * (size_t)ctx->size;
        if (pc_service_create(ctx, max, &ctx->service) != PCOLL_SUCCESS)
            rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for the service channel");
    }
    if ((rc = agree_step(ctx->comm, rc)) != PCOLL_SUCCESS) goto fail;
    /* collective (doorbells in node-shared memory) */
    rc = pc_engine_create(ctx->comm, ctx->ctrl_comm, &ctx->tags, &cfg.policy, &ctx->engine);
    if ((rc = agree_step(ctx->comm, rc)) != PCOLL_SUCCESS) goto fail;
    atomic_fetch_add(&ctx->inflight, 1);
    if (pc_engine_post(ctx->engine, open_task, ctx) != PCOLL_SUCCESS)
        open_task(ctx->engine, ctx); /* no memory for the task: the progress thread is idle, nothing races */
    pc_engine_wait(ctx->engine, nothing_inflight, ctx);
    /* every rank listens before anyone sends */
    mrc = MPI_Barrier(ctx->comm);
    if (mrc != MPI_SUCCESS) {
        rc = pc_mpi_error(mrc, fn, "MPI_Barrier");
        goto fail;
    }
    pc_log(PCOLL_LOG_INFO,
           "initialized: %d ranks, algo %s, %d tag bits (%u channels, %u ids), %s, spin idle/active/wait %d/%d/%d us, "
           "max sleep %d us, stall warning %g s, timeout %g s",
           ctx->size, pcoll_allreduce_algo_name(cfg.algo), ctx->tags.bits, ctx->tags.nchannels, ctx->tags.nids,
           ctx->oversubscribed ? "oversubscribed" : "not oversubscribed", cfg.policy.idle_spin_us,
           cfg.policy.active_spin_us, cfg.policy.wait_spin_us, cfg.policy.max_sleep_us, cfg.stall_warn_s,
           cfg.timeout_s);
    *out = ctx;
    return PCOLL_SUCCESS;
fail:
    if (ctx) {
        destroy(ctx);
    }
    if (owns_mpi) MPI_Finalize();
    return rc;
}

int pcoll_finalize(pcoll_t **pctx)
{
    if (!pctx) return PC_ERR(PCOLL_ERR_NULL, "ctx (the pointer to the context) is NULL");
    pcoll_t *ctx = *pctx;
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
    stats->data_bytes_sent = e.data_bytes;
    stats->data_messages_sent = e.data_msgs;
    stats->control_bytes_sent = e.ctrl_bytes;
    stats->control_messages_sent = e.ctrl_msgs;
    return PCOLL_SUCCESS;
}

int pcoll_get_progress_policy(const pcoll_t *ctx, pcoll_progress_policy_t *policy)
{
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!policy) return PC_ERR(PCOLL_ERR_NULL, "policy is NULL");
    pc_engine_get_policy(ctx->engine, policy);
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
