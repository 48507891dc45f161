/* The report's numbers.  Every kind of exchange is found by sorting the
 * events that make it (by object, round, rank, time...) and walking the
 * sorted runs, so that millions of events cost n log n. */
#include "analyze.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define NO_EVENT ((size_t)-1)

typedef struct member {
    int32_t rank;
    double arrival; /* NaN: none known */
    double end;     /* its completion, for the clock check; NaN: not checked */
    size_t event;   /* its call, or NO_EVENT */
} member_t;

/* ---- sorted index arrays ---- */

typedef int (*event_cmp_t)(const tr_event_t *x, const tr_event_t *y);

typedef struct sort_ctx {
    const trace_t *t;
    event_cmp_t cmp;
} sort_ctx_t;

static int cmp_index(const void *a, const void *b, void *arg)
{
    const sort_ctx_t *c = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int r = c->cmp(&c->t->events[i], &c->t->events[j]);
    return r ? r : (i > j) - (i < j);
}

#define CMP_FIELD(x, y) \
    do { \
        if ((x) != (y)) return (x) < (y) ? -1 : 1; \
    } while (0)

/* The events of one type, sorted by cmp; *n of them */
static size_t *collect(const trace_t *t, tr_type_t type, event_cmp_t cmp, size_t *n)
{
    size_t count = 0;
    for (size_t i = 0; i < t->n; i++) count += t->events[i].type == type;
    size_t *idx = xmalloc((count ? count : 1) * sizeof *idx);
    count = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->events[i].type == type) idx[count++] = i;
    sort_ctx_t ctx = {t, cmp};
    if (count > 1) qsort_r(idx, count, sizeof *idx, cmp_index, &ctx);
    *n = count;
    return idx;
}

static void push_double(double **v, size_t *n, size_t *cap, double x)
{
    GROW(*v, *cap, *n + 1);
    (*v)[(*n)++] = x;
}

static void push_lateness(rank_stats_t *s, double ms, size_t count)
{
    GROW(s->lateness, s->cap_lateness, s->nlateness + 1);
    s->lateness[s->nlateness++] = (lateness_t){ms, count};
}

/* ---- one exchange ---- */

static void check_pair(analysis_t *a, const trace_t *t, int cause_rank, double cause, int effect_rank, double effect)
{
    if (isnan(cause) || isnan(effect)) return;
    double gap = cause - effect, tolerance = t->err_us[cause_rank] + t->err_us[effect_rank] + 0.001; /* ts has ns */
    a->clock.pairs++;
    if (gap > a->clock.worst_us) a->clock.worst_us = gap;
    if (gap > tolerance) a->clock.violations++;
}

/* Lateness of each member, the last one, and the waiting it caused
 * (synchronous) or that the others avoided; for a synchronous allreduce the
 * waiting in each call (set_waiting).  It counts as `times` exchanges with
 * these arrivals (iteration steps that share them). */
static int score_exchange(analysis_t *a, const trace_t *t, const member_t *m, size_t n, int synchronous,
                          int set_waiting, size_t times)
{
    size_t arrived = 0, last = 0;
    double earliest = INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (isnan(m[i].arrival)) continue;
        /* the largest arrival; on a tie the smaller rank, whatever the list's order */
        if (arrived++ == 0 || m[i].arrival > m[last].arrival ||
            (m[i].arrival == m[last].arrival && m[i].rank < m[last].rank))
            last = i;
        if (m[i].arrival < earliest) earliest = m[i].arrival;
    }
    if (arrived < 2) return 0; /* not an exchange: nobody to wait for */
    double waiting = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(m[i].arrival)) continue;
        rank_stats_t *s = &a->rank[m[i].rank];
        s->exchanges += times;
        push_lateness(s, (m[i].arrival - earliest) / 1000.0, times);
        double wait = m[last].arrival - m[i].arrival;
        waiting += wait;
        if (set_waiting && m[i].event != NO_EVENT) {
            double dur = t->events[m[i].event].dur;
            a->waiting_us[m[i].event] = wait < dur ? wait : dur;
        }
        if (synchronous && i != last) check_pair(a, t, m[last].rank, m[last].arrival, m[i].rank, m[i].end);
    }
    a->rank[m[last].rank].last += times;
    if (synchronous) a->rank[m[last].rank].caused_us += waiting * (double)times;
    else a->rank[m[last].rank].avoided_us += waiting * (double)times;
    return 1;
}

/* ---- synchronous allreduces: the k-th call of each member on one list ---- */

static int cmp_allreduce(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->group, y->group);
    CMP_FIELD(x->rank, y->rank);
    CMP_FIELD(x->ts, y->ts);
    return 0;
}

