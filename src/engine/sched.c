#include "sched.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nodebar.h"
#include "reduce.h"

#define EXTERNAL SIZE_MAX /* slot_bytes of a slot bound per run (not owned) */

typedef struct step {
    uint8_t kind;
    uint8_t is_or;
    int32_t ndeps;   /* incoming edges */
    int32_t succ_off; /* successors: succ[succ_off .. succ_off + nsucc) */
    int32_t nsucc;
    int peer;
    int tagstep;
    pc_ref_t dst, a, b;
    size_t n; /* bytes (send, recv, copy) or elements (reduce, scale) */
    pcoll_dtype_t dtype;
    int64_t divisor;
    pc_step_fn fn;
    void *arg;
    /* per run */
    int32_t left;
    uint8_t fired;
    uint8_t done;
    int32_t aux; /* the issuer's counter (e.g. chunks in flight) */
} step_t;

typedef struct edge {
    int32_t before, after;
} edge_t;

struct pc_sched {
    step_t *steps;
    int nsteps, capsteps;
    edge_t *edges;
    int nedges, capedges;
    int32_t *succ;
    void **slots;
    size_t *slot_bytes;
    int nslots, capslots;
    size_t scratch_total;
    int committed;
    int is_virtual; /* no data: pc_sched_set_virtual */
    int err;
    /* per run */
    int *ready; /* FIFO of fired steps; each step enters at most once a run */
    int ready_head, ready_tail;
    int ndone;
    int running;
    int draining;
    int aborted;
    pc_fault_t fault; /* status and message of the run's first failure */
    int recv_base;
    const int *send_bases; /* by group index, or NULL */
    const int *ranks;      /* group index -> rank, or NULL */
    const void *comm;      /* an MPI_Comm, or NULL: the engine's */
    const int *comm_ranks; /* group index -> rank in comm */
    struct pc_nodebar *barrier; /* barrier steps' members, or NULL */
    pc_sched_done_fn on_done;
    void *done_arg;
};

static atomic_long live_scratch;

long pc_sched_live_scratch(void) { return atomic_load(&live_scratch); }

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p) return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

pc_sched_t *pc_sched_new(void)
{
    pc_sched_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (grow((void **)&s->slots, &s->capslots, PC_NUM_BOUND_SLOTS, sizeof(void *)) ||
        !(s->slot_bytes = calloc((size_t)s->capslots, sizeof(size_t)))) {
        free(s->slots);
        free(s);
        return NULL;
    }
    s->nslots = PC_NUM_BOUND_SLOTS;
    s->slots[PC_SLOT_IN] = s->slots[PC_SLOT_OUT] = NULL;
    pc_fault_clear(&s->fault);
    return s;
}

void pc_sched_free(pc_sched_t *s)
{
    if (!s) return;
    for (int i = PC_NUM_BOUND_SLOTS; i < s->nslots; i++) {
        if (s->slot_bytes[i] == EXTERNAL) continue;
        if (s->slots[i]) atomic_fetch_sub(&live_scratch, 1);
        free(s->slots[i]);
    }
    free(s->slots);
    free(s->slot_bytes);
    free(s->steps);
    free(s->edges);
    free(s->succ);
    free(s->ready);
    free(s);
}

static int fail(pc_sched_t *s, int status)
{
    if (!s->err) s->err = status;
    return -1;
}

void pc_sched_fail(pc_sched_t *s, int status) { fail(s, status); }

int pc_sched_scratch(pc_sched_t *s, size_t bytes)
{
    if (s->err) return -1;
    if (s->committed) return fail(s, PCOLL_ERR_INTERNAL);
    int old = s->capslots;
    if (grow((void **)&s->slots, &s->capslots, s->nslots + 1, sizeof(void *))) return fail(s, PCOLL_ERR_NOMEM);
    if (s->capslots != old) {
        size_t *nb = realloc(s->slot_bytes, (size_t)s->capslots * sizeof(size_t));
        if (!nb) return fail(s, PCOLL_ERR_NOMEM);
        s->slot_bytes = nb;
    }
    s->slots[s->nslots] = NULL;
    s->slot_bytes[s->nslots] = bytes;
    return s->nslots++;
}

