/* Gradient exchange: the synchronous algorithms (MPI_Allreduce, pcoll_allreduce)
 * and the dispatch to the partial ones (exchange_partial.c) and to the
 * dynamic groups (exchange_preduce.c). */
#include "exchange.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

static void scale_into(const float *sum, float *update, size_t n, float s)
{
    if (s == 1.0f && sum == update) return; /* one rank */
    for (size_t i = 0; i < n; i++) update[i] = sum[i] * s;
}

void exchange_synchronous_done(exchange_t *ex, const float *sum, float *update, exchange_info_t *info)
{
    scale_into(sum, update, ex->cfg.count, ex->scale);
    memset(info, 0, sizeof *info);
    info->rounds = 1;
    info->own_included = 1;
    info->active = ex->nranks;
    info->contributions = (uint64_t)ex->nranks;
}

static int mpi_step(exchange_t *ex, const float *grad, float *update, exchange_info_t *info)
{
    if (ex->cfg.count > (size_t)INT32_MAX) return tr_fail("MPI_Allreduce: %zu values exceed an int count", ex->cfg.count);
    int rc = MPI_Allreduce(grad, update, (int)ex->cfg.count, MPI_FLOAT, MPI_SUM, ex->cfg.comm);
    if (rc != MPI_SUCCESS) return tr_fail("MPI_Allreduce failed (error %d)", rc);
    exchange_synchronous_done(ex, update, update, info);
    return 0;
}

static int sync_step(exchange_t *ex, const float *grad, float *update, exchange_info_t *info)
{
    int rc = pcoll_allreduce(ex->cfg.ctx, grad, update, ex->cfg.count, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0);
    if (rc != PCOLL_SUCCESS) return tr_fail("pcoll_allreduce: %s", pcoll_last_error());
    exchange_synchronous_done(ex, update, update, info);
    return 0;
}

int exchange_nothing_pending(exchange_t *ex, const float *model, float *update, exchange_info_t *info)
{
    (void)model;
    memset(update, 0, ex->cfg.count * sizeof *update);
    memset(info, 0, sizeof *info);
    return 0;
}

static int sync_destroy(exchange_t *ex)
{
    (void)ex;
    return 0;
}

static const exchange_ops_t mpi_ops = {mpi_step, exchange_nothing_pending, sync_destroy, NULL};
static const exchange_ops_t sync_ops = {sync_step, exchange_nothing_pending, sync_destroy, NULL};

int exchange_needs_pcoll(const char *algo) { return strcmp(algo, "mpi") != 0; }


int exchange_create(const exchange_config_t *cfg, exchange_t **out)
{
    *out = NULL;
    if (!cfg->algo) return tr_fail("--algo: missing");
    if (cfg->count == 0) return tr_fail("gradient exchange: no parameters");
    exchange_t *ex = calloc(1, sizeof *ex);
    if (!ex) return tr_fail("out of memory");
    ex->cfg = *cfg;
    int rc = MPI_Comm_size(cfg->comm, &ex->nranks);
    if (rc != MPI_SUCCESS) {
        free(ex);
        return tr_fail("MPI_Comm_size failed (error %d)", rc);
    }
    ex->scale = 1.0f / (float)ex->nranks;
    if (cfg->fusion_plan) {
        if (exchange_fusion_setup(ex) != 0) {
            free(ex);
            return -1;
        }
    } else if (strcmp(cfg->algo, "mpi") == 0) {
        ex->ops = &mpi_ops;
    } else if (strcmp(cfg->algo, "sync") == 0) {
        if (!cfg->ctx) {
            free(ex);
            return tr_fail("--algo sync needs a pcoll context");
        }
        ex->ops = &sync_ops;
    } else {
        int p = exchange_partial_setup(ex);
        if (p > 0) p = exchange_preduce_setup(ex);
        if (p != 0) {
            free(ex);
            if (p > 0)
                return tr_fail("--algo \"%s\": unknown algorithm (mpi, sync, solo, majority, quorum:Q, wagma[:S], "
                               "preduce:SPEC)",
                               cfg->algo);
            return -1;
        }
    }
    *out = ex;
    return 0;
}

int exchange_step(exchange_t *ex, const float *grad, float *update, exchange_info_t *info)
{
    return ex->ops->step(ex, grad, update, info);
}

int exchange_finish(exchange_t *ex, const float *model, float *update, exchange_info_t *info)
{
    return ex->ops->finish(ex, model, update, info);
}

int exchange_averages_models(const exchange_t *ex) { return ex->models; }

int exchange_wants_layers(const exchange_t *ex) { return ex->ops->layer_ready != NULL; }

int exchange_layer_ready(exchange_t *ex, int layer)
{
    return ex->ops->layer_ready ? ex->ops->layer_ready(ex, layer) : 0;
}

const exchange_stats_t *exchange_get_stats(const exchange_t *ex) { return &ex->stats; }

int exchange_free(exchange_t **ex)
{
    if (!ex || !*ex) return 0;
    int rc = (*ex)->ops->destroy(*ex);
    free(*ex);
    *ex = NULL;
    return rc;
}

void exchange_abandon(exchange_t **ex)
{
    if (!ex || !*ex) return;
    free(*ex);
    *ex = NULL;
}