/* The calls of one member list, idx[b..e): the k-th exchange for each k */
static void allreduce_list(const trace_t *t, analysis_t *a, const size_t *idx, size_t b, size_t e, size_t *start,
                           size_t *count, member_t *m)
{
    int32_t group = t->events[idx[b]].group;
    int32_t all = t->ranks, n = group < 0 ? all : t->nmembers[group];
    const int32_t *list = group < 0 ? NULL : t->members[group];
    for (int32_t r = 0; r < all; r++) count[r] = 0;
    for (size_t i = b; i < e; i++) {
        int32_t r = t->events[idx[i]].rank;
        if (count[r]++ == 0) start[r] = i;
    }
    size_t most = 0;
    for (int32_t j = 0; j < n; j++) {
        int32_t r = list ? list[j] : j;
        if (r >= 0 && r < all && count[r] > most) most = count[r];
    }
    for (size_t k = 0; k < most; k++) {
        size_t have = 0;
        for (int32_t j = 0; j < n; j++) {
            int32_t r = list ? list[j] : j;
            if (r < 0 || r >= all || count[r] <= k || have == (size_t)all) continue;
            size_t ev = idx[start[r] + k];
            m[have++] = (member_t){r, t->events[ev].ts, t->events[ev].ts + t->events[ev].dur, ev};
        }
        if (have < (size_t)n) {
            a->allreduces_incomplete++; /* a member's k-th call is not in the trace */
            continue;
        }
        a->allreduces += (size_t)score_exchange(a, t, m, have, 1, 1, 1);
    }
}

static void allreduce_exchanges(const trace_t *t, analysis_t *a)
{
    size_t n;
    size_t *idx = collect(t, TR_ALLREDUCE, cmp_allreduce, &n);
    size_t *start = xmalloc((size_t)t->ranks * sizeof *start), *count = xmalloc((size_t)t->ranks * sizeof *count);
    member_t *m = xmalloc((size_t)t->ranks * sizeof *m);
    for (size_t b = 0, e; b < n; b = e) {
        for (e = b + 1; e < n && t->events[idx[e]].group == t->events[idx[b]].group;) e++;
        allreduce_list(t, a, idx, b, e, start, count, m);
    }
    free(m);
    free(count);
    free(start);
    free(idx);
}

/* ---- partial rounds: (object, round) ---- */

static int cmp_partial(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->rank, y->rank);
    CMP_FIELD(x->u.round.round, y->u.round.round); /* flushes (-1) first */
    CMP_FIELD(x->ts, y->ts);
    return 0;
}

static int cmp_round(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->u.round.round, y->u.round.round);
    CMP_FIELD(x->rank, y->rank);
    CMP_FIELD(x->ts, y->ts);
    return 0;
}

/* The first position in idx[lo..hi) whose event is not below key */
static size_t lower_bound(const trace_t *t, const size_t *idx, size_t lo, size_t hi, const tr_event_t *key,
                          event_cmp_t cmp)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp(&t->events[idx[mid]], key) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* A rank's calls on one object: flushes [b, f) by time, the others [f, e)
 * by round */
typedef struct call_block {
    int32_t obj, rank;
    size_t b, f, e;
} call_block_t;

static call_block_t find_calls(const trace_t *t, const size_t *calls, size_t n, int32_t obj, int32_t rank)
{
    tr_event_t key = {.obj = obj, .rank = rank, .ts = -INFINITY};
    call_block_t c = {.obj = obj, .rank = rank};
    key.u.round.round = INT64_MIN;
    c.b = lower_bound(t, calls, 0, n, &key, cmp_partial);
    key.u.round.round = 0;
    c.f = lower_bound(t, calls, c.b, n, &key, cmp_partial);
    key.u.round.round = INT64_MAX;
    key.ts = INFINITY;
    c.e = lower_bound(t, calls, c.f, n, &key, cmp_partial);
    return c;
}

/* The first call of the block with a round >= round; NO_EVENT if none */
static size_t call_from_round(const trace_t *t, const size_t *calls, call_block_t c, int64_t round)
{
    tr_event_t key = {.obj = c.obj, .rank = c.rank, .ts = -INFINITY};
    key.u.round.round = round;
    size_t at = lower_bound(t, calls, c.f, c.e, &key, cmp_partial);
    return at < c.e ? calls[at] : NO_EVENT;
}

/* Position of the block's first flush that starts at ts or later (later
 * only, when strictly) */
