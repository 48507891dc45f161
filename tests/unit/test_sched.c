/*
 * Engine unit tests, no MPI: dependency counting (AND), OR steps, re-arming,
 * scratch ownership, local steps, cycle rejection; then every allreduce
 * builder run for n = 1..40 simulated ranks over an in-process loopback
 * network that completes matching sends and receives in random order.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/allreduce.h"
#include "engine/sched.h"
#include "rng.h"
#include "unit_check.h"


/* ---- a scripted issuer: records posts, the test completes them ---- */

typedef struct script {
    int posted[64];
    int nposted;
} script_t;

static int script_post(void *self, pc_sched_t *s, int step)
{
    (void)s;
    script_t *sc = self;
    sc->posted[sc->nposted++] = step;
    return PCOLL_SUCCESS;
}

static int was_posted(const script_t *sc, int step)
{
    int n = 0;
    for (int i = 0; i < sc->nposted; i++) n += sc->posted[i] == step;
    return n;
}

static int done_calls, done_status;
static void on_done(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    (void)arg;
    done_calls++;
    done_status = status;
}

static int callback_calls;
static void count_cb(pc_sched_t *s, void *arg)
{
    (void)s;
    (*(int *)arg)++;
    callback_calls++;
}

static void test_and_or_rearm(void)
{
    script_t sc = {0};
    pc_issuer_t iss = {script_post, &sc, NULL};
    pc_sched_t *s = pc_sched_new();
    int scr = pc_sched_scratch(s, 4 * sizeof(int));
    int r1 = pc_sched_recv(s, pc_ref((uint32_t)scr, 0), 4, 1, 0);
    int r2 = pc_sched_recv(s, pc_ref((uint32_t)scr, 4), 4, 2, 1);
    int both = pc_sched_nop(s);     /* AND of r1, r2 */
    int first = pc_sched_nop(s);    /* OR of r1, r2 */
    int counter = 0;
    int cb = pc_sched_callback(s, count_cb, &counter); /* after `first` */
    int snd = pc_sched_send(s, pc_ref((uint32_t)scr, 0), 8, 3, 2); /* after `both` */
    pc_sched_dep(s, r1, both);
    pc_sched_dep(s, r2, both);
    pc_sched_dep(s, r1, first);
    pc_sched_dep(s, r2, first);
    pc_sched_set_or(s, first);
    pc_sched_dep(s, first, cb);
    pc_sched_dep(s, both, snd);
    CHECK(pc_sched_commit(s) == PCOLL_SUCCESS);
    CHECK(pc_sched_live_scratch() == 1);
    pc_sched_on_done(s, on_done, NULL);

    for (int run = 0; run < 3; run++) { /* re-armed three times */
        sc.nposted = 0;
        done_calls = 0;
        counter = 0;
        CHECK(pc_sched_start(s, &iss) == PCOLL_SUCCESS);
        CHECK(sc.nposted == 2 && was_posted(&sc, r1) && was_posted(&sc, r2));
        CHECK(pc_sched_running(s));
        /* complete in a different order each run */
        int a = run % 2 ? r2 : r1, b = run % 2 ? r1 : r2;
        pc_sched_step_done(s, a, PCOLL_SUCCESS, &iss);
        CHECK(counter == 1);            /* OR fired at the first dependency */
        CHECK(!was_posted(&sc, snd));   /* AND still waits */
        pc_sched_step_done(s, b, PCOLL_SUCCESS, &iss);
        CHECK(counter == 1);            /* OR is consumable: not again */
        CHECK(was_posted(&sc, snd) == 1);
        CHECK(done_calls == 0);
        pc_sched_step_done(s, snd, PCOLL_SUCCESS, &iss);
        CHECK(done_calls == 1 && done_status == PCOLL_SUCCESS);
        CHECK(!pc_sched_running(s));
    }
    /* a failed step finishes the run with its status */
    sc.nposted = 0;
    done_calls = 0;
    CHECK(pc_sched_start(s, &iss) == PCOLL_SUCCESS);
    pc_sched_step_done(s, r1, PCOLL_ERR_MPI, &iss);
    pc_sched_step_done(s, r2, PCOLL_SUCCESS, &iss);
    pc_sched_step_done(s, snd, PCOLL_SUCCESS, &iss);
    CHECK(done_calls == 1 && done_status == PCOLL_ERR_MPI);
    pc_sched_free(s);
    CHECK(pc_sched_live_scratch() == 0); /* the schedule freed its scratch */
}

