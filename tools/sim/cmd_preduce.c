/*
 * pcoll-sim preduce: pcoll-bench preduce, simulated.  The dynamic-group
 * partial reduce's decisions are pcoll's own: the controller
 * (groups/controller.c, with its staleness weights) for fifo and
 * ripples:random/smart, Ripples' static schedule (groups/static_schedule.c)
 * for ripples:static, the specs parsed by pcoll_preduce_config_parse.  The
 * messages are src/preduce/protocol.c's, at its sizes (pr_msg_t); each
 * group's average is a group allreduce as pcoll_allreduce runs it: the
 * members' HELLO handshake (core/op.c), then src/algo's schedule.
 *
 *   app actor of rank i               progress actor of rank i
 *   -------------------               ------------------------
 *   [compute --compute-us]
 *   t0; call ---------- doorbell -->  READY(k) ----------------+
 *                                                              |  progress actor of the
 *                                                              |  controller's rank (cfg ctl)
 *                                                              +->  --ctl-cost, pc_gen_request
 *                                     GROUP(id, members) <-------  assign: GROUP to each member
 *   <------------- GROUP arrived ---  (the mailbox)                 once it is ready
 *   wait = now - t0
 *   call ---------- doorbell -->      schedule built (no data), HELLO
 *                                     to its receive peers, HELLOs from
 *                                     its send peers, schedule run
 *   <------------- on_done ---------  schedule freed
 *   post DONE(id) ----------------->  DONE --------------------->  pc_gen_done: locks clear
 *
 *   after --calls: FIN, the groups still planned with the rank, FINISHED
 *   (pcoll_preduce_free's drain; untimed); the controller's rank also
 *   waits for every rank's FINISHED.  ripples:static: no controller and no
 *   wait, the group is pc_static_group(step).
 *
 * Runs: MPI_Allreduce first (a schedule among all ranks, Open MPI's rule:
 * recursive doubling for small messages), then every policy, all in one
 * simulation, with barriers in between.  Figures as pcoll-bench preduce:
 * the controller's rank's loop and its controller's statistics.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/allreduce.h"
#include "groups/controller.h"
#include "groups/static_schedule.h"
#include "preduce/object.h"
#include "sim.h"
#include "tool.h"

static const char *help =
    "usage: pcoll-sim preduce [flags]\n"
    "pcoll-bench preduce on the simulated platform: pcoll's controller (fifo,\n"
    "ripples:random, ripples:smart) or Ripples' static schedule decide the groups,\n"
    "the group allreduces are src/algo's schedules; time only.\n"
    "  --policies L     comma-separated pcoll_preduce_config_parse specs (default\n"
    "                   fifo:3:const,fifo:3:dyn,ripples:random:3,ripples:smart:3,\n"
    "                   ripples:static)\n"
    "  --calls N        calls per rank and policy (default 2000)\n"
    "  --count C        floats in the model (default 16)\n"
    "  --ctl-cost US    CPU microseconds the controller's rank spends per event\n"
    "                   (READY, DONE, FIN) on top of its messages (default 1)\n"
    "  --compute-us U   microseconds of compute before each call (default 0: none,\n"
    "                   as pcoll-bench preduce)\n"
    "  --compute-jitter J  each call's compute is U * (1 + J * u), u uniform in\n"
    "                   [-1, 1], from a seed per rank (0 <= J < 1, default 0)\n"
    "  --json           one JSON object per policy and one for MPI_Allreduce,\n"
    "                   pcoll-bench preduce's keys: bench, ranks, policy, calls,\n"
    "                   count, seconds, groups, groups_per_s, mean_group_size,\n"
    "                   steps_per_s, vs_mpi, wait_us_median, wait_us_p99,\n"
    "                   ctl_busy_pct, ctl_us_per_group, ctl_limit_groups_s; and\n"
    "                   ctl_rank_busy_pct, ctl_cost_us, compute_us,\n"
    "                   compute_jitter, platform, ranks_per_node, link_rate_bps;\n"
    "                   then one line {\"bench\": \"sim\", ...}\n"
    "The controller's busy time (ctl_*) is its --ctl-cost per event plus the\n"
    "messages it sends while deciding (the real one times its handler, sends\n"
    "included); ctl_rank_busy_pct is all of its rank's progress actor's time\n"
    "(receives, its own groups, doorbells too): at 100 the rank saturates.\n";

#define MAX_POLICIES 16
/* message channels: MPI_Allreduce's schedule, each policy's control
 * messages, and the groups' (their id modulo CH_GROUPS) */
