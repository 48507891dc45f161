/*
 * Calibration of the cost model on the running job: the allreduce that
 * buckets run (buckets.h), timed at sizes doubling from min to max bytes.
 *
 *   for each size: a persistent plan; warm-up; reps x (sync, start + wait,
 *   time); every member's times to every member (one allreduce: each fills
 *   its own row); per rep the slowest member; the median over reps
 *   -> samples (bytes, us) -> pcoll_cost_model_fit, the same at every member
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/plan.h"
#include "../util/error.h"
#include "buckets.h"

void pcoll_calibrate_config_default(pcoll_calibrate_config_t *cfg)
{
    if (!cfg) return;
    cfg->min_bytes = 4;
    cfg->max_bytes = (size_t)64 << 20;
    cfg->reps = 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int reps_for(size_t bytes)
{
    double n = 2e7 / ((double)bytes + 1e5);
    return n > 50 ? 50 : n < 5 ? 5 : (int)n;
}

static int cmp_double(const void *p, const void *q)
{
    double a = *(const double *)p, b = *(const double *)q;
    return a < b ? -1 : a > b;
}

static int run(pcoll_plan_t *plan, const char *fn)
{
    pcoll_request_t *req;
    int rc = pcoll_start(plan, &req);
    if (rc == PCOLL_SUCCESS) rc = pcoll_wait(&req);
    return rc == PCOLL_SUCCESS ? rc : pc_error(rc, fn, "an allreduce failed: %s", pcoll_last_error());
}

int pcoll_calibrate(pcoll_t *ctx, const int *group, int group_size, const pcoll_calibrate_config_t *cfg,
                    pcoll_cost_model_t *model)
{
    static const char *fn = "pcoll_calibrate";
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!model) return pc_error(PCOLL_ERR_NULL, fn, "model is NULL");
    pcoll_calibrate_config_t c;
    pcoll_calibrate_config_default(&c);
    if (cfg) c = *cfg;
    if (c.min_bytes < 4) return pc_error(PCOLL_ERR_ARG, fn, "cfg->min_bytes %zu is below one float (4)", c.min_bytes);
    if (c.max_bytes < c.min_bytes)
        return pc_error(PCOLL_ERR_ARG, fn, "cfg->max_bytes %zu is below cfg->min_bytes %zu", c.max_bytes, c.min_bytes);
    if (c.reps < 0) return pc_error(PCOLL_ERR_ARG, fn, "cfg->reps %d is negative", c.reps);
    int n = group ? group_size : ctx->size, me = pc_bucket_index(ctx, group, group_size);
    if (group && group_size < 1) return pc_error(PCOLL_ERR_ARG, fn, "group_size %d is below 1", group_size);
    if (me < 0) return pc_error(PCOLL_ERR_ARG, fn, "this rank (%d) is not in the group", ctx->rank);
    int nsizes = 0;
    for (size_t b = c.min_bytes; b <= c.max_bytes; b *= 2) {
        nsizes++;
        if (b > ((size_t)-1) / 2) break;
    }
    int maxreps = c.reps ? c.reps : 50;
    float *buf = calloc(c.max_bytes / 4, sizeof(float));
    double *times = calloc((size_t)n * (size_t)maxreps, sizeof(double)), *slow = malloc(sizeof(double) * (size_t)maxreps);
    double *sx = malloc(sizeof(double) * (size_t)nsizes), *sy = malloc(sizeof(double) * (size_t)nsizes);
    int one = 1, sum = 0, have = buf && times && slow && sx && sy;
    pcoll_plan_t *sync = NULL;
    /* collective: a member without memory takes part with a count of 0,
     * which fails the setup at every member (their counts differ) */
    rc = pc_plan_init(ctx, &one, &sum, have ? 1 : 0, PCOLL_INT32, PCOLL_SUM, group, group_size, PCOLL_ALGO_RECDBL, fn,
                      &sync);
    if (rc == PCOLL_SUCCESS && !have) rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for %zu bytes", c.max_bytes);
    int k = 0;
    for (size_t bytes = c.min_bytes; rc == PCOLL_SUCCESS && k < nsizes; bytes *= 2, k++) {
        size_t count = bytes / 4;
        int reps = c.reps ? c.reps : reps_for(bytes);
        pcoll_plan_t *plan = NULL;
        rc = pc_plan_init(ctx, PCOLL_IN_PLACE, buf, count, PCOLL_FLOAT32, PCOLL_SUM, group, group_size,
                          pc_bucket_algo(ctx, count * 4, n), fn, &plan);
        for (int w = 0; rc == PCOLL_SUCCESS && w < 2; w++) rc = run(plan, fn);
        memset(times, 0, sizeof(double) * (size_t)n * (size_t)maxreps);
        for (int r = 0; rc == PCOLL_SUCCESS && r < reps; r++) {
            rc = run(sync, fn);
            double t0 = now_us();
            if (rc == PCOLL_SUCCESS) rc = run(plan, fn);
            times[(size_t)me * (size_t)reps + (size_t)r] = now_us() - t0;
        }
        if (plan) pcoll_plan_free(&plan);
        /* every member's times at every member: adding zeros is exact */
        if (rc == PCOLL_SUCCESS)
            rc = pcoll_allreduce(ctx, PCOLL_IN_PLACE, times, (size_t)n * (size_t)reps, PCOLL_FLOAT64, PCOLL_SUM,
                                 group, group_size);
        if (rc != PCOLL_SUCCESS) break;
        for (int r = 0; r < reps; r++) {
            slow[r] = 0;
            for (int i = 0; i < n; i++)
                if (times[(size_t)i * (size_t)reps + (size_t)r] > slow[r]) slow[r] = times[(size_t)i * (size_t)reps + (size_t)r];
        }
        qsort(slow, (size_t)reps, sizeof(double), cmp_double);
        sx[k] = (double)(count * 4);
        sy[k] = reps % 2 ? slow[reps / 2] : (slow[reps / 2 - 1] + slow[reps / 2]) / 2;
    }
    if (sync) pcoll_plan_free(&sync);
    if (rc == PCOLL_SUCCESS && nsizes < 2)
        rc = pc_error(PCOLL_ERR_ARG, fn, "one size (%zu bytes) cannot be fitted: give max_bytes >= 2 min_bytes",
                      c.min_bytes);
    if (rc == PCOLL_SUCCESS && (rc = pcoll_cost_model_fit(sx, sy, nsizes, model)) != PCOLL_SUCCESS)
        rc = pc_error(rc, fn, "%s", pcoll_last_error());
    free(buf);
    free(times);
    free(slow);
    free(sx);
    free(sy);
    return rc;
}
