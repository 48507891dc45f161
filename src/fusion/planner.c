/*
 * The merged-gradient planner, pure (no MPI): which consecutive layers
 * share an allreduce, and the iteration time a cost model predicts.
 *
 *   time -->   forward | backward L-1 ... 1 0            (layer index, forward order)
 *   ready[l]:            ^ L-1 ready   ^ 1   ^ 0 ready
 *   buckets, in backprop order, one allreduce at a time:
 *     start[b] = max(end[b-1], ready[first[b]])   (first: its lowest layer,
 *     end[b]   = start[b] + T(bytes[b])            computed last)
 *   iteration = max(end[last bucket], ready[0])
 *
 * Strategies:
 *   wfbp     every layer a bucket
 *   single   one bucket of every layer
 *   fixed:C  in backprop order, a new bucket when the next layer would take
 *            the current one beyond C bytes (a layer larger than C alone)
 *   mgwfbp   Algorithm 1 of the MG-WFBP paper: for l = L .. 2 (1-based),
 *            merge layer l's bucket into layer l-1 when that makes layer
 *            l-1's exchange end sooner, i.e. tau_b[l-2] - tau_c[l] < a under
 *            T = a + bM (for another T: < min(s, T(p_l)) with s = T(p_l) +
 *            T(p_l-1) - T(p_l + p_l-1) > 0, the same inequality without the
 *            linear form); tau_c is recomputed after each merge
 *   optimal  dynamic programming over the backprop order: E[j] = the
 *            earliest end of an exchange of the first j layers (any split),
 *            E[j] = min over i < j of max(E[i], ready(j-th)) + T(bytes(i..j));
 *            exact because an exchange's end only grows with the previous
 *            one's.  O(L^2).
 *
 * The paper's Theorem 1 says mgwfbp is optimal; it is not always
 * (tests/unit/test_fusion_plan.c keeps a three-layer counterexample): its
 * merges are decided one layer at a time, in one direction.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "../util/parse.h"
#include "pcoll.h"

/* the strategies known by name (fixed:BYTES carries its size) */
static const struct {
    const char *name;
    pcoll_fusion_strategy_t s;
} strategy_names[] = {{"optimal", PCOLL_FUSION_OPTIMAL},
                      {"mgwfbp", PCOLL_FUSION_MGWFBP},
                      {"wfbp", PCOLL_FUSION_WFBP},
                      {"single", PCOLL_FUSION_SINGLE}};
#define NSTRATEGY_NAMES (sizeof strategy_names / sizeof strategy_names[0])

int pcoll_fusion_spec_parse(const char *text, pcoll_fusion_spec_t *spec)
{
    if (!text) return PC_ERR(PCOLL_ERR_NULL, "text is NULL");
    if (!spec) return PC_ERR(PCOLL_ERR_NULL, "spec is NULL");
    for (size_t i = 0; i < NSTRATEGY_NAMES; i++)
        if (!strcmp(text, strategy_names[i].name)) {
            *spec = (pcoll_fusion_spec_t){.strategy = strategy_names[i].s, .fixed_bytes = 0};
            return PCOLL_SUCCESS;
        }
    size_t cap;
    if (!strncmp(text, "fixed:", 6)) {
        if (pc_parse_bytes(text + 6, &cap) != 0 || cap == 0)
            return PC_ERR(PCOLL_ERR_ARG, "\"%s\": fixed:BYTES needs a size >= 1 (e.g. fixed:25M)", text);
        *spec = (pcoll_fusion_spec_t){.strategy = PCOLL_FUSION_FIXED, .fixed_bytes = cap};
        return PCOLL_SUCCESS;
    }
    return PC_ERR(PCOLL_ERR_ARG, "\"%s\" is not optimal, mgwfbp, wfbp, single or fixed:BYTES", text);
}

void pcoll_fusion_spec_name(const pcoll_fusion_spec_t *spec, char *buf, size_t len)
{
    if (!buf || len == 0) return;
    if (!spec) {
        snprintf(buf, len, "?");
        return;
    }
    for (size_t i = 0; i < NSTRATEGY_NAMES; i++)
        if (spec->strategy == strategy_names[i].s) {
            snprintf(buf, len, "%s", strategy_names[i].name);
            return;
        }
    if (spec->strategy == PCOLL_FUSION_FIXED)
        snprintf(buf, len, "fixed:%zu", spec->fixed_bytes);
    else
        snprintf(buf, len, "?");
}

