/*
 * pcoll-sim train: a data-parallel training run as compute time per step
 * plus the gradient exchange, for time-per-epoch curves against the rank
 * count (the epoch's steps shrink as P grows when --samples is given).
 *
 *   one rank count (every rank's app actor, steps back to back: only the
 *   exchange holds the ranks together)
 *     compute c(r, s) = U (1 + F u(r, s)) + imbalance delay(r, s)
 *                       (u uniform in [-1, 1), seeded by (seed, step, rank);
 *                        the delay: pcoll-train's --imbalance)
 *     exchange  sync    one allreduce of the whole gradient after the compute
 *                       (a src/algo schedule, pcoll_allreduce's algorithm)
 *               fusion  cmd_fusion.c's bucketed exchange of the mgwfbp plan:
 *                       layer l ready at c x (its share of forward + backward)
 *               (partial kinds: see exchange_kind_t)
 *     step_us = the slowest rank's time / simulated steps;
 *     epoch_s = steps_per_epoch x step_us
 *
 *   --ranks-list 1,2,4,...  (SimGrid starts once per process)
 *     parent --fork, exec /proc/self/exe train ... --ranks P --json--> child
 *            <--------------- JSON lines on a pipe -------------------
 *     then a table (or the lines with --json), and --svg: epoch time
 *     against P on a log2 axis
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"
#include "tool.h"

#include "err.h"
#include "fusion.h"
#include "imbalance.h"
#include "prng.h"

static const char *help =
    "usage: pcoll-sim train [flags]\n"
    "A training run on the simulated platform: compute time per step and the\n"
    "gradient exchange; time per epoch, one line per rank count.\n"
    "  --ranks-list LIST  rank counts to run, e.g. 1,2,4,8,16 (each a run of its own\n"
    "                     process); default: --ranks\n"
    "  --svg FILE         with --ranks-list: epoch time against P (log2 axis) as SVG\n"
    "  --steps-per-epoch N  steps per epoch whatever P (default 100), or\n"
    "  --samples N        samples per epoch: N / (batch x P) steps, rounded up\n"
    "  --batch B          samples per rank and step (default 32)\n"
    "  --epochs E         epochs (default 1): total_s = E x epoch_s\n"
    "  --compute-us U     compute per step (default: the profile's forward +\n"
    "                     backward; required with --params)\n"
    "  --compute-jitter F each rank's step U (1 + F u), u uniform in [-1, 1), seeded\n"
    "                     by (seed, step, rank) (default 0)\n"
    "  --imbalance SPEC   pcoll-train's: none, random:K:MS, skew:MIN:MAX,\n"
    "                     slow:R[,R...]:FACTOR[:MS], dist:MEAN:SD\n"
    "  --seed N           jitter and imbalance (default 1)\n"
    "  --params N         the model's size in float32 elements (K, M suffixes), or\n"
    "  --profile FILE     its layers (pcoll-sim fusion's CSV); --forward-us US as there\n"
    "  --exchange X       sync (one allreduce of the gradient per step, default) or\n"
    "                     fusion (mgwfbp buckets overlapped with backprop; --profile)\n"
    "  --buckets B        fusion: serial (default) or executor, as pcoll-sim fusion's\n"
    "  --cost-model A,B   fusion's planner model T(M) = A + B M (us, us/B); default:\n"
    "                     calibrated on the simulated platform as pcoll-sim fusion's\n"
    "  --sim-steps N      steps simulated (default 20; 0: every step of every\n"
    "                     epoch); the epoch is extrapolated from their mean\n"
    "  --sim-model FILE   the same as --model FILE\n"
    "  --json             one line per run: bench, ranks, exchange, steps_per_epoch,\n"
    "                     epoch_s, step_us, compute_us, exchange_us, ...; then\n"
    "                     {\"bench\": \"sim\", ...}\n";

static const char *prog = "pcoll-sim train";

/* The exchanges.  Partial kinds (solo, majority, group) are to come from a
 * function of cmd_skew.c: a kind here, its name in exchange_names, its state
 * in exchange_t, and a case in exchange_setup, exchange_step and
 * exchange_free. */