enum { CH_MPI = 900, CH_CTL = 1000, CH_GROUP = 2048, CH_GROUPS = 1 << 19 };
enum { TAG_TO_CTL = 1, TAG_TO_RANK = 2, TAG_HELLO = 3 };

/* A protocol message as the simulation hands it over; its simulated size is
 * the real pr_msg_t's (plus the members of a GROUP). */
typedef struct msg {
    int src;
    uint32_t kind; /* PR_READY, PR_DONE, PR_FIN, PR_GROUP, PR_FINISHED */
    uint64_t a, b; /* READY: iteration; DONE, GROUP: group id; GROUP: iteration after */
    int n;
    int members[];
} msg_t;

typedef struct policy {
    char spec[256];
    pcoll_preduce_config_t cfg;
    double seconds, groups, steps, busy_s; /* at the controller's rank */
    double progress_busy_s;                /* its progress actor's charged time */
    double *secs, *med, *p99;              /* [P]: each rank's loop, wait median, wait p99 */
} policy_t;

static struct {
    policy_t pol[MAX_POLICIES];
    int np;
    long calls, count;
    double ctl_cost_s, compute_s, jitter;
    pc_nodes_t nodes;
    double *mpi_secs; /* [P] */
    uint64_t *live_gid; /* [CH_GROUPS]: the group using a channel, */
    int *live_refs;     /* and how many of its members are in it */
} C;

/* A rank's state (r->cmd). */
typedef struct rank_st {
    int pi;          /* the policy running */
    uint64_t k;      /* the iteration it reports */
    uint64_t rng;
    double *waits;   /* [calls] */
    /* the mailbox (written by the progress actor's handler) */
    int finished;
    uint64_t gid, giter, done_gid;
    int gn, cap;
    int *members; /* [cap]: the group map of the running schedule */
    int *peers;   /* [cap] */
    /* the group's allreduce */
    pc_sched_t *s;
    int channel, hello_missing;
    /* the controller's rank */
    pc_gen_t *gen;
    int nfinished, all_waiting;
    double busy_s;
} rank_st_t;

static void die(const char *what, int rank)
{
    fprintf(stderr, "pcoll-sim preduce: rank %d: %s\n", rank, what);
    exit(1);
}

static rank_st_t *st_of(sim_rank_t *r) { return r->cmd; }
static const policy_t *cur(const rank_st_t *st) { return &C.pol[st->pi]; }
static int ctl_of(const rank_st_t *st) { return cur(st)->cfg.controller; }
static int is_static(const policy_t *p) { return p->cfg.policy == PCOLL_PREDUCE_RIPPLES_STATIC; }

/* The controller's configuration from a spec, as pc_preduce_protocol_init
 * maps it (not callable apart: it also installs the object's handlers). */
/* ---- the controller (its rank's progress actor) ---- */

static void to_rank(sim_rank_t *r, int dst, msg_t *m, int n)
{
    sim_ctl_send(r, dst, CH_CTL + st_of(r)->pi, TAG_TO_RANK, m, (long)(sizeof(pr_msg_t) + sizeof(int32_t) * (size_t)n));
}

static void on_assign(void *arg, int rank, const pc_gen_group_t *g, int index)
{
    (void)index;
    msg_t *m = malloc(sizeof *m + sizeof(int) * (size_t)g->n);
    if (!m) die("out of memory", rank);
    *m = (msg_t){.kind = PR_GROUP, .a = g->id, .b = g->iteration, .n = g->n};
    memcpy(m->members, g->members, sizeof(int) * (size_t)g->n);
    to_rank(arg, rank, m, g->n);
}

static void on_finished(void *arg, int rank)
{
    sim_rank_t *r = arg;
    msg_t *m = calloc(1, sizeof *m);
    if (!m) die("out of memory", rank);
    m->kind = PR_FINISHED;
    st_of(r)->nfinished++;
    to_rank(r, rank, m, 0);
}

