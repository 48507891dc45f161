/*
 * The decisions of dynamic-group partial reduce, no MPI:
 *   - staleness-aware weights (groups/staleness.c): they sum to 1, follow
 *     the formula (a worked example), members of one age share its weight,
 *     one age only gives 1/n;
 *   - Ripples' static schedule (groups/static_schedule.c) for node layouts
 *     up to 12 x 12 and uneven ones: every rank in exactly one group per
 *     step, every member computes the same group, every value reaches every
 *     rank within two periods; figure 10's rows at 4 x 4;
 *   - the group generator (groups/controller.c) driven by simulated
 *     workers (random compute times, some ranks slower): FIFO, RANDOM and
 *     SMART (with and without inter-intra) reach thousands of groups
 *     without a deadlock at P = 2, 3, 5, 8, 13; a rank runs one group at a
 *     time and gets its groups in activation order; weights sum to 1; FIFO
 *     groups hold ready ranks only; with constant weights every group
 *     average keeps the mean of all ranks' models; every rank finishes;
 *   - frozen-group avoidance: arrivals in two cliques get a bridging group
 *     within the window, and without avoidance never do;
 *   - RANDOM's lock vector and pending queue, SMART's division, its
 *     slow-worker filter and inter-intra buffers, step by step.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups/controller.h"
#include "util/nodes.h"
#include "groups/static_schedule.h"
#include "groups/staleness.h"
#include "unit_check.h"

static int close_to(double a, double b) { return fabs(a - b) < 1e-9; }

/* ---- weights ---- */

static void test_weights(void)
{
    double w[16];
    uint64_t it[16] = {10, 10, 6};
    /* alpha .5, ages 1 1 5: beta_v = .5^v / (1 - .5^5); ages 2, 3 go to 1,
     * age 4 to 5 */
    uint64_t top = pc_staleness_weights(3, it, 0.5, w);
    double norm = 1 - pow(0.5, 5), b[6];
    for (int v = 1; v <= 5; v++) b[v] = 0.5 * pow(0.5, v - 1) / norm;
    CHECK(top == 10);
    CHECK(close_to(w[0], (b[1] + b[2] + b[3]) / 2) && close_to(w[1], w[0]));
    CHECK(close_to(w[2], b[4] + b[5]));
    CHECK(close_to(w[0] + w[1] + w[2], 1));
    /* one age: 1/n, as the constant rule */
    uint64_t same[4] = {7, 7, 7, 7};
    pc_staleness_weights(4, same, 0.5, w);
    for (int i = 0; i < 4; i++) CHECK(close_to(w[i], 0.25));
    /* ages 1 and 2: beta 2/3 and 1/3 */
    uint64_t two[3] = {5, 4, 5};
    pc_staleness_weights(3, two, 0.5, w);
    CHECK(close_to(w[0], 1.0 / 3) && close_to(w[2], 1.0 / 3) && close_to(w[1], 1.0 / 3));
    uint64_t two2[2] = {5, 4};
    pc_staleness_weights(2, two2, 0.5, w);
    CHECK(close_to(w[0], 2.0 / 3) && close_to(w[1], 1.0 / 3));
    /* alpha 0: all to the freshest */
    pc_staleness_weights(2, two2, 0.0, w);
    CHECK(close_to(w[0], 1) && close_to(w[1], 0));
    /* random instances: sum 1, no negative weight (both rules) */
    srand(7);
    for (int t = 0; t < 20000; t++) {
        int n = 1 + rand() % 16;
        uint64_t its[16];
        for (int i = 0; i < n; i++) its[i] = 100 + (uint64_t)(rand() % (1 + t % 40));
        double alpha = (rand() % 100) / 100.0;
        pc_staleness_weights(n, its, alpha, w);
        double sum = 0;
        for (int i = 0; i < n; i++) {
            CHECK(w[i] >= 0);
            sum += w[i];
        }
        CHECK(close_to(sum, 1));
        pc_constant_weights(n, its, w);
        sum = 0;
        for (int i = 0; i < n; i++) sum += w[i];
        CHECK(close_to(sum, 1));
    }
}

/* ---- static schedule ---- */