static void test_local_steps(void)
{
    pc_sched_t *s = pc_sched_new();
    float in[5] = {1, 2, 3, 4, 5}, out[5] = {0};
    int scr = pc_sched_scratch(s, sizeof in);
    int cp = pc_sched_copy(s, pc_ref((uint32_t)scr, 0), pc_ref(PC_SLOT_IN, 0), sizeof in);
    int red = pc_sched_reduce(s, pc_ref(PC_SLOT_OUT, 0), pc_ref(PC_SLOT_IN, 0), pc_ref((uint32_t)scr, 0), 5,
                              PCOLL_FLOAT32);
    int sc = pc_sched_scale(s, pc_ref(PC_SLOT_OUT, 0), 5, PCOLL_FLOAT32, 4);
    pc_sched_dep(s, cp, red);
    pc_sched_dep(s, red, sc);
    CHECK(pc_sched_commit(s) == PCOLL_SUCCESS);
    pc_sched_bind(s, PC_SLOT_IN, in);
    pc_sched_bind(s, PC_SLOT_OUT, out);
    done_calls = 0;
    pc_sched_on_done(s, on_done, NULL);
    pc_issuer_t none = {NULL, NULL, NULL};
    CHECK(pc_sched_start(s, &none) == PCOLL_SUCCESS);
    CHECK(done_calls == 1); /* only local steps: done at once */
    for (int i = 0; i < 5; i++) CHECK(out[i] == (float)(i + 1) * 2.0f / 4.0f);
    pc_sched_free(s);

    /* integer sums wrap instead of trapping; integer average truncates */
    int32_t a[2] = {INT32_MAX, -7}, b[2] = {1, 0}, c[2];
    s = pc_sched_new();
    red = pc_sched_reduce(s, pc_ref(PC_SLOT_OUT, 0), pc_ref(PC_SLOT_IN, 0), pc_ref(PC_SLOT_OUT, 0), 2, PCOLL_INT32);
    sc = pc_sched_scale(s, pc_ref(PC_SLOT_OUT, 0), 2, PCOLL_INT32, 2);
    pc_sched_dep(s, red, sc);
    CHECK(pc_sched_commit(s) == PCOLL_SUCCESS);
    memcpy(c, b, sizeof b);
    pc_sched_bind(s, PC_SLOT_IN, a);
    pc_sched_bind(s, PC_SLOT_OUT, c);
    pc_sched_on_done(s, NULL, NULL);
    CHECK(pc_sched_start(s, &none) == PCOLL_SUCCESS);
    CHECK(c[0] == INT32_MIN / 2 && c[1] == -3);
    pc_sched_free(s);

    /* an empty schedule completes at once */
    s = pc_sched_new();
    CHECK(pc_sched_commit(s) == PCOLL_SUCCESS);
    done_calls = 0;
    pc_sched_on_done(s, on_done, NULL);
    CHECK(pc_sched_start(s, &none) == PCOLL_SUCCESS && done_calls == 1);
    pc_sched_free(s);
}

