#include "context.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"

int pc_ctx_check(const pcoll_t *ctx, const char *fn)
{
    if (!ctx) return pc_error(PCOLL_ERR_NULL, fn, "ctx is NULL (call pcoll_init first)");
    return PCOLL_SUCCESS;
}

static int check_mpi_threads(int *owns_mpi)
{
    int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Finalized(&finalized);
    if (finalized) return PC_ERR(PCOLL_ERR_STATE, "MPI has already been finalized");
    MPI_Initialized(&initialized);
    *owns_mpi = 0;
    if (!initialized) {
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) return pc_mpi_error(rc, "pcoll_init", "MPI_Init_thread");
        *owns_mpi = 1;
    }
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        static const char *levels[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED"};
        const char *have = provided >= 0 && provided <= 2 ? levels[provided] : "unknown";
        if (*owns_mpi) MPI_Finalize();
        return pc_error(PCOLL_ERR_THREAD_LEVEL, "pcoll_init",
                        "MPI provides %s; pcoll's progress thread needs MPI_THREAD_MULTIPLE "
                        "(initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...))",
                        have);
    }
    return PCOLL_SUCCESS;
}

/* Collective: does this node run more threads (two per rank: application and
 * progress) than it has CPUs, or is this process bound to a single CPU? */
static int detect_oversubscription(MPI_Comm comm)
{
    MPI_Comm node;
    int local = 1;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t mask;
    int mine = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : (int)online;
    return 2L * local > online || mine < 2;
}

static void destroy(pcoll_t *ctx)
{
    if (ctx->engine) pc_engine_destroy(ctx->engine);
    pc_cache_clear(ctx);
    pc_groups_destroy(&ctx->groups);
    free(ctx->object_channels);
    if (ctx->comm != MPI_COMM_NULL) MPI_Comm_free(&ctx->comm);
    pthread_mutex_destroy(&ctx->lock);
    int owns = ctx->owns_mpi;
    free(ctx);
    if (owns) MPI_Finalize();
}

int pcoll_init(MPI_Comm comm, pcoll_t **out)
{
    if (!out) return PC_ERR(PCOLL_ERR_NULL, "ctx (the output pointer) is NULL");
    *out = NULL;
    int owns_mpi = 0;
    int rc = check_mpi_threads(&owns_mpi);
    if (rc != PCOLL_SUCCESS) return rc;
    if (comm == MPI_COMM_NULL) {
        if (owns_mpi) MPI_Finalize();
        return PC_ERR(PCOLL_ERR_ARG, "comm is MPI_COMM_NULL");
    }
    /* parse what can be parsed before anything collective, so that a bad
     * variable fails at every rank without a hang */
    pc_config_t cfg;
    pc_config_defaults(&cfg, 0);
    if ((rc = pc_config_from_env(&cfg)) != PCOLL_SUCCESS) {
        if (owns_mpi) MPI_Finalize();
        return rc;
    }
    pcoll_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        if (owns_mpi) MPI_Finalize();
        return PC_ERR(PCOLL_ERR_NOMEM, "no memory for the context");
    }
    ctx->owns_mpi = owns_mpi;
    ctx->comm = MPI_COMM_NULL;
    pthread_mutex_init(&ctx->lock, NULL);
    atomic_init(&ctx->algo, (int)cfg.algo);
    atomic_init(&ctx->direct_bytes, cfg.direct_bytes);
    atomic_init(&ctx->small_bytes, cfg.small_bytes);
    ctx->partial_shm_bytes = cfg.partial_shm_bytes;
    atomic_init(&ctx->inflight, 0);

    int mrc = MPI_Comm_dup(comm, &ctx->comm);
    if (mrc != MPI_SUCCESS) {
        ctx->comm = MPI_COMM_NULL;
        rc = pc_mpi_error(mrc, "pcoll_init", "MPI_Comm_dup");
        goto fail;
    }
    MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->size);
    pc_log_set_rank(ctx->rank);
    /* the policy defaults depend on the machine; the variables still win */
    ctx->oversubscribed = detect_oversubscription(ctx->comm);
    pc_config_defaults(&cfg, ctx->oversubscribed);
    if ((rc = pc_config_from_env(&cfg)) != PCOLL_SUCCESS) goto fail;

    int *tag_ub = NULL, flag = 0;
    MPI_Comm_get_attr(ctx->comm, MPI_TAG_UB, &tag_ub, &flag);
    if (!flag || pc_tags_init(&ctx->tags, *tag_ub) != 0) {
        rc = PC_ERR(PCOLL_ERR_LIMIT, "MPI_TAG_UB is %d; pcoll needs at least 2^23 - 1", flag ? *tag_ub : -1);
        goto fail;
    }
    uint32_t nobj = ctx->tags.nchannels - ctx->tags.first_object_chan;
    if (!(ctx->object_channels = calloc(nobj, 1))) {
        rc = PC_ERR(PCOLL_ERR_NOMEM, "no memory for the channel table");
        goto fail;
    }
    if ((rc = pc_groups_init(&ctx->groups, ctx->size, ctx->rank, &ctx->tags)) != PCOLL_SUCCESS) {
        rc = PC_ERR(rc, "no memory for the group registry");
        goto fail;
    }
    if ((rc = pc_engine_create(ctx->comm, &ctx->tags, &cfg.policy, &ctx->engine)) != PCOLL_SUCCESS) goto fail;
    pc_log(PCOLL_LOG_INFO,
           "initialized: %d ranks, algo %s, %d channel bits, %s, spin idle/active/wait %d/%d/%d us, max sleep %d us",
           ctx->size, pcoll_allreduce_algo_name(cfg.algo), ctx->tags.chan_bits,
           ctx->oversubscribed ? "oversubscribed" : "not oversubscribed", cfg.policy.idle_spin_us,
           cfg.policy.active_spin_us, cfg.policy.wait_spin_us, cfg.policy.max_sleep_us);
    *out = ctx;
    return PCOLL_SUCCESS;