#define RMAX 160
static uint64_t know[RMAX][3], nknow[RMAX][3];

static void check_schedule(const pc_nodes_t *nodes)
{
    int P = nodes->P, m[RMAX], o[RMAX], most = pc_static_max_group(nodes);
    for (uint64_t start = 0; start < PC_STATIC_PERIOD; start++) {
        memset(know, 0, sizeof know);
        for (int r = 0; r < P; r++) know[r][r / 64] |= 1ull << (r % 64);
        for (uint64_t t = start; t < start + 2 * PC_STATIC_PERIOD; t++) {
            memcpy(nknow, know, sizeof know);
            for (int r = 0; r < P; r++) {
                int n = pc_static_group(nodes, r, t, m);
                CHECK(n >= 1 && n <= most);
                int in = 0;
                for (int i = 0; i < n; i++) {
                    in |= m[i] == r;
                    if (i) CHECK(m[i] > m[i - 1]);
                }
                CHECK(in);
                for (int i = 0; i < n; i++) { /* the same group at every member */
                    int k = pc_static_group(nodes, m[i], t, o);
                    CHECK(k == n && memcmp(o, m, sizeof(int) * (size_t)n) == 0);
                    for (int w = 0; w < 3; w++) nknow[r][w] |= know[m[i]][w];
                }
            }
            memcpy(know, nknow, sizeof know);
        }
        for (int r = 0; r < P; r++)
            for (int q = 0; q < P; q++) CHECK((know[r][q / 64] >> (q % 64)) & 1);
    }
}

static void test_static(void)
{
    pc_nodes_t nodes;
    for (int M = 1; M <= 12; M++)
        for (int K = 1; K <= 12; K++) {
            CHECK(pc_nodes_init_blocks(&nodes, M * K, K) == 0);
            check_schedule(&nodes);
            pc_nodes_destroy(&nodes);
        }
    for (int P = 1; P <= 40; P++) /* uneven: blocks of 3, 4, 5 */
        for (int K = 3; K <= 5; K++) {
            CHECK(pc_nodes_init_blocks(&nodes, P, K) == 0);
            check_schedule(&nodes);
            pc_nodes_destroy(&nodes);
        }
    int labels[7] = {9, 4, 9, 4, 4, 1, 9}; /* interleaved labels */
    CHECK(pc_nodes_init(&nodes, 7, labels) == 0);
    CHECK(nodes.count == 3 && nodes.node_of[0] == 0 && nodes.node_of[1] == 1 && nodes.node_of[5] == 2);
    CHECK(nodes.local_of[6] == 2 && pc_nodes_rank(&nodes, 1, 2) == 4);
    check_schedule(&nodes);
    pc_nodes_destroy(&nodes);
    /* figure 10 at 4 nodes x 4 (ranks 4n + local) */
    CHECK(pc_nodes_init_blocks(&nodes, 16, 4) == 0);
    int m[16];
    CHECK(pc_static_group(&nodes, 0, 0, m) == 4 && m[0] == 0 && m[1] == 4 && m[2] == 8 && m[3] == 12);
    CHECK(pc_static_group(&nodes, 1, 0, m) == 1);                             /* local 1: no sync */
    CHECK(pc_static_group(&nodes, 2, 0, m) == 2 && m[0] == 2 && m[1] == 3);   /* locals 2, 3 */
    CHECK(pc_static_group(&nodes, 5, 1, m) == 4 && m[0] == 4 && m[3] == 7);   /* intra */
    CHECK(pc_static_group(&nodes, 0, 2, m) == 2 && m[0] == 0 && m[1] == 3);   /* locals 0, 3 */
    CHECK(pc_static_group(&nodes, 1, 2, m) == 2 && m[0] == 1 && m[1] == 9);   /* opposite node */
    CHECK(pc_static_group(&nodes, 6, 2, m) == 1);                             /* local 2: no sync */
    pc_nodes_destroy(&nodes);
}

/* ---- the group generator, driven by simulated workers ---- */

