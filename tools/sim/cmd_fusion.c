/*
 * pcoll-sim fusion: pcoll-bench fusion --measure, simulated.  The plans are
 * the library's own (pcoll_fusion_plan_create); each runs as the executor
 * (src/fusion/executor.c) runs it, with src/algo's schedules, time only.
 *
 *   rank 0's app actor        every rank's app actor           progress actor
 *   ------------------        ----------------------           --------------
 *                             [--calibrate: per size 4 B, 8 B, ... a tree
 *                              allreduce, warm-up + timed run]
 *   fit (slowest rank per
 *   size), plan per strategy
 *                             per bucket and iteration parity:
 *                             pc_allreduce_build (in place, no data,
 *                             pc_allreduce_choose(PC_USE_TREE))
 *   per iteration, the strategies taking turns:
 *                             barrier, t0
 *                             sleep until t0 + ready[l], l = L-1 .. 0
 *                             (forward, then backward in backprop order);
 *                             ready(l): pending[bucket of l] -= 1; while
 *                             the next bucket may start  --post-->  start its
 *                             (plan order): next++                  schedule
 *                                                                   on_done: serial,
 *                                                                   start the next
 *                                                                   if it may
 *                             wait (sim_call) <------------------- last on_done
 *                             t = now - t0
 *   measured = the median over iterations of the slowest rank's t
 *
 *   may start: its layers are ready, and the bucket before it started
 *   (--buckets executor: pcoll_fusion_ready's rule, buckets run at once) or
 *   completed (--buckets serial, the default: the planner's model)
 *
 * The shared piece (sim_fusion_* and sim_fx_*, fusion.h) is also
 * cmd_train.c's bucketed exchange.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/allreduce.h"
#include "fusion.h"
#include "sim.h"
#include "tool.h"

static const char *help =
    "usage: pcoll-sim fusion --profile FILE [flags]\n"
    "pcoll-bench fusion --measure on the simulated platform: the planner's plans\n"
    "(pcoll_fusion_plan_create) run as the executor runs them, every bucket's\n"
    "allreduce a src/algo schedule started when its last layer is ready.\n"
    "  --profile FILE     CSV with a header: per layer in forward order, n_params\n"
    "                     (float32 elements) or bytes, and backward_us (e.g.\n"
    "                     data/mgwfbp/googlenet-k80-layers.csv)\n"
    "  --forward-us US    the forward pass (default: half the backward time)\n"
    "  --model A,B        the cost model T(M) = A + B M: A in microseconds, B in\n"
    "                     microseconds per byte (pcoll-bench's --model; the\n"
    "                     simulation's factors file is --sim-model here)\n"
    "  --model-table FILE CSV of measured allreduce times (bytes, and avg_latency_us\n"
    "                     or us): fitted, linear and piecewise\n"
    "  --calibrate        time the buckets' allreduce on the simulated platform and\n"
    "                     fit (the default without --model or --model-table)\n"
    "  --calibrate-max-bytes B  largest size calibrated (default: the profile's\n"
    "                     total, up to the next power of two)\n"
    "  --cost C           linear or piecewise: which fitted model the planner uses\n"
    "  --strategies LIST  optimal, mgwfbp, wfbp, single, fixed:BYTES, comma-separated\n"
    "                     (default wfbp,single,fixed:25M,mgwfbp,optimal)\n"
    "  --iters N          measured iterations per strategy (default 5)\n"
    "  --warmup N         untimed iterations per strategy first (default 1)\n"
    "  --measure          accepted: the simulation always runs the plans\n"
    "  --buckets B        serial: a bucket starts when its layers are ready and the\n"
    "                     one before it completed (the planner's model; default);\n"
    "                     executor: when its layers are ready and the ones before\n"
    "                     it started, so several may run at once (pcoll_fusion_ready's\n"
    "                     rule; far slower to simulate when buckets pile up: 30x at\n"
    "                     8 ranks on 1 Gbit/s links)\n"
    "  --algo A           the buckets' algorithm: auto (the library's: recursive\n"
    "                     doubling, Rabenseifner above the small size; the\n"
    "                     default)|recdbl|rabenseifner|ring|direct, a what-if (the\n"
    "                     library never forces it on buckets, so that a layer's\n"
    "                     sum does not depend on its bucket)\n"
    "  --sim-model FILE   the factors a `pcoll-sim calibrate` wrote (the other\n"
    "                     commands' --model FILE)\n"
    "  --json             one JSON object per strategy, pcoll-bench fusion --measure's\n"
    "                     keys (measured: simulated) and bucket_first_layer (each\n"
    "                     bucket's lowest layer, in start order), platform,\n"
    "                     ranks_per_node, link_rate_bps; then {\"bench\": \"sim\", ...}\n";

enum { MAXS = 16 };

static const char *prog = "pcoll-sim fusion";

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "pcoll-sim: %s: %s\n", what, detail);
    exit(1);
}

/* ---- the profile ---- */