static size_t flush_position(const trace_t *t, const size_t *calls, call_block_t c, double ts, int strictly)
{
    size_t lo = c.b, hi = c.f;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        double x = t->events[calls[mid]].ts;
        if (x < ts || (strictly && x == ts)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static size_t flush_from(const trace_t *t, const size_t *calls, call_block_t c, double ts)
{
    size_t pos = flush_position(t, calls, c, ts, 0);
    return pos < c.f ? calls[pos] : NO_EVENT;
}

/* The flush whose span holds ts; NO_EVENT if none */
static size_t flush_around(const trace_t *t, const size_t *calls, call_block_t c, double ts)
{
    size_t pos = flush_position(t, calls, c, ts, 1);
    if (pos == c.b) return NO_EVENT;
    const tr_event_t *e = &t->events[calls[pos - 1]];
    return ts <= e->ts + e->dur ? calls[pos - 1] : NO_EVENT;
}

typedef struct round_ctx {
    const trace_t *t;
    analysis_t *a;
    const size_t *calls, *starts;
    size_t ncalls, nstarts;
    int32_t *obj_ranks; /* the ranks with calls on obj_of_ranks */
    size_t nobj_ranks;
    int32_t obj_of_ranks;
    double *done; /* [rank]: its completion of the round at hand, NaN */
    member_t *m;
} round_ctx_t;

static void object_ranks(round_ctx_t *c, int32_t obj)
{
    if (c->obj_of_ranks == obj) return;
    c->obj_of_ranks = obj;
    c->nobj_ranks = 0;
    tr_event_t key = {.obj = obj, .rank = INT32_MIN, .ts = -INFINITY};
    key.u.round.round = INT64_MIN;
    for (size_t i = lower_bound(c->t, c->calls, 0, c->ncalls, &key, cmp_partial); i < c->ncalls; i++) {
        const tr_event_t *e = &c->t->events[c->calls[i]];
        if (e->obj != obj) break;
        if (c->nobj_ranks == 0 || c->obj_ranks[c->nobj_ranks - 1] != e->rank) c->obj_ranks[c->nobj_ranks++] = e->rank;
    }
}

/* Rank x at a round: taken (the call whose round it is), or in a
 * synchronous round the flush around its completion, or, inside a flush (or
 * free) when the round starts, no member of it (it waits for the flush's
 * synchronous round), or missed (its next call on the object: the one with
 * the next round, or a flush after the round started, whichever comes
 * first) */
static member_t round_member(round_ctx_t *c, int32_t x, int64_t round, int sync, double round_start)
{
    const trace_t *t = c->t;
    member_t m = {x, NAN, sync ? c->done[x] : NAN, NO_EVENT};
    call_block_t b = find_calls(t, c->calls, c->ncalls, c->obj_of_ranks, x);
    size_t call = call_from_round(t, c->calls, b, round);
    if (call != NO_EVENT && t->events[call].u.round.round == round) {
        m.arrival = t->events[call].ts;
        m.event = call;
        return m;
    }
    if (sync) {
        size_t flush = isnan(c->done[x]) ? NO_EVENT : flush_around(t, c->calls, b, c->done[x]);
        if (flush != NO_EVENT) m.arrival = t->events[flush].ts, m.event = flush;
        return m;
    }
    if (flush_around(t, c->calls, b, round_start) != NO_EVENT) return m; /* waiting in a flush: not in the round */
    c->a->rank[x].missed_rounds++;
    double next = call != NO_EVENT ? t->events[call].ts : INFINITY;
    size_t flush = flush_from(t, c->calls, b, round_start);
    if (flush != NO_EVENT && t->events[flush].ts < next) next = t->events[flush].ts;
    if (isfinite(next)) m.arrival = next;
    return m;
}

/* The root's round_start of (obj, round), NaN if it did not record one */
static double root_start(const round_ctx_t *c, int32_t obj, int64_t round, int64_t root)
{
    tr_event_t key = {.obj = obj, .rank = (int32_t)root, .ts = -INFINITY};
    key.u.round.round = round;
    size_t at = lower_bound(c->t, c->starts, 0, c->nstarts, &key, cmp_round);
    if (at == c->nstarts) return NAN;
    const tr_event_t *e = &c->t->events[c->starts[at]];
    return e->obj == obj && e->u.round.round == round && e->rank == root ? e->ts : NAN;
}

/* One round: its events rounds[b..e) (every rank's completion) */
static void partial_round(round_ctx_t *c, const size_t *rounds, size_t b, size_t e)
{
    const trace_t *t = c->t;
    const tr_event_t *first = &t->events[rounds[b]];
    int sync = 0;
    double earliest = INFINITY;
    for (size_t i = b; i < e; i++) {
        const tr_event_t *ev = &t->events[rounds[i]];
        sync |= ev->flag;
        if (isnan(c->done[ev->rank])) c->done[ev->rank] = ev->ts;
        if (ev->ts < earliest) earliest = ev->ts;
    }
    int64_t root = first->u.round.root;
    double start = root >= 0 && root < t->ranks ? root_start(c, first->obj, first->u.round.round, root) : NAN;
    object_ranks(c, first->obj);
    for (size_t i = 0; i < c->nobj_ranks; i++)
        c->m[i] = round_member(c, c->obj_ranks[i], first->u.round.round, sync, isnan(start) ? earliest : start);
    if (score_exchange(c->a, t, c->m, c->nobj_ranks, sync, 0, 1)) {
        c->a->rounds++;
        c->a->sync_rounds += (size_t)sync;
    }
    for (int32_t x = 0; !isnan(start) && x < t->ranks; x++)
        if (x != root) check_pair(c->a, t, (int)root, start, x, c->done[x]);
    for (size_t i = b; i < e; i++) c->done[t->events[rounds[i]].rank] = NAN;
}

static void partial_exchanges(const trace_t *t, analysis_t *a)
{
    size_t nrounds;
    size_t *rounds = collect(t, TR_ROUND, cmp_round, &nrounds);
    round_ctx_t c = {.t = t, .a = a, .obj_of_ranks = -2};
    c.calls = collect(t, TR_PARTIAL_CALL, cmp_partial, &c.ncalls);
    c.starts = collect(t, TR_ROUND_START, cmp_round, &c.nstarts);
    c.obj_ranks = xmalloc((size_t)t->ranks * sizeof *c.obj_ranks);
    c.m = xmalloc((size_t)t->ranks * sizeof *c.m);
    c.done = xmalloc((size_t)t->ranks * sizeof *c.done);
    for (int r = 0; r < t->ranks; r++) c.done[r] = NAN;
    for (size_t b = 0, e; b < nrounds; b = e) {
        const tr_event_t *first = &t->events[rounds[b]];
        for (e = b + 1; e < nrounds; e++) {
            const tr_event_t *ev = &t->events[rounds[e]];
            if (ev->obj != first->obj || ev->u.round.round != first->u.round.round) break;
        }
        partial_round(&c, rounds, b, e);
    }
    free(c.done);
    free(c.m);
    free(c.obj_ranks);
    free((void *)c.starts);
    free((void *)c.calls);
    free(rounds);
}

/* ---- dynamic groups: (object, group id), and iteration steps ---- */

static int cmp_preduce(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->u.preduce.group_id, y->u.preduce.group_id);
    CMP_FIELD(x->rank, y->rank);
    CMP_FIELD(x->ts, y->ts);
    return 0;
}

/* ---- rounds that went on without silent ranks (PCOLL_EXCLUDE_MS) ---- */

static int cmp_left_out(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->u.round.round, y->u.round.round);
    CMP_FIELD(x->rank, y->rank);
    return 0;
}