int pc_sched_external(pc_sched_t *s)
{
    int slot = pc_sched_scratch(s, 0);
    if (slot >= 0) s->slot_bytes[slot] = EXTERNAL;
    return slot;
}

static int add_step(pc_sched_t *s, pc_step_kind_t kind)
{
    if (s->err) return -1;
    if (s->committed) return fail(s, PCOLL_ERR_INTERNAL);
    if (grow((void **)&s->steps, &s->capsteps, s->nsteps + 1, sizeof(step_t))) return fail(s, PCOLL_ERR_NOMEM);
    step_t *st = &s->steps[s->nsteps];
    memset(st, 0, sizeof *st);
    st->kind = (uint8_t)kind;
    st->peer = -1;
    return s->nsteps++;
}

static int check_ref(pc_sched_t *s, pc_ref_t r) { return r.slot < (uint32_t)s->nslots ? 0 : fail(s, PCOLL_ERR_INTERNAL); }

static int add_comm(pc_sched_t *s, pc_step_kind_t kind, pc_ref_t buf, size_t bytes, int peer, int tagstep)
{
    int i = add_step(s, kind);
    if (i < 0 || check_ref(s, buf) < 0) return -1;
    if (peer < 0 || tagstep < 0) return fail(s, PCOLL_ERR_INTERNAL);
    step_t *st = &s->steps[i];
    st->a = buf;
    st->n = bytes;
    st->peer = peer;
    st->tagstep = tagstep;
    return i;
}

int pc_sched_send(pc_sched_t *s, pc_ref_t buf, size_t bytes, int peer, int tagstep)
{
    return add_comm(s, PC_STEP_SEND, buf, bytes, peer, tagstep);
}

int pc_sched_recv(pc_sched_t *s, pc_ref_t buf, size_t bytes, int peer, int tagstep)
{
    return add_comm(s, PC_STEP_RECV, buf, bytes, peer, tagstep);
}

int pc_sched_reduce(pc_sched_t *s, pc_ref_t dst, pc_ref_t a, pc_ref_t b, size_t count, pcoll_dtype_t dtype)
{
    int i = add_step(s, PC_STEP_REDUCE);
    if (i < 0 || check_ref(s, dst) < 0 || check_ref(s, a) < 0 || check_ref(s, b) < 0) return -1;
    if (!pc_dtype_valid(dtype)) return fail(s, PCOLL_ERR_DTYPE);
    step_t *st = &s->steps[i];
    st->dst = dst;
    st->a = a;
    st->b = b;
    st->n = count;
    st->dtype = dtype;
    return i;
}

int pc_sched_scale(pc_sched_t *s, pc_ref_t dst, size_t count, pcoll_dtype_t dtype, int64_t divisor)
{
    int i = add_step(s, PC_STEP_SCALE);
    if (i < 0 || check_ref(s, dst) < 0) return -1;
    if (!pc_dtype_valid(dtype) || divisor == 0) return fail(s, PCOLL_ERR_INTERNAL);
    step_t *st = &s->steps[i];
    st->dst = dst;
    st->n = count;
    st->dtype = dtype;
    st->divisor = divisor;
    return i;
}

int pc_sched_copy(pc_sched_t *s, pc_ref_t dst, pc_ref_t src, size_t bytes)
{
    int i = add_step(s, PC_STEP_COPY);
    if (i < 0 || check_ref(s, dst) < 0 || check_ref(s, src) < 0) return -1;
    s->steps[i].dst = dst;
    s->steps[i].a = src;
    s->steps[i].n = bytes;
    return i;
}

int pc_sched_nop(pc_sched_t *s) { return add_step(s, PC_STEP_NOP); }

int pc_sched_barrier(pc_sched_t *s, int index)
{
    int i = add_step(s, PC_STEP_BARRIER);
    if (i < 0) return -1;
    if (index < 1) return fail(s, PCOLL_ERR_INTERNAL);
    s->steps[i].tagstep = index;
    return i;
}

int pc_sched_callback(pc_sched_t *s, pc_step_fn fn, void *arg)
{
    int i = add_step(s, PC_STEP_CALLBACK);
    if (i < 0) return -1;
    if (!fn) return fail(s, PCOLL_ERR_INTERNAL);
    s->steps[i].fn = fn;
    s->steps[i].arg = arg;
    return i;
}