#define SMAX 32
typedef struct sim {
    pc_gen_t *g;
    int P;
    double now, speed[SMAX];
    int state[SMAX];        /* 0 computing, 1 waiting for a group, 2 in a group, 3 freeing, 4 finished */
    double ready_at[SMAX];
    uint64_t group[SMAX], last_group[SMAX], iteration[SMAX];
    int index[SMAX];
    double weight[SMAX], model[SMAX];
    int steps[SMAX], target;
    uint64_t groups_done, bridges_seen;
    int members[SMAX][SMAX], nmembers[SMAX];
    int fifo;
    unsigned seed;
} sim_t;

static double urand(sim_t *s) { return (rand_r(&s->seed) % 1000) / 1000.0; }

static void on_assign(void *arg, int rank, const pc_gen_group_t *grp, int index)
{
    sim_t *s = arg;
    CHECK(s->state[rank] == 1 || s->state[rank] == 3);
    CHECK(grp->members[index] == rank);
    CHECK(grp->id > s->last_group[rank]); /* activation order */
    s->last_group[rank] = grp->id;
    double sum = 0;
    for (int i = 0; i < grp->n; i++) {
        sum += grp->weights[i];
        if (i) CHECK(grp->members[i] > grp->members[i - 1]);
    }
    CHECK(close_to(sum, 1));
    if (s->fifo) /* FIFO groups hold ready ranks only */
        for (int i = 0; i < grp->n; i++) {
            int m = grp->members[i], st = s->state[m];
            CHECK(st == 1 || st == 3 || ((st == 2 || st == 5) && s->group[m] == grp->id));
        }
    s->group[rank] = grp->id;
    s->index[rank] = index;
    s->weight[rank] = grp->weights[index];
    s->iteration[rank] = grp->iteration;
    s->nmembers[rank] = grp->n;
    memcpy(s->members[rank], grp->members, sizeof(int) * (size_t)grp->n);
    s->state[rank] = s->state[rank] == 3 ? 5 : 2; /* 5: in a group while freeing */
}

static void on_finished(void *arg, int rank)
{
    sim_t *s = arg;
    CHECK(s->state[rank] == 3);
    s->state[rank] = 4;
}

/* Completes every group whose members all hold it: the weighted average,
 * done events.  Returns how many. */
static int complete_groups(sim_t *s)
{
    int did = 0;
    for (int r = 0; r < s->P; r++) {
        if (s->state[r] != 2 && s->state[r] != 5) continue;
        uint64_t id = s->group[r];
        int n = s->nmembers[r], all = 1;
        for (int i = 0; i < n; i++) {
            int m = s->members[r][i];
            all &= (s->state[m] == 2 || s->state[m] == 5) && s->group[m] == id;
        }
        if (!all) continue;
        double avg = 0, before = 0, after;
        for (int i = 0; i < n; i++) {
            int m = s->members[r][i];
            avg += s->weight[m] * s->model[m];
            before += s->model[m];
        }
        after = avg * n;
        if (s->fifo != 2) CHECK(fabs(before - after) < 1e-6 * (fabs(before) + 1)); /* the mean is kept (1/n) */
        s->groups_done++;
        int mem[SMAX]; /* done events may assign new groups: copy first */
        memcpy(mem, s->members[r], sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++) {
            int m = mem[i];
            s->model[m] = avg;
            int freeing = s->state[m] == 5;
            s->state[m] = freeing ? 3 : 0;
            s->ready_at[m] = s->now + s->speed[m] * (0.5 + urand(s));
            CHECK(pc_gen_done(s->g, m, id) == 0);
        }
        did++;
    }
    return did;
}

/* Runs until every rank made `target` requests and finished. */
static void run_sim(sim_t *s)
{
    for (int guard = 0;; guard++) {
        CHECK(guard < 50000000);
        while (complete_groups(s)) {
        }
        /* the next rank to be ready */
        int next = -1;
        for (int r = 0; r < s->P; r++)
            if (s->state[r] == 0 && (next < 0 || s->ready_at[r] < s->ready_at[next])) next = r;
        if (next < 0) {
            int all = 1;
            for (int r = 0; r < s->P; r++) all &= s->state[r] == 4;
            if (all) break;
            /* nobody computes: every rank waits; that is a deadlock */
            fprintf(stderr, "deadlock at P = %d after %llu groups:", s->P, (unsigned long long)s->groups_done);
            for (int r = 0; r < s->P; r++) fprintf(stderr, " %d:%d", r, s->state[r]);
            fprintf(stderr, "\n");
            CHECK(0);
        }
        s->now = s->ready_at[next];
        s->model[next] += urand(s) - 0.5; /* a local step */
        if (s->steps[next] == s->target) {
            s->state[next] = 3;
            CHECK(pc_gen_finish(s->g, next) == 0);
        } else {
            s->steps[next]++;
            s->state[next] = 1;
            CHECK(pc_gen_request(s->g, next, (uint64_t)s->steps[next] + s->iteration[next]) == 0);
        }
    }
    CHECK(pc_gen_all_finished(s->g));
}