typedef enum exchange_kind {
    EX_SYNC,   /* one allreduce of the whole gradient per step */
    EX_FUSION, /* cmd_fusion.c's buckets, the mgwfbp plan */
    EX_KINDS
} exchange_kind_t;
static const char *const exchange_names[EX_KINDS] = {"sync", "fusion"};

/* a rank's exchange */
typedef struct exchange {
    sim_fx_t *fx; /* sync (one bucket), fusion */
} exchange_t;

enum { MAX_RUNS = 32, TAG_JITTER = 0x4a495454 };

static struct {
    exchange_kind_t ex;
    long steps_per_epoch, samples, batch, epochs, sim_steps;
    double compute_us, jitter, forward_us;
    const char *imb_text, *profile, *cost_text, *svg, *ranks_list;
    size_t params; /* float32 elements */
    uint64_t seed;
    int json, serial;
    imbalance_t imb;
    pcoll_fusion_profile_t prof; /* the exchange's layers (sync: one) */
    double *frac;                /* [layer]: its ready time / the step's compute */
    size_t total;                /* gradient bytes */
    int calibrate;
    size_t cal_max;
    pcoll_cost_model_t model;
    pcoll_fusion_plan_t *pl;
    long spe, nsteps;            /* steps per epoch at this P; simulated */
    double *end_s, *comp_s, *exch_s; /* per rank */
} T;

/* ---- flags ---- */

/* argv words of the flags a child must not inherit */
static void drop_words(char *drop, int from, int to)
{
    for (int i = from; i < to; i++) drop[i] = 1;
}

static exchange_kind_t exchange_kind(const char *v)
{
    for (int k = 0; k < EX_KINDS; k++)
        if (!strcmp(v, exchange_names[k])) return (exchange_kind_t)k;
    tool_usage_error(prog, "--exchange: \"%s\" is not sync or fusion", v);
}

static int train_flag(int c, const char *v)
{
    switch (c) {
    case 'L': T.ranks_list = v; return 1;
    case 'S': T.svg = v; return 1;
    case 'e': T.steps_per_epoch = tool_flag_long(prog, "--steps-per-epoch", v, 1, 1L << 40); return 1;
    case 'n': T.samples = tool_flag_long(prog, "--samples", v, 1, 1L << 50); return 1;
    case 'b': T.batch = tool_flag_long(prog, "--batch", v, 1, 1L << 30); return 1;
    case 'E': T.epochs = tool_flag_long(prog, "--epochs", v, 1, 1000000); return 1;
    case 'u': T.compute_us = tool_flag_double(prog, "--compute-us", v, 0, 1e12); return 1;
    case 'J': T.jitter = tool_flag_double(prog, "--compute-jitter", v, 0, 0.999); return 1;
    case 'I': T.imb_text = v; return 1;
    case 's': T.seed = (uint64_t)tool_flag_long(prog, "--seed", v, 0, 1L << 62); return 1;
    case 'P': T.params = tool_flag_bytes(prog, "--params", v); return 1;
    case 'p': T.profile = v; return 1;
    case 'f': T.forward_us = tool_flag_double(prog, "--forward-us", v, 0, 1e12); return 1;
    case 'x': T.ex = exchange_kind(v); return 1;
    case 'c': T.cost_text = v; return 1;
    case 'N': T.sim_steps = tool_flag_long(prog, "--sim-steps", v, 0, 1L << 40); return 1;
    case 'j': T.json = 1; return 1;
    case 'B':
        if (strcmp(v, "executor") && strcmp(v, "serial"))
            tool_usage_error(prog, "--buckets: \"%s\" is not executor or serial", v);
        T.serial = !strcmp(v, "serial");
        return 1;
    default: return 0;
    }
}