/* Every rank that completes a round reports the ranks it left out: a round
 * counts once for each rank named at any of them.  A catch-up counts at the
 * rank that made it. */
static void left_out(const trace_t *t, analysis_t *a)
{
    size_t n;
    size_t *idx = collect(t, TR_LEFT_OUT, cmp_left_out, &n);
    unsigned char *named = xcalloc((size_t)a->ranks, 1);
    for (size_t b = 0, e; b < n; b = e) {
        const tr_event_t *first = &t->events[idx[b]];
        memset(named, 0, (size_t)a->ranks);
        for (e = b; e < n; e++) {
            const tr_event_t *ev = &t->events[idx[e]];
            if (ev->obj != first->obj || ev->u.round.round != first->u.round.round) break;
            if (ev->flag) { /* a catch-up: rounds first..round, at its rank */
                rank_stats_t *s = &a->rank[ev->rank];
                s->caught_up++;
                if (ev->u.round.round >= ev->u.round.root)
                    s->caught_up_rounds += (size_t)(ev->u.round.round - ev->u.round.root + 1);
                continue;
            }
            for (int32_t i = 0; ev->group >= 0 && i < t->nmembers[ev->group]; i++) {
                int32_t r = t->members[ev->group][i];
                if (r < a->ranks) named[r] = 1;
            }
        }
        for (int r = 0; r < a->ranks; r++) a->rank[r].left_out_rounds += named[r];
    }
    free(named);
    free(idx);
}

/* Per group: the count, each call's wait for its group (lateness is not
 * scored per group: see iteration_steps) */
static void group_waits(const trace_t *t, analysis_t *a)
{
    size_t n;
    size_t *idx = collect(t, TR_PREDUCE, cmp_preduce, &n);
    for (size_t b = 0, e; b < n; b = e) {
        const tr_event_t *first = &t->events[idx[b]];
        int formed = 0;
        for (e = b; e < n; e++) {
            const tr_event_t *ev = &t->events[idx[e]];
            if (ev->obj != first->obj || ev->u.preduce.group_id != first->u.preduce.group_id) break;
            rank_stats_t *s = &a->rank[ev->rank];
            push_double(&s->preduce_wait_ms, &s->npreduce, &s->cap_preduce, ev->u.preduce.wait_us / 1000.0);
            double wait = ev->u.preduce.wait_us < ev->dur ? ev->u.preduce.wait_us : ev->dur;
            a->waiting_us[idx[e]] = wait > 0 ? wait : 0;
            formed |= !ev->flag; /* a failed call was in no group */
        }
        a->groups += (size_t)formed;
    }
    free(idx);
}

static int cmp_preduce_time(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->rank, y->rank);
    CMP_FIELD(x->ts, y->ts);
    return 0;
}

