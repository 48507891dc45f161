/*
 * pcoll-sim calibrate: fits the model's factors to pcoll-bench JSON measured
 * on the emulated cluster (scripts/sim-measure.sh), and validates them on
 * the points not used for fitting.
 *
 *   DIR/allreduce-NxK-RATE.json  DIR/skew-...  DIR/group-...
 *        |  points: (platform shape, size[, mode]) -> measured microseconds
 *        v
 *   fit set: allreduce of the fewest and the most nodes at every rate,
 *            sizes 8 x 4^i (8, 32, 128, ... up to --fit-max-bytes, 2M)
 *                                                   (--fit-nodes changes it)
 *   valid.:  every other point (the other node counts, the other sizes,
 *            skew and group rounds)
 *        |
 *   Nelder-Mead on the factors' logarithms (--fit: msg cost, wake, link
 *   latency, rate share, loss factor; a backbone's rate): each evaluation runs this program's own commands
 *   (allreduce, skew, group) as child processes with the candidate factors,
 *   and scores the mean squared log ratio over the fit set
 *        v
 *   --out FILE: the factors (sim_model_load reads them), every point's
 *   measured, simulated and error; a table on stdout
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <dirent.h>
#include <unistd.h>

#include "sim.h"
#include "tool.h"

typedef struct point {
    char bench[16], mode[24];
    int nodes, rpn;
    double rate_bps, bytes, measured_us, simulated_us;
    int fit, runs;
} point_t;

typedef struct config {
    char bench[16];
    int nodes, rpn;
    double rate_bps;
    char modes[128];
    double min_bytes, max_bytes;
} config_t;

enum { MAX_POINTS = 4096, MAX_CONFIGS = 64, NPARAM = 7 };

static point_t pts[MAX_POINTS];
static int npts;
static config_t cfgs[MAX_CONFIGS];
static int ncfgs;
static char self_exe[4096];
/* the allreduce column fitted: pcoll's (pcoll_us) or the MPI library's
 * (mpi_us: Open MPI measured, the MPI stand-in simulated) */
static const char *variant = "pcoll";

/* JSON lines: a field that is there and valid (tool_json_get_*) */
static int json_num(const char *line, const char *key, double *out) { return tool_json_get_num(line, key, out) > 0; }

static int json_str(const char *line, const char *key, char *out, size_t len)
{
    return tool_json_get_str(line, key, out, len) > 0;
}

static int allreduce_us(const char *line, double *us)
{
    char key[16];
    snprintf(key, sizeof key, "%s_us", variant);
    return json_num(line, key, us);
}

/* "allreduce-4x1-100mbit.json" -> bench, nodes, rpn, rate */
static int parse_name(const char *prog, const char *name, config_t *c)
{
    char rate[32];
    if (sscanf(name, "%15[a-z]-%dx%d-%31[^.].json", c->bench, &c->nodes, &c->rpn, rate) != 4) return 0;
    if (strcmp(c->bench, "allreduce") && strcmp(c->bench, "skew") && strcmp(c->bench, "group")) return 0;
    c->rate_bps = tool_flag_rate(prog, "a measured file's rate", rate);
    return c->nodes >= 1 && c->rpn >= 1;
}

static void add_mode(config_t *c, const char *mode)
{
    char want[40];
    snprintf(want, sizeof want, ",%s,", mode);
    char have[140];
    snprintf(have, sizeof have, ",%s,", c->modes);
    if (strstr(have, want)) return;
    size_t n = strlen(c->modes);
    snprintf(c->modes + n, sizeof c->modes - n, "%s%s", n ? "," : "", mode);
}