/* the flags into T and m; drop[i] = 1 for the words a child must not get */
static void parse_flags(int argc, char **argv, sim_model_t *m, char *drop)
{
    static struct option opts[] = {
        {"ranks-list", required_argument, 0, 'L'}, {"svg", required_argument, 0, 'S'},
        {"steps-per-epoch", required_argument, 0, 'e'}, {"samples", required_argument, 0, 'n'},
        {"batch", required_argument, 0, 'b'}, {"epochs", required_argument, 0, 'E'},
        {"compute-us", required_argument, 0, 'u'}, {"compute-jitter", required_argument, 0, 'J'},
        {"imbalance", required_argument, 0, 'I'}, {"seed", required_argument, 0, 's'},
        {"params", required_argument, 0, 'P'}, {"profile", required_argument, 0, 'p'},
        {"forward-us", required_argument, 0, 'f'}, {"exchange", required_argument, 0, 'x'},
        {"cost-model", required_argument, 0, 'c'}, {"sim-steps", required_argument, 0, 'N'},
        {"json", no_argument, 0, 'j'}, {"sim-model", required_argument, 0, 'F'},
        {"buckets", required_argument, 0, 'B'}, {"help", no_argument, 0, 'h'}, SIM_COMMON_OPTS, {0, 0, 0, 0}};
    int c, at = optind;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'L' || c == 'S' || c == 'j' || c == 1000) drop_words(drop, at, optind);
        at = optind;
        if (sim_common_flag(prog, m, c, optarg) || train_flag(c, optarg)) continue;
        switch (c) {
        case 'F': sim_common_flag(prog, m, 1005, optarg); break;
        case 'h': fputs(help, stdout); fputs(sim_common_help, stdout); exit(0);
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
}

static void check_flags(void)
{
    if (!T.profile && !T.params) tool_usage_error(prog, "give the model: --params N or --profile FILE");
    if (T.profile && T.params) tool_usage_error(prog, "give one of --params and --profile");
    if (T.ex == EX_FUSION && !T.profile) tool_usage_error(prog, "--exchange fusion needs --profile FILE (the layers)");
    if (!T.profile && T.compute_us < 0) tool_usage_error(prog, "--compute-us is required with --params");
    if (T.steps_per_epoch && T.samples) tool_usage_error(prog, "give one of --steps-per-epoch and --samples");
    if (T.svg && !T.ranks_list) tool_usage_error(prog, "--svg needs --ranks-list");
    if (T.cost_text && T.ex != EX_FUSION) tool_usage_error(prog, "--cost-model is for --exchange fusion");
    if (imbalance_parse(T.imb_text, T.seed, &T.imb) != 0) tool_usage_error(prog, "%s", tr_error());
}

/* ---- the model's layers and the plan ---- */

/* frac[l]: when layer l is ready, as a share of the step's compute */
static void ready_shares(void)
{
    const pcoll_fusion_profile_t *p = &T.prof;
    double all = p->forward_us, t = p->forward_us;
    for (int l = 0; l < p->nlayers; l++) all += p->backward_us[l];
    T.frac = malloc(sizeof(double) * (size_t)p->nlayers);
    if (!T.frac) tool_usage_error(prog, "out of memory for %d layers", p->nlayers);
    for (int l = p->nlayers - 1; l >= 0; l--) T.frac[l] = all > 0 ? (t += p->backward_us[l]) / all : 1;
}

/* sync: the whole gradient as one layer, ready when the compute ends */
static void one_layer(void)
{
    size_t *bytes = malloc(sizeof(size_t));
    double *backward = malloc(sizeof(double));
    if (!bytes || !backward) tool_usage_error(prog, "out of memory");
    bytes[0] = T.total;
    backward[0] = T.compute_us;
    T.prof = (pcoll_fusion_profile_t){.nlayers = 1, .bytes = bytes, .backward_us = backward, .forward_us = 0};
}

/* the profile's times scaled to --compute-us (the plan sees the real step) */
static void scale_profile(void)
{
    double all = T.prof.forward_us, *b = (double *)T.prof.backward_us;
    for (int l = 0; l < T.prof.nlayers; l++) all += b[l];
    if (T.compute_us < 0) T.compute_us = all;
    double k = all > 0 ? T.compute_us / all : 0;
    for (int l = 0; l < T.prof.nlayers; l++) b[l] *= k;
    T.prof.forward_us *= k;
}

static void load_model(void)
{
    if (T.profile) {
        T.total = sim_fusion_read_profile(prog, T.profile, T.forward_us, &T.prof);
        scale_profile();
    } else {
        T.total = T.params * 4;
    }
    if (T.ex == EX_SYNC) {
        if (T.profile) sim_fusion_profile_free(&T.prof);
        one_layer();
    }
    ready_shares();
    if (T.cost_text && pcoll_cost_model_parse(T.cost_text, &T.model) != PCOLL_SUCCESS)
        tool_usage_error(prog, "--cost-model: %s", pcoll_last_error());
    T.calibrate = T.ex == EX_FUSION && !T.cost_text;
    for (T.cal_max = 8; T.cal_max < T.total; T.cal_max *= 2) continue;
}