/* The iteration steps of one object: calls[b..e) are its successful calls
 * by rank, then time.  Rank x arrives at step k when it calls with an
 * iteration >= k for the first time.  Per rank a position (at) that only
 * moves forward: the first call with an iteration >= k comes no earlier as
 * k grows.  Steps k..until whose arrivals are the same calls are scored
 * once, counted until - k + 1 times. */
static void object_steps(const trace_t *t, analysis_t *a, const size_t *calls, size_t b, size_t e, size_t *at,
                         size_t *end, member_t *m)
{
    size_t nranks = 0;
    int64_t kmin = INT64_MAX, kmax = INT64_MAX; /* kmax: the largest iteration every rank reached */
    for (size_t i = b, j; i < e; i = j) {
        int32_t rank = t->events[calls[i]].rank;
        int64_t most = INT64_MIN;
        for (j = i; j < e && t->events[calls[j]].rank == rank; j++) {
            int64_t it = t->events[calls[j]].u.preduce.iteration;
            if (it < kmin) kmin = it;
            if (it > most) most = it;
        }
        if (most < kmax) kmax = most;
        m[nranks] = (member_t){rank, NAN, NAN, NO_EVENT};
        at[nranks] = i;
        end[nranks++] = j;
    }
    if (nranks < 2) return;
    for (int64_t k = kmin; k <= kmax;) {
        int64_t until = kmax;
        for (size_t x = 0; x < nranks; x++) {
            while (at[x] + 1 < end[x] && t->events[calls[at[x]]].u.preduce.iteration < k) at[x]++; /* k <= kmax */
            const tr_event_t *ev = &t->events[calls[at[x]]];
            if (ev->u.preduce.iteration < until) until = ev->u.preduce.iteration;
            m[x].arrival = ev->ts;
            m[x].event = calls[at[x]];
        }
        size_t times = (size_t)((uint64_t)until - (uint64_t)k) + 1;
        if (score_exchange(a, t, m, nranks, 0, 0, times)) a->iteration_steps += times;
        if (until == kmax) break;
        k = until + 1;
    }
}

static void iteration_steps(const trace_t *t, analysis_t *a)
{
    size_t n, kept = 0;
    size_t *calls = collect(t, TR_PREDUCE, cmp_preduce_time, &n);
    for (size_t i = 0; i < n; i++)
        if (!t->events[calls[i]].flag) calls[kept++] = calls[i]; /* a failed call reached no step */
    size_t *at = xmalloc((size_t)t->ranks * sizeof *at), *end = xmalloc((size_t)t->ranks * sizeof *end);
    member_t *m = xmalloc((size_t)t->ranks * sizeof *m);
    for (size_t b = 0, e; b < kept; b = e) {
        for (e = b + 1; e < kept && t->events[calls[e]].obj == t->events[calls[b]].obj;) e++;
        object_steps(t, a, calls, b, e, at, end, m);
    }
    free(m);
    free(end);
    free(at);
    free(calls);
}

/* ---- time shares ---- */

static int32_t kind_of(const trace_t *t, analysis_t *a, const tr_event_t *e)
{
    const char *name = e->type == TR_FUSION_WAIT ? "fusion" : strtab_get(&t->strings, e->label);
    size_t known = a->kind_names.count;
    int32_t id = strtab_intern(&a->kind_names, name, strlen(name));
    if ((size_t)id == known) {
        GROW(a->kinds, a->cap_kinds, a->nkinds + 1);
        kind_stats_t *k = &a->kinds[a->nkinds++];
        k->name = id;
        k->exchange_us = xcalloc((size_t)t->ranks, sizeof *k->exchange_us);
        k->waiting_us = xcalloc((size_t)t->ranks, sizeof *k->waiting_us);
    }
    return id; /* kinds are added in the order of their names' ids */
}

static int is_call(const tr_event_t *e)
{
    return e->type == TR_ALLREDUCE || e->type == TR_PARTIAL_CALL || e->type == TR_PREDUCE || e->type == TR_FUSION_WAIT;
}

typedef struct interval {
    int32_t rank, kind; /* kind: -1 when unions are per rank only */
    double from, to;
    double wait_to; /* the end of its waiting part [from, wait_to) */
} interval_t;

static int cmp_interval(const void *a, const void *b)
{
    const interval_t *x = a, *y = b;
    CMP_FIELD(x->rank, y->rank);
    CMP_FIELD(x->kind, y->kind);
    CMP_FIELD(x->from, y->from);
    return 0;
}

/* The length of the union of v[b..e) (sorted by from): of their spans, or
 * of their waiting parts (which start where their spans do) */
static double union_length(const interval_t *v, size_t b, size_t e, int waiting)
{
    double total = 0, from = 0, to = -INFINITY;
    for (size_t i = b; i < e; i++) {
        double x = waiting ? v[i].wait_to : v[i].to;
        if (!(x > v[i].from)) continue; /* nothing */
        if (v[i].from > to) {
            if (isfinite(to)) total += to - from;
            from = v[i].from;
            to = x;
        } else if (x > to) {
            to = x;
        }
    }
    return isfinite(to) ? total + (to - from) : total;
}

