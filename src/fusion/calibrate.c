/*
 * Calibration of the cost model on the running job: the allreduce that
 * buckets run (PC_USE_TREE), timed at sizes doubling from min to max bytes.
 *
 *   check, agree (agree.h: a bad argument or no memory at one member fails
 *   every member at once)
 *   for each size: a persistent plan; warm-up; reps x (sync, start + wait,
 *   time); every member's times to every member (one allreduce: each fills
 *   its own row); per rep the slowest member; the median over reps
 *   -> samples (bytes, us) -> pcoll_cost_model_fit, the same at every member
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/agree.h"
#include "../core/context.h"
#include "../core/groupmap.h"
#include "../core/plan.h"
#include "../util/error.h"

void pcoll_calibrate_config_default(pcoll_calibrate_config_t *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
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

/* The scratch of a calibration: allocated before the members agree, so
 * that one member short of memory fails them all. */
typedef struct scratch {
    int n, me, nsizes, maxreps;
    float *buf;
    double *times, *slow, *sx, *sy;
} scratch_t;

static void scratch_free(scratch_t *w)
{
    free(w->buf);
    free(w->times);
    free(w->slow);
    free(w->sx);
    free(w->sy);
}

enum { F_MIN, F_MAX, F_REPS, F_MODEL, NFIELDS };

/* What a member checks alone; *bad: the field at fault. */
static int check(const pcoll_calibrate_config_t *c, const pcoll_cost_model_t *model, scratch_t *w, int *bad,
                 const char *fn)
{
    if (!model) return *bad = F_MODEL, pc_error(PCOLL_ERR_NULL, fn, "model is NULL");
    if (c->min_bytes < 4)
        return *bad = F_MIN, pc_error(PCOLL_ERR_ARG, fn, "cfg->min_bytes %zu is below one float (4)", c->min_bytes);
    if (c->max_bytes < c->min_bytes)
        return *bad = F_MAX,
               pc_error(PCOLL_ERR_ARG, fn, "cfg->max_bytes %zu is below cfg->min_bytes %zu", c->max_bytes, c->min_bytes);
    if (c->max_bytes / 2 < c->min_bytes)
        return *bad = F_MAX, pc_error(PCOLL_ERR_ARG, fn,
                                      "one size (%zu bytes) cannot be fitted: give max_bytes >= 2 min_bytes",
                                      c->min_bytes);
    if (c->reps < 0) return *bad = F_REPS, pc_error(PCOLL_ERR_ARG, fn, "cfg->reps %d is negative", c->reps);
    for (size_t b = c->min_bytes; b <= c->max_bytes; b *= 2) {
        w->nsizes++;
        if (b > ((size_t)-1) / 2) break;
    }
    w->maxreps = c->reps ? c->reps : 50;
    w->buf = calloc(c->max_bytes / 4, sizeof(float));
    w->times = calloc((size_t)w->n * (size_t)w->maxreps, sizeof(double));
    w->slow = malloc(sizeof(double) * (size_t)w->maxreps);
    w->sx = malloc(sizeof(double) * (size_t)w->nsizes);
    w->sy = malloc(sizeof(double) * (size_t)w->nsizes);
    if (!w->buf || !w->times || !w->slow || !w->sx || !w->sy)
        return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for %zu bytes", c->max_bytes);
    return PCOLL_SUCCESS;
}

/* Collective: the median over reps of the slowest member's time of one
 * size, into the samples. */