static void simulate(pc_gen_kind_t kind, int P, int S, int dynamic, const pc_nodes_t *nodes, int target)
{
    sim_t *s = calloc(1, sizeof *s);
    s->P = P;
    s->target = target;
    s->seed = (unsigned)(P * 31 + S + kind * 7);
    s->fifo = kind == PC_GEN_FIFO ? (dynamic ? 2 : 1) : 0;
    for (int r = 0; r < P; r++) {
        s->speed[r] = r % 3 == 0 ? 3.0 : 1.0; /* every third rank slower */
        s->ready_at[r] = s->speed[r] * urand(s);
        s->model[r] = r;
    }
    pc_gen_config_t cfg = {kind, P, S, dynamic, 0.5, 1, 0, kind == PC_GEN_SMART ? 3 : 0, nodes, 42};
    pc_gen_out_t out = {on_assign, on_finished, s};
    CHECK((s->g = pc_gen_create(&cfg, &out)) != NULL);
    run_sim(s);
    pc_gen_stats_t st;
    pc_gen_stats(s->g, &st);
    CHECK(st.requests == (uint64_t)P * (uint64_t)target);
    CHECK(st.groups >= s->groups_done);
    printf("  kind %d P %2d S %d%s: %llu groups, %llu bridges, %llu holds, %llu conflicts, pending max %d\n", kind,
           P, S, nodes ? " inter-intra" : "", (unsigned long long)s->groups_done, (unsigned long long)st.bridges,
           (unsigned long long)st.holds, (unsigned long long)st.conflicts, st.pending_max);
    pc_gen_destroy(s->g);
    free(s);
}

static void test_simulated(void)
{
    int Ps[] = {2, 3, 5, 8, 13};
    for (int i = 0; i < 5; i++) {
        int P = Ps[i];
        for (int S = 2; S <= 4 && S <= P; S++) {
            simulate(PC_GEN_FIFO, P, S, 0, NULL, 1500);
            simulate(PC_GEN_FIFO, P, S, 1, NULL, 1500);
            simulate(PC_GEN_RANDOM, P, S, 0, NULL, 1500);
            simulate(PC_GEN_SMART, P, S, 0, NULL, 1500);
        }
        pc_nodes_t nodes;
        CHECK(pc_nodes_init_blocks(&nodes, P, 2) == 0);
        simulate(PC_GEN_SMART, P, 2, 0, &nodes, 1500);
        pc_nodes_destroy(&nodes);
    }
}

/* ---- frozen groups ---- */

typedef struct frozen {
    int bridged_at; /* the group number of the first bridge, 0: none */
    int groups;
    int half;
    uint64_t id[SMAX]; /* the group each rank holds (0: none) */
} frozen_t;

static void frozen_assign(void *arg, int rank, const pc_gen_group_t *grp, int index)
{
    frozen_t *f = arg;
    (void)index;
    f->id[rank] = grp->id;
    if (rank != grp->members[0]) return;
    f->groups++;
    int lo = 0, hi = 0;
    for (int i = 0; i < grp->n; i++) {
        if (grp->members[i] < f->half)
            lo++;
        else
            hi++;
    }
    if (lo && hi && !f->bridged_at) f->bridged_at = f->groups;
}
static void frozen_finished(void *arg, int rank)
{
    (void)arg;
    (void)rank;
}

/* Two cliques of N/2 ranks that always arrive together (each arrival block
 * is a whole clique): FIFO alone keeps them apart forever. */