static void on_ctl_msg(sim_rank_t *r, sim_pending_t *p);

static void ctl_listen(sim_rank_t *r) { sim_ctl_recv(r, CH_CTL + st_of(r)->pi, TAG_TO_CTL, on_ctl_msg, NULL); }

/* a rank's READY, DONE or FIN: one decision */
static void on_ctl_msg(sim_rank_t *r, sim_pending_t *p)
{
    rank_st_t *st = st_of(r);
    msg_t *m = p->payload;
    double busy0 = r->busy_s;
    sim_charge(r, C.ctl_cost_s);
    int rc = m->kind == PR_READY  ? pc_gen_request(st->gen, m->src, m->a)
             : m->kind == PR_DONE ? pc_gen_done(st->gen, m->src, m->a)
             : m->kind == PR_FIN  ? pc_gen_finish(st->gen, m->src)
                                  : PCOLL_ERR_INTERNAL;
    st->busy_s += r->busy_s - busy0;
    if (rc != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-sim preduce: %s: the controller failed on message %u from rank %d: %s\n",
                cur(st)->spec, m->kind, m->src, pcoll_strerror(rc));
        exit(1);
    }
    free(m);
    if (st->nfinished < sim.P) {
        ctl_listen(r);
    } else if (st->all_waiting) {
        st->all_waiting = 0;
        sim_call_done(r);
    }
}

/* ---- every rank's progress actor ---- */

static void on_rank_msg(sim_rank_t *r, sim_pending_t *p);

static void rank_listen(sim_rank_t *r) { sim_ctl_recv(r, CH_CTL + st_of(r)->pi, TAG_TO_RANK, on_rank_msg, NULL); }

/* room for a group of n (never while one runs: its map is members) */
static void ensure_cap(sim_rank_t *r, int n)
{
    rank_st_t *st = st_of(r);
    if (n <= st->cap) return;
    st->members = realloc(st->members, sizeof(int) * (size_t)n);
    st->peers = realloc(st->peers, sizeof(int) * (size_t)n);
    if (!st->members || !st->peers) die("out of memory", r->rank);
    st->cap = n;
}

/* a GROUP or FINISHED into the mailbox; the app waits for it */
static void on_rank_msg(sim_rank_t *r, sim_pending_t *p)
{
    rank_st_t *st = st_of(r);
    msg_t *m = p->payload;
    if (m->kind == PR_GROUP) {
        st->gid = m->a;
        st->giter = m->b;
        st->gn = m->n;
        ensure_cap(r, m->n);
        memcpy(st->members, m->members, sizeof(int) * (size_t)m->n);
        rank_listen(r);
    } else {
        st->finished = 1;
    }
    free(m);
    sim_call_done(r);
}

static void to_ctl(sim_rank_t *r, uint32_t kind, uint64_t a)
{
    rank_st_t *st = st_of(r);
    msg_t *m = calloc(1, sizeof *m);
    if (!m) die("out of memory", r->rank);
    *m = (msg_t){.src = r->rank, .kind = kind, .a = a};
    sim_ctl_send(r, ctl_of(st), CH_CTL + st->pi, TAG_TO_CTL, m, (long)sizeof(pr_msg_t));
}

static void p_ready(sim_rank_t *r, void *arg)
{
    (void)arg;
    to_ctl(r, PR_READY, st_of(r)->k);
}

static void p_done(sim_rank_t *r, void *arg)
{
    (void)arg;
    to_ctl(r, PR_DONE, st_of(r)->done_gid);
}

static void p_fin(sim_rank_t *r, void *arg)
{
    (void)arg;
    to_ctl(r, PR_FIN, 0);
}

/* the object's creation: the controller, and every rank listening */
static void p_open(sim_rank_t *r, void *arg)
{
    (void)arg;
    rank_st_t *st = st_of(r);
    if (r->rank == ctl_of(st)) {
        pc_gen_config_t gc = pc_preduce_gen_config(&cur(st)->cfg, sim.P, &C.nodes);
        pc_gen_out_t out = {on_assign, on_finished, r};
        if (!(st->gen = pc_gen_create(&gc, &out))) die("no memory for the controller", r->rank);
        st->nfinished = st->all_waiting = 0;
        st->busy_s = 0;
        ctl_listen(r);
    }
    rank_listen(r);
    sim_call_done(r);
}

