/* Merged-gradient buckets overlapped with backprop (--fusion, for the
 * synchronous exchanges): backprop marks each layer ready as it completes
 * (exchange_layer_ready), which starts the buckets of the plan whose layers
 * are all ready; the step waits for the rest and scales the sum.
 *   sync   pcoll_fusion_* (persistent plans; pcoll's progress thread moves
 *          them while backprop goes on)
 *   mpi    one MPI_Iallreduce per bucket, started in plan order; MPI moves
 *          them only inside MPI calls, so every layer's mark also tests them */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "exchange.h"
#include "tool.h"

typedef struct fusion_impl {
    pcoll_fusion_t *f;        /* sync */
    /* mpi */
    int *pending, next;
    MPI_Request *req;
} fusion_impl_t;

static fusion_impl_t *F(exchange_t *ex) { return ex->impl; }

static void reset_mpi(exchange_t *ex)
{
    fusion_impl_t *x = F(ex);
    const pcoll_fusion_plan_t *pl = ex->cfg.fusion_plan;
    for (int b = 0; b < pl->nbuckets; b++) x->pending[b] = pl->last[b] - pl->first[b] + 1;
    x->next = 0;
}

static int ready_sync(exchange_t *ex, int layer)
{
    if (pcoll_fusion_ready(F(ex)->f, layer) != PCOLL_SUCCESS) return tr_fail("%s", pcoll_last_error());
    return 0;
}