/* ---- fusion ---- */

static int cmp_fusion_step(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->u.fusion.step, y->u.fusion.step);
    CMP_FIELD(x->rank, y->rank);
    CMP_FIELD(x->ts, y->ts);
    return 0;
}

static int cmp_fusion_bucket(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->u.fusion.index, y->u.fusion.index);
    CMP_FIELD(x->u.fusion.step, y->u.fusion.step);
    CMP_FIELD(x->rank, y->rank);
    return 0;
}

static int cmp_plan(const tr_event_t *x, const tr_event_t *y)
{
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->u.plan.bucket, y->u.plan.bucket);
    CMP_FIELD(x->ts, y->ts);
    return 0;
}

/* The last fusion_ready of (obj, step) at a rank; NaN if none */
static double last_ready(const trace_t *t, const size_t *readies, size_t n, int32_t obj, int64_t step, int32_t rank)
{
    tr_event_t key = {.obj = obj, .rank = rank, .ts = INFINITY};
    key.u.fusion.step = step;
    size_t at = lower_bound(t, readies, 0, n, &key, cmp_fusion_step);
    if (at == 0) return NAN;
    const tr_event_t *e = &t->events[readies[at - 1]]; /* sorted by time within the rank */
    return e->obj == obj && e->u.fusion.step == step && e->rank == rank ? e->ts : NAN;
}

/* The latest start of a bucket of (obj, step) at any rank: bucket[*at..]
 * sorted by (obj, step), *at moved past the ones before (obj, step) */
static double all_started(const trace_t *t, const size_t *buckets, size_t n, size_t *at, int32_t obj, int64_t step)
{
    tr_event_t key = {.obj = obj, .rank = INT32_MIN, .ts = -INFINITY};
    key.u.fusion.step = step;
    while (*at < n && cmp_fusion_step(&t->events[buckets[*at]], &key) < 0) ++*at;
    double latest = NAN;
    for (size_t i = *at; i < n; i++) {
        const tr_event_t *x = &t->events[buckets[i]];
        if (x->obj != obj || x->u.fusion.step != step) break;
        if (isnan(latest) || x->ts > latest) latest = x->ts;
    }
    return latest;
}

/* A fusion_wait waits for the others until every rank has started every
 * bucket of its step */
static void fusion_waiting(const trace_t *t, analysis_t *a)
{
    size_t nb, nw, at = 0;
    size_t *buckets = collect(t, TR_FUSION_BUCKET, cmp_fusion_step, &nb);
    size_t *waits = collect(t, TR_FUSION_WAIT, cmp_fusion_step, &nw);
    double latest = NAN;
    for (size_t w = 0; w < nw; w++) {
        const tr_event_t *e = &t->events[waits[w]];
        const tr_event_t *prev = w ? &t->events[waits[w - 1]] : NULL;
        if (!prev || prev->obj != e->obj || prev->u.fusion.step != e->u.fusion.step)
            latest = all_started(t, buckets, nb, &at, e->obj, e->u.fusion.step);
        double wait = isnan(latest) ? 0 : latest - e->ts;
        a->waiting_us[waits[w]] = wait < 0 ? 0 : wait > e->dur ? e->dur : wait;
    }
    free(waits);
    free(buckets);
}

static const tr_event_t *find_plan(const trace_t *t, const size_t *plans, size_t n, int32_t obj, int64_t bucket)
{
    tr_event_t key = {.obj = obj, .ts = -INFINITY};
    key.u.plan.bucket = bucket;
    size_t at = lower_bound(t, plans, 0, n, &key, cmp_plan);
    if (at == n) return NULL;
    const tr_event_t *p = &t->events[plans[at]];
    return p->obj == obj && p->u.plan.bucket == bucket ? p : NULL;
}

static bucket_stats_t *add_bucket(analysis_t *a, int32_t obj, int64_t bucket, const tr_event_t *plan)
{
    GROW(a->buckets, a->cap_buckets, a->nbuckets + 1);
    bucket_stats_t *s = &a->buckets[a->nbuckets++];
    s->obj = obj;
    s->bucket = (long long)bucket;
    s->steps = 0;
    s->measured_exposed_ms = s->measured_duration_ms = NAN;
    s->predicted_exposed_ms = s->predicted_duration_ms = NAN;
    if (plan) {
        double exposed = plan->u.plan.pred_end_us - plan->u.plan.compute_us;
        s->predicted_exposed_ms = (exposed > 0 ? exposed : 0) / 1000.0;
        s->predicted_duration_ms = (plan->u.plan.pred_end_us - plan->u.plan.pred_start_us) / 1000.0;
    }
    return s;
}

