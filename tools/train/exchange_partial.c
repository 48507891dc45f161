/* The exchanges on pcoll partial objects:
 *   eager-SGD (solo, majority, quorum:Q): gradients, ACCUMULATE mode, so
 *     that a gradient that misses a round waits in the pending buffer for a
 *     later one and nothing is lost;
 *   WAGMA-SGD (wagma, wagma:S): models, a GROUP object in AVERAGE mode (a
 *     rank that is late contributes its last model; a call returns the
 *     model averaged by the library's rule); every sync_every-th round is a
 *     global average.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "exchange.h"

typedef struct partial_state {
    pcoll_partial_t *p;
} partial_state_t;

static void fill_info(const pcoll_partial_info_t *pi, exchange_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->rounds = pi->rounds;
    info->own_included = pi->own_included;
    info->active = pi->active;
    info->contributions = pi->contributions;
    info->left_out_rounds = pi->left_out_rounds;
    info->caught_up = pi->caught_up;
}

/* update holds the delivered sum: make it sum / P, or zeros when no round
 * was delivered */
static void deliver(const exchange_t *ex, const pcoll_partial_info_t *pi, float *update)
{
    const size_t n = ex->cfg.count;
    if (pi->rounds == 0) {
        memset(update, 0, n * sizeof *update);
        return;
    }
    if (ex->scale != 1.0f)
        for (size_t i = 0; i < n; i++) update[i] *= ex->scale;
}

static int partial_step(exchange_t *ex, const float *grad, float *update, exchange_info_t *info)
{
    partial_state_t *st = ex->impl;
    pcoll_partial_info_t pi;
    int rc = pcoll_partial_allreduce(st->p, grad, update, &pi);
    if (rc != PCOLL_SUCCESS) return tr_fail("pcoll_partial_allreduce: %s", pcoll_last_error());
    deliver(ex, &pi, update);
    fill_info(&pi, info);
    return 0;
}

static int partial_finish(exchange_t *ex, const float *model, float *update, exchange_info_t *info)
{
    (void)model;
    partial_state_t *st = ex->impl;
    pcoll_partial_info_t pi;
    int rc = pcoll_partial_flush(st->p, update, &pi);
    if (rc != PCOLL_SUCCESS) return tr_fail("pcoll_partial_flush: %s", pcoll_last_error());
    deliver(ex, &pi, update);
    fill_info(&pi, info);
    return 0;
}

static int partial_destroy(exchange_t *ex)
{
    partial_state_t *st = ex->impl;
    int rc = 0;
    if (!st) return 0;
    if (st->p && pcoll_partial_free(&st->p) != PCOLL_SUCCESS)
        rc = tr_fail("pcoll_partial_free: %s", pcoll_last_error());
    free(st);
    ex->impl = NULL;
    return rc;
}

static const exchange_ops_t partial_ops = {partial_step, partial_finish, partial_destroy, NULL};

/* WAGMA: model in, the new model (the group's average by the library's
 * rule: a PCOLL_AVERAGE object) out */
static int wagma_step(exchange_t *ex, const float *model, float *out, exchange_info_t *info)
{
    partial_state_t *st = ex->impl;
    pcoll_partial_info_t pi;
    int rc = pcoll_partial_allreduce(st->p, model, out, &pi);
    if (rc != PCOLL_SUCCESS) return tr_fail("wagma: %s", pcoll_last_error());
    fill_info(&pi, info);
    return 0;
}

static int wagma_finish(exchange_t *ex, const float *model, float *out, exchange_info_t *info)
{
    partial_state_t *st = ex->impl;
    pcoll_partial_info_t pi;
    /* the flush averages the current models, not the last ones exchanged */
    int rc = pcoll_partial_deposit(st->p, model);
    if (rc == PCOLL_SUCCESS) rc = pcoll_partial_flush(st->p, out, &pi);
    if (rc != PCOLL_SUCCESS) return tr_fail("wagma: %s", pcoll_last_error());
    fill_info(&pi, info);
    return 0;
}

static const exchange_ops_t wagma_ops = {wagma_step, wagma_finish, partial_destroy, NULL};

int exchange_partial_setup(exchange_t *ex)
{
    const char *a = ex->cfg.algo;
    int wagma = strcmp(a, "wagma") == 0 || strncmp(a, "wagma:", 6) == 0;
    if (!(strcmp(a, "solo") == 0 || strcmp(a, "majority") == 0 || strncmp(a, "quorum", 6) == 0 || wagma)) return 1;
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    char spec[64];
    snprintf(spec, sizeof spec, "group%s", wagma ? a + 5 : "");
    if (pcoll_partial_config_parse(wagma ? spec : a, &cfg) != PCOLL_SUCCESS)
        return tr_fail("--algo %s: %s", a, pcoll_last_error());
    if (ex->cfg.sync_every < 0) return tr_fail("--sync-every must be >= 0");
    cfg.mode = wagma ? PCOLL_AVERAGE : PCOLL_ACCUMULATE;
    cfg.sync_every = ex->cfg.sync_every;
    cfg.seed = ex->cfg.seed;
    if (!ex->cfg.ctx) return tr_fail("--algo %s needs a pcoll context", a);
    partial_state_t *st = calloc(1, sizeof *st);
    if (!st) return tr_fail("out of memory");
    int rc = pcoll_partial_create(ex->cfg.ctx, ex->cfg.count, PCOLL_FLOAT32, &cfg, &st->p);
    if (rc != PCOLL_SUCCESS) {
        free(st);
        return tr_fail("--algo %s: %s", a, pcoll_last_error());
    }
    ex->impl = st;
    ex->ops = wagma ? &wagma_ops : &partial_ops;
    ex->models = wagma;
    return 0;
}