static void read_file(const char *prog, const char *dir, const char *name)
{
    config_t c;
    memset(&c, 0, sizeof c);
    if (!parse_name(prog, name, &c)) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) tool_usage_error(prog, "--measured: cannot read \"%s\"", path);
    char line[65536];
    c.min_bytes = 1e300;
    while (fgets(line, sizeof line, f)) {
        point_t p;
        memset(&p, 0, sizeof p);
        if (!json_str(line, "bench", p.bench, sizeof p.bench) || strcmp(p.bench, c.bench)) continue;
        int ok = json_num(line, "bytes", &p.bytes);
        if (!strcmp(c.bench, "allreduce")) {
            ok = ok && allreduce_us(line, &p.measured_us);
            snprintf(p.mode, sizeof p.mode, "%s", variant);
        } else {
            ok = ok && json_num(line, "avg_latency_us", &p.measured_us) && json_str(line, "mode", p.mode, sizeof p.mode);
            if (ok && !strcmp(p.mode, "mpi")) continue; /* Open MPI's own: not pcoll's code */
            if (ok) add_mode(&c, p.mode);
        }
        /* the simulated sweeps double from the smallest size: powers of two */
        if (!ok || npts == MAX_POINTS || p.bytes < 1 || ((unsigned long long)p.bytes & ((unsigned long long)p.bytes - 1)))
            continue;
        p.nodes = c.nodes;
        p.rpn = c.rpn;
        p.rate_bps = c.rate_bps;
        pts[npts++] = p;
        if (p.bytes < c.min_bytes) c.min_bytes = p.bytes;
        if (p.bytes > c.max_bytes) c.max_bytes = p.bytes;
    }
    fclose(f);
    if (c.max_bytes > 0 && ncfgs < MAX_CONFIGS) cfgs[ncfgs++] = c;
}

/* Points measured more than once (the files of several runs of one
 * configuration): one point, the median of the runs. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int same_point(const point_t *a, const point_t *b)
{
    return a->nodes == b->nodes && a->rpn == b->rpn && a->rate_bps == b->rate_bps && a->bytes == b->bytes &&
           !strcmp(a->bench, b->bench) && !strcmp(a->mode, b->mode);
}

static void merge_runs(void)
{
    int n = 0;
    double runs[64];
    for (int i = 0; i < npts; i++) {
        int k = 0, seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = same_point(&pts[j], &pts[i]);
        if (seen) continue;
        for (int j = i; j < npts && k < 64; j++)
            if (same_point(&pts[j], &pts[i])) runs[k++] = pts[j].measured_us;
        qsort(runs, (size_t)k, sizeof runs[0], cmp_double);
        pts[n] = pts[i];
        pts[n].runs = k;
        pts[n++].measured_us = k % 2 ? runs[k / 2] : (runs[k / 2 - 1] + runs[k / 2]) / 2;
    }
    npts = n;
    /* configurations read from several files: once */
    int m = 0;
    for (int i = 0; i < ncfgs; i++) {
        config_t *c = &cfgs[i], *same = NULL;
        for (int j = 0; j < m && !same; j++)
            if (cfgs[j].nodes == c->nodes && cfgs[j].rpn == c->rpn && cfgs[j].rate_bps == c->rate_bps &&
                !strcmp(cfgs[j].bench, c->bench))
                same = &cfgs[j];
        if (!same) {
            cfgs[m++] = *c;
            continue;
        }
        if (c->min_bytes < same->min_bytes) same->min_bytes = c->min_bytes;
        if (c->max_bytes > same->max_bytes) same->max_bytes = c->max_bytes;
        char modes[128];
        snprintf(modes, sizeof modes, "%s", c->modes);
        for (char *tok = strtok(modes, ","); tok; tok = strtok(NULL, ",")) add_mode(same, tok);
    }
    ncfgs = m;
}

/* ---- the factors ---- */

typedef struct param {
    const char *name; /* its flag without the dashes */
    double lo, hi;
} param_t;

/* every factor calibrate can fit, in the units of its flag (--msg-cost
 * etc.: microseconds; --backbone-rate: bits per second) */
static const param_t params[NPARAM] = {
    {"msg-cost", 0.1, 500}, {"wake", 0.1, 500},       {"latency", 0.1, 1000},
    {"bw-factor", 0.02, 1}, {"loss-factor", 0, 5}, {"backbone-rate", 1e6, 1e12},
    {"poll-load", 0, 0.5},
};
/* the ones fitted (--fit): indices into params */
static int fitted[NPARAM], nfitted;

static double get_param(const sim_model_t *m, int i)
{
    switch (i) {
    case 0: return m->msg_cost_s * 1e6;
    case 1: return m->wake_s * 1e6;
    case 2: return m->link_lat_s * 1e6;
    case 3: return m->bw_factor;
    case 4: return m->loss_factor;
    case 5: return m->backbone_bps;
    default: return m->poll_load;
    }
}

static void set_param(sim_model_t *m, int i, double v)
{
    if (v < params[i].lo) v = params[i].lo;
    if (v > params[i].hi) v = params[i].hi;
    switch (i) {
    case 0: m->msg_cost_s = v * 1e-6; break;
    case 1: m->wake_s = v * 1e-6; break;
    case 2: m->link_lat_s = v * 1e-6; break;
    case 3: m->bw_factor = v; break;
    case 4: m->loss_factor = v; break;
    case 5: m->backbone_bps = v; break;
    default: m->poll_load = v; break;
    }
}