static int cliques(int N, int P, int avoid, int rounds, int *window)
{
    frozen_t f = {0, 0, N / 2, {0}};
    pc_gen_config_t cfg = {PC_GEN_FIFO, N, P, 0, 0.5, avoid, 0, 0, NULL, 1};
    pc_gen_out_t out = {frozen_assign, frozen_finished, &f};
    pc_gen_t *g = pc_gen_create(&cfg, &out);
    *window = pc_gen_default_window(N, P);
    int waiting[SMAX] = {0};
    for (int t = 0; t < rounds; t++) {
        /* each clique's ranks ask one after the other, clique by clique (a
         * rank still held from before asks no more) */
        for (int r = 0; r < N; r++)
            if (!waiting[r]) {
                CHECK(pc_gen_request(g, r, (uint64_t)t) == 0);
                waiting[r] = 1;
            }
        /* FIFO groups hold ready ranks only: every group is complete; its
         * members report it done */
        for (int r = 0; r < N; r++)
            if (f.id[r]) {
                CHECK(pc_gen_done(g, r, f.id[r]) == 0);
                f.id[r] = 0;
                waiting[r] = 0;
            }
    }
    pc_gen_destroy(g);
    return f.bridged_at;
}

static void test_frozen(void)
{
    int window;
    /* N = 4, P = 2 (the paper's example) and N = 6, P = 3 */
    CHECK(cliques(4, 2, 0, 200, &window) == 0);
    int at = cliques(4, 2, 1, 200, &window);
    printf("  frozen N 4 P 2: bridge at group %d (window %d)\n", at, window);
    CHECK(at > 0 && at <= window + 1);
    CHECK(cliques(6, 3, 0, 200, &window) == 0);
    at = cliques(6, 3, 1, 200, &window);
    printf("  frozen N 6 P 3: bridge at group %d (window %d)\n", at, window);
    CHECK(at > 0 && at <= window + 1);
    CHECK(window >= (6 - 1 + 3 - 2) / (3 - 1)); /* T >= ceil((N-1)/(P-1)) */
}

/* ---- RANDOM and SMART step by step ---- */

typedef struct rec {
    int got[SMAX];
    uint64_t id[SMAX];
    int n[SMAX];
    int members[SMAX][SMAX];
} rec_t;

static void rec_assign(void *arg, int rank, const pc_gen_group_t *grp, int index)
{
    rec_t *r = arg;
    (void)index;
    r->got[rank]++;
    r->id[rank] = grp->id;
    r->n[rank] = grp->n;
    memcpy(r->members[rank], grp->members, sizeof(int) * (size_t)grp->n);
}
static void rec_finished(void *arg, int rank)
{
    (void)arg;
    (void)rank;
}

/* A generator whose decisions are recorded in rec (cleared here). */
static pc_gen_t *recording(pc_gen_config_t cfg, rec_t *rec)
{
    memset(rec, 0, sizeof *rec);
    pc_gen_out_t out = {rec_assign, rec_finished, rec};
    pc_gen_t *g = pc_gen_create(&cfg, &out);
    CHECK(g != NULL);
    return g;
}

