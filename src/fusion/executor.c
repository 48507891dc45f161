/*
 * The executor of merged-gradient plans: one persistent allreduce per
 * bucket, started the moment the bucket's last layer is ready, in plan
 * order at every member.
 *
 *   create (collective)     check the plan and layout; agree on them
 *                           across the group; per bucket: its place in
 *                           the gradient (in place when its layers fill
 *                           one stretch of it, in forward or backprop
 *                           order, else a staging buffer)
 *                           and a persistent plan (buckets.h's algorithm)
 *   ready(l)                pending[bucket of l] -= 1; while the next
 *                           bucket in plan order has none pending: copy
 *                           in if staged, pcoll_start, next += 1
 *   wait                    pcoll_wait every started bucket in order, copy
 *                           out the staged ones; a layer never marked
 *                           ready is an error; then the next step
 *
 * Buckets start in plan order even when the application marks layers
 * ready out of order (plans on one group must start in the same order at
 * every member): a complete bucket waits for the ones before it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/agree.h"
#include "../core/groupmap.h"
#include "../core/object.h"
#include "../core/plan.h"
#include "../core/timeline.h"
#include "../util/error.h"

typedef struct bucket {
    int first, last;  /* its layers */
    int pending;      /* layers of this step not marked ready yet */
    size_t count;     /* elements */
    char *data;       /* what the allreduce reduces in place */
    int staged;       /* data is a buffer of its own */
    int abandoned;    /* its allreduce timed out: MPI may still read data */
    pcoll_plan_t *plan;
    pcoll_request_t *req;
    uint64_t tl_start;  /* its start in this step (timeline; 0: not recorded) */
} bucket_t;

struct pcoll_fusion {
    pc_object_t base;       /* identity, failure, the context's list */
    int nlayers, nbuckets;
    char *grad;
    size_t esize;
    size_t *offset, *count; /* per layer, elements */
    int *bucket_of;
    unsigned char *ready;   /* per layer: marked in this step */
    bucket_t *b;
    int next;               /* the next bucket to start */
    uint64_t step;          /* steps completed (timeline) */
};

static void destroy(pcoll_fusion_t *f)
{
    if (!f) return;
    pc_object_release(&f->base);
    for (int k = 0; f->b && k < f->nbuckets; k++) {
        if (f->b[k].plan) pcoll_plan_free(&f->b[k].plan);
        if (f->b[k].staged && !f->b[k].abandoned) free(f->b[k].data);
    }
    free(f->b);
    free(f->offset);
    free(f->count);
    free(f->bucket_of);
    free(f->ready);
    free(f);
}

/* A hash of the plan's buckets (FNV-1a): members must split alike. */
static int64_t buckets_hash(const pcoll_fusion_plan_t *pl)
{
    uint64_t h = 1469598103934665603ULL;
    for (int k = 0; k < pl->nbuckets; k++)
        for (int v = 0; v < 2; v++) {
            uint64_t x = (uint64_t)(v ? pl->last[k] : pl->first[k]);
            for (int i = 0; i < 8; i++, x >>= 8) h = (h ^ (x & 0xff)) * 1099511628211ULL;
        }
    return (int64_t)(h >> 1);
}

/* A hash of the layers' element counts (their offsets may differ). */
static int64_t counts_hash(const size_t *count, int n)
{
    uint64_t h = 1469598103934665603ULL;
    for (int l = 0; l < n; l++)
        for (uint64_t x = count[l], i = 0; i < 8; i++, x >>= 8) h = (h ^ (x & 0xff)) * 1099511628211ULL;
    return (int64_t)(h >> 1);
}

static const char *dtype_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return pcoll_dtype_name((pcoll_dtype_t)v);
}

/* Each bucket's layers and place in the gradient: in place when its layers
 * fill one stretch of it (in either order), else a staging buffer (allocated here, before the
 * members agree, so that one member short of memory fails them all). */