static double T(const pcoll_cost_model_t *m, double bytes) { return pcoll_cost_predict(m, bytes); }

static int check_profile(const pcoll_fusion_profile_t *p)
{
    if (!p) return PC_ERR(PCOLL_ERR_NULL, "profile is NULL");
    if (p->nlayers < 1) return PC_ERR(PCOLL_ERR_ARG, "profile->nlayers is %d; it must be >= 1", p->nlayers);
    if (!p->bytes || !p->backward_us)
        return PC_ERR(PCOLL_ERR_NULL, "profile->%s is NULL", !p->bytes ? "bytes" : "backward_us");
    if (!isfinite(p->forward_us) || p->forward_us < 0)
        return PC_ERR(PCOLL_ERR_ARG, "profile->forward_us %g is not a finite time >= 0", p->forward_us);
    for (int l = 0; l < p->nlayers; l++)
        if (!isfinite(p->backward_us[l]) || p->backward_us[l] < 0)
            return PC_ERR(PCOLL_ERR_ARG, "profile->backward_us[%d] %g is not a finite time >= 0", l,
                          p->backward_us[l]);
    return PCOLL_SUCCESS;
}

static int check_model(const pcoll_cost_model_t *m)
{
    if (!m) return PC_ERR(PCOLL_ERR_NULL, "model is NULL");
    if (!isfinite(m->a_us) || !isfinite(m->b_us) || m->a_us < 0 || m->b_us < 0)
        return PC_ERR(PCOLL_ERR_ARG, "model: a_us %g and b_us %g must be finite and >= 0", m->a_us, m->b_us);
    if (!m->piecewise) return PCOLL_SUCCESS;
    if (m->nsegments < 1 || m->nsegments > PCOLL_COST_MAX_SEGMENTS)
        return PC_ERR(PCOLL_ERR_ARG, "model->nsegments %d is not in 1..%d", m->nsegments, PCOLL_COST_MAX_SEGMENTS);
    /* a fitted segment's a may be below 0 (a line through its range only) */
    for (int k = 0; k < m->nsegments; k++) {
        const pcoll_cost_segment_t *g = &m->segment[k];
        if (!isfinite(g->from_bytes) || !isfinite(g->a_us) || !isfinite(g->b_us) || g->b_us < 0)
            return PC_ERR(PCOLL_ERR_ARG, "model->segment[%d] (from %g bytes, a %g us, b %g us/B): finite numbers, b >= 0",
                          k, g->from_bytes, g->a_us, g->b_us);
        if (k > 0 && g->from_bytes <= m->segment[k - 1].from_bytes)
            return PC_ERR(PCOLL_ERR_ARG, "model->segment[%d] begins at %g bytes, not after segment %d's %g", k,
                          g->from_bytes, k - 1, m->segment[k - 1].from_bytes);
    }
    return PCOLL_SUCCESS;
}

/* ready[l]: when layer l's gradient is complete, from the forward start */
static void ready_times(const pcoll_fusion_profile_t *p, double *ready)
{
    double t = p->forward_us;
    for (int l = p->nlayers - 1; l >= 0; l--) ready[l] = t += p->backward_us[l];
}

/* ---- strategies: head[l] = 1 when layer l is the highest of its bucket ---- */

static void plan_fixed(const pcoll_fusion_profile_t *p, size_t cap, char *head)
{
    size_t cur = 0; /* the current bucket's bytes */
    for (int l = p->nlayers - 1; l >= 0; l--) {
        head[l] = l == p->nlayers - 1 || cur >= cap || p->bytes[l] > cap - cur;
        if (head[l] && l != p->nlayers - 1 && cur == 0) head[l] = 0; /* an empty bucket takes any layer */
        if (head[l]) cur = 0;
        cur += p->bytes[l];
    }
}

/* MG-WFBP's Algorithm 1, in the paper's 1-based layers (layer j here is
 * index j - 1 of the profile).  Scratch: 5 (L + 1) doubles. */