size_t sim_fusion_read_profile(const char *cmd, const char *path, double forward_us, pcoll_fusion_profile_t *prof)
{
    char err[512];
    const char *cols[2] = {"n_params|bytes", "backward_us"};
    double *col[2];
    int which[2], L = 0;
    if (tool_read_csv(path, cols, 2, col, which, &L, err, sizeof err) != 0) tool_usage_error(cmd, "--profile: %s", err);
    if (L < 1) tool_usage_error(cmd, "--profile: %s has no layers", path);
    size_t *bytes = malloc(sizeof(size_t) * (size_t)L), total = 0;
    if (!bytes) tool_usage_error(cmd, "--profile: out of memory for %d layers", L);
    double backward = 0;
    for (int l = 0; l < L; l++) {
        if (col[0][l] < 0 || col[1][l] < 0) tool_usage_error(cmd, "--profile: layer %d has a negative value", l);
        bytes[l] = (size_t)col[0][l] * (which[0] == 0 ? 4 : 1);
        total += bytes[l];
        backward += col[1][l];
    }
    free(col[0]);
    *prof = (pcoll_fusion_profile_t){
        .nlayers = L, .bytes = bytes, .backward_us = col[1], .forward_us = forward_us >= 0 ? forward_us : backward / 2};
    return total;
}

void sim_fusion_profile_free(pcoll_fusion_profile_t *prof)
{
    free((void *)prof->bytes);
    free((void *)prof->backward_us);
    prof->bytes = NULL;
    prof->backward_us = NULL;
}

/* ---- buckets as schedules ---- */

struct sim_fx {
    sim_rank_t *r;
    const pcoll_fusion_plan_t *pl;
    int nb;
    pc_sched_t **s;   /* [2 nb]: parity p, bucket b at p * nb + b */
    int *pending;     /* [nb]: layers not ready in this step */
    int parity, next; /* the step's schedules; the next bucket to start */
    int done;         /* buckets completed in this step */
    int waiting;      /* the app waits for the last one */
    int serial;       /* a bucket waits for the one before it */
};

/* one allreduce of `bytes` in place, without data, for rank r: the
 * library's rule for `use`, or `forced` (--algo, a what-if: the library's
 * buckets never take a forced algorithm, so that a layer's sum does not
 * depend on its bucket) */
static pc_sched_t *build_sched(sim_rank_t *r, size_t bytes, pc_algo_use_t use, pcoll_allreduce_algo_t forced,
                               int channel)
{
    int n = sim.P;
    pcoll_allreduce_algo_t algo = forced != PCOLL_ALGO_AUTO ? forced
                                  : use == PC_USE_TREE
                                      ? pc_allreduce_choose(PC_USE_TREE, PCOLL_ALGO_AUTO, PCOLL_ALGO_AUTO, 0,
                                                            sim_small_bytes(), bytes, n)
                                      : sim_pcoll_rule(PCOLL_ALGO_AUTO, bytes, n);
    pc_allreduce_spec_t sp = {n, r->rank, bytes / 4, PCOLL_FLOAT32, PCOLL_SUM, 1, 0, 0, 1};
    pc_sched_t *s = NULL;
    if (pc_allreduce_build(&sp, algo, &s) != PCOLL_SUCCESS) die("building a bucket's schedule failed", "no memory?");
    sim_sched_prepare(r, s, NULL, channel);
    return s;
}