static void test_random_locks(void)
{
    rec_t rec;
    pc_gen_t *g = recording((pc_gen_config_t){PC_GEN_RANDOM, 8, 3, 0, 0.5, 0, 0, 0, NULL, 3}, &rec);
    /* rank 0 asks: a group of 3 with it, sent to it at once; the other two
     * hold locks and have it in their buffers */
    CHECK(pc_gen_request(g, 0, 0) == 0);
    CHECK(rec.got[0] == 1 && rec.n[0] == 3);
    int a = rec.members[0][0] == 0 ? rec.members[0][1] : rec.members[0][0];
    int b = rec.members[0][2] == 0 ? rec.members[0][1] : rec.members[0][2];
    CHECK(pc_gen_locks(g, 0) == 1 && pc_gen_locks(g, a) == 1 && pc_gen_locks(g, b) == 1);
    CHECK(pc_gen_buffered(g, a) == 1 && pc_gen_buffered(g, 0) == 0);
    /* every other rank asks in turn: each either gets a group that does not
     * touch the locked ones or waits in the pending queue */
    int conflicts = 0;
    for (int r = 1; r < 8; r++) {
        if (r == a || r == b) continue;
        int before = pc_gen_pending(g);
        CHECK(pc_gen_request(g, r, 0) == 0);
        conflicts += pc_gen_pending(g) > before;
    }
    for (int r = 0; r < 8; r++) CHECK(pc_gen_locks(g, r) <= 1); /* no rank in two active groups */
    /* a and b arrive: they get rank 0's group */
    CHECK(pc_gen_request(g, a, 0) == 0 && pc_gen_request(g, b, 0) == 0);
    CHECK(rec.id[a] == rec.id[0] && rec.id[b] == rec.id[0]);
    /* the group ends: pending groups become active as their locks clear */
    int pend = pc_gen_pending(g);
    CHECK(pc_gen_done(g, 0, rec.id[0]) == 0 && pc_gen_done(g, a, rec.id[0]) == 0);
    CHECK(pc_gen_done(g, b, rec.id[0]) == 0);
    CHECK(pc_gen_locks(g, 0) <= 1 && pc_gen_pending(g) <= pend);
    printf("  random: %d of 5 requests waited in the pending queue, %d left after the first group\n", conflicts,
           pc_gen_pending(g));
    pc_gen_destroy(g);
}

static void test_smart(void)
{
    rec_t rec;
    /* a division over 8 idle ranks, S = 3: groups 3, 3, 2, everyone buffered */
    pc_gen_t *g = recording((pc_gen_config_t){PC_GEN_SMART, 8, 3, 0, 0.5, 0, 0, 2, NULL, 5}, &rec);
    CHECK(pc_gen_request(g, 0, 0) == 0);
    CHECK(rec.got[0] == 1);
    int total = 0;
    for (int r = 0; r < 8; r++) {
        CHECK(pc_gen_locks(g, r) == 1);
        total += pc_gen_buffered(g, r);
    }
    CHECK(total == 7);
    pc_gen_stats_t st;
    pc_gen_stats(g, &st);
    CHECK(st.groups == 3 && st.divisions == 1);
    pc_gen_destroy(g);

    /* the slow-worker filter, C_thres = 1: only ranks that asked at least as
     * often as the requester are dealt with it */
    g = recording((pc_gen_config_t){PC_GEN_SMART, 4, 2, 0, 0.5, 0, 0, 1, NULL, 5}, &rec);
    CHECK(pc_gen_request(g, 0, 0) == 0); /* the others lag by 1: nobody to group with */
    CHECK(rec.got[0] == 0);              /* it awaits the next division */
    unsigned char bits[1] = {0};
    CHECK(pc_gen_missing(g, 0, bits) == 3 && bits[0] == 0x0e); /* it waits for 1, 2, 3 */
    CHECK(pc_gen_request(g, 1, 0) == 0); /* rank 0 asked as often: with it */
    CHECK(rec.got[0] == 1 && rec.got[1] == 1 && rec.id[0] == rec.id[1]);
    CHECK(rec.n[1] == 2 && rec.members[1][0] == 0 && rec.members[1][1] == 1);
    CHECK(pc_gen_locks(g, 2) == 0 && pc_gen_locks(g, 3) == 0);
    pc_gen_destroy(g);

    /* awaiting until a rank is idle again: 4 ranks, S = 2, no filter */
    g = recording((pc_gen_config_t){PC_GEN_SMART, 4, 2, 0, 0.5, 0, 0, 0, NULL, 7}, &rec);
    CHECK(pc_gen_request(g, 0, 0) == 0); /* two groups of 2: everyone locked */
    CHECK(rec.got[0] == 1 && rec.n[0] == 2);
    const int x = rec.members[0][0] == 0 ? rec.members[0][1] : rec.members[0][0];
    const uint64_t first = rec.id[0];
    CHECK(pc_gen_done(g, 0, first) == 0);
    CHECK(pc_gen_request(g, 0, 1) == 0); /* the others are all busy: it awaits */
    CHECK(rec.got[0] == 1);
    CHECK(pc_gen_request(g, x, 0) == 0 && rec.id[x] == first); /* x takes the first group */
    CHECK(rec.got[0] == 1);
    CHECK(pc_gen_done(g, x, first) == 0); /* x is idle: a division pairs it with rank 0 */
    CHECK(rec.got[0] == 2 && rec.n[0] == 2 && rec.id[0] != first);
    CHECK(rec.members[0][0] == 0 && rec.members[0][1] == x);
    CHECK(pc_gen_buffered(g, x) == 1);
    pc_gen_destroy(g);

    /* awaiting while the only other rank frees: a group of one */
    g = recording((pc_gen_config_t){PC_GEN_SMART, 2, 2, 0, 0.5, 0, 0, 1, NULL, 7}, &rec);
    CHECK(pc_gen_request(g, 0, 0) == 0 && rec.got[0] == 0); /* rank 1 lags: it awaits */
    CHECK(pc_gen_finish(g, 1) == 0);
    CHECK(rec.got[0] == 1 && rec.n[0] == 1);
    pc_gen_destroy(g);

    /* inter-intra: 2 nodes x 4, S = 2: a division gives every rank two
     * groups (inter or inside the node, then its node's four) */
    pc_nodes_t nodes;
    CHECK(pc_nodes_init_blocks(&nodes, 8, 4) == 0);
    g = recording((pc_gen_config_t){PC_GEN_SMART, 8, 2, 0, 0.5, 0, 0, 0, &nodes, 9}, &rec);
    CHECK(pc_gen_request(g, 5, 0) == 0);
    CHECK(rec.got[5] == 1);
    for (int r = 0; r < 8; r++) CHECK(pc_gen_locks(g, r) == 2);
    /* per node: a head and a group of the other three (S = 2, the single
     * left over joins); one group of the two heads; two node groups */
    pc_gen_stats(g, &st);
    CHECK(st.groups == 5);
    CHECK(rec.n[5] == 2 || rec.n[5] == 3);
    if (rec.n[5] == 2) CHECK(rec.members[5][0] < 4 && rec.members[5][1] >= 4); /* the heads, across */
    else CHECK(rec.members[5][0] >= 4);                                        /* inside node 1 */
    pc_gen_destroy(g);
    pc_nodes_destroy(&nodes);
}