static int cmp_bucket_stats(const void *a, const void *b)
{
    const bucket_stats_t *x = a, *y = b;
    CMP_FIELD(x->obj, y->obj);
    CMP_FIELD(x->bucket, y->bucket);
    return 0;
}

static int bucket_measured(const trace_t *t, const size_t *buckets, size_t n, int32_t obj, int64_t bucket)
{
    tr_event_t key = {.obj = obj, .rank = INT32_MIN};
    key.u.fusion.index = bucket;
    key.u.fusion.step = INT64_MIN;
    size_t at = lower_bound(t, buckets, 0, n, &key, cmp_fusion_bucket);
    return at < n && t->events[buckets[at]].obj == obj && t->events[buckets[at]].u.fusion.index == bucket;
}

/* One bucket's measurements: buckets[b..e) are its allreduces (steps x ranks) */
static void measure_bucket(const trace_t *t, bucket_stats_t *s, const size_t *buckets, size_t b, size_t e,
                           const size_t *readies, size_t nready, double *scratch)
{
    double *exposed = scratch, *duration = scratch + (e - b);
    size_t nexposed = 0;
    for (size_t i = b; i < e; i++) {
        const tr_event_t *x = &t->events[buckets[i]];
        if (i == b || x->u.fusion.step != t->events[buckets[i - 1]].u.fusion.step) s->steps++;
        duration[i - b] = x->dur / 1000.0;
        double ready = last_ready(t, readies, nready, x->obj, x->u.fusion.step, x->rank);
        if (!isnan(ready)) exposed[nexposed++] = (x->ts + x->dur > ready ? x->ts + x->dur - ready : 0) / 1000.0;
    }
    sort_doubles(exposed, nexposed);
    sort_doubles(duration, e - b);
    s->measured_exposed_ms = quantile_sorted(exposed, nexposed, 0.5);
    s->measured_duration_ms = quantile_sorted(duration, e - b, 0.5);
}

static void fusion_buckets(const trace_t *t, analysis_t *a)
{
    size_t nb, nr, np;
    size_t *buckets = collect(t, TR_FUSION_BUCKET, cmp_fusion_bucket, &nb);
    size_t *readies = collect(t, TR_FUSION_READY, cmp_fusion_step, &nr);
    size_t *plans = collect(t, TR_FUSION_PLAN, cmp_plan, &np);
    double *scratch = xmalloc((2 * nb + 1) * sizeof *scratch);
    for (size_t b = 0, e; b < nb; b = e) {
        const tr_event_t *first = &t->events[buckets[b]];
        for (e = b + 1; e < nb; e++) {
            const tr_event_t *x = &t->events[buckets[e]];
            if (x->obj != first->obj || x->u.fusion.index != first->u.fusion.index) break;
        }
        bucket_stats_t *s = add_bucket(a, first->obj, first->u.fusion.index,
                                       find_plan(t, plans, np, first->obj, first->u.fusion.index));
        measure_bucket(t, s, buckets, b, e, readies, nr, scratch);
    }
    for (size_t i = 0; i < np; i++) { /* planned buckets that never ran in the trace */
        const tr_event_t *p = &t->events[plans[i]];
        const tr_event_t *prev = i > 0 ? &t->events[plans[i - 1]] : NULL;
        int repeat = prev && prev->obj == p->obj && prev->u.plan.bucket == p->u.plan.bucket;
        if (!repeat && !bucket_measured(t, buckets, nb, p->obj, p->u.plan.bucket)) add_bucket(a, p->obj, p->u.plan.bucket, p);
    }
    if (a->nbuckets > 1) qsort(a->buckets, a->nbuckets, sizeof *a->buckets, cmp_bucket_stats);
    free(scratch);
    free(plans);
    free(readies);
    free(buckets);
}

/* ---- putting it together ---- */

/* Per rank and kind: the union of its calls' spans, and of their waiting
 * parts (a call waits from its start: [ts, ts + waiting)).  Calls of one
 * kind that overlap (a rank's plan starts in flight together) count once;
 * calls of different kinds may overlap (a preduce holds its group's
 * allreduce) and count in both. */