static void check_status(int status)
{
    if (status != PCOLL_SUCCESS) die("a bucket's schedule failed", pcoll_strerror(status));
}

static void fx_start_here(sim_rank_t *r, void *arg)
{
    if (sim_sched_start(r, arg) != PCOLL_SUCCESS) die("a bucket's schedule did not start", "running already?");
}

/* the next bucket may start: its layers are ready (and, serial, the bucket
 * before it is done) */
static int fx_may_start(const sim_fx_t *x)
{
    return x->next < x->nb && x->pending[x->next] == 0 && (!x->serial || x->done == x->next);
}

/* on the progress actor */
static void fx_bucket_done(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    check_status(status);
    sim_fx_t *x = arg;
    x->done++;
    if (x->serial && fx_may_start(x)) fx_start_here(x->r, x->s[x->parity * x->nb + x->next++]);
    if (x->done == x->nb && x->waiting) {
        x->waiting = 0;
        sim_call_done(x->r);
    }
}

sim_fx_t *sim_fx_create(sim_rank_t *r, const pcoll_fusion_plan_t *pl, pc_algo_use_t use,
                        pcoll_allreduce_algo_t forced, int serial, int channel_base)
{
    sim_fx_t *x = calloc(1, sizeof *x);
    if (!x) die("out of memory", "buckets");
    x->r = r;
    x->pl = pl;
    x->nb = pl->nbuckets;
    x->serial = serial;
    x->s = malloc(sizeof(pc_sched_t *) * 2 * (size_t)x->nb);
    x->pending = malloc(sizeof(int) * (size_t)x->nb);
    if (!x->s || !x->pending) die("out of memory", "buckets");
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < x->nb; b++) {
            pc_sched_t *s = build_sched(r, pl->bytes[b], use, forced, channel_base + 2 * b + p);
            pc_sched_on_done(s, fx_bucket_done, x);
            x->s[p * x->nb + b] = s;
        }
    return x;
}

/* the executor's pcoll_fusion_ready: buckets start in plan order */
static void fx_ready(sim_rank_t *r, sim_fx_t *x, int layer)
{
    x->pending[x->pl->bucket_of[layer]]--;
    while (fx_may_start(x)) sim_post(r, fx_start_here, x->s[x->parity * x->nb + x->next++]);
}

/* the executor's pcoll_fusion_wait, on the progress actor */
static void fx_wait_here(sim_rank_t *r, void *arg)
{
    sim_fx_t *x = arg;
    if (x->done == x->nb)
        sim_call_done(r);
    else
        x->waiting = 1;
}

void sim_fx_step(sim_rank_t *r, sim_fx_t *x, const double *ready_s, int parity)
{
    const pcoll_fusion_plan_t *pl = x->pl;
    for (int b = 0; b < x->nb; b++) x->pending[b] = pl->last[b] - pl->first[b] + 1;
    x->parity = parity & 1;
    x->next = x->done = x->waiting = 0;
    for (int l = pl->nlayers - 1; l >= 0; l--) {
        if (ready_s[l] > sim_now()) sg_actor_sleep_until(ready_s[l]);
        fx_ready(r, x, l);
    }
    sim_call(r, fx_wait_here, x);
}

void sim_fx_free(sim_fx_t *x)
{
    if (!x) return;
    for (int i = 0; i < 2 * x->nb; i++) pc_sched_free(x->s[i]);
    free(x->s);
    free(x->pending);
    free(x);
}

/* ---- calibration on the simulated platform ---- */

static struct {
    int nsizes;
    double *t; /* [size][rank], seconds */
    pcoll_cost_model_t model;
} Cal;

static void cal_done(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    check_status(status);
    sim_call_done(arg);
}

/* pcoll_calibrate's measure(): a warm-up run, then a timed one from a
 * common start */
static double cal_time(sim_rank_t *r, size_t bytes, pcoll_allreduce_algo_t forced, int channel)
{
    pc_sched_t *s = build_sched(r, bytes, PC_USE_TREE, forced, channel);
    pc_sched_on_done(s, cal_done, r);
    sim_barrier();
    sim_call(r, fx_start_here, s);
    sim_barrier();
    double t0 = sim_now();
    sim_call(r, fx_start_here, s);
    double t = sim_now() - t0;
    pc_sched_free(s);
    return t;
}