static void make_plan(void)
{
    pcoll_fusion_spec_t spec = {.strategy = T.ex == EX_FUSION ? PCOLL_FUSION_MGWFBP : PCOLL_FUSION_SINGLE};
    if (T.ex == EX_SYNC) pcoll_cost_model_linear(0, 0, &T.model);
    if (pcoll_fusion_plan_create(&T.prof, &T.model, &spec, &T.pl) != PCOLL_SUCCESS) {
        fprintf(stderr, "%s: the plan: %s\n", prog, pcoll_last_error());
        exit(1);
    }
}

/* ---- one run ---- */

/* rank's compute in step s, seconds */
static double step_compute_s(int rank, long s)
{
    double c = T.compute_us * 1e-6;
    if (T.jitter > 0) {
        rng_t g;
        rng_seed(&g, rng_key(T.seed, TAG_JITTER, (uint64_t)s, (uint64_t)rank));
        c *= 1 + T.jitter * (2 * rng_uniform(&g) - 1);
    }
    return c + 1e-3 * imbalance_delay_ms(&T.imb, rank, sim.P, (uint64_t)s, c * 1e3);
}

/* the exchange at rank r (collective over the app actors) */
static void exchange_setup(sim_rank_t *r, exchange_t *e)
{
    switch (T.ex) {
    case EX_FUSION:
        if (T.calibrate) {
            pcoll_cost_model_t model;
            sim_fusion_calibrate(r, T.cal_max, PCOLL_ALGO_AUTO, &model);
            if (r->rank == 0) T.model = model;
        }
        /* fall through */
    case EX_SYNC:
        if (r->rank == 0) make_plan();
        sim_barrier();
        e->fx = sim_fx_create(r, T.pl, T.ex == EX_SYNC ? PC_USE_CALL : PC_USE_TREE, PCOLL_ALGO_AUTO, T.serial, SIM_FX_CHANNEL_BASE);
        break;
    default: break; /* partial kinds: cmd_skew.c's setup */
    }
}

/* step s's exchange at rank r: the layers ready at ready_s (sync: one) */
static void exchange_step(sim_rank_t *r, exchange_t *e, const double *ready_s, long s)
{
    switch (T.ex) {
    case EX_SYNC:
    case EX_FUSION: sim_fx_step(r, e->fx, ready_s, (int)(s & 1)); break;
    default: break; /* partial kinds: cmd_skew.c's step */
    }
}

static void exchange_free(exchange_t *e)
{
    switch (T.ex) {
    case EX_SYNC:
    case EX_FUSION: sim_fx_free(e->fx); break;
    default: break; /* partial kinds */
    }
}

static void train_app(sim_rank_t *r)
{
    exchange_t e = {0};
    exchange_setup(r, &e);
    double *ready = malloc(sizeof(double) * (size_t)T.prof.nlayers), comp = 0, exch = 0;
    if (!ready) exit(1);
    sim_barrier();
    double t0 = sim_now();
    for (long s = 0; s < T.nsteps; s++) {
        double ts = sim_now(), c = step_compute_s(r->rank, s);
        for (int l = 0; l < T.prof.nlayers; l++) ready[l] = ts + c * T.frac[l];
        exchange_step(r, &e, ready, s);
        comp += c;
        exch += sim_now() - (ts + c);
    }
    T.end_s[r->rank] = sim_now() - t0;
    T.comp_s[r->rank] = comp;
    T.exch_s[r->rank] = exch;
    free(ready);
    exchange_free(&e);
}