/* the controller's rank: every rank has finished */
static void p_wait_all(sim_rank_t *r, void *arg)
{
    (void)arg;
    rank_st_t *st = st_of(r);
    if (st->nfinished == sim.P)
        sim_call_done(r);
    else
        st->all_waiting = 1;
}

/* ---- a group's allreduce (progress actor) ---- */

/* Two groups alive at once on one channel would mix their messages. */
static void live_take(int rank, int channel, uint64_t gid)
{
    int i = channel - CH_GROUP;
    if (C.live_refs[i] > 0 && C.live_gid[i] != gid) die("two live groups share a channel (ids too far apart)", rank);
    C.live_gid[i] = gid;
    C.live_refs[i]++;
}

static void live_drop(int channel) { C.live_refs[channel - CH_GROUP]--; }

static void group_done(pc_sched_t *s, int status, void *arg)
{
    sim_rank_t *r = arg;
    rank_st_t *st = st_of(r);
    if (status != PCOLL_SUCCESS) die("a group's schedule failed", r->rank);
    live_drop(st->channel);
    pc_sched_free(s);
    st->s = NULL;
    sim_call_done(r);
}

static void start_group(sim_rank_t *r)
{
    if (sim_sched_start(r, st_of(r)->s) != PCOLL_SUCCESS) die("a group's schedule did not start", r->rank);
}

static void on_hello(sim_rank_t *r, sim_pending_t *p)
{
    (void)p; /* no payload: its size is what counts */
    rank_st_t *st = st_of(r);
    if (--st->hello_missing > 0)
        sim_ctl_recv(r, st->channel, TAG_HELLO, on_hello, NULL);
    else
        start_group(r);
}

/* core/op.c's HELLO of a group operation: a service header, the member's
 * pc_hello_t, world and n, the member list */
static long hello_bytes(int n)
{
    return (long)(sizeof(pc_svc_head_t) + sizeof(pc_hello_t) + 2 * sizeof(int32_t) + sizeof(int32_t) * (size_t)n);
}

/* the model's allreduce in place (the preduce's average, MPI_IN_PLACE),
 * without data */
static pc_sched_t *build_inplace(sim_rank_t *r, int n, int me, pcoll_allreduce_algo_t algo)
{
    pc_allreduce_spec_t sp = {n, me, (size_t)C.count, PCOLL_FLOAT32, PCOLL_SUM, 1, 0, 0, 1};
    pc_sched_t *s = NULL;
    if (pc_allreduce_build(&sp, algo, &s) != PCOLL_SUCCESS) die("building an allreduce's schedule failed", r->rank);
    return s;
}

/* pcoll_allreduce of the group in the mailbox: its algorithm for a call */
static pc_sched_t *build_group(sim_rank_t *r, int n)
{
    rank_st_t *st = st_of(r);
    int me = 0;
    while (me < n && st->members[me] != r->rank) me++;
    if (me == n) die("a group without this rank", r->rank);
    return build_inplace(r, n, me, sim_pcoll_rule(PCOLL_ALGO_AUTO, (size_t)C.count * 4, n));
}

/* the group in the mailbox (st->members, gn) on st->channel: HELLOs, then
 * the schedule */
static void p_group(sim_rank_t *r, void *arg)
{
    (void)arg;
    rank_st_t *st = st_of(r);
    int n = st->gn;
    st->s = build_group(r, n);
    live_take(r->rank, st->channel, st->gid);
    sim_sched_prepare(r, st->s, st->members, st->channel);
    pc_sched_on_done(st->s, group_done, r);
    int nrecv = pc_sched_peers(st->s, PC_STEP_RECV, st->peers, n);
    for (int i = 0; i < nrecv; i++)
        sim_ctl_send(r, st->members[st->peers[i]], st->channel, TAG_HELLO, NULL, hello_bytes(n));
    st->hello_missing = pc_sched_peers(st->s, PC_STEP_SEND, st->peers, n);
    if (st->hello_missing > 0)
        sim_ctl_recv(r, st->channel, TAG_HELLO, on_hello, NULL);
    else
        start_group(r);
}

/* ---- the app actor ---- */