/* "msg-cost,latency,...": the factors to fit */
static void parse_fit(const char *prog, const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    nfitted = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int k = -1;
        for (int i = 0; i < NPARAM; i++)
            if (!strcmp(tok, params[i].name)) k = i;
        if (k < 0)
            tool_usage_error(prog, "--fit: \"%s\" is not msg-cost, wake, latency, bw-factor, loss-factor, "
                                   "backbone-rate or poll-load", tok);
        for (int i = 0; i < nfitted; i++)
            if (fitted[i] == k) tool_usage_error(prog, "--fit: \"%s\" twice", tok);
        fitted[nfitted++] = k;
    }
    if (!nfitted) tool_usage_error(prog, "--fit: no factor named");
}

/* ---- one evaluation: every configuration simulated ---- */

static int wanted(const config_t *c, int only_fit)
{
    for (int i = 0; i < npts; i++)
        if (pts[i].nodes == c->nodes && pts[i].rpn == c->rpn && pts[i].rate_bps == c->rate_bps &&
            !strcmp(pts[i].bench, c->bench) && (!only_fit || pts[i].fit))
            return 1;
    return 0;
}

/* the fit set's sizes end here (larger points are validation points):
 * each evaluation then simulates only up to it */
static double fit_max_bytes = 2 << 20;

static FILE *start_config(const config_t *c, const sim_model_t *m, int only_fit)
{
    double max_bytes = only_fit && c->max_bytes > fit_max_bytes ? fit_max_bytes : c->max_bytes;
    char cmd[8192];
    int n = snprintf(cmd, sizeof cmd, "'%s' %s --json --ranks %d --ranks-per-node %d --link-rate %.6gmbit "
                     "--min-bytes %.0f --max-bytes %.0f --msg-cost %.6gus --wake %.6gus --latency %.6gus "
                     "--bw-factor %.6g --loss-factor %.6g --poll-load %.6g --reduce-rate %.0f --shm-rate %.0f --platform %s --cores %d",
                     self_exe, c->bench, c->nodes * c->rpn, c->rpn, c->rate_bps / 1e6, c->min_bytes, max_bytes,
                     m->msg_cost_s * 1e6, m->wake_s * 1e6, m->link_lat_s * 1e6, m->bw_factor, m->loss_factor, m->poll_load,
                     m->reduce_Bps, m->shm_Bps, sim_platform_name(m->platform), m->cores);
    if (m->backbone_bps > 0)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --backbone-rate %.6gmbit", m->backbone_bps / 1e6);
    /* the repetitions pcoll-bench took (scripts/sim-measure.sh): the tbf
     * buckets' state after them is part of what was measured */
    if (strcmp(c->bench, "allreduce") != 0)
        snprintf(cmd + n, sizeof cmd - (size_t)n, " --modes %s --iters 32", c->modes);
    FILE *f = popen(cmd, "r");
    if (!f) {
        fprintf(stderr, "pcoll-sim calibrate: cannot run %s\n", cmd);
        exit(1);
    }
    return f;
}

static void collect_config(const config_t *c, FILE *f)
{
    char line[65536];
    while (fgets(line, sizeof line, f)) {
        char bench[16] = "", mode[24];
        snprintf(mode, sizeof mode, "%s", variant);
        double bytes, us;
        if (!json_str(line, "bench", bench, sizeof bench) || strcmp(bench, c->bench) || !json_num(line, "bytes", &bytes))
            continue;
        if (strcmp(bench, "allreduce") ? !json_str(line, "mode", mode, sizeof mode) || !json_num(line, "avg_latency_us", &us)
                                       : !allreduce_us(line, &us))
            continue;
        for (int i = 0; i < npts; i++)
            if (pts[i].nodes == c->nodes && pts[i].rpn == c->rpn && pts[i].rate_bps == c->rate_bps &&
                !strcmp(pts[i].bench, bench) && !strcmp(pts[i].mode, mode) && pts[i].bytes == bytes)
                pts[i].simulated_us = us;
    }
    if (pclose(f) != 0) {
        fprintf(stderr, "pcoll-sim calibrate: a simulation of %s at %dx%d failed\n", c->bench, c->nodes, c->rpn);
        exit(1);
    }
}

/* Every configuration (the fit set's only) simulated with m: the child
 * processes run side by side, two at a time (this machine's cores). */