static void print_run(const sim_model_t *m)
{
    double slow = 0, comp = 0, exch = 0;
    for (int i = 0; i < m->ranks; i++) {
        slow = fmax(slow, T.end_s[i]);
        comp += T.comp_s[i] / (double)m->ranks;
        exch += T.exch_s[i] / (double)m->ranks;
    }
    double n = (double)T.nsteps, step_us = slow / n * 1e6, epoch_s = step_us * 1e-6 * (double)T.spe;
    if (!T.json) {
        printf("# pcoll-sim train: %d ranks on %d nodes (%s, %.4g Gbit/s links), exchange %s, %.1f MB of gradients; "
               "%ld of %ld steps simulated\n",
               m->ranks, m->ranks / m->ranks_per_node, sim_platform_name(m->platform), m->link_bps / 1e9,
               exchange_names[T.ex], (double)T.total / 1e6, T.nsteps, T.spe * T.epochs);
        printf("%6s %12s %12s %12s %12s %12s\n", "ranks", "steps/epoch", "epoch_s", "step_us", "compute_us",
               "exchange_us");
        printf("%6d %12ld %12.6g %12.1f %12.1f %12.1f\n", m->ranks, T.spe, epoch_s, step_us, comp / n * 1e6,
               exch / n * 1e6);
        return;
    }
    tool_json_t j;
    tool_json_begin(&j);
    tool_json_str(&j, "bench", "train");
    tool_json_int(&j, "ranks", m->ranks);
    tool_json_str(&j, "exchange", exchange_names[T.ex]);
    tool_json_int(&j, "steps_per_epoch", T.spe);
    tool_json_num(&j, "epoch_s", epoch_s);
    tool_json_num(&j, "step_us", step_us);
    tool_json_num(&j, "compute_us", comp / n * 1e6);
    tool_json_num(&j, "exchange_us", exch / n * 1e6);
    tool_json_int(&j, "epochs", T.epochs);
    tool_json_num(&j, "total_s", epoch_s * (double)T.epochs);
    tool_json_int(&j, "simulated_steps", T.nsteps);
    tool_json_int(&j, "gradient_bytes", (long long)T.total);
    tool_json_int(&j, "buckets", T.pl->nbuckets);
    tool_json_num(&j, "compute_jitter", T.jitter);
    tool_json_str(&j, "imbalance", T.imb.spec);
    tool_json_str(&j, "platform", sim_platform_name(m->platform));
    tool_json_int(&j, "ranks_per_node", m->ranks_per_node);
    tool_json_num(&j, "link_rate_bps", m->link_bps);
    tool_json_end(&j, stdout);
}

static int run_one(int argc, char **argv, sim_model_t *m)
{
    sim_model_check(prog, m);
    if (imbalance_check(&T.imb, m->ranks) != 0) tool_usage_error(prog, "%s", tr_error());
    long per = T.batch * (long)m->ranks;
    T.spe = T.samples ? (T.samples + per - 1) / per : T.steps_per_epoch ? T.steps_per_epoch : 100;
    long total = T.spe * T.epochs;
    T.nsteps = T.sim_steps > 0 && T.sim_steps < total ? T.sim_steps : total;
    T.end_s = calloc((size_t)m->ranks, sizeof(double));
    T.comp_s = calloc((size_t)m->ranks, sizeof(double));
    T.exch_s = calloc((size_t)m->ranks, sizeof(double));
    if (!T.end_s || !T.comp_s || !T.exch_s) tool_usage_error(prog, "out of memory for %d ranks", m->ranks);
    if (sim_setup(&argc, argv, m) != 0) return 1;
    sim_run(train_app);
    print_run(m);
    sim_print_summary("train", T.json);
    pcoll_fusion_plan_free(&T.pl);
    free(T.end_s);
    free(T.comp_s);
    free(T.exch_s);
    sim_teardown();
    return 0;
}

/* ---- --ranks-list: a child process per rank count ---- */

typedef struct run {
    int ranks;
    double spe, epoch_s, step_us, compute_us, exchange_us;
} run_t;

/* the number after "key": in a JSON line (NAN if absent) */
static double json_value(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return NAN;
    return strtod(p + strlen(pat), NULL);
}

static void read_child(FILE *in, run_t *run, double *wall, double *rss)
{
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, in) > 0) {
        if (T.json) fputs(line, stdout);
        if (strstr(line, "\"bench\":\"train\"")) {
            *run = (run_t){(int)json_value(line, "ranks"),    json_value(line, "steps_per_epoch"),
                           json_value(line, "epoch_s"),      json_value(line, "step_us"),
                           json_value(line, "compute_us"),   json_value(line, "exchange_us")};
        } else if (strstr(line, "\"bench\": \"sim\"")) {
            *wall += json_value(line, "wall_s");
            *rss = fmax(*rss, json_value(line, "peak_rss_mib"));
        }
    }
    free(line);
    fflush(stdout);
}