/* waits for the mailbox (a GROUP or FINISHED), as pc_preduce_wait blocks */
static void wait_mail(sim_rank_t *r) { sg_sem_acquire(r->app_sem); }

static void compute(rank_st_t *st)
{
    if (C.compute_s <= 0) return;
    st->rng ^= st->rng << 13, st->rng ^= st->rng >> 7, st->rng ^= st->rng << 17;
    double u = (double)(st->rng >> 11) / 9007199254740992.0 * 2 - 1;
    sg_actor_sleep_for(C.compute_s * (1 + C.jitter * u));
}

/* model *= weight (the app's, before the group's allreduce), then it */
static void average(sim_rank_t *r)
{
    if (st_of(r)->gn <= 1) return;
    sg_actor_sleep_for((double)C.count * 4 / sim.model.reduce_Bps);
    sim_call(r, p_group, NULL);
}

/* MPI_Allreduce's stand-in (calls.c's rule), --calls times */
static void run_mpi(sim_rank_t *r)
{
    pc_sched_t *s = build_inplace(r, sim.P, r->rank, sim_mpi_rule((size_t)C.count * 4, sim.P));
    sim_sched_prepare(r, s, NULL, CH_MPI);
    sim_barrier();
    double t0 = sim_now();
    for (long i = 0; i < C.calls; i++) {
        compute(st_of(r));
        sim_allreduce_run(r, s);
    }
    C.mpi_secs[r->rank] = sim_now() - t0;
    sim_barrier();
    pc_sched_free(s);
}

/* the group in the mailbox: its average, then DONE to the controller */
static void group_and_done(sim_rank_t *r)
{
    rank_st_t *st = st_of(r);
    st->channel = CH_GROUP + (int)(st->gid % CH_GROUPS);
    average(r);
    st->done_gid = st->gid;
    sim_post(r, p_done, NULL);
}

/* one pcoll_preduce call of a controller policy; its wait */
static double call_dynamic(sim_rank_t *r)
{
    rank_st_t *st = st_of(r);
    st->k++;
    double t0 = sim_now();
    sim_call(r, p_ready, NULL); /* returns when the GROUP is in */
    double wait = sim_now() - t0;
    if (st->giter > st->k) st->k = st->giter;
    group_and_done(r);
    return wait;
}

/* pcoll_preduce_free's drain: FIN, the groups still planned, FINISHED */
static void drain(sim_rank_t *r)
{
    rank_st_t *st = st_of(r);
    st->finished = 0;
    sim_call(r, p_fin, NULL);
    while (!st->finished) {
        group_and_done(r);
        wait_mail(r);
    }
    if (r->rank == ctl_of(st)) {
        sim_call(r, p_wait_all, NULL);
        pc_gen_destroy(st->gen);
        st->gen = NULL;
    }
}

/* one call of ripples:static: the schedule's group of this step, no wait */
static void call_static(sim_rank_t *r, uint64_t step)
{
    rank_st_t *st = st_of(r);
    st->gn = pc_static_group(&C.nodes, r->rank, step, st->members);
    st->gid = step + 1;
    st->channel = CH_GROUP + (int)(step % CH_GROUPS);
    average(r);
}

static void wait_quantiles(policy_t *p, int rank, double *w, long n)
{
    p->med[rank] = tool_median(w, (size_t)n) * 1e6; /* sorts w */
    long i = (long)ceil(0.99 * (double)n) - 1;
    p->p99[rank] = w[i < 0 ? 0 : i] * 1e6;
}

static void run_policy(sim_rank_t *r, int pi)
{
    rank_st_t *st = st_of(r);
    policy_t *p = &C.pol[pi];
    st->pi = pi;
    st->k = 0;
    int dynamic = !is_static(p);
    if (dynamic) sim_call(r, p_open, NULL);
    sim_barrier(); /* every rank listens before anyone sends */
    double t0 = sim_now(), busy0 = r->busy_s;
    for (long i = 0; i < C.calls; i++) {
        compute(st);
        if (dynamic) {
            st->waits[i] = call_dynamic(r);
        } else {
            call_static(r, (uint64_t)i);
            st->waits[i] = 0;
        }
    }
    p->secs[r->rank] = sim_now() - t0;
    if (dynamic && r->rank == p->cfg.controller) {
        pc_gen_stats_t gs;
        pc_gen_stats(st->gen, &gs);
        p->seconds = p->secs[r->rank];
        p->groups = (double)gs.groups;
        p->steps = (double)gs.requests;
        p->busy_s = st->busy_s;
        p->progress_busy_s = r->busy_s - busy0;
    }
    if (dynamic) drain(r);
    wait_quantiles(p, r->rank, st->waits, C.calls);
    sim_barrier();
}