fail:
    destroy(ctx);
    return rc;
}

static int nothing_inflight(void *arg) { return atomic_load(&((pcoll_t *)arg)->inflight) == 0; }

int pcoll_finalize(pcoll_t **pctx)
{
    if (!pctx) return PC_ERR(PCOLL_ERR_NULL, "ctx (the pointer to the context) is NULL");
    pcoll_t *ctx = *pctx;
    int rc = pc_ctx_check(ctx, __func__);
    if (rc != PCOLL_SUCCESS) return rc;
    /* partial objects still alive are freed collectively, newest first (the
     * list is the same at every rank because creation and free are collective) */
    for (;;) {
        pthread_mutex_lock(&ctx->lock);
        pc_partial_link_t *link = ctx->partials;
        pthread_mutex_unlock(&ctx->lock);
        if (!link) break;
        pc_log(PCOLL_LOG_WARN, "pcoll_finalize: freeing a partial object that was not freed");
        link->free_fn(link->object); /* unregisters itself */
    }
    pc_engine_wait(ctx->engine, nothing_inflight, ctx);
    if (ctx->live_requests)
        pc_log(PCOLL_LOG_WARN, "pcoll_finalize: %ld requests were never completed with pcoll_wait/pcoll_test",
               ctx->live_requests);
    destroy(ctx);
    *pctx = NULL;
    return PCOLL_SUCCESS;
}

int pcoll_rank(const pcoll_t *ctx) { return ctx ? ctx->rank : -1; }
int pcoll_size(const pcoll_t *ctx) { return ctx ? ctx->size : -1; }

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

int pc_ctx_alloc_channel(pcoll_t *ctx, uint32_t *channel)
{
    uint32_t nobj = ctx->tags.nchannels - ctx->tags.first_object_chan;
    pthread_mutex_lock(&ctx->lock);
    /* round robin: a freed channel is reused as late as possible */
    for (uint32_t tries = 0; tries < nobj; tries++) {
        uint32_t c = ctx->next_object_channel;
        ctx->next_object_channel = (c + 1) % nobj;
        if (!ctx->object_channels[c]) {
            ctx->object_channels[c] = 1;
            pthread_mutex_unlock(&ctx->lock);
            *channel = ctx->tags.first_object_chan + c;
            return PCOLL_SUCCESS;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return PC_ERR(PCOLL_ERR_LIMIT, "all %u object channels are in use; free some objects", nobj);
}

void pc_ctx_free_channel(pcoll_t *ctx, uint32_t channel)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->object_channels[channel - ctx->tags.first_object_chan] = 0;
    pthread_mutex_unlock(&ctx->lock);
}

void pc_ctx_register_object(pcoll_t *ctx, pc_partial_link_t *link)
{
    pthread_mutex_lock(&ctx->lock);
    link->next = ctx->partials;
    ctx->partials = link;
    ctx->nparkers += link->park_fn != NULL;
    pthread_mutex_unlock(&ctx->lock);
}

void pc_ctx_unregister_object(pcoll_t *ctx, pc_partial_link_t *link)
{
    pthread_mutex_lock(&ctx->lock);
    for (pc_partial_link_t **pp = &ctx->partials; *pp; pp = &(*pp)->next)
        if (*pp == link) {
            *pp = link->next;
            ctx->nparkers -= link->park_fn != NULL;
            break;
        }
    pthread_mutex_unlock(&ctx->lock);
}

typedef struct park_task {
    pcoll_t *ctx;
    const pc_partial_link_t *except;
    int parked;
} park_task_t;

static void park_run(pc_engine_t *e, void *arg)
{
    (void)e;
    park_task_t *t = arg;
    pthread_mutex_lock(&t->ctx->lock);
    for (pc_partial_link_t *link = t->ctx->partials; link; link = link->next)
        if (link != t->except && link->park_fn) link->park_fn(link->object, t->parked);
    pthread_mutex_unlock(&t->ctx->lock);
    free(t);
}

void pc_ctx_park(pcoll_t *ctx, const pc_partial_link_t *except, int parked)
{
    pthread_mutex_lock(&ctx->lock);
    int others = ctx->nparkers - (except && except->park_fn ? 1 : 0);
    pthread_mutex_unlock(&ctx->lock);
    if (others <= 0) return; /* the common case: nobody to tell, nothing posted */
    park_task_t *t = malloc(sizeof *t);
    if (!t) {
        pc_log(PCOLL_LOG_ERROR, "no memory to report a blocking call to partial objects");
        return;
    }
    t->ctx = ctx;
    t->except = except;
    t->parked = parked;
    if (pc_engine_post(ctx->engine, park_run, t) != PCOLL_SUCCESS) free(t);
}