/* runs `pcoll-sim train <args> --ranks P --json`; 0, or -1 with a message */
static int run_child(char **args, int nargs, int P, run_t *run, double *wall, double *rss)
{
    char ranks[16];
    snprintf(ranks, sizeof ranks, "%d", P);
    args[nargs - 3] = ranks;
    int fd[2];
    fflush(stdout);
    if (pipe(fd) != 0) return fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno)), -1;
    pid_t pid = fork();
    if (pid < 0) return fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno)), -1;
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv("/proc/self/exe", args);
        fprintf(stderr, "%s: cannot run /proc/self/exe: %s\n", prog, strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    *run = (run_t){0, NAN, NAN, NAN, NAN, NAN};
    if (in) read_child(in, run, wall, rss);
    if (in) fclose(in);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || run->ranks != P)
        return fprintf(stderr, "%s: the run with --ranks %d failed\n", prog, P), -1;
    return 0;
}

/* ---- the SVG plot: epoch time against P, log2 x axis ---- */

enum { SVG_W = 640, SVG_H = 400, SVG_L = 70, SVG_R = 20, SVG_T = 40, SVG_B = 50 };

static double svg_x(int P, int pmin, int pmax)
{
    if (pmax == pmin) return (SVG_L + SVG_W - SVG_R) / 2.0;
    return SVG_L + (log2(P) - log2(pmin)) / (log2(pmax) - log2(pmin)) * (SVG_W - SVG_L - SVG_R);
}

static double svg_y(double v, double ymax) { return SVG_H - SVG_B - v / ymax * (SVG_H - SVG_T - SVG_B); }

/* a round tick step (1, 2 or 5 x 10^k) for about five ticks up to ymax */
static double svg_step(double ymax)
{
    double p = pow(10, floor(log10(ymax / 5))), f = ymax / 5 / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static void svg_axes(FILE *f, const run_t *runs, int n, int pmin, int pmax, double ymax)
{
    fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n", SVG_L, SVG_H - SVG_B, SVG_W - SVG_R,
            SVG_H - SVG_B);
    fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n", SVG_L, SVG_T, SVG_L, SVG_H - SVG_B);
    for (int i = 0; i < n; i++)
        fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle'>%d</text>\n", svg_x(runs[i].ranks, pmin, pmax),
                SVG_H - SVG_B + 18, runs[i].ranks);
    double step = svg_step(ymax);
    for (double v = 0; v <= ymax * (1 + 1e-9); v += step)
        fprintf(f, "<text x='%d' y='%.1f' text-anchor='end'>%g</text>\n", SVG_L - 6, svg_y(v, ymax) + 4, v);
    fprintf(f, "<text x='%d' y='%d' text-anchor='middle'>ranks (log2)</text>\n", (SVG_L + SVG_W - SVG_R) / 2,
            SVG_H - 12);
    fprintf(f, "<text x='16' y='%d' transform='rotate(-90 16 %d)' text-anchor='middle'>epoch (s)</text>\n",
            (SVG_T + SVG_H - SVG_B) / 2, (SVG_T + SVG_H - SVG_B) / 2);
}

static void svg_line(FILE *f, const run_t *runs, int n, int pmin, int pmax, double ymax)
{
    fprintf(f, "<polyline fill='none' stroke='steelblue' stroke-width='2' points='");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.1f,%.1f", i ? " " : "", svg_x(runs[i].ranks, pmin, pmax), svg_y(runs[i].epoch_s, ymax));
    fprintf(f, "'/>\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3' fill='steelblue'/>\n", svg_x(runs[i].ranks, pmin, pmax),
                svg_y(runs[i].epoch_s, ymax));
}