static void simulate_all(const sim_model_t *m, int only_fit)
{
    for (int i = 0; i < npts; i++) pts[i].simulated_us = NAN;
    int todo[MAX_CONFIGS], n = 0;
    for (int k = 0; k < ncfgs; k++)
        if (wanted(&cfgs[k], only_fit)) todo[n++] = k;
    for (int k = 0; k < n; k += 2) {
        FILE *a = start_config(&cfgs[todo[k]], m, only_fit);
        FILE *b = k + 1 < n ? start_config(&cfgs[todo[k + 1]], m, only_fit) : NULL;
        collect_config(&cfgs[todo[k]], a);
        if (b) collect_config(&cfgs[todo[k + 1]], b);
    }
}

/* mean squared log ratio over the fit set */
static double score(const sim_model_t *m)
{
    simulate_all(m, 1);
    double sum = 0;
    int n = 0;
    for (int i = 0; i < npts; i++) {
        if (!pts[i].fit) continue;
        double e = isnan(pts[i].simulated_us) ? 10 : log(pts[i].simulated_us / pts[i].measured_us);
        sum += e * e;
        n++;
    }
    return n ? sum / n : 0;
}

/* The search runs in x = log(factor) (a factor that may be 0, the loss
 * factor and the poll load: log(0.01 + it)), so that every step is
 * relative; x holds the fitted factors only. */
static double to_x(const sim_model_t *m, int i)
{
    return params[i].lo == 0 ? log(0.01 + get_param(m, i)) : log(get_param(m, i));
}

static void from_x(sim_model_t *m, const double *x)
{
    for (int k = 0; k < nfitted; k++) {
        int i = fitted[k];
        set_param(m, i, params[i].lo == 0 ? exp(x[k]) - 0.01 : exp(x[k]));
    }
}

static double score_x(const sim_model_t *base, const double *x)
{
    sim_model_t t = *base;
    from_x(&t, x);
    return score(&t);
}

static void report(const sim_model_t *base, const double *x, int used, double f)
{
    sim_model_t t = *base;
    from_x(&t, x);
    fprintf(stderr, "calibrate: %d evaluations, score %.5f (", used, f);
    for (int k = 0; k < nfitted; k++)
        fprintf(stderr, "%s%s %.4g", k ? ", " : "", params[fitted[k]].name, get_param(&t, fitted[k]));
    fprintf(stderr, ")\n");
}

/* Nelder-Mead over the fitted factors: a simplex of n + 1 points,
 * reflected, expanded, contracted and shrunk toward the best, for at most
 * `evals` evaluations. */
static void fit(sim_model_t *m, int evals, int verbose)
{
    const int N = nfitted;
    double x[NPARAM + 1][NPARAM] = {{0}}, f[NPARAM + 1] = {0};
    for (int k = 0; k <= N; k++) {
        for (int i = 0; i < N; i++) x[k][i] = to_x(m, fitted[i]) + (k == i + 1 ? 0.4 : 0);
        f[k] = score_x(m, x[k]);
    }
    int used = N + 1;
    while (used < evals) {
        int lo = 0, hi = 0, nh = 0;
        for (int k = 0; k <= N; k++) {
            if (f[k] < f[lo]) lo = k;
            if (f[k] > f[hi]) hi = k;
        }
        nh = lo;
        for (int k = 0; k <= N; k++)
            if (k != hi && f[k] > f[nh]) nh = k;
        if (f[hi] - f[lo] < 1e-6) break;
        double c[NPARAM] = {0}, xr[NPARAM], xe[NPARAM], xc[NPARAM];
        for (int k = 0; k <= N; k++)
            if (k != hi)
                for (int i = 0; i < N; i++) c[i] += x[k][i] / N;
        for (int i = 0; i < N; i++) xr[i] = c[i] + (c[i] - x[hi][i]);
        double fr = score_x(m, xr);
        used++;
        if (fr < f[lo]) {
            for (int i = 0; i < N; i++) xe[i] = c[i] + 2 * (c[i] - x[hi][i]);
            double fe = score_x(m, xe);
            used++;
            memcpy(x[hi], fe < fr ? xe : xr, sizeof xr);
            f[hi] = fe < fr ? fe : fr;
        } else if (fr < f[nh]) {
            memcpy(x[hi], xr, sizeof xr);
            f[hi] = fr;
        } else {
            for (int i = 0; i < N; i++) xc[i] = c[i] + 0.5 * (x[hi][i] - c[i]);
            double fc = score_x(m, xc);
            used++;
            if (fc < f[hi]) {
                memcpy(x[hi], xc, sizeof xc);
                f[hi] = fc;
            } else {
                for (int k = 0; k <= N; k++) {
                    if (k == lo) continue;
                    for (int i = 0; i < N; i++) x[k][i] = x[lo][i] + 0.5 * (x[k][i] - x[lo][i]);
                    f[k] = score_x(m, x[k]);
                    used++;
                }
            }
        }
        if (verbose) report(m, x[lo], used, f[lo]);
    }
    int lo = 0;
    for (int k = 0; k <= N; k++)
        if (f[k] < f[lo]) lo = k;
    from_x(m, x[lo]);
}