static void app(sim_rank_t *r)
{
    run_mpi(r);
    for (int i = 0; i < C.np; i++) run_policy(r, i);
}

/* ---- flags and output ---- */

static void add_policies(const char *prog, const char *list, int P)
{
    char buf[1024];
    if (strlen(list) >= sizeof buf) tool_usage_error(prog, "--policies: the list is too long");
    strcpy(buf, list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (C.np == MAX_POLICIES) tool_usage_error(prog, "--policies: more than %d", MAX_POLICIES);
        policy_t *p = &C.pol[C.np++];
        if (strlen(t) >= sizeof p->spec) tool_usage_error(prog, "--policies: \"%.40s...\" is too long", t);
        strcpy(p->spec, t);
        pcoll_preduce_config_default(&p->cfg);
        if (pcoll_preduce_config_parse(t, &p->cfg) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--policies: %s", pcoll_last_error());
        if (p->cfg.controller >= P)
            tool_usage_error(prog, "--policies %s: the controller's rank %d does not exist (%d ranks)", t,
                             p->cfg.controller, P);
        if (p->cfg.group_size > P)
            tool_usage_error(prog, "--policies %s: a group of %d ranks among %d", t, p->cfg.group_size, P);
        /* pcoll_preduce_create's default group size */
        if (p->cfg.group_size == 0) p->cfg.group_size = P < 3 ? P : 3;
    }
    if (C.np == 0) tool_usage_error(prog, "--policies: empty");
}

static void json_tail(tool_json_t *j, const sim_model_t *m)
{
    tool_json_num(j, "ctl_cost_us", C.ctl_cost_s * 1e6);
    tool_json_num(j, "compute_us", C.compute_s * 1e6);
    tool_json_num(j, "compute_jitter", C.jitter);
    tool_json_str(j, "platform", sim_platform_name(m->platform));
    tool_json_int(j, "ranks_per_node", m->ranks_per_node);
    tool_json_num(j, "link_rate_bps", m->link_bps);
    tool_json_end(j, stdout);
}

static void json_head(tool_json_t *j, const char *policy, double seconds)
{
    tool_json_begin(j);
    tool_json_str(j, "bench", "preduce");
    tool_json_int(j, "ranks", sim.P);
    tool_json_str(j, "policy", policy);
    tool_json_int(j, "calls", C.calls);
    tool_json_int(j, "count", C.count);
    tool_json_num(j, "seconds", seconds);
}

static double max_of(const double *v, int n)
{
    double mx = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > mx) mx = v[i];
    return mx;
}

/* a table cell: "-" for no figure */
static void cell(char *out, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(out, 32, fmt, v);
    else
        strcpy(out, "-");
}

/* x per second of s; none for no time (a single rank's calls take none) */
static double per_s(double x, double s) { return s > 0 ? x / s : NAN; }

static double print_mpi(int json, const sim_model_t *m)
{
    double s = max_of(C.mpi_secs, sim.P), steps_s = per_s((double)C.calls * sim.P, s);
    if (json) {
        tool_json_t j;
        json_head(&j, "MPI_Allreduce", s);
        tool_json_num(&j, "groups_per_s", per_s((double)C.calls, s));
        tool_json_num(&j, "mean_group_size", sim.P);
        tool_json_num(&j, "steps_per_s", steps_s);
        tool_json_num(&j, "vs_mpi", 1.0);
        json_tail(&j, m);
        return steps_s;
    }
    printf("# pcoll-sim preduce: %d ranks on %d nodes (%s, %.4g Gbit/s links), %ld calls per rank, %ld floats, "
           "compute %.4g us per call, controller cost %.4g us per event\n",
           sim.P, sim.P / m->ranks_per_node, sim_platform_name(m->platform), m->link_bps / 1e9, C.calls, C.count,
           C.compute_s * 1e6, C.ctl_cost_s * 1e6);
    printf("# steps/s: calls per second; wait: ready to group start, us (median of the ranks' medians, largest "
           "p99); ctl: the controller's busy %%, us per group, groups/s it alone could form\n");
    printf("%-22s %8s %10s %6s %10s %7s %10s %10s %7s %8s %12s\n", "policy", "groups", "groups/s", "size", "steps/s",
           "vs_mpi", "wait_med", "wait_p99", "ctl_%", "ctl_us", "ctl_limit/s");
    char c[2][32];
    cell(c[0], "%.0f", per_s((double)C.calls, s));
    cell(c[1], "%.0f", steps_s);
    printf("%-22s %8ld %10s %6d %10s %7.2f %10s %10s %7s %8s %12s\n", "MPI_Allreduce", C.calls, c[0], sim.P, c[1],
           1.0, "-", "-", "-", "-", "-");
    return steps_s;
}