static int ready_mpi(exchange_t *ex, int layer)
{
    fusion_impl_t *x = F(ex);
    const pcoll_fusion_plan_t *pl = ex->cfg.fusion_plan;
    x->pending[pl->bucket_of[layer]]--;
    while (x->next < pl->nbuckets && x->pending[x->next] == 0) {
        int b = x->next;
        size_t first = ex->cfg.layer_offset[pl->first[b]], count = 0;
        for (int l = pl->first[b]; l <= pl->last[b]; l++) count += ex->cfg.layer_count[l];
        if (count > (size_t)INT32_MAX) return tr_fail("bucket %d: %zu values exceed an int count", b, count);
        int rc = MPI_Iallreduce(MPI_IN_PLACE, ex->cfg.grad + first, (int)count, MPI_FLOAT, MPI_SUM, ex->cfg.comm,
                                &x->req[b]);
        if (rc != MPI_SUCCESS) return tr_fail("MPI_Iallreduce failed (error %d)", rc);
        x->next++;
    }
    int flag;
    if (x->next > 0 && MPI_Testall(x->next, x->req, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return tr_fail("MPI_Testall failed");
    return 0;
}

/* The step: every bucket reduced in grad (in place), update = grad / P. */
static int step_fusion(exchange_t *ex, const float *grad, float *update, exchange_info_t *info)
{
    (void)grad; /* the buckets reduced ex->cfg.grad, which it is */
    fusion_impl_t *x = F(ex);
    if (x->f) {
        if (pcoll_fusion_wait(x->f) != PCOLL_SUCCESS) return tr_fail("%s", pcoll_last_error());
    } else {
        int started = x->next, all = ex->cfg.fusion_plan->nbuckets;
        if (started > 0 && MPI_Waitall(started, x->req, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return tr_fail("MPI_Waitall failed");
        reset_mpi(ex);
        if (started < all) return tr_fail("--fusion: %d of %d buckets never had all their layers ready", all - started, all);
    }
    exchange_synchronous_done(ex, ex->cfg.grad, update, info);
    return 0;
}

static int destroy_fusion(exchange_t *ex)
{
    fusion_impl_t *x = F(ex);
    int rc = 0;
    if (x->f && pcoll_fusion_free(&x->f) != PCOLL_SUCCESS) rc = tr_fail("%s", pcoll_last_error());
    free(x->pending);
    free(x->req);
    free(x);
    return rc;
}

static const exchange_ops_t sync_fusion_ops = {step_fusion, exchange_nothing_pending, destroy_fusion, ready_sync};
static const exchange_ops_t mpi_fusion_ops = {step_fusion, exchange_nothing_pending, destroy_fusion, ready_mpi};

/* MPI_Allreduce timed as pcoll_calibrate times pcoll's: sizes doubling from
 * 4 bytes, the median over repetitions of the slowest rank, then the fit
 * (up to 30 repetitions, where pcoll_calibrate takes up to 50). */
static int calibrate_mpi(MPI_Comm comm, size_t max_bytes, pcoll_cost_model_t *model)
{
    enum { MAXREPS = 30 };
    double x[64], y[64], t[MAXREPS];
    float *buf = calloc(max_bytes / 4, sizeof(float));
    if (!buf) return tr_fail("out of memory for %zu bytes", max_bytes);
    int n = 0;
    for (size_t bytes = 4; bytes <= max_bytes && n < 64; bytes *= 2, n++) {
        double want = 2e7 / ((double)bytes + 1e5);
        int reps = want > MAXREPS ? MAXREPS : want < 5 ? 5 : (int)want;
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, comm); /* warm-up */
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(comm);
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, comm);
            double dt = (MPI_Wtime() - t0) * 1e6;
            MPI_Allreduce(&dt, &t[r], 1, MPI_DOUBLE, MPI_MAX, comm);
        }
        x[n] = (double)bytes;
        y[n] = tool_median(t, (size_t)reps);
    }
    free(buf);
    if (pcoll_cost_model_fit(x, y, n, model) != PCOLL_SUCCESS) return tr_fail("%s", pcoll_last_error());
    return 0;
}

int exchange_calibrate(const char *algo, MPI_Comm comm, pcoll_t *ctx, size_t max_bytes, pcoll_cost_model_t *model)
{
    if (strcmp(algo, "mpi") == 0) return calibrate_mpi(comm, max_bytes, model);
    pcoll_calibrate_config_t cfg;
    pcoll_calibrate_config_default(&cfg);
    cfg.max_bytes = max_bytes;
    if (!ctx) return tr_fail("--fusion with --algo %s needs a pcoll context", algo);
    if (pcoll_calibrate(ctx, NULL, 0, &cfg, model) != PCOLL_SUCCESS) return tr_fail("%s", pcoll_last_error());
    return 0;
}

int exchange_fusion_setup(exchange_t *ex)
{
    const exchange_config_t *c = &ex->cfg;
    int mpi = strcmp(c->algo, "mpi") == 0;
    if (!mpi && strcmp(c->algo, "sync") != 0) return tr_fail("--fusion applies to --algo sync and mpi, not %s", c->algo);
    if (!c->grad || !c->layer_offset || !c->layer_count) return tr_fail("--fusion: no layer layout (internal error)");
    fusion_impl_t *x = calloc(1, sizeof *x);
    if (!x) return tr_fail("out of memory");
    ex->impl = x;
    if (mpi) {
        int nb = c->fusion_plan->nbuckets;
        x->pending = malloc(sizeof(int) * (size_t)nb);
        x->req = malloc(sizeof(MPI_Request) * (size_t)nb);
        if (!x->pending || !x->req) {
            destroy_fusion(ex);
            return tr_fail("out of memory");
        }
        reset_mpi(ex);
        ex->ops = &mpi_fusion_ops;
    } else {
        if (!c->ctx) {
            destroy_fusion(ex);
            return tr_fail("--algo sync needs a pcoll context");
        }
        if (pcoll_fusion_create(c->ctx, NULL, 0, c->grad, PCOLL_FLOAT32, PCOLL_SUM, c->layer_offset, c->layer_count,
                                c->fusion_plan, &x->f) != PCOLL_SUCCESS) {
            int rc = tr_fail("%s", pcoll_last_error());
            destroy_fusion(ex);
            return rc;
        }
        ex->ops = &sync_fusion_ops;
    }
    return 0;
}