/* ---- the choice of fit points ---- */

static void choose_fit(const char *fit_nodes)
{
    for (int i = 0; i < npts; i++) {
        point_t *p = &pts[i];
        int lo = 1 << 30, hi = 0;
        for (int k = 0; k < npts; k++)
            if (pts[k].rate_bps == p->rate_bps && !strcmp(pts[k].bench, "allreduce")) {
                if (pts[k].nodes < lo) lo = pts[k].nodes;
                if (pts[k].nodes > hi) hi = pts[k].nodes;
            }
        int node_ok;
        if (fit_nodes) {
            char want[16], list[256];
            snprintf(want, sizeof want, ",%d,", p->nodes);
            snprintf(list, sizeof list, ",%s,", fit_nodes);
            node_ok = strstr(list, want) != NULL;
        } else {
            node_ok = p->nodes == lo || p->nodes == hi;
        }
        int e = (int)lround(log2(p->bytes));
        p->fit = !strcmp(p->bench, "allreduce") && node_ok && e % 2 == 1 && /* 8 = 2^3, 32, 128, ... */
                 p->bytes <= fit_max_bytes;
    }
}

static void write_out(const char *path, const sim_model_t *m, double fit_max, double valid_max)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "pcoll-sim calibrate: cannot write \"%s\"\n", path);
        exit(1);
    }
    fprintf(f, "{");
    sim_model_print(m, f);
    fprintf(f, ",\n \"fit_max_error\": %.4f, \"validation_max_error\": %.4f,\n \"points\": [\n", fit_max, valid_max);
    for (int i = 0; i < npts; i++) {
        const point_t *p = &pts[i];
        fprintf(f,
                "  {\"bench\": \"%s\", \"mode\": \"%s\", \"nodes\": %d, \"ranks_per_node\": %d, \"link_rate_bps\": %.0f, "
                "\"bytes\": %.0f, \"runs\": %d, \"measured_us\": %.6g, \"simulated_us\": %.6g, \"error\": %.4f, "
                "\"fit\": %s}%s\n",
                p->bench, p->mode, p->nodes, p->rpn, p->rate_bps, p->bytes, p->runs, p->measured_us, p->simulated_us,
                p->simulated_us / p->measured_us - 1, p->fit ? "true" : "false", i + 1 < npts ? "," : "");
    }
    fprintf(f, " ]}\n");
    fclose(f);
}

static const char *help =
    "usage: pcoll-sim calibrate [flags]\n"
    "Fits the model's factors (message cost, wake, link latency, rate share,\n"
    "loss factor) to pcoll-bench JSON measured on the emulated cluster, and\n"
    "validates them on the points not fitted.\n"
    "  --measured DIR   the measurements: allreduce|skew|group-NxK-RATE[.RUN].json,\n"
    "                   as scripts/sim-measure.sh writes them; a point measured in\n"
    "                   several runs counts with its median; sizes that are not powers\n"
    "                   of two are left out (default data/cluster)\n"
    "  --fit-nodes L    node counts whose allreduce points (sizes 8 x 4^i) are\n"
    "                   fitted (default: the fewest and the most at each rate)\n"
    "  --fit-max-bytes B  the fit set's largest size (default 2M: larger sizes\n"
    "                   are validation points, and each evaluation is quicker)\n"
    "  --evals N        simulations of the fit set at most (default 150)\n"
    "  --fit LIST       the factors fitted, the others kept as given: msg-cost,\n"
    "                   wake, latency, bw-factor, loss-factor, backbone-rate,\n"
    "                   poll-load (default the first five and poll-load on the\n"
    "                   cluster platform; backbone-rate needs a start,\n"
    "                   --backbone-rate R, on switch or cluster)\n"
    "  --variant V      the allreduce column: pcoll (pcoll_us, default) or mpi\n"
    "                   (mpi_us: the MPI library measured, its stand-in simulated)\n"
    "  --check          no fit: only compare the model as given (flags, --model)\n"
    "  --out FILE       the factors and every point (default\n"
    "                   results/sim/calibration.json); --model FILE reads it\n"
    "  --quiet          no progress lines\n";