/* a policy's figures, as pcoll-bench preduce computes them */
typedef struct figures {
    double seconds, groups, groups_s, size, steps_s, vs_mpi, wait_med, wait_p99, busy, us_group, limit, rank_busy;
} figures_t;

static void figures(policy_t *p, double mpi_steps_s, figures_t *f)
{
    int st = is_static(p);
    if (st) { /* no controller: the slowest rank's time, no groups counted */
        p->seconds = max_of(p->secs, sim.P);
        p->groups = NAN;
        p->steps = (double)C.calls * sim.P;
    }
    f->seconds = p->seconds;
    f->groups = p->groups;
    f->groups_s = per_s(p->groups, p->seconds);
    f->size = st || p->groups <= 0 ? NAN : p->steps / p->groups;
    f->steps_s = per_s(p->steps, p->seconds);
    f->vs_mpi = f->steps_s / mpi_steps_s;
    f->wait_med = tool_median(p->med, (size_t)sim.P);
    f->wait_p99 = max_of(p->p99, sim.P);
    f->busy = st ? NAN : per_s(100 * p->busy_s, p->seconds);
    f->us_group = st || p->groups <= 0 ? NAN : 1e6 * p->busy_s / p->groups;
    f->limit = f->us_group > 0 ? 1e6 / f->us_group : NAN;
    f->rank_busy = st ? NAN : per_s(100 * p->progress_busy_s, p->seconds);
}

static void print_policy(policy_t *p, int json, double mpi_steps_s, const sim_model_t *m)
{
    figures_t f;
    figures(p, mpi_steps_s, &f);
    if (json) {
        tool_json_t j;
        json_head(&j, p->spec, f.seconds);
        tool_json_num(&j, "groups", f.groups);
        tool_json_num(&j, "groups_per_s", f.groups_s);
        tool_json_num(&j, "mean_group_size", f.size);
        tool_json_num(&j, "steps_per_s", f.steps_s);
        tool_json_num(&j, "vs_mpi", f.vs_mpi);
        tool_json_num(&j, "wait_us_median", f.wait_med);
        tool_json_num(&j, "wait_us_p99", f.wait_p99);
        tool_json_num(&j, "ctl_busy_pct", f.busy);
        tool_json_num(&j, "ctl_us_per_group", f.us_group);
        tool_json_num(&j, "ctl_limit_groups_s", f.limit);
        tool_json_num(&j, "ctl_rank_busy_pct", f.rank_busy);
        json_tail(&j, m);
        return;
    }
    char c[8][32];
    cell(c[0], "%.0f", f.groups);
    cell(c[1], "%.0f", f.groups_s);
    cell(c[2], "%.2f", f.size);
    cell(c[3], "%.0f", f.steps_s);
    cell(c[4], "%.2f", f.vs_mpi);
    cell(c[5], "%.2f", f.busy);
    cell(c[6], "%.2f", f.us_group);
    cell(c[7], "%.0f", f.limit);
    printf("%-22s %8s %10s %6s %10s %7s %10.1f %10.1f %7s %8s %12s\n", p->spec, c[0], c[1], c[2], c[3], c[4],
           f.wait_med, f.wait_p99, c[5], c[6], c[7]);
}

