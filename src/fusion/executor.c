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

#include "../core/plan.h"
#include "../util/error.h"
#include "buckets.h"

typedef struct bucket {
    int first, last;  /* its layers */
    int pending;      /* layers of this step not marked ready yet */
    size_t count;     /* elements */
    char *data;       /* what the allreduce reduces in place */
    int staged;       /* data is a buffer of its own */
    int abandoned;    /* its allreduce timed out: MPI may still read data */
    pcoll_plan_t *plan;
    pcoll_request_t *req;
} bucket_t;

struct pcoll_fusion {
    pcoll_t *ctx;
    int nlayers, nbuckets;
    char *grad;
    size_t esize;
    size_t *offset, *count; /* per layer, elements */
    int *bucket_of;
    unsigned char *ready;   /* per layer: marked in this step */
    bucket_t *b;
    int next;               /* the next bucket to start */
    pc_fault_t fault;       /* a start failed: the object is unusable */
};

static void destroy(pcoll_fusion_t *f)
{
    if (!f) return;
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

/* What must be alike at every member, hashed (FNV-1a). */
static uint64_t signature(const pcoll_fusion_plan_t *pl, const size_t *count, pcoll_dtype_t dtype, pcoll_op_t op)
{
    uint64_t h = 1469598103934665603ULL;
#define MIX(v)                                                                                                        \
    do {                                                                                                              \
        uint64_t x_ = (uint64_t)(v);                                                                                  \
        for (int i_ = 0; i_ < 8; i_++, x_ >>= 8) h = (h ^ (x_ & 0xff)) * 1099511628211ULL;                            \
    } while (0)
    MIX(pl->nlayers);
    MIX(pl->nbuckets);
    MIX(dtype);
    MIX(op);
    for (int k = 0; k < pl->nbuckets; k++) {
        MIX(pl->first[k]);
        MIX(pl->last[k]);
    }
    for (int l = 0; l < pl->nlayers; l++) MIX(count[l]);
#undef MIX
    return h;
}

/* Collective over the group: the members whose signature differs from the
 * first member's, into bad (n ints: 1 = differs).  A member that failed
 * before (failed != 0) counts as differing. */
static int agree(pcoll_t *ctx, const int *group, int group_size, int n, int me, uint64_t sig, int failed, int *bad,
                 const char *fn)
{
    /* the first member's signature, in four exact 16-bit pieces */
    int64_t first[4] = {0, 0, 0, 0};
    if (me == 0)
        for (int i = 0; i < 4; i++) first[i] = (int64_t)((sig >> (16 * i)) & 0xffff);
    int rc = pcoll_allreduce(ctx, PCOLL_IN_PLACE, first, 4, PCOLL_INT64, PCOLL_SUM, group, group_size);
    uint64_t s0 = 0;
    for (int i = 0; i < 4; i++) s0 |= (uint64_t)first[i] << (16 * i);
    memset(bad, 0, sizeof(int) * (size_t)n);
    bad[me] = failed || sig != s0;
    if (rc == PCOLL_SUCCESS) rc = pcoll_allreduce(ctx, PCOLL_IN_PLACE, bad, (size_t)n, PCOLL_INT32, PCOLL_SUM, group,
                                                  group_size);
    return rc == PCOLL_SUCCESS ? rc : pc_error(rc, fn, "agreeing on the plan failed: %s", pcoll_last_error());
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

int pcoll_fusion_create(pcoll_t *ctx, const int *group, int group_size, void *grad, pcoll_dtype_t dtype,
                        pcoll_op_t op, const size_t *offset, const size_t *count, const pcoll_fusion_plan_t *pl,
                        pcoll_fusion_t **out)
{
    static const char *fn = "pcoll_fusion_create";
    if (!out) return pc_error(PCOLL_ERR_NULL, fn, "fusion (the output pointer) is NULL");
    *out = NULL;
    int rc = pc_ctx_check(ctx, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (group && group_size < 1) return pc_error(PCOLL_ERR_ARG, fn, "group_size %d is below 1", group_size);
    int n = group ? group_size : ctx->size, me = pc_bucket_index(ctx, group, group_size);
    if (me < 0) return pc_error(PCOLL_ERR_ARG, fn, "this rank (%d) is not in the group", ctx->rank);
    /* what this member can check alone; then every member learns who
     * differs (or failed) before any bucket is set up */
    rc = check(grad, dtype, op, offset, count, pl, fn);
    pcoll_fusion_t *f = rc == PCOLL_SUCCESS ? calloc(1, sizeof *f) : NULL;
    if (f) {
        f->ctx = ctx;
        f->nlayers = pl->nlayers;
        f->nbuckets = pl->nbuckets;
        f->grad = grad;
        f->esize = pcoll_dtype_size(dtype);
        f->offset = malloc(sizeof(size_t) * (size_t)pl->nlayers);
        f->count = malloc(sizeof(size_t) * (size_t)pl->nlayers);
        f->bucket_of = malloc(sizeof(int) * (size_t)pl->nlayers);
        f->ready = calloc((size_t)pl->nlayers, 1);
        f->b = calloc((size_t)pl->nbuckets, sizeof *f->b);
        pc_fault_clear(&f->fault);
    }
    if (rc == PCOLL_SUCCESS && (!f || !f->offset || !f->count || !f->bucket_of || !f->ready || !f->b))
        rc = pc_error(PCOLL_ERR_NOMEM, fn, "no memory for a plan of %d layers", pl->nlayers);
    if (rc == PCOLL_SUCCESS) rc = lay_out(f, pl, offset, count, fn);
    int *bad = malloc(sizeof(int) * (size_t)n);
    if (!bad) {
        destroy(f);
        return pc_error(PCOLL_ERR_NOMEM, fn, "no memory for %d members", n);
    }
    uint64_t sig = rc == PCOLL_SUCCESS ? signature(pl, count, dtype, op) : 0;
    int arc = agree(ctx, group, group_size, n, me, sig, rc != PCOLL_SUCCESS, bad, fn);
    if (arc != PCOLL_SUCCESS) rc = arc;
    if (rc == PCOLL_SUCCESS) {
        char who[200];
        size_t at = 0;
        int differ = 0;
        for (int i = 0; i < n; i++)
            if (bad[i] && at < sizeof who)
                at += (size_t)snprintf(who + at, sizeof who - at, "%s%d", differ++ ? ", " : "", group ? group[i] : i);
        if (differ)
            rc = pc_error(PCOLL_ERR_ARG, fn,
                          "the plan, layer counts, dtype or op differ from the first member's (or failed) at rank(s) %s",
                          who);
    }
    free(bad);
    if (rc != PCOLL_SUCCESS) {
        destroy(f);
        return rc;
    }
    /* every member sets up every bucket (collective plans), in order; one
     * that fails makes the others' setup fail too, or time out */
    for (int k = 0; k < f->nbuckets && rc == PCOLL_SUCCESS; k++)
        rc = pc_plan_init(ctx, PCOLL_IN_PLACE, f->b[k].data, f->b[k].count, dtype, op, group, group_size,
                          pc_bucket_algo(ctx, f->b[k].count * f->esize, n), fn, &f->b[k].plan);
    if (rc != PCOLL_SUCCESS) {
        destroy(f);
        return rc;
    }
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
    int rc = pc_fault_raise(&f->fault, fn);
    if (rc != PCOLL_SUCCESS) return rc;
    if (layer < 0 || layer >= f->nlayers)
        return pc_error(PCOLL_ERR_ARG, fn, "layer %d is not in 0..%d", layer, f->nlayers - 1);
    if (f->ready[layer])
        return pc_error(PCOLL_ERR_STATE, fn, "layer %d was marked ready already in this step (pcoll_fusion_wait ends "
                                             "a step)", layer);
    f->ready[layer] = 1;
    f->b[f->bucket_of[layer]].pending--;
    while (f->next < f->nbuckets && f->b[f->next].pending == 0) {
        bucket_t *b = &f->b[f->next];
        if (b->staged) stage(f, b, 1);
        if ((rc = pcoll_start(b->plan, &b->req)) != PCOLL_SUCCESS) {
            pc_fault_set(&f->fault, rc, "bucket %d (layers %d..%d) could not start: %s", f->next, b->first, b->last,
                         pcoll_last_error());
            return pc_fault_raise(&f->fault, fn);
        }
        f->next++;
    }
    return PCOLL_SUCCESS;
}

int pcoll_fusion_wait(pcoll_fusion_t *f)
{
    static const char *fn = "pcoll_fusion_wait";
    if (!f) return pc_error(PCOLL_ERR_NULL, fn, "fusion is NULL");
    int rc = PCOLL_SUCCESS, timed_out = 0;
    for (int k = 0; k < f->next; k++) {
        bucket_t *b = &f->b[k]; /* every bucket before next was started */
        /* after one timeout the later buckets (the same members) are given
         * up at once: the call fails after PCOLL_TIMEOUT_S, not once per bucket */
        int wrc = timed_out ? pc_request_give_up(&b->req, fn) : pcoll_wait(&b->req);
        if (wrc == PCOLL_ERR_TIMEOUT) b->abandoned = timed_out = 1;
        if (wrc != PCOLL_SUCCESS) {
            if (rc == PCOLL_SUCCESS)
                rc = pc_error(wrc, fn, "bucket %d (layers %d..%d): %s", k, b->first, b->last, pcoll_last_error());
            pc_fault_set(&f->fault, wrc, "an earlier step's bucket %d failed", k);
        } else if (b->staged) {
            stage(f, b, 0);
        }
    }
    if (rc == PCOLL_SUCCESS && (rc = pc_fault_raise(&f->fault, fn)) == PCOLL_SUCCESS && f->next < f->nbuckets) {
        int missing = -1;
        for (int l = f->nlayers - 1; l >= 0 && missing < 0; l--)
            if (!f->ready[l]) missing = l;
        rc = pc_error(PCOLL_ERR_STATE, fn,
                      "layer %d was not marked ready in this step: buckets %d..%d did not run (the step's other "
                      "buckets completed)",
                      missing, f->next, f->nbuckets - 1);
    }
    /* the next step */
    memset(f->ready, 0, (size_t)f->nlayers);
    for (int k = 0; k < f->nbuckets; k++) f->b[k].pending = f->b[k].last - f->b[k].first + 1;
    f->next = 0;
    return rc;
}

int pcoll_fusion_free(pcoll_fusion_t **pf)
{
    if (!pf || !*pf) return pc_error(PCOLL_ERR_NULL, "pcoll_fusion_free", "fusion is NULL");
    pcoll_fusion_t *f = *pf;
    for (int k = 0; k < f->next; k++)
        if (f->b[k].req)
            return pc_error(PCOLL_ERR_STATE, "pcoll_fusion_free",
                            "bucket %d of the current step is in flight: pcoll_fusion_wait first", k);
    destroy(f);
    *pf = NULL;
    return PCOLL_SUCCESS;
}