static void time_shares(const trace_t *t, analysis_t *a)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) n += is_call(&t->events[i]);
    interval_t *v = xmalloc((n ? n : 1) * sizeof *v);
    n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const tr_event_t *e = &t->events[i];
        if (!is_call(e)) continue;
        if (e->type == TR_PARTIAL_CALL) a->waiting_us[i] = e->flag ? e->dur : 0;
        int32_t kind = kind_of(t, a, e);
        v[n++] = (interval_t){e->rank, kind, e->ts, e->ts + e->dur, e->ts + a->waiting_us[i]};
    }
    if (n > 1) qsort(v, n, sizeof *v, cmp_interval);
    for (size_t b = 0, e; b < n; b = e) {
        for (e = b + 1; e < n && v[e].rank == v[b].rank && v[e].kind == v[b].kind;) e++;
        kind_stats_t *k = &a->kinds[v[b].kind];
        k->exchange_us[v[b].rank] = union_length(v, b, e, 0);
        k->waiting_us[v[b].rank] = union_length(v, b, e, 1);
    }
    /* every kind together: each rank's calls counted once (calls on several
     * threads, or a nonblocking call in flight during another) */
    for (size_t i = 0; i < n; i++) v[i].kind = -1;
    if (n > 1) qsort(v, n, sizeof *v, cmp_interval);
    for (size_t b = 0, e; b < n; b = e) {
        for (e = b + 1; e < n && v[e].rank == v[b].rank;) e++;
        a->rank[v[b].rank].calls_us = union_length(v, b, e, 0);
    }
    free(v);
    for (int r = 0; r < t->ranks; r++) {
        rank_stats_t *s = &a->rank[r];
        s->traced_us = isfinite(t->first_us[r]) ? t->last_us[r] - t->first_us[r] : 0;
        double compute = s->traced_us - s->calls_us;
        s->compute_share = s->traced_us > 0 ? (compute > 0 ? compute : 0) / s->traced_us : NAN;
    }
}

static int cmp_lateness(const void *a, const void *b)
{
    const lateness_t *x = a, *y = b;
    return (x->ms > y->ms) - (x->ms < y->ms);
}

/* The value at position pos (from 0) of the sorted lateness values, each
 * repeated its count times */
static double lateness_at(const rank_stats_t *s, size_t pos)
{
    for (size_t i = 0; i < s->nlateness; i++) {
        if (pos < s->lateness[i].count) return s->lateness[i].ms;
        pos -= s->lateness[i].count;
    }
    return s->nlateness ? s->lateness[s->nlateness - 1].ms : NAN;
}

/* As quantile_sorted (position p (n - 1), linear interpolation) over the
 * exchanges' lateness, s->lateness sorted */
static double lateness_quantile(const rank_stats_t *s, double p)
{
    if (s->exchanges == 0) return NAN;
    double pos = p * (double)(s->exchanges - 1);
    size_t lo = (size_t)floor(pos);
    if (lo >= s->exchanges - 1) return lateness_at(s, s->exchanges - 1);
    double below = lateness_at(s, lo), above = lateness_at(s, lo + 1);
    return below + (above - below) * (pos - (double)lo);
}

static void summarize_ranks(analysis_t *a)
{
    double most = 0;
    a->straggler = -1;
    for (int r = 0; r < a->ranks; r++) {
        rank_stats_t *s = &a->rank[r];
        if (s->nlateness > 1) qsort(s->lateness, s->nlateness, sizeof *s->lateness, cmp_lateness);
        s->late_median_ms = lateness_quantile(s, 0.5);
        s->late_p90_ms = lateness_quantile(s, 0.9);
        s->late_max_ms = lateness_quantile(s, 1.0);
        double sum = 0;
        for (size_t i = 0; i < s->nlateness; i++) sum += s->lateness[i].ms * (double)s->lateness[i].count;
        s->late_mean_ms = s->exchanges ? sum / (double)s->exchanges : NAN;
        sort_doubles(s->preduce_wait_ms, s->npreduce);
        s->preduce_median_ms = quantile_sorted(s->preduce_wait_ms, s->npreduce, 0.5);
        s->preduce_max_ms = quantile_sorted(s->preduce_wait_ms, s->npreduce, 1.0);
        double held = s->caused_us + s->avoided_us;
        if (held > most) {
            most = held;
            a->straggler = r;
        }
    }
}

void analyze(const trace_t *t, analysis_t *a)
{
    memset(a, 0, sizeof *a);
    a->ranks = t->ranks;
    a->rank = xcalloc((size_t)t->ranks, sizeof *a->rank);
    a->waiting_us = xcalloc(t->n ? t->n : 1, sizeof *a->waiting_us);
    strtab_init(&a->kind_names);
    a->clock.bound_us = t->bound_us;
    allreduce_exchanges(t, a);
    partial_exchanges(t, a);
    group_waits(t, a);
    iteration_steps(t, a);
    fusion_waiting(t, a);
    fusion_buckets(t, a);
    left_out(t, a);
    time_shares(t, a);
    summarize_ranks(a);
    a->clock.ok = a->clock.violations == 0;
}

void analysis_free(analysis_t *a)
{
    for (int r = 0; a->rank && r < a->ranks; r++) {
        free(a->rank[r].lateness);
        free(a->rank[r].preduce_wait_ms);
    }
    for (size_t k = 0; k < a->nkinds; k++) {
        free(a->kinds[k].exchange_us);
        free(a->kinds[k].waiting_us);
    }
    free(a->kinds);
    free(a->rank);
    free(a->buckets);
    free(a->waiting_us);
    strtab_free(&a->kind_names);
    memset(a, 0, sizeof *a);
}