static void cal_fit(void)
{
    int n = Cal.nsizes;
    double *sx = malloc(sizeof(double) * (size_t)n), *sy = malloc(sizeof(double) * (size_t)n);
    if (!sx || !sy) die("out of memory", "calibration");
    for (int k = 0; k < n; k++) {
        double slow = 0;
        for (int i = 0; i < sim.P; i++) slow = fmax(slow, Cal.t[(size_t)k * (size_t)sim.P + (size_t)i]);
        sx[k] = (double)((size_t)4 << k);
        sy[k] = slow * 1e6;
    }
    if (pcoll_cost_model_fit(sx, sy, n, &Cal.model) != PCOLL_SUCCESS) die("--calibrate", pcoll_last_error());
    free(sx);
    free(sy);
}

void sim_fusion_calibrate(sim_rank_t *r, size_t max_bytes, pcoll_allreduce_algo_t forced, pcoll_cost_model_t *model)
{
    if (r->rank == 0) {
        Cal.nsizes = 0;
        for (size_t b = 4; b <= max_bytes && Cal.nsizes < SIM_FX_CHANNEL_BASE; b *= 2) Cal.nsizes++;
        if (Cal.nsizes < 2) die("--calibrate", "fitting needs two sizes or more (8 bytes or more)");
        Cal.t = calloc((size_t)Cal.nsizes * (size_t)sim.P, sizeof(double));
        if (!Cal.t) die("out of memory", "calibration");
    }
    sim_barrier();
    for (int k = 0; k < Cal.nsizes; k++)
        Cal.t[(size_t)k * (size_t)sim.P + (size_t)r->rank] = cal_time(r, (size_t)4 << k, forced, k);
    sim_barrier();
    if (r->rank == 0) {
        cal_fit();
        free(Cal.t);
        Cal.t = NULL;
    }
    sim_barrier();
    *model = Cal.model;
}

/* ---- the command ---- */

static struct {
    const char *profile, *model_text, *table, *cost, *list;
    double forward_us;
    size_t cal_max, total;
    long iters, warmup;
    int json, calibrate, ns, serial;
    pcoll_allreduce_algo_t algo; /* --algo: the buckets' (and calibration's) */
    char names[MAXS][32];
    pcoll_fusion_spec_t spec[MAXS];
    pcoll_fusion_profile_t prof;
    pcoll_cost_model_t model;
    pcoll_fusion_plan_t *pl[MAXS];
    double *t; /* [strategy][iteration][rank], seconds */
} F;