/* Events that break the protocol are refused, named PCOLL_ERR_INTERNAL, and
 * change nothing: a rank out of range, a second request while waiting, a
 * done for a group it was not sent, anything after its finish. */
static void test_protocol_errors(void)
{
    rec_t rec;
    pc_gen_t *g = recording((pc_gen_config_t){PC_GEN_FIFO, 4, 2, 0, 0.5, 0, 0, 0, NULL, 1}, &rec);
    CHECK(pc_gen_request(g, 4, 0) == PCOLL_ERR_INTERNAL && pc_gen_request(g, -1, 0) == PCOLL_ERR_INTERNAL);
    CHECK(pc_gen_request(g, 0, 0) == PCOLL_SUCCESS && rec.got[0] == 0); /* waits for a partner */
    CHECK(pc_gen_request(g, 0, 0) == PCOLL_ERR_INTERNAL);               /* asks again while waiting */
    CHECK(pc_gen_done(g, 0, 12345) == PCOLL_ERR_INTERNAL);              /* no such group of its own */
    CHECK(pc_gen_request(g, 1, 0) == PCOLL_SUCCESS && rec.got[0] == 1 && rec.got[1] == 1);
    CHECK(pc_gen_done(g, 0, rec.id[0] + 1) == PCOLL_ERR_INTERNAL);      /* not the group it was sent */
    CHECK(pc_gen_done(g, 0, rec.id[0]) == PCOLL_SUCCESS && pc_gen_done(g, 1, rec.id[1]) == PCOLL_SUCCESS);
    CHECK(pc_gen_finish(g, 2) == PCOLL_SUCCESS);
    CHECK(pc_gen_finish(g, 2) == PCOLL_ERR_INTERNAL && pc_gen_request(g, 2, 0) == PCOLL_ERR_INTERNAL);
    pc_gen_destroy(g);
}

int main(void)
{
    test_protocol_errors();
    test_weights();
    test_static();
    test_frozen();
    test_random_locks();
    test_smart();
    test_simulated();
    printf("preduce policy: %ld checks passed\n", checks);
    return 0;
}