static void plan_mgwfbp(const pcoll_fusion_profile_t *p, const pcoll_cost_model_t *m, double *scratch, char *head)
{
    int L = p->nlayers;
    double *tb = scratch, *taub = tb + (L + 1), *tc = taub + (L + 1), *bytes = tc + (L + 1), *tauc = bytes + (L + 1);
    for (int j = 1; j <= L; j++) {
        tb[j] = p->backward_us[j - 1];
        bytes[j] = (double)p->bytes[j - 1];
        tc[j] = T(m, bytes[j]);
        head[j - 1] = 1;
    }
    taub[L] = p->forward_us; /* tau_b[j]: when layer j's backward begins */
    for (int j = L - 1; j >= 1; j--) taub[j] = taub[j + 1] + tb[j + 1];
    taub[0] = taub[1] + tb[1]; /* tau_b[0]: the end of backprop (layer 1 ready) */
    for (int l = L; l >= 2; l--) {
        /* tau_c: when each layer's exchange may begin (CALCULATECOMMSTART) */
        tauc[L] = taub[L] + tb[L];
        for (int j = L - 1; j >= 1; j--) {
            double prev = tauc[j + 1] + tc[j + 1], own = taub[j] + tb[j];
            tauc[j] = prev > own ? prev : own;
        }
        /* merging l into l-1 pays when l-1's exchange then ends sooner:
         * tau_b[l-2] - tau_c[l] < a for T = a + bM */
        double gain;
        if (m->piecewise) { /* no gain from merging, no merge */
            double saved = tc[l] + tc[l - 1] - T(m, bytes[l] + bytes[l - 1]);
            gain = saved <= 0 ? -INFINITY : saved < tc[l] ? saved : tc[l];
        } else {
            gain = m->a_us;
        }
        if (taub[l - 2] - tauc[l] < gain) {
            tc[l] = 0;
            bytes[l - 1] += bytes[l];
            tc[l - 1] = T(m, bytes[l - 1]);
            head[l - 2] = 0; /* layer l-1 joins layer l's bucket */
        }
    }
}

/* The exact optimum.  Scratch: 3 (L + 1) doubles and L + 1 ints. */
static void plan_optimal(const pcoll_fusion_profile_t *p, const pcoll_cost_model_t *m, const double *ready,
                         double *scratch, int *cut, char *head)
{
    int L = p->nlayers;
    /* position k of the backprop order is layer L - 1 - k */
    double *E = scratch, *pre = E + (L + 1);
    pre[0] = 0;
    for (int k = 0; k < L; k++) pre[k + 1] = pre[k] + (double)p->bytes[L - 1 - k];
    E[0] = 0;
    for (int j = 1; j <= L; j++) {
        double r = ready[L - j], best = INFINITY;
        for (int i = 0; i < j; i++) {
            double start = E[i] > r ? E[i] : r, end = start + T(m, pre[j] - pre[i]);
            if (end < best) {
                best = end;
                cut[j] = i;
            }
        }
        E[j] = best;
    }
    memset(head, 0, (size_t)L);
    for (int j = L; j > 0; j = cut[j]) head[L - 1 - cut[j]] = 1; /* the bucket's first position */
}

/* ---- plans ---- */

static pcoll_fusion_plan_t *plan_alloc(int L, int nb)
{
    size_t sz = sizeof(pcoll_fusion_plan_t) + sizeof(int) * (size_t)(L + 2 * nb) +
                sizeof(size_t) * (size_t)nb + sizeof(double) * (size_t)(2 * nb);
    pcoll_fusion_plan_t *pl = calloc(1, sz);
    if (!pl) return NULL;
    /* doubles and size_ts first (alignment), then ints */
    double *d = (double *)(pl + 1);
    pl->start_us = d;
    pl->end_us = d + nb;
    pl->bytes = (size_t *)(d + 2 * nb);
    int *i = (int *)(pl->bytes + nb);
    pl->bucket_of = i;
    pl->first = i + L;
    pl->last = i + L + nb;
    pl->nlayers = L;
    pl->nbuckets = nb;
    return pl;
}