static int lay_out(pcoll_fusion_t *f, const pcoll_fusion_plan_t *pl, const size_t *offset, const size_t *count,
                   const char *fn)
{
    memcpy(f->offset, offset, sizeof(size_t) * (size_t)pl->nlayers);
    memcpy(f->count, count, sizeof(size_t) * (size_t)pl->nlayers);
    memcpy(f->bucket_of, pl->bucket_of, sizeof(int) * (size_t)pl->nlayers);
    for (int k = 0; k < f->nbuckets; k++) {
        bucket_t *b = &f->b[k];
        b->first = pl->first[k];
        b->last = pl->last[k];
        b->pending = b->last - b->first + 1;
        /* in place when the layers fill one stretch of grad, in forward
         * order or in backprop order (a flat buffer filled as backprop goes) */
        int ascending = 1, descending = 1;
        for (int l = b->first; l <= b->last; l++) {
            b->count += count[l];
            if (l > b->first && offset[l - 1] + count[l - 1] != offset[l]) ascending = 0;
            if (l > b->first && offset[l] + count[l] != offset[l - 1]) descending = 0;
        }
        if (ascending || descending) {
            b->data = f->grad + offset[ascending ? b->first : b->last] * f->esize;
        } else if (!(b->data = malloc(b->count * f->esize + 1))) {
            return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for bucket %d (%zu elements)", k, b->count);
        } else {
            b->staged = 1;
        }
    }
    return PCOLL_SUCCESS;
}

/* Checks what one member can check alone. */
static int check(void *grad, pcoll_dtype_t dtype, pcoll_op_t op, const size_t *offset,
                 const size_t *count, const pcoll_fusion_plan_t *pl, const char *fn)
{
    if (!pl) return pc_error(PCOLL_ERR_NULL, fn, "plan is NULL");
    if (!offset || !count) return pc_error(PCOLL_ERR_NULL, fn, "%s is NULL", !offset ? "layer_offset" : "layer_count");
    if (!grad) return pc_error(PCOLL_ERR_NULL, fn, "grad is NULL");
    if (dtype < PCOLL_FLOAT32 || dtype > PCOLL_INT64)
        return pc_error(PCOLL_ERR_DTYPE, fn, "dtype %d is not a pcoll_dtype_t", (int)dtype);
    if (op != PCOLL_SUM && op != PCOLL_AVG) return pc_error(PCOLL_ERR_OP, fn, "op %d is not PCOLL_SUM or PCOLL_AVG", (int)op);
    if (pl->nlayers < 1 || pl->nbuckets < 1 || pl->nbuckets > pl->nlayers)
        return pc_error(PCOLL_ERR_ARG, fn, "the plan has %d layers in %d buckets", pl->nlayers, pl->nbuckets);
    /* buckets in backprop order: consecutive layers, from the last one down */
    for (int k = 0, top = pl->nlayers - 1; k < pl->nbuckets; k++) {
        if (pl->last[k] != top || pl->first[k] > pl->last[k] || pl->first[k] < 0)
            return pc_error(PCOLL_ERR_ARG, fn, "plan bucket %d holds layers %d..%d: expected %d and below", k,
                            pl->first[k], pl->last[k], top);
        for (int l = pl->first[k]; l <= pl->last[k]; l++)
            if (pl->bucket_of[l] != k)
                return pc_error(PCOLL_ERR_ARG, fn, "plan: layer %d is in bucket %d, bucket_of says %d", l, k,
                                pl->bucket_of[l]);
        top = pl->first[k] - 1;
        if (k == pl->nbuckets - 1 && top != -1)
            return pc_error(PCOLL_ERR_ARG, fn, "plan: layers 0..%d are in no bucket", top);
    }
    size_t es = pcoll_dtype_size(dtype);
    for (int l = 0; l < pl->nlayers; l++)
        if (offset[l] > SIZE_MAX / es || count[l] > SIZE_MAX / es - offset[l])
            return pc_error(PCOLL_ERR_COUNT, fn, "layer %d: offset %zu + count %zu overflows", l, offset[l], count[l]);
    return PCOLL_SUCCESS;
}

enum { F_NLAYERS, F_NBUCKETS, F_BUCKETS, F_COUNTS, F_DTYPE, F_OP, F_PLAN, F_GRAD, F_OUT, NFIELDS };

/* The executor and its buckets' places, as far as this member can set them
 * up alone; *bad: the field at fault. */
static int new_executor(pcoll_t *ctx, void *grad, pcoll_dtype_t dtype, pcoll_op_t op, const size_t *offset,
                        const size_t *count, const pcoll_fusion_plan_t *pl, pcoll_fusion_t **out, int *bad,
                        const char *fn)
{
    int rc = check(grad, dtype, op, offset, count, pl, fn);
    if (rc != PCOLL_SUCCESS) {
        *bad = !pl ? F_PLAN : !grad ? F_GRAD : rc == PCOLL_ERR_DTYPE ? F_DTYPE : rc == PCOLL_ERR_OP ? F_OP : F_PLAN;
        return rc;
    }
    pcoll_fusion_t *f = calloc(1, sizeof *f);
    if (!f) return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for a plan of %d layers", pl->nlayers);
    *out = f;
    f->nlayers = pl->nlayers;
    f->nbuckets = pl->nbuckets;
    f->grad = grad;
    f->esize = pcoll_dtype_size(dtype);
    f->offset = malloc(sizeof(size_t) * (size_t)pl->nlayers);
    f->count = malloc(sizeof(size_t) * (size_t)pl->nlayers);
    f->bucket_of = malloc(sizeof(int) * (size_t)pl->nlayers);
    f->ready = calloc((size_t)pl->nlayers, 1);
    f->b = calloc((size_t)pl->nbuckets, sizeof *f->b);
    if (pc_object_init(&f->base, ctx, "fusion", 0, fn) != PCOLL_SUCCESS || !f->offset || !f->count ||
        !f->bucket_of || !f->ready || !f->b)
        return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for a plan of %d layers", pl->nlayers);
    return lay_out(f, pl, offset, count, fn);
}