static void test_builder_errors(void)
{
    pc_sched_t *s = pc_sched_new();
    int a = pc_sched_nop(s), b = pc_sched_nop(s);
    pc_sched_dep(s, a, b);
    pc_sched_dep(s, b, a); /* a cycle */
    CHECK(pc_sched_commit(s) == PCOLL_ERR_INTERNAL);
    pc_sched_free(s);

    s = pc_sched_new();
    CHECK(pc_sched_send(s, pc_ref(99, 0), 4, 0, 0) < 0); /* no such slot */
    CHECK(pc_sched_nop(s) < 0);                          /* sticky: later calls fail too */
    CHECK(pc_sched_commit(s) == PCOLL_ERR_INTERNAL);
    pc_sched_free(s);
    CHECK(pc_sched_live_scratch() == 0);
}

/* ---- loopback network: n simulated ranks in one process ---- */

typedef struct msg {
    int src, dst, tag, is_send, step;
    pc_sched_t *s;
} msg_t;

typedef struct net {
    msg_t *m;
    int n, cap;
    pc_sched_t **scheds;
    int nranks;
    long delivered;
    int no_data;          /* virtual schedules: move no bytes */
    size_t local_bytes;   /* bytes of the data steps handed to net_local */
    long local_steps;
} net_t;

static int rank_of_sched(net_t *net, pc_sched_t *s)
{
    for (int i = 0; i < net->nranks; i++)
        if (net->scheds[i] == s) return i;
    return -1;
}

static int net_post(void *self, pc_sched_t *s, int step)
{
    net_t *net = self;
    if (net->n == net->cap) {
        net->cap = net->cap ? net->cap * 2 : 256;
        net->m = realloc(net->m, sizeof(msg_t) * (size_t)net->cap);
    }
    int me = rank_of_sched(net, s);
    int is_send = pc_sched_step_kind(s, step) == PC_STEP_SEND;
    /* the peer is a group index: the bound group map makes it a rank; the
     * tag is the receiver's (sends use the destination's base) */
    int peer = pc_sched_peer_rank(s, pc_sched_step_peer(s, step));
    msg_t m = {is_send ? me : peer, is_send ? peer : me, pc_sched_step_tag(s, step, 31), is_send, step, s};
    net->m[net->n++] = m;
    return PCOLL_SUCCESS;
}

/* Delivers one random matching (send, receive) pair; MPI order rules hold:
 * the oldest send and the oldest receive of a (src, dst, tag) match. */
static int net_deliver_one(net_t *net, rng_t *r, const pc_issuer_t *iss)
{
    int start = net->n ? (int)rng_below(r, (uint64_t)net->n) : 0;
    for (int k = 0; k < net->n; k++) {
        int i = (start + k) % net->n;
        if (!net->m[i].is_send) continue;
        int j = -1;
        for (int x = 0; x < net->n && j < 0; x++)
            if (!net->m[x].is_send && net->m[x].src == net->m[i].src && net->m[x].dst == net->m[i].dst &&
                net->m[x].tag == net->m[i].tag)
                j = x;
        if (j < 0) continue;
        /* the oldest send of that triple */
        for (int x = 0; x < i; x++)
            if (net->m[x].is_send && net->m[x].src == net->m[i].src && net->m[x].dst == net->m[i].dst &&
                net->m[x].tag == net->m[i].tag) {
                i = x;
                break;
            }
        msg_t snd = net->m[i], rcv = net->m[j];
        size_t sb = pc_sched_step_bytes(snd.s, snd.step), rb = pc_sched_step_bytes(rcv.s, rcv.step);
        CHECK(sb == rb);
        if (!net->no_data) memcpy(pc_sched_step_buf(rcv.s, rcv.step), pc_sched_step_buf(snd.s, snd.step), sb);
        /* remove both (higher index first) */
        int hi = i > j ? i : j, lo = i > j ? j : i;
        memmove(&net->m[hi], &net->m[hi + 1], sizeof(msg_t) * (size_t)(net->n - hi - 1));
        memmove(&net->m[lo], &net->m[lo + 1], sizeof(msg_t) * (size_t)(net->n - lo - 2));
        net->n -= 2;
        net->delivered++;
        if (rng_below(r, 2)) {
            pc_sched_step_done(snd.s, snd.step, PCOLL_SUCCESS, iss);
            pc_sched_step_done(rcv.s, rcv.step, PCOLL_SUCCESS, iss);
        } else {
            pc_sched_step_done(rcv.s, rcv.step, PCOLL_SUCCESS, iss);
            pc_sched_step_done(snd.s, snd.step, PCOLL_SUCCESS, iss);
        }
        return 1;
    }
    return 0;
}