int pcoll_fusion_plan_predict(pcoll_fusion_plan_t *pl, const pcoll_fusion_profile_t *p, const pcoll_cost_model_t *m)
{
    if (!pl) return PC_ERR(PCOLL_ERR_NULL, "plan is NULL");
    int rc = check_profile(p);
    if (rc == PCOLL_SUCCESS) rc = check_model(m);
    if (rc != PCOLL_SUCCESS) return rc;
    if (p->nlayers != pl->nlayers)
        return PC_ERR(PCOLL_ERR_ARG, "profile->nlayers %d differs from the plan's %d", p->nlayers, pl->nlayers);
    double *ready = malloc(sizeof(double) * (size_t)p->nlayers);
    if (!ready) return PC_ERR(PCOLL_ERR_NOMEM, "no memory for %d layers", p->nlayers);
    ready_times(p, ready);
    double end = 0, comm = 0, compute = ready[0];
    for (int b = 0; b < pl->nbuckets; b++) {
        size_t bytes = 0;
        for (int l = pl->first[b]; l <= pl->last[b]; l++) bytes += p->bytes[l];
        pl->bytes[b] = bytes;
        double r = ready[pl->first[b]], t = T(m, (double)bytes);
        pl->start_us[b] = end > r ? end : r;
        end = pl->end_us[b] = pl->start_us[b] + t;
        comm += t;
    }
    pl->iter_us = end > compute ? end : compute;
    pl->compute_us = compute;
    pl->comm_us = comm;
    pl->exposed_us = pl->iter_us - compute;
    free(ready);
    return PCOLL_SUCCESS;
}

int pcoll_fusion_plan_create(const pcoll_fusion_profile_t *p, const pcoll_cost_model_t *m,
                             const pcoll_fusion_spec_t *spec, pcoll_fusion_plan_t **out)
{
    if (!out) return PC_ERR(PCOLL_ERR_NULL, "plan (the output pointer) is NULL");
    *out = NULL;
    int rc = check_profile(p);
    if (rc == PCOLL_SUCCESS) rc = check_model(m);
    if (rc != PCOLL_SUCCESS) return rc;
    if (!spec) return PC_ERR(PCOLL_ERR_NULL, "spec is NULL");
    if (spec->strategy < PCOLL_FUSION_OPTIMAL || spec->strategy > PCOLL_FUSION_FIXED)
        return PC_ERR(PCOLL_ERR_ARG, "spec->strategy %d is not a pcoll_fusion_strategy_t", (int)spec->strategy);
    if (spec->strategy == PCOLL_FUSION_FIXED && spec->fixed_bytes == 0)
        return PC_ERR(PCOLL_ERR_ARG, "spec->fixed_bytes is 0: a FIXED plan needs a bucket size >= 1");
    int L = p->nlayers;
    if (L < 1) return PCOLL_ERR_ARG; /* checked above; tells the compiler */
    char *head = malloc((size_t)L);
    double *scratch = malloc(sizeof(double) * 5 * (size_t)(L + 1));
    double *ready = malloc(sizeof(double) * (size_t)L);
    int *cut = malloc(sizeof(int) * (size_t)(L + 1));
    if (!head || !scratch || !ready || !cut) {
        rc = PC_ERR(PCOLL_ERR_NOMEM, "no memory to plan %d layers", L);
        goto out;
    }
    ready_times(p, ready);
    switch (spec->strategy) {
    case PCOLL_FUSION_WFBP: memset(head, 1, (size_t)L); break;
    case PCOLL_FUSION_SINGLE:
        memset(head, 0, (size_t)L);
        head[L - 1] = 1;
        break;
    case PCOLL_FUSION_FIXED: plan_fixed(p, spec->fixed_bytes, head); break;
    case PCOLL_FUSION_MGWFBP: plan_mgwfbp(p, m, scratch, head); break;
    default: plan_optimal(p, m, ready, scratch, cut, head); break;
    }
    int nb = 0;
    for (int l = 0; l < L; l++) nb += head[l];
    pcoll_fusion_plan_t *pl = plan_alloc(L, nb);
    if (!pl) {
        rc = PC_ERR(PCOLL_ERR_NOMEM, "no memory for a plan of %d buckets", nb);
        goto out;
    }
    pl->spec = *spec;
    for (int l = L - 1, b = -1; l >= 0; l--) {
        if (head[l]) pl->last[++b] = l;
        pl->first[b] = l;
        pl->bucket_of[l] = b;
    }
    rc = pcoll_fusion_plan_predict(pl, p, m);
    if (rc == PCOLL_SUCCESS)
        *out = pl;
    else
        free(pl);
out:
    free(head);
    free(scratch);
    free(ready);
    free(cut);
    return rc;
}

void pcoll_fusion_plan_free(pcoll_fusion_plan_t **pl)
{
    if (!pl) return;
    free(*pl);
    *pl = NULL;
}
