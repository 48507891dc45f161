/* The exchange on dynamic groups (Partial Reduce, Ripples), a model
 * exchange: after its local SGD step a rank is ready, asks the library for
 * a group (pcoll_preduce) and takes the group's weighted average as its new
 * model.
 *
 *   step:   k = k + 1;  model -> pcoll_preduce(obj, model, k) -> average
 *           k = max(k, the group's iteration)     (Partial Reduce 3.3: the
 *           members take the group's largest iteration, so a slow rank that
 *           averaged with fast ones is not stale forever); the training
 *           loop continues from step k (info.iteration), so every rank
 *           reaches the planned iterations at about the same time and a
 *           slow rank skips the steps its faster group members took
 *   finish: pcoll_preduce_free (drains the controller's last groups), then
 *           every rank's model averaged (pcoll_allreduce / P).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "exchange.h"

typedef struct preduce_state {
    pcoll_preduce_t *obj;
    uint64_t iteration; /* this rank's k */
} preduce_state_t;

static int preduce_step(exchange_t *ex, const float *model, float *out, exchange_info_t *info)
{
    preduce_state_t *st = ex->impl;
    memcpy(out, model, ex->cfg.count * sizeof *out);
    st->iteration++;
    pcoll_preduce_info_t pi;
    if (pcoll_preduce(st->obj, out, st->iteration, &pi) != PCOLL_SUCCESS)
        return tr_fail("pcoll_preduce: %s", pcoll_last_error());
    if (pi.iteration > st->iteration) st->iteration = pi.iteration;
    memset(info, 0, sizeof *info);
    info->rounds = 1;
    info->own_included = 1;
    info->active = pi.group_size;
    info->contributions = (uint64_t)pi.group_size;
    info->iteration = st->iteration;
    ex->stats.groups_joined++;
    ex->stats.wait_s += pi.wait_s;
    return 0;
}

static void take_controller_stats(exchange_t *ex, const preduce_state_t *st)
{
    pcoll_preduce_stats_t cs;
    if (pcoll_preduce_get_stats(st->obj, &cs) != PCOLL_SUCCESS) return;
    ex->stats.ctl_groups = cs.groups;
    ex->stats.ctl_busy_s = cs.busy_s;
    ex->stats.ctl_open_s = cs.open_s;
}

static int preduce_finish(exchange_t *ex, const float *model, float *out, exchange_info_t *info)
{
    preduce_state_t *st = ex->impl;
    take_controller_stats(ex, st);
    if (pcoll_preduce_free(&st->obj) != PCOLL_SUCCESS) return tr_fail("pcoll_preduce_free: %s", pcoll_last_error());
    int rc = pcoll_allreduce(ex->cfg.ctx, model, out, ex->cfg.count, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0);
    if (rc != PCOLL_SUCCESS) return tr_fail("pcoll_allreduce: %s", pcoll_last_error());
    exchange_synchronous_done(ex, out, out, info);
    return 0;
}

static int preduce_destroy(exchange_t *ex)
{
    preduce_state_t *st = ex->impl;
    int rc = 0;
    if (!st) return 0;
    if (st->obj && pcoll_preduce_free(&st->obj) != PCOLL_SUCCESS)
        rc = tr_fail("pcoll_preduce_free: %s", pcoll_last_error());
    free(st);
    ex->impl = NULL;
    return rc;
}

static const exchange_ops_t preduce_ops = {preduce_step, preduce_finish, preduce_destroy, NULL};

int exchange_preduce_setup(exchange_t *ex)
{
    const char *a = ex->cfg.algo;
    if (strncmp(a, "preduce:", 8) != 0) return 1;
    pcoll_preduce_config_t cfg;
    pcoll_preduce_config_default(&cfg);
    cfg.seed = ex->cfg.seed;
    if (pcoll_preduce_config_parse(a + 8, &cfg) != PCOLL_SUCCESS)
        return tr_fail("--algo %s: %s", a, pcoll_last_error());
    if (!ex->cfg.ctx) return tr_fail("--algo %s needs a pcoll context", a);
    preduce_state_t *st = calloc(1, sizeof *st);
    if (!st) return tr_fail("out of memory");
    int rc = pcoll_preduce_create(ex->cfg.ctx, ex->cfg.count, PCOLL_FLOAT32, &cfg, &st->obj);
    if (rc != PCOLL_SUCCESS) {
        free(st);
        return tr_fail("--algo %s: %s", a, pcoll_last_error());
    }
    ex->impl = st;
    ex->ops = &preduce_ops;
    ex->models = 1;
    return 0;
}