void pc_sched_dep(pc_sched_t *s, int before, int after)
{
    if (s->err || before < 0 || after < 0) return;
    if (s->committed || before >= s->nsteps || after >= s->nsteps || before == after) {
        fail(s, PCOLL_ERR_INTERNAL);
        return;
    }
    if (grow((void **)&s->edges, &s->capedges, s->nedges + 1, sizeof(edge_t))) {
        fail(s, PCOLL_ERR_NOMEM);
        return;
    }
    s->edges[s->nedges].before = before;
    s->edges[s->nedges].after = after;
    s->nedges++;
}

void pc_sched_set_or(pc_sched_t *s, int step)
{
    if (s->err || step < 0) return;
    if (step >= s->nsteps) {
        fail(s, PCOLL_ERR_INTERNAL);
        return;
    }
    s->steps[step].is_or = 1;
}

/* Kahn's algorithm over the edges: every step must be reachable in a
 * topological order, i.e. the graph has no cycle. */
static int acyclic(pc_sched_t *s)
{
    int *indeg = malloc(sizeof(int) * (size_t)(s->nsteps + 1));
    int *queue = malloc(sizeof(int) * (size_t)(s->nsteps + 1));
    if (!indeg || !queue) {
        free(indeg);
        free(queue);
        return -1;
    }
    int head = 0, tail = 0, seen = 0;
    for (int i = 0; i < s->nsteps; i++) {
        indeg[i] = s->steps[i].ndeps;
        if (indeg[i] == 0) queue[tail++] = i;
    }
    while (head < tail) {
        const step_t *st = &s->steps[queue[head++]];
        seen++;
        for (int k = 0; k < st->nsucc; k++) {
            int j = s->succ[st->succ_off + k];
            if (--indeg[j] == 0) queue[tail++] = j;
        }
    }
    free(indeg);
    free(queue);
    return seen == s->nsteps ? 0 : -1;
}

int pc_sched_commit(pc_sched_t *s)
{
    if (s->err) return s->err;
    if (s->committed) return PCOLL_ERR_INTERNAL;
    for (int e = 0; e < s->nedges; e++) {
        s->steps[s->edges[e].after].ndeps++;
        s->steps[s->edges[e].before].nsucc++;
    }
    int off = 0;
    for (int i = 0; i < s->nsteps; i++) {
        s->steps[i].succ_off = off;
        off += s->steps[i].nsucc;
        s->steps[i].nsucc = 0;
    }
    s->succ = malloc(sizeof(int32_t) * (size_t)(s->nedges + 1));
    s->ready = malloc(sizeof(int) * (size_t)(s->nsteps + 1));
    if (!s->succ || !s->ready) return s->err = PCOLL_ERR_NOMEM;
    for (int e = 0; e < s->nedges; e++) {
        step_t *b = &s->steps[s->edges[e].before];
        s->succ[b->succ_off + b->nsucc++] = s->edges[e].after;
    }
    free(s->edges);
    s->edges = NULL;
    if (acyclic(s) != 0) return s->err = PCOLL_ERR_INTERNAL;
    for (int i = PC_NUM_BOUND_SLOTS; i < s->nslots; i++) {
        size_t bytes = s->slot_bytes[i];
        if (bytes == 0 || bytes == EXTERNAL) continue;
        if (s->is_virtual) {
            s->scratch_total += bytes;
            continue;
        }
        /* 64-byte alignment keeps the reduce kernels on whole vectors */
        size_t rounded = (bytes + 63) & ~(size_t)63;
        if (!(s->slots[i] = aligned_alloc(64, rounded))) return s->err = PCOLL_ERR_NOMEM;
        atomic_fetch_add(&live_scratch, 1);
        s->scratch_total += bytes;
    }
    s->committed = 1;
    return PCOLL_SUCCESS;
}

void pc_sched_set_virtual(pc_sched_t *s)
{
    if (!s->committed) s->is_virtual = 1;
}

void pc_sched_bind(pc_sched_t *s, uint32_t slot, void *ptr)
{
    if (slot < PC_NUM_BOUND_SLOTS || (slot < (uint32_t)s->nslots && s->slot_bytes[slot] == EXTERNAL))
        s->slots[slot] = ptr;
}