static int free_for_finalize(void *object)
{
    pcoll_fusion_t *f = object;
    return pcoll_fusion_free(&f);
}

int pcoll_fusion_create(pcoll_t *ctx, const int *group, int group_size, void *grad, pcoll_dtype_t dtype,
                        pcoll_op_t op, const size_t *offset, const size_t *count, const pcoll_fusion_plan_t *pl,
                        pcoll_fusion_t **out)
{
    static const char *fn = "pcoll_fusion_create";
    if (out) *out = NULL;
    int rc = pc_ctx_check(ctx, fn), me = -1;
    if (rc != PCOLL_SUCCESS) return rc;
    /* a member whose group list is unusable cannot know whom to agree with */
    if ((rc = pc_group_index(ctx, group, group_size, fn, &me)) != PCOLL_SUCCESS) return rc;
    /* what this member can set up alone; then every member learns whether
     * every other one did, and with the same plan, before any bucket is set up */
    pcoll_fusion_t *f = NULL;
    int bad = -1;
    if (!out)
        rc = (bad = F_OUT, pc_error(PCOLL_ERR_NULL, fn, "fusion (the output pointer) is NULL"));
    else
        rc = new_executor(ctx, grad, dtype, op, offset, count, pl, &f, &bad, fn);
    int ok = rc == PCOLL_SUCCESS;
    pc_agree_field_t fields[NFIELDS] = {
        {"plan->nlayers", ok ? pl->nlayers : 0, 1, NULL},
        {"plan->nbuckets", ok ? pl->nbuckets : 0, 1, NULL},
        {"the plan's buckets (hash)", ok ? buckets_hash(pl) : 0, 1, NULL},
        {"layer_count (hash)", ok ? counts_hash(count, pl->nlayers) : 0, 1, NULL},
        {"dtype", (int64_t)dtype, 1, dtype_text},
        {"op", (int64_t)op, 1, NULL},
        {"plan", 0, 0, NULL},
        {"grad", 0, 0, NULL},
        {"fusion", 0, 0, NULL},
    };
    pc_agree_over_t members = pc_agree_group(ctx, group, group_size);
    if ((rc = pc_agree(&members, fn, rc, bad, fields, NFIELDS, PCOLL_ERR_ARG)) != PCOLL_SUCCESS) {
        destroy(f);
        return rc;
    }
    /* every member sets up every bucket (collective plans, each agreed on),
     * in order */
    for (int k = 0; k < f->nbuckets && rc == PCOLL_SUCCESS; k++)
        rc = pc_plan_init(ctx, PCOLL_IN_PLACE, f->b[k].data, f->b[k].count, dtype, op, group, group_size,
                          PC_USE_TREE, PCOLL_ALGO_AUTO, fn, &f->b[k].plan);
    if (rc != PCOLL_SUCCESS) {
        destroy(f);
        return rc;
    }
    pc_object_register(&f->base, f, free_for_finalize, 0);
    pc_tl_fusion_plan(ctx, f->base.id, pl);
    *out = f;
    return PCOLL_SUCCESS;
}

/* staged buckets: the layers' gradients into the bucket, or back */
static void stage(pcoll_fusion_t *f, bucket_t *b, int in)
{
    char *at = b->data;
    for (int l = b->first; l <= b->last; l++) {
        char *g = f->grad + f->offset[l] * f->esize;
        size_t len = f->count[l] * f->esize;
        if (in)
            memcpy(at, g, len);
        else
            memcpy(g, at, len);
        at += len;
    }
}