int sim_cmd_calibrate(int argc, char **argv)
{
    const char *prog = "pcoll-sim calibrate";
    const char *dir = "data/cluster", *out = "results/sim/calibration.json", *fit_nodes = NULL;
    int evals = 150, check = 0, verbose = 1;
    const char *fit_list = NULL;
    sim_model_t m;
    sim_model_defaults(&m, SIM_CLUSTER);
    static struct option opts[] = {{"measured", required_argument, 0, 'd'}, {"fit-nodes", required_argument, 0, 'f'},
                                   {"evals", required_argument, 0, 'r'},   {"check", no_argument, 0, 'c'},
                                   {"variant", required_argument, 0, 'v'},  {"fit", required_argument, 0, 'F'},
                                   {"fit-max-bytes", required_argument, 0, 'B'},
                                   {"out", required_argument, 0, 'o'},      {"quiet", no_argument, 0, 'q'},
                                   {"help", no_argument, 0, 'h'},           SIM_COMMON_OPTS,
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (sim_common_flag(prog, &m, c, optarg)) continue;
        switch (c) {
        case 'd': dir = optarg; break;
        case 'f': fit_nodes = optarg; break;
        case 'r': evals = (int)tool_flag_long(prog, "--evals", optarg, 1, 100000); break;
        case 'c': check = 1; break;
        case 'F': fit_list = optarg; break;
        case 'B': fit_max_bytes = (double)tool_flag_bytes(prog, "--fit-max-bytes", optarg); break;
        case 'v':
            if (strcmp(optarg, "pcoll") && strcmp(optarg, "mpi"))
                tool_usage_error(prog, "--variant: \"%s\" is not pcoll or mpi", optarg);
            variant = optarg;
            break;
        case 'o': out = optarg; break;
        case 'q': verbose = 0; break;
        case 'h': fputs(help, stdout); return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    sim_model_finish(&m);
    parse_fit(prog, fit_list                              ? fit_list
                    : m.platform == SIM_CLUSTER ? "msg-cost,wake,latency,bw-factor,loss-factor,poll-load"
                                                : "msg-cost,wake,latency,bw-factor,loss-factor");
    for (int k = 0; k < nfitted; k++)
        if (fitted[k] == 5 && m.backbone_bps <= 0)
            tool_usage_error(prog, "--fit backbone-rate: give a start with --backbone-rate R");
    sim_model_check(prog, &m);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) tool_usage_error(prog, "cannot find this program's path (/proc/self/exe)");
    self_exe[n] = '\0';
    DIR *d = opendir(dir);
    if (!d) tool_usage_error(prog, "--measured: cannot open \"%s\": %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) read_file(prog, dir, e->d_name);
    closedir(d);
    if (!npts)
        tool_usage_error(prog, "--measured: no pcoll-bench points in \"%s\" (files NAME-NxK-RATE[.RUN].json)", dir);
    merge_runs();
    choose_fit(fit_nodes);
    if (!check) fit(&m, evals, verbose);
    simulate_all(&m, 0);
    double fit_max = 0, valid_max = 0;
    printf("%-10s %-9s %5s %9s %10s %13s %13s %8s %s\n", "bench", "mode", "nodes", "rate", "bytes", "measured_us",
           "simulated_us", "error", "set");
    for (int i = 0; i < npts; i++) {
        const point_t *p = &pts[i];
        double err = p->simulated_us / p->measured_us - 1;
        double *mx = p->fit ? &fit_max : &valid_max;
        if (isnan(err) || fabs(err) > *mx) *mx = isnan(err) ? INFINITY : fabs(err);
        printf("%-10s %-9s %2dx%-2d %8.0fM %10.0f %13.1f %13.1f %+7.1f%% %s\n", p->bench, p->mode, p->nodes, p->rpn,
               p->rate_bps / 1e6, p->bytes, p->measured_us, p->simulated_us, 100 * err, p->fit ? "fit" : "validation");
    }
    printf("# largest error: %.1f%% on the fit set, %.1f%% on the validation set\n# factors: {", 100 * fit_max,
           100 * valid_max);
    sim_model_print(&m, stdout);
    printf("}\n");
    write_out(out, &m, fit_max, valid_max);
    return 0;
}