void pc_sched_bind_barrier(pc_sched_t *s, struct pc_nodebar *b) { s->barrier = b; }
struct pc_nodebar *pc_sched_bound_barrier(const pc_sched_t *s) { return s->barrier; }

uint64_t pc_sched_step_barrier(const pc_sched_t *s, int step)
{
    return s->barrier->base + (uint64_t)s->steps[step].tagstep;
}

void pc_sched_on_done(pc_sched_t *s, pc_sched_done_fn fn, void *arg)
{
    s->on_done = fn;
    s->done_arg = arg;
}

static inline void *resolve(const pc_sched_t *s, pc_ref_t r) { return (char *)s->slots[r.slot] + r.off; }

static void complete(pc_sched_t *s, int i, int status)
{
    step_t *st = &s->steps[i];
    st->done = 1;
    s->ndone++;
    if (status != PCOLL_SUCCESS)
        pc_sched_fail_run(s, status, "%s of step %d failed: %s",
                          st->kind == PC_STEP_SEND   ? "a send"
                          : st->kind == PC_STEP_RECV ? "a receive"
                                                     : "a node-shared barrier",
                          i, pcoll_strerror(status));
    for (int k = 0; k < st->nsucc; k++) {
        step_t *nx = &s->steps[s->succ[st->succ_off + k]];
        nx->left--;
        if (!nx->fired && (nx->is_or || nx->left == 0)) {
            nx->fired = 1;
            s->ready[s->ready_tail++] = s->succ[st->succ_off + k];
        }
    }
}

static void run_local(pc_sched_t *s, int i)
{
    step_t *st = &s->steps[i];
    switch ((pc_step_kind_t)st->kind) {
    case PC_STEP_REDUCE:
        pc_reduce_sum(resolve(s, st->dst), resolve(s, st->a), resolve(s, st->b), st->n, st->dtype);
        break;
    case PC_STEP_SCALE: pc_reduce_div(resolve(s, st->dst), st->n, st->dtype, st->divisor); break;
    case PC_STEP_COPY:
        if (st->n) memmove(resolve(s, st->dst), resolve(s, st->a), st->n);
        break;
    case PC_STEP_CALLBACK: st->fn(s, st->arg); break;
    default: break;
    }
}

/* Issues ready steps until none is left; finishes the run when all are done.
 * Completions reported while draining only queue successors (no recursion). */
static void drain(pc_sched_t *s, const pc_issuer_t *iss)
{
    s->draining = 1;
    while (s->ready_head < s->ready_tail) {
        int i = s->ready[s->ready_head++];
        pc_step_kind_t kind = (pc_step_kind_t)s->steps[i].kind;
        if (s->aborted) {
            complete(s, i, PCOLL_SUCCESS); /* the run's status is set already */
        } else if (kind == PC_STEP_SEND || kind == PC_STEP_RECV || kind == PC_STEP_BARRIER) {
            int rc = iss->post(iss->self, s, i);
            if (rc != PCOLL_SUCCESS) complete(s, i, rc);
        } else if (iss->local && kind != PC_STEP_CALLBACK && kind != PC_STEP_NOP) {
            int rc = iss->local(iss->self, s, i);
            if (rc != PCOLL_SUCCESS) complete(s, i, rc);
        } else {
            run_local(s, i);
            complete(s, i, PCOLL_SUCCESS);
        }
    }
    s->draining = 0;
    if (s->ndone == s->nsteps) {
        /* the callback may free or restart the schedule: touch nothing after */
        s->running = 0;
        if (s->on_done) s->on_done(s, pc_fault_status(&s->fault), s->done_arg);
    }
}

int pc_sched_start(pc_sched_t *s, const pc_issuer_t *iss)
{
    if (!s->committed || s->running || (s->is_virtual && !iss->local)) return PCOLL_ERR_INTERNAL;
    s->ready_head = s->ready_tail = 0;
    s->ndone = 0;
    s->aborted = 0;
    pc_fault_clear(&s->fault);
    s->running = 1;
    for (int i = 0; i < s->nsteps; i++) {
        step_t *st = &s->steps[i];
        st->left = st->ndeps;
        st->done = 0;
        st->fired = (st->ndeps == 0);
    }
    /* roots issue in build order, then steps in the order they become ready */
    for (int i = 0; i < s->nsteps; i++)
        if (s->steps[i].ndeps == 0) s->ready[s->ready_tail++] = i;
    drain(s, iss);
    return PCOLL_SUCCESS;
}