static int finished;
static void count_done(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    (void)arg;
    CHECK(status == PCOLL_SUCCESS);
    finished++;
}

static long loopback_runs;

static void loopback_allreduce(int n, size_t count, pcoll_allreduce_algo_t algo, pcoll_op_t op, int inplace,
                               rng_t *r)
{
    /* the group: the simulated ranks in a random order; group index i is
     * rank ranks[i], and every rank numbers its receives with its own tag
     * base (as member-agreed ids do, engine/tags.h) */
    int *ranks = malloc(sizeof(int) * (size_t)n), *bases = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) ranks[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint64_t)i + 1), t = ranks[i];
        ranks[i] = ranks[j];
        ranks[j] = t;
    }
    for (int i = 0; i < n; i++) bases[i] = (ranks[i] + 1) << 5;
    int64_t **in = malloc(sizeof(void *) * (size_t)n), **out = malloc(sizeof(void *) * (size_t)n);
    int64_t *expect = calloc(count + 1, sizeof(int64_t));
    net_t net = {0};
    net.nranks = n;
    net.scheds = calloc((size_t)n, sizeof(pc_sched_t *));
    pc_issuer_t iss = {net_post, &net, NULL};
    for (int i = 0; i < n; i++) {
        in[i] = malloc(sizeof(int64_t) * (count + 1));
        out[i] = malloc(sizeof(int64_t) * (count + 1));
        for (size_t e = 0; e < count; e++) {
            in[i][e] = (int64_t)rng_below(r, 1000) - 500;
            expect[e] += in[i][e];
        }
        if (inplace) memcpy(out[i], in[i], sizeof(int64_t) * count);
        /* simulated rank ranks[g] is group index g */
        int g = 0;
        while (ranks[g] != i) g++;
        pc_allreduce_spec_t sp = {n, g, count, PCOLL_INT64, op, inplace, 0, 0, 0};
        CHECK(pc_allreduce_build(&sp, algo, &net.scheds[i]) == PCOLL_SUCCESS);
        pc_sched_bind_ranks(net.scheds[i], ranks);
        pc_sched_set_tags(net.scheds[i], bases[g], bases);
        pc_sched_bind(net.scheds[i], PC_SLOT_IN, inplace ? NULL : in[i]);
        pc_sched_bind(net.scheds[i], PC_SLOT_OUT, out[i]);
        pc_sched_on_done(net.scheds[i], count_done, NULL);
    }
    finished = 0;
    for (int i = 0; i < n; i++) CHECK(pc_sched_start(net.scheds[i], &iss) == PCOLL_SUCCESS);
    while (net_deliver_one(&net, r, &iss)) {
    }
    CHECK(net.n == 0);      /* nothing left unmatched */
    CHECK(finished == n);   /* every rank's schedule completed */
    for (int i = 0; i < n; i++) {
        for (size_t e = 0; e < count; e++) {
            int64_t want = op == PCOLL_AVG ? expect[e] / n : expect[e];
            if (out[i][e] != want) {
                fprintf(stderr, "FAILED loopback %s n=%d count=%zu rank %d elem %zu: %lld != %lld\n",
                        pcoll_allreduce_algo_name(algo), n, count, i, e, (long long)out[i][e], (long long)want);
                exit(1);
            }
        }
        pc_sched_free(net.scheds[i]);
        free(in[i]);
        free(out[i]);
    }
    free(in);
    free(out);
    free(expect);
    free(ranks);
    free(bases);
    free(net.scheds);
    free(net.m);
    loopback_runs++;
}