/* 1: --help was shown */
static int parse(int argc, char **argv, sim_model_t *m, int *json)
{
    const char *prog = "pcoll-sim preduce";
    const char *policies = "fifo:3:const,fifo:3:dyn,ripples:random:3,ripples:smart:3,ripples:static";
    static struct option opts[] = {{"policies", required_argument, 0, 'p'},
                                   {"calls", required_argument, 0, 'n'},
                                   {"count", required_argument, 0, 'c'},
                                   {"ctl-cost", required_argument, 0, 'C'},
                                   {"compute-us", required_argument, 0, 'u'},
                                   {"compute-jitter", required_argument, 0, 'J'},
                                   {"json", no_argument, 0, 'j'},
                                   {"help", no_argument, 0, 'h'},
                                   SIM_COMMON_OPTS,
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (sim_common_flag(prog, m, c, optarg)) continue;
        switch (c) {
        case 'p': policies = optarg; break;
        case 'n': C.calls = tool_flag_long(prog, "--calls", optarg, 1, 100000000); break;
        case 'c': C.count = tool_flag_long(prog, "--count", optarg, 1, 1L << 28); break;
        case 'C': C.ctl_cost_s = tool_flag_double(prog, "--ctl-cost", optarg, 0, 1e6) * 1e-6; break;
        case 'u': C.compute_s = tool_flag_double(prog, "--compute-us", optarg, 0, 1e9) * 1e-6; break;
        case 'J': C.jitter = tool_flag_double(prog, "--compute-jitter", optarg, 0, 0.999); break;
        case 'j': *json = 1; break;
        case 'h': fputs(help, stdout); fputs(sim_common_help, stdout); return 1;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    sim_model_check(prog, m);
    add_policies(prog, policies, m->ranks);
    return 0;
}

static void alloc_all(void)
{
    int P = sim.P;
    C.mpi_secs = calloc((size_t)P, sizeof(double));
    C.live_gid = calloc(CH_GROUPS, sizeof *C.live_gid);
    C.live_refs = calloc(CH_GROUPS, sizeof *C.live_refs);
    int ok = C.mpi_secs && C.live_gid && C.live_refs;
    ok = ok && pc_nodes_init_blocks(&C.nodes, P, sim.model.ranks_per_node) == 0;
    for (int i = 0; ok && i < C.np; i++) {
        policy_t *p = &C.pol[i];
        ok = (p->secs = calloc((size_t)P, sizeof(double))) && (p->med = calloc((size_t)P, sizeof(double))) &&
             (p->p99 = calloc((size_t)P, sizeof(double)));
    }
    for (int i = 0; ok && i < P; i++) {
        rank_st_t *st = calloc(1, sizeof *st);
        sim.ranks[i].cmd = st;
        ok = st && (st->waits = malloc(sizeof(double) * (size_t)C.calls));
        if (ok) st->rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
        if (ok) ensure_cap(&sim.ranks[i], pc_static_max_group(&C.nodes));
    }
    if (!ok) die("out of memory", -1);
}

static void free_all(void)
{
    for (int i = 0; i < sim.P; i++) {
        rank_st_t *st = sim.ranks[i].cmd;
        free(st->waits);
        free(st->members);
        free(st->peers);
        free(st);
    }
    for (int i = 0; i < C.np; i++) free(C.pol[i].secs), free(C.pol[i].med), free(C.pol[i].p99);
    free(C.mpi_secs);
    free(C.live_gid);
    free(C.live_refs);
    pc_nodes_destroy(&C.nodes);
}

int sim_cmd_preduce(int argc, char **argv)
{
    sim_model_t m;
    sim_model_defaults(&m, SIM_CLUSTER);
    C.calls = 2000;
    C.count = 16;
    C.ctl_cost_s = 1e-6;
    int json = 0;
    if (parse(argc, argv, &m, &json)) return 0;
    if (sim_setup(&argc, argv, &m) != 0) return 1;
    alloc_all();
    sim_run(app);
    double mpi_steps_s = print_mpi(json, &m);
    for (int i = 0; i < C.np; i++) print_policy(&C.pol[i], json, mpi_steps_s, &m);
    if (!json) printf("(static: no controller, each rank follows the schedule)\n");
    sim_print_summary("preduce", json);
    free_all();
    sim_teardown();
    return 0;
}