void pc_sched_step_done(pc_sched_t *s, int step, int status, const pc_issuer_t *iss)
{
    complete(s, step, status);
    if (!s->draining) drain(s, iss);
}

void pc_sched_abort(pc_sched_t *s, int status)
{
    pc_sched_fail_run(s, status, "abandoned: %s", pcoll_strerror(status));
    s->aborted = 1;
}


void pc_sched_bind_ranks(pc_sched_t *s, const int *ranks) { s->ranks = ranks; }
int pc_sched_peer_rank(const pc_sched_t *s, int index) { return s->ranks ? s->ranks[index] : index; }

void pc_sched_set_comm(pc_sched_t *s, const void *comm, const int *comm_ranks)
{
    s->comm = comm;
    s->comm_ranks = comm_ranks;
}
const void *pc_sched_comm(const pc_sched_t *s) { return s->comm; }
int pc_sched_comm_peer(const pc_sched_t *s, int index)
{
    return s->comm ? (s->comm_ranks ? s->comm_ranks[index] : index) : pc_sched_peer_rank(s, index);
}

void pc_sched_set_tags(pc_sched_t *s, int recv_base, const int *send_bases)
{
    s->recv_base = recv_base;
    s->send_bases = send_bases;
}

int pc_sched_step_tag(const pc_sched_t *s, int i, uint32_t step_mask)
{
    const step_t *st = &s->steps[i];
    int base = st->kind == PC_STEP_SEND && s->send_bases ? s->send_bases[st->peer] : s->recv_base;
    return base | (int)((uint32_t)st->tagstep & step_mask);
}

void pc_sched_fail_run(pc_sched_t *s, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pc_fault_vset(&s->fault, status, fmt, ap);
    va_end(ap);
}

int pc_sched_status(const pc_sched_t *s) { return pc_fault_status(&s->fault); }
const pc_fault_t *pc_sched_fault(const pc_sched_t *s) { return &s->fault; }

/* appends peer to the ascending set out[0..*n) unless it is there */
static void add_peer(int *out, int *n, int max, int peer)
{
    int at = 0;
    while (at < *n && out[at] < peer) at++;
    if ((at < *n && out[at] == peer) || *n == max) return;
    for (int k = *n; k > at; k--) out[k] = out[k - 1];
    out[at] = peer;
    (*n)++;
}

int pc_sched_peers(const pc_sched_t *s, pc_step_kind_t kind, int *out, int max)
{
    int n = 0;
    for (int i = 0; i < s->nsteps; i++)
        if (s->steps[i].kind == kind) add_peer(out, &n, max, s->steps[i].peer);
    return n;
}

int pc_sched_waiting_on(const pc_sched_t *s, int *out, int max)
{
    int n = 0;
    if (!s->running) return 0;
    for (int i = 0; i < s->nsteps; i++) {
        const step_t *st = &s->steps[i];
        if ((st->kind == PC_STEP_SEND || st->kind == PC_STEP_RECV) && st->fired && !st->done)
            add_peer(out, &n, max, st->peer);
    }
    return n;
}

int32_t *pc_sched_step_aux(pc_sched_t *s, int i) { return &s->steps[i].aux; }
int pc_sched_running(const pc_sched_t *s) { return s->running; }
int pc_sched_nsteps(const pc_sched_t *s) { return s->nsteps; }
pc_step_kind_t pc_sched_step_kind(const pc_sched_t *s, int i) { return (pc_step_kind_t)s->steps[i].kind; }
void *pc_sched_step_buf(const pc_sched_t *s, int i) { return s->is_virtual ? NULL : resolve(s, s->steps[i].a); }
size_t pc_sched_step_bytes(const pc_sched_t *s, int i)
{
    const step_t *st = &s->steps[i];
    return st->kind == PC_STEP_REDUCE || st->kind == PC_STEP_SCALE ? st->n * pcoll_dtype_size(st->dtype) : st->n;
}
int pc_sched_step_peer(const pc_sched_t *s, int i) { return s->steps[i].peer; }
size_t pc_sched_scratch_bytes(const pc_sched_t *s) { return s->scratch_total; }