/* The simulator's time-only mode: the builders' schedules with no data
 * (no scratch allocated, no buffer touched), data steps handed to the
 * issuer.  Every algorithm completes on the loopback network with the same
 * messages, and the data steps' bytes are what the algorithm adds up. */
static int net_local(void *self, pc_sched_t *s, int step)
{
    net_t *net = self;
    pc_step_kind_t k = pc_sched_step_kind(s, step);
    CHECK(k == PC_STEP_REDUCE || k == PC_STEP_SCALE || k == PC_STEP_COPY);
    net->local_bytes += pc_sched_step_bytes(s, step);
    net->local_steps++;
    pc_sched_step_done(s, step, PCOLL_SUCCESS, NULL);
    return PCOLL_SUCCESS;
}

static void test_virtual(rng_t *r)
{
    long scratch0 = pc_sched_live_scratch();
    for (int algo = PCOLL_ALGO_RECDBL; algo <= PCOLL_ALGO_DIRECT; algo++)
        for (int n = 2; n <= 9; n++) {
            size_t count = (size_t)1 << 18; /* 2 MiB of int64 per rank, never allocated */
            net_t net = {0};
            net.nranks = n;
            net.no_data = 1;
            net.scheds = calloc((size_t)n, sizeof(pc_sched_t *));
            size_t scratch = 0;
            pc_issuer_t iss = {net_post, &net, net_local};
            pc_issuer_t no_local = {net_post, &net, NULL};
            for (int i = 0; i < n; i++) {
                pc_allreduce_spec_t sp = {n, i, count, PCOLL_INT64, PCOLL_SUM, 0, 0, 0, 1};
                CHECK(pc_allreduce_build(&sp, (pcoll_allreduce_algo_t)algo, &net.scheds[i]) == PCOLL_SUCCESS);
                scratch += pc_sched_scratch_bytes(net.scheds[i]);
                pc_sched_on_done(net.scheds[i], count_done, NULL);
            }
            /* receives land in scratch: counted, not allocated */
            CHECK(scratch > 0);
            CHECK(pc_sched_live_scratch() == scratch0);
            /* a virtual schedule cannot run where data steps would compute */
            CHECK(pc_sched_start(net.scheds[0], &no_local) == PCOLL_ERR_INTERNAL);
            finished = 0;
            for (int i = 0; i < n; i++) CHECK(pc_sched_start(net.scheds[i], &iss) == PCOLL_SUCCESS);
            while (net_deliver_one(&net, r, &iss)) {
            }
            CHECK(net.n == 0);
            CHECK(finished == n);
            /* every rank adds up at least its share of the vector: (n - 1) / n
             * of it in all, over the group (n - 1 whole vectors) */
            CHECK(net.local_bytes >= (size_t)(n - 1) * count * 8);
            CHECK(net.local_steps > 0);
            for (int i = 0; i < n; i++) pc_sched_free(net.scheds[i]);
            free(net.scheds);
            free(net.m);
        }
}

int main(void)
{
    test_and_or_rearm();
    test_local_steps();
    test_builder_errors();
    rng_t r;
    rng_seed(&r, 7);
    for (int n = 1; n <= 40; n++)
        for (int algo = PCOLL_ALGO_RECDBL; algo <= PCOLL_ALGO_DIRECT; algo++) {
            size_t counts[] = {0, 1, 2, (size_t)n - 1, (size_t)n, (size_t)n + 1, 3 * (size_t)n + 2, 97};
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                loopback_allreduce(n, counts[c], (pcoll_allreduce_algo_t)algo, (pcoll_op_t)(c % 2), (int)(n % 2),
                                   &r);
        }
    test_virtual(&r);
    CHECK(pc_sched_live_scratch() == 0);
    printf("test_sched: %ld checks, %ld loopback allreduces passed\n", checks, loopback_runs);
    return 0;
}