static void parse_flags(int argc, char **argv, sim_model_t *m)
{
    static struct option opts[] = {{"profile", required_argument, 0, 'p'},
                                   {"forward-us", required_argument, 0, 'f'},
                                   {"model", required_argument, 0, 'm'}, /* before the common --model FILE */
                                   {"model-table", required_argument, 0, 't'},
                                   {"calibrate", no_argument, 0, 'c'},
                                   {"calibrate-max-bytes", required_argument, 0, 'C'},
                                   {"cost", required_argument, 0, 'k'},
                                   {"strategies", required_argument, 0, 's'},
                                   {"measure", no_argument, 0, 'M'},
                                   {"iters", required_argument, 0, 'i'},
                                   {"warmup", required_argument, 0, 'w'},
                                   {"json", no_argument, 0, 'j'},
                                   {"sim-model", required_argument, 0, 'F'},
                                   {"buckets", required_argument, 0, 'B'},
                                   {"algo", required_argument, 0, 'a'},
                                   {"help", no_argument, 0, 'h'},
                                   SIM_COMMON_OPTS,
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (sim_common_flag(prog, m, c, optarg)) continue;
        switch (c) {
        case 'p': F.profile = optarg; break;
        case 'f': F.forward_us = tool_flag_double(prog, "--forward-us", optarg, 0, 1e12); break;
        case 'm': F.model_text = optarg; break;
        case 't': F.table = optarg; break;
        case 'c': F.calibrate = 1; break;
        case 'C': F.cal_max = tool_flag_bytes(prog, "--calibrate-max-bytes", optarg); break;
        case 'k':
            if (strcmp(optarg, "linear") && strcmp(optarg, "piecewise"))
                tool_usage_error(prog, "--cost: \"%s\" is not linear or piecewise", optarg);
            F.cost = optarg;
            break;
        case 's': F.list = optarg; break;
        case 'M': break;
        case 'i': F.iters = tool_flag_long(prog, "--iters", optarg, 1, 100000); break;
        case 'w': F.warmup = tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'j': F.json = 1; break;
        case 'a': F.algo = tool_flag_algo(prog, "--algo", optarg); break;
        case 'F': sim_common_flag(prog, m, 1005, optarg); break;
        case 'B':
            if (strcmp(optarg, "executor") && strcmp(optarg, "serial"))
                tool_usage_error(prog, "--buckets: \"%s\" is not executor or serial", optarg);
            F.serial = !strcmp(optarg, "serial");
            break;
        case 'h': fputs(help, stdout); fputs(sim_common_help, stdout); exit(0);
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
}

static void check_flags(void)
{
    F.ns = tool_split_list(prog, "--strategies", F.list, F.names, MAXS);
    for (int k = 0; k < F.ns; k++)
        if (pcoll_fusion_spec_parse(F.names[k], &F.spec[k]) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--strategies: %s", pcoll_last_error());
    if (!F.profile) tool_usage_error(prog, "--profile FILE is required");
    if ((F.model_text != NULL) + (F.table != NULL) + F.calibrate > 1)
        tool_usage_error(prog, "give one of --model, --model-table and --calibrate");
    if (!F.model_text && !F.table) F.calibrate = 1;
}

/* --model A,B or --model-table FILE (before the simulation) */
static void given_model(void)
{
    if (F.model_text) {
        if (pcoll_cost_model_parse(F.model_text, &F.model) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--model: %s (the simulation's factors file is --sim-model FILE)",
                             pcoll_last_error());
        return;
    }
    char err[512];
    const char *tcols[2] = {"bytes", "avg_latency_us|us"};
    double *t[2];
    int nt;
    if (tool_read_csv(F.table, tcols, 2, t, NULL, &nt, err, sizeof err) != 0)
        tool_usage_error(prog, "--model-table: %s", err);
    if (pcoll_cost_model_fit(t[0], t[1], nt, &F.model) != PCOLL_SUCCESS)
        tool_usage_error(prog, "--model-table: %s", pcoll_last_error());
    free(t[0]);
    free(t[1]);
}

/* --cost: which of the fitted models the planner uses */
static void choose_cost(void)
{
    if (!F.cost) return;
    F.model.piecewise = !strcmp(F.cost, "piecewise") && F.model.nsegments > 0;
    if (!strcmp(F.cost, "piecewise") && !F.model.piecewise)
        tool_usage_error(prog, "--cost piecewise: the model was given as A,B or fitted to too few sizes");
}

static void make_plans(void)
{
    choose_cost();
    for (int k = 0; k < F.ns; k++)
        if (pcoll_fusion_plan_create(&F.prof, &F.model, &F.spec[k], &F.pl[k]) != PCOLL_SUCCESS)
            die(F.names[k], pcoll_last_error());
}

static double *t_at(int k, long it, int rank)
{
    return &F.t[((size_t)k * (size_t)F.iters + (size_t)it) * (size_t)sim.P + (size_t)rank];
}

/* one iteration of strategy k at rank r, from a common start */
static double run_iteration(sim_rank_t *r, sim_fx_t *x, double *ready_s, long it)
{
    sim_barrier();
    double t0 = sim_now(), t = F.prof.forward_us;
    for (int l = F.prof.nlayers - 1; l >= 0; l--) ready_s[l] = t0 + 1e-6 * (t += F.prof.backward_us[l]);
    sim_fx_step(r, x, ready_s, (int)((it + F.warmup) & 1));
    return sim_now() - t0;
}

static void fusion_app(sim_rank_t *r)
{
    if (F.calibrate) {
        pcoll_cost_model_t model;
        sim_fusion_calibrate(r, F.cal_max, F.algo, &model);
        if (r->rank == 0) F.model = model;
    }
    if (r->rank == 0) make_plans();
    sim_barrier();
    sim_fx_t *x[MAXS];
    for (int k = 0; k < F.ns; k++)
        x[k] = sim_fx_create(r, F.pl[k], PC_USE_TREE, F.algo, F.serial, SIM_FX_CHANNEL_BASE + 2 * k * F.prof.nlayers);
    double *ready_s = malloc(sizeof(double) * (size_t)F.prof.nlayers);
    if (!ready_s) die("out of memory", "layers");
    for (long it = -F.warmup; it < F.iters; it++)
        for (int k = 0; k < F.ns; k++) {
            double t = run_iteration(r, x[k], ready_s, it);
            if (it >= 0) *t_at(k, it, r->rank) = t;
        }
    free(ready_s);
    for (int k = 0; k < F.ns; k++) sim_fx_free(x[k]);
}

/* ---- output ---- */

/* the median over iterations of the slowest rank's iteration, us */
static double measured_us(int k)
{
    double *slow = malloc(sizeof(double) * (size_t)F.iters);
    if (!slow) die("out of memory", "results");
    for (long it = 0; it < F.iters; it++) {
        slow[it] = 0;
        for (int i = 0; i < sim.P; i++) slow[it] = fmax(slow[it], *t_at(k, it, i) * 1e6);
    }
    double m = tool_median(slow, (size_t)F.iters);
    free(slow);
    return m;
}

typedef struct refs {
    double wfbp, single;     /* predicted */
    double m_wfbp, m_single; /* simulated, if they ran (else NAN) */
} refs_t;

static double predicted_us(pcoll_fusion_strategy_t strategy)
{
    pcoll_fusion_spec_t spec = {.strategy = strategy};
    pcoll_fusion_plan_t *pl;
    if (pcoll_fusion_plan_create(&F.prof, &F.model, &spec, &pl) != PCOLL_SUCCESS) die("plan", pcoll_last_error());
    double t = pl->iter_us;
    pcoll_fusion_plan_free(&pl);
    return t;
}

static void json_row(const sim_model_t *m, const char *nm, const pcoll_fusion_plan_t *pl, double meas,
                     const refs_t *r)
{
    tool_json_t j;
    tool_json_begin(&j);
    tool_json_fusion_plan(&j, nm, m->ranks, pl, r->wfbp, r->single, &F.model);
    tool_json_fusion_measured(&j, pl, meas, r->m_wfbp, r->m_single);
    tool_json_str(&j, "bucket_start", F.serial ? "serial" : "executor");
    tool_json_str(&j, "bucket_algo", F.algo == PCOLL_ALGO_AUTO ? "auto" : pcoll_allreduce_algo_name(F.algo));
    tool_json_str(&j, "platform", sim_platform_name(m->platform));
    tool_json_int(&j, "ranks_per_node", m->ranks_per_node);
    tool_json_num(&j, "link_rate_bps", m->link_bps);
    tool_json_end(&j, stdout);
}

static void print_header(const sim_model_t *m)
{
    const pcoll_cost_model_t *c = &F.model;
    double backward = 0;
    for (int l = 0; l < F.prof.nlayers; l++) backward += F.prof.backward_us[l];
    printf("# pcoll-sim fusion: %s, %d layers, %.1f MB of gradients, forward %.1f ms, backward %.1f ms; %d ranks on "
           "%d nodes (%s, %.4g Gbit/s links)\n",
           F.profile, F.prof.nlayers, (double)F.total / 1e6, F.prof.forward_us / 1e3, backward / 1e3, m->ranks,
           m->ranks / m->ranks_per_node, sim_platform_name(m->platform), m->link_bps / 1e9);
    printf("# model (%s): T(M) = %.2f us + %.6f us/B x M",
           F.model_text ? "given" : F.table ? F.table : "calibrated on the simulated platform", c->a_us, c->b_us);
    if (c->nsamples)
        printf(" (%d sizes; rms %.1f us, worst %.1f%%); piecewise %d segments (rms %.1f us, worst %.1f%%)", c->nsamples,
               c->linear_rms_us, 100 * c->linear_max_rel, c->nsegments, c->piecewise_rms_us,
               100 * c->piecewise_max_rel);
    printf("; the planner uses the %s model; measured = simulated, buckets started %s\n",
           c->piecewise ? "piecewise" : "linear", F.serial ? "one at a time" : "as the executor starts them");
    if (F.algo != PCOLL_ALGO_AUTO) printf("# every bucket's allreduce is %s (--algo)\n", pcoll_allreduce_algo_name(F.algo));
    printf("%-14s %8s %12s %11s %11s %10s %10s %12s %10s %10s\n", "strategy", "buckets", "predicted_ms", "exposed_ms",
           "vs_wfbp", "vs_single", "comm_ms", "measured_ms", "meas/pred", "m_vs_wfbp");
}

static void text_row(const char *nm, const pcoll_fusion_plan_t *pl, double meas, const refs_t *r)
{
    printf("%-14s %8d %12.2f %11.2f %10.2fx %9.2fx %10.2f %12.2f %10.3f", nm, pl->nbuckets, pl->iter_us / 1e3,
           pl->exposed_us / 1e3, r->wfbp / pl->iter_us, r->single / pl->iter_us, pl->comm_us / 1e3, meas / 1e3,
           meas / pl->iter_us);
    if (!isnan(r->m_wfbp))
        printf(" %9.2fx\n", r->m_wfbp / meas);
    else
        printf(" %10s\n", "-");
}

static void report(const sim_model_t *m)
{
    refs_t r = {predicted_us(PCOLL_FUSION_WFBP), predicted_us(PCOLL_FUSION_SINGLE), NAN, NAN};
    double meas[MAXS];
    for (int k = 0; k < F.ns; k++) {
        meas[k] = measured_us(k);
        if (F.spec[k].strategy == PCOLL_FUSION_WFBP) r.m_wfbp = meas[k];
        if (F.spec[k].strategy == PCOLL_FUSION_SINGLE) r.m_single = meas[k];
    }
    if (!F.json) print_header(m);
    for (int k = 0; k < F.ns; k++) {
        char nm[64];
        pcoll_fusion_spec_name(&F.spec[k], nm, sizeof nm);
        if (F.json)
            json_row(m, nm, F.pl[k], meas[k], &r);
        else
            text_row(nm, F.pl[k], meas[k], &r);
    }
}

int sim_cmd_fusion(int argc, char **argv)
{
    sim_model_t m;
    sim_model_defaults(&m, SIM_CLUSTER);
    F.list = "wfbp,single,fixed:25M,mgwfbp,optimal";
    F.forward_us = -1;
    F.iters = 5;
    F.warmup = 1;
    F.serial = 1;
    parse_flags(argc, argv, &m);
    check_flags();
    sim_model_check(prog, &m);
    F.total = sim_fusion_read_profile(prog, F.profile, F.forward_us, &F.prof);
    if (!F.calibrate) given_model();
    if (!F.calibrate) choose_cost();
    if (!F.cal_max) {
        F.cal_max = 4;
        while (F.cal_max < F.total) F.cal_max *= 2;
    }
    if ((long)SIM_FX_CHANNEL_BASE + 2L * F.ns * F.prof.nlayers >= 1L << 20)
        tool_usage_error(prog, "--profile: %d layers x %d strategies are too many channels", F.prof.nlayers, F.ns);
    F.t = calloc((size_t)F.ns * (size_t)F.iters * (size_t)m.ranks, sizeof(double));
    if (!F.t) tool_usage_error(prog, "out of memory for %d ranks", m.ranks);
    if (sim_setup(&argc, argv, &m) != 0) return 1;
    sim_run(fusion_app);
    report(&m);
    sim_print_summary("fusion", F.json);
    for (int k = 0; k < F.ns; k++) pcoll_fusion_plan_free(&F.pl[k]);
    sim_fusion_profile_free(&F.prof);
    free(F.t);
    sim_teardown();
    return 0;
}