int pcoll_fusion_ready(pcoll_fusion_t *f, int layer)
{
    static const char *fn = "pcoll_fusion_ready";
    if (!f) return pc_error(PCOLL_ERR_NULL, fn, "fusion is NULL");
    int rc = pc_ctx_replaced(f->base.ctx, fn);
    if (rc == PCOLL_SUCCESS) rc = pc_fault_raise(&f->base.fault, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (layer < 0 || layer >= f->nlayers)
        return pc_error(PCOLL_ERR_ARG, fn, "layer %d is not in 0..%d", layer, f->nlayers - 1);
    if (f->ready[layer])
        return pc_error(PCOLL_ERR_STATE, fn, "layer %d was marked ready already in this step (pcoll_fusion_wait ends "
                                             "a step)", layer);
    f->ready[layer] = 1;
    pc_tl_fusion_ready(f->base.ctx, f->base.id, f->step, layer);
    f->b[f->bucket_of[layer]].pending--;
    while (f->next < f->nbuckets && f->b[f->next].pending == 0) {
        bucket_t *b = &f->b[f->next];
        if (b->staged) stage(f, b, 1);
        b->tl_start = pc_tl_now(f->base.ctx);
        if ((rc = pcoll_start(b->plan, &b->req)) != PCOLL_SUCCESS) {
            pc_fault_set(&f->base.fault, rc, "bucket %d (layers %d..%d) could not start: %s", f->next, b->first, b->last,
                         pcoll_last_error());
            return pc_fault_raise(&f->base.fault, fn);
        }
        f->next++;
    }
    return PCOLL_SUCCESS;
}

int pcoll_fusion_wait(pcoll_fusion_t *f)
{
    static const char *fn = "pcoll_fusion_wait";
    if (!f) return pc_error(PCOLL_ERR_NULL, fn, "fusion is NULL");
    int rc = pc_ctx_replaced(f->base.ctx, fn), timed_out = 0;
    if (rc != PCOLL_SUCCESS) return rc;
    uint64_t t0 = pc_tl_now(f->base.ctx);
    for (int k = 0; k < f->next; k++) {
        bucket_t *b = &f->b[k]; /* every bucket before next was started */
        /* after one timeout the later buckets (the same members) are given
         * up at once: the call fails after PCOLL_TIMEOUT_S, not once per bucket */
        int wrc = timed_out ? pc_request_give_up(&b->req, fn) : pcoll_wait(&b->req);
        if (wrc == PCOLL_ERR_TIMEOUT) b->abandoned = timed_out = 1;
        if (wrc != PCOLL_SUCCESS) {
            if (rc == PCOLL_SUCCESS)
                rc = pc_error(wrc, fn, "bucket %d (layers %d..%d): %s", k, b->first, b->last, pcoll_last_error());
            pc_fault_set(&f->base.fault, wrc, "an earlier step's bucket %d failed", k);
        } else if (b->staged) {
            stage(f, b, 0);
        }
        if (wrc == PCOLL_SUCCESS)
            pc_tl_fusion_bucket(f->base.ctx, b->tl_start, pc_plan_completed_at(b->plan), f->base.id, f->step, k,
                                b->count * f->esize);
    }
    if (rc == PCOLL_SUCCESS && (rc = pc_fault_raise(&f->base.fault, fn)) == PCOLL_SUCCESS && f->next < f->nbuckets) {
        int missing = -1;
        for (int l = f->nlayers - 1; l >= 0 && missing < 0; l--)
            if (!f->ready[l]) missing = l;
        rc = pc_error(PCOLL_ERR_STATE, fn,
                      "layer %d was not marked ready in this step: buckets %d..%d did not run (the step's other "
                      "buckets completed)",
                      missing, f->next, f->nbuckets - 1);
    }
    pc_tl_fusion_wait(f->base.ctx, t0, f->base.id, f->step);
    /* the next step */
    f->step++;
    memset(f->ready, 0, (size_t)f->nlayers);
    for (int k = 0; k < f->nbuckets; k++) f->b[k].pending = f->b[k].last - f->b[k].first + 1;
    f->next = 0;
    return rc;
}

int pcoll_fusion_free(pcoll_fusion_t **pf)
{
    if (!pf || !*pf) return pc_error(PCOLL_ERR_NULL, "pcoll_fusion_free", "fusion is NULL");
    pcoll_fusion_t *f = *pf;
    int rc = pc_ctx_replaced(f->base.ctx, "pcoll_fusion_free");
    if (rc != PCOLL_SUCCESS) return rc;
    for (int k = 0; k < f->next; k++)
        if (f->b[k].req)
            return pc_error(PCOLL_ERR_STATE, "pcoll_fusion_free",
                            "bucket %d of the current step is in flight: pcoll_fusion_wait first", k);
    destroy(f);
    *pf = NULL;
    return PCOLL_SUCCESS;
}