static int svg_write(const char *path, const run_t *runs, int n, const char *title)
{
    FILE *f = fopen(path, "w");
    if (!f) return fprintf(stderr, "%s: --svg: cannot write %s\n", prog, path), -1;
    int pmin = runs[0].ranks, pmax = runs[0].ranks;
    double ymax = 0;
    for (int i = 0; i < n; i++) {
        pmin = runs[i].ranks < pmin ? runs[i].ranks : pmin;
        pmax = runs[i].ranks > pmax ? runs[i].ranks : pmax;
        ymax = fmax(ymax, runs[i].epoch_s);
    }
    if (!(ymax > 0)) ymax = 1;
    ymax = ceil(ymax * 1.05 / svg_step(ymax * 1.05)) * svg_step(ymax * 1.05);
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif' "
               "font-size='12'>\n<rect width='100%%' height='100%%' fill='white'/>\n",
            SVG_W, SVG_H);
    fprintf(f, "<text x='%d' y='24' text-anchor='middle' font-size='14'>%s</text>\n", SVG_W / 2, title);
    svg_axes(f, runs, n, pmin, pmax, ymax);
    svg_line(f, runs, n, pmin, pmax, ymax);
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : (fprintf(stderr, "%s: --svg: cannot write %s\n", prog, path), -1);
}

/* ---- the sweep ---- */

static void print_table(const run_t *runs, int n, double wall, double rss)
{
    printf("# pcoll-sim train: exchange %s, %.1f MB of gradients; time per epoch against the rank count\n",
           exchange_names[T.ex], (double)T.total / 1e6);
    printf("%6s %12s %12s %12s %12s %12s %9s\n", "ranks", "steps/epoch", "epoch_s", "step_us", "compute_us",
           "exchange_us", "speedup");
    for (int i = 0; i < n; i++)
        printf("%6d %12.0f %12.6g %12.1f %12.1f %12.1f %8.2fx\n", runs[i].ranks, runs[i].spe, runs[i].epoch_s,
               runs[i].step_us, runs[i].compute_us, runs[i].exchange_us, runs[0].epoch_s / runs[i].epoch_s);
    printf("# %d runs in %.2f s of simulation wall time, the largest took %.0f MiB\n", n, wall, rss);
}

static int sweep(int argc, char **argv, const char *drop)
{
    char list[MAX_RUNS][32];
    int n = tool_split_list(prog, "--ranks-list", T.ranks_list, list, MAX_RUNS), nargs = 0;
    int P[MAX_RUNS];
    for (int i = 0; i < n; i++) P[i] = (int)tool_flag_long(prog, "--ranks-list", list[i], 1, 1 << 20);
    char **args = malloc(sizeof(char *) * (size_t)(argc + 6));
    if (!args) return 1;
    char cmd[] = "train", ranks_flag[] = "--ranks", json_flag[] = "--json";
    args[nargs++] = argv[0];
    args[nargs++] = cmd;
    for (int i = 1; i < argc; i++)
        if (!drop[i]) args[nargs++] = argv[i];
    args[nargs++] = ranks_flag;
    args[nargs++] = NULL; /* the rank count */
    args[nargs++] = json_flag;
    args[nargs++] = NULL;
    run_t runs[MAX_RUNS];
    double wall = 0, rss = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = run_child(args, nargs, P[i], &runs[i], &wall, &rss);
    free(args);
    if (rc != 0) return 1;
    if (!T.json) print_table(runs, n, wall, rss);
    char title[96];
    snprintf(title, sizeof title, "pcoll-sim train: time per epoch, exchange %s", exchange_names[T.ex]);
    return T.svg && svg_write(T.svg, runs, n, title) != 0 ? 1 : 0;
}

int sim_cmd_train(int argc, char **argv)
{
    sim_model_t m;
    sim_model_defaults(&m, SIM_CLUSTER);
    T.batch = 32;
    T.epochs = 1;
    T.sim_steps = 20;
    T.compute_us = -1;
    T.forward_us = -1;
    T.seed = 1;
    T.serial = 1;
    T.imb_text = "none";
    char *drop = calloc((size_t)argc + 1, 1);
    if (!drop) return 1;
    parse_flags(argc, argv, &m, drop);
    check_flags();
    load_model();
    int rc = T.ranks_list ? sweep(argc, argv, drop) : run_one(argc, argv, &m);
    free(drop);
    free(T.frac);
    sim_fusion_profile_free(&T.prof);
    return rc;
}