static int measure(pcoll_t *ctx, const int *group, int group_size, const pcoll_calibrate_config_t *c,
                   pcoll_plan_t *sync, size_t bytes, int k, scratch_t *w, const char *fn)
{
    size_t count = bytes / 4;
    int reps = c->reps ? c->reps : reps_for(bytes), n = w->n;
    pcoll_plan_t *plan = NULL;
    int rc = pc_plan_init(ctx, PCOLL_IN_PLACE, w->buf, count, PCOLL_FLOAT32, PCOLL_SUM, group, group_size,
                          PC_USE_TREE, PCOLL_ALGO_AUTO, fn, &plan);
    for (int warm = 0; rc == PCOLL_SUCCESS && warm < 2; warm++) rc = run(plan, fn);
    memset(w->times, 0, sizeof(double) * (size_t)n * (size_t)w->maxreps);
    for (int r = 0; rc == PCOLL_SUCCESS && r < reps; r++) {
        rc = run(sync, fn);
        double t0 = now_us();
        if (rc == PCOLL_SUCCESS) rc = run(plan, fn);
        w->times[(size_t)w->me * (size_t)reps + (size_t)r] = now_us() - t0;
    }
    if (plan) pcoll_plan_free(&plan);
    /* every member's times at every member: adding zeros is exact */
    if (rc == PCOLL_SUCCESS)
        rc = pcoll_allreduce(ctx, PCOLL_IN_PLACE, w->times, (size_t)n * (size_t)reps, PCOLL_FLOAT64, PCOLL_SUM, group,
                             group_size);
    if (rc != PCOLL_SUCCESS) return rc;
    for (int r = 0; r < reps; r++) {
        w->slow[r] = 0;
        for (int i = 0; i < n; i++)
            if (w->times[(size_t)i * (size_t)reps + (size_t)r] > w->slow[r])
                w->slow[r] = w->times[(size_t)i * (size_t)reps + (size_t)r];
    }
    qsort(w->slow, (size_t)reps, sizeof(double), cmp_double);
    w->sx[k] = (double)(count * 4);
    w->sy[k] = reps % 2 ? w->slow[reps / 2] : (w->slow[reps / 2 - 1] + w->slow[reps / 2]) / 2;
    return PCOLL_SUCCESS;
}

int pcoll_calibrate(pcoll_t *ctx, const int *group, int group_size, const pcoll_calibrate_config_t *cfg,
                    pcoll_cost_model_t *model)
{
    static const char *fn = "pcoll_calibrate";
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    scratch_t w;
    memset(&w, 0, sizeof w);
    /* a member whose group list is unusable cannot know whom to agree with */
    if ((rc = pc_group_index(ctx, group, group_size, fn, &w.me)) != PCOLL_SUCCESS) return rc;
    w.n = group ? group_size : ctx->size;
    pcoll_calibrate_config_t c;
    pcoll_calibrate_config_default(&c);
    if (cfg) c = *cfg;
    int bad = -1;
    rc = check(&c, model, &w, &bad, fn);
    pc_agree_field_t fields[NFIELDS] = {
        {"cfg->min_bytes", (int64_t)c.min_bytes, 1, NULL},
        {"cfg->max_bytes", (int64_t)c.max_bytes, 1, NULL},
        {"cfg->reps", c.reps, 1, NULL},
        {"model", 0, 0, NULL},
    };
    pc_agree_over_t members = pc_agree_group(ctx, group, group_size);
    if ((rc = pc_agree(&members, fn, rc, bad, fields, NFIELDS, PCOLL_ERR_ARG)) != PCOLL_SUCCESS) {
        scratch_free(&w);
        return rc;
    }
    /* the members start each timed allreduce together: a tiny one first */
    int one = 1, sum = 0;
    pcoll_plan_t *sync = NULL;
    rc = pc_plan_init(ctx, &one, &sum, 1, PCOLL_INT32, PCOLL_SUM, group, group_size, PC_USE_CALL, PCOLL_ALGO_RECDBL,
                      fn, &sync);
    size_t bytes = c.min_bytes;
    for (int k = 0; rc == PCOLL_SUCCESS && k < w.nsizes; bytes *= 2, k++)
        rc = measure(ctx, group, group_size, &c, sync, bytes, k, &w, fn);
    if (sync) pcoll_plan_free(&sync);
    if (rc == PCOLL_SUCCESS && (rc = pcoll_cost_model_fit(w.sx, w.sy, w.nsizes, model)) != PCOLL_SUCCESS)
        rc = pc_error(rc, fn, "%s", pcoll_last_error());
    scratch_free(&w);
    return rc;
}
