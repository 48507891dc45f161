/*
 * pcoll-bench fusion: merged-gradient plans for a model's profile (layer
 * sizes and backward times, --profile) under a cost model (--model A,B, a
 * table of measured times --model-table, or --calibrate on the running
 * job): per strategy, the buckets and the predicted iteration time,
 * exposed communication, and speedup over wfbp and single.
 *
 * With --measure the plans also run: every rank sleeps the forward time,
 * then each layer's backward time in backprop order (until the layer's
 * ready time, measured from the iteration's start, so the timeline does not
 * drift), marks the layer ready (pcoll_fusion_ready: the buckets' real
 * allreduces start), then waits (pcoll_fusion_wait).  Reported: the median
 * over iterations of the slowest rank's iteration, against the prediction.
 * The strategies take turns iteration by iteration.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "tool.h"

static const char *help =
    "usage: mpirun -np P pcoll-bench fusion --profile FILE [flags]\n"
    "  --profile FILE     CSV with a header: per layer in forward order, n_params\n"
    "                     (float32 elements) or bytes, and backward_us (e.g.\n"
    "                     data/mgwfbp/googlenet-k80-layers.csv)\n"
    "  --forward-us US    the forward pass (default: half the backward time)\n"
    "  --model A,B        T(M) = A + B M: A in microseconds, B in microseconds per byte\n"
    "  --model-table FILE CSV of measured allreduce times (bytes, and avg_latency_us or\n"
    "                     us): fitted, linear and piecewise\n"
    "  --calibrate        time the buckets' allreduce on this job and fit (the default\n"
    "                     without --model or --model-table)\n"
    "  --calibrate-max-bytes B  largest size calibrated (default: the profile's total,\n"
    "                     up to the next power of two)\n"
    "  --cost C           linear or piecewise: which fitted model the planner uses\n"
    "                     (default piecewise when fitted, else linear)\n"
    "  --strategies LIST  comma-separated: optimal, mgwfbp, wfbp, single, fixed:BYTES\n"
    "                     (default wfbp,single,fixed:25M,mgwfbp,optimal)\n"
    "  --measure          also run each plan with sleeps for the compute and real\n"
    "                     allreduces, and report measured against predicted\n"
    "  --iters N          measured iterations per strategy (default 5)\n"
    "  --warmup N         untimed iterations per strategy first (default 1)\n"
    "  --json             one JSON object per strategy: bench, strategy, ranks,\n"
    "                     layers, buckets, predicted_iter_us, compute_us, comm_us,\n"
    "                     exposed_us, speedup_vs_wfbp, speedup_vs_single, model_a_us,\n"
    "                     model_b_us, cost, bucket_first_layer (each bucket's first layer,\n"
    "                     in forward order); with --measure: measured_iter_us,\n"
    "                     measured_over_predicted, measured_speedup_vs_wfbp,\n"
    "                     measured_speedup_vs_single\n";

enum { MAXS = 16 };

static void sleep_until(double t_us)
{
    struct timespec ts = {(time_t)(t_us / 1e6), (long)(fmod(t_us, 1e6) * 1e3)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
}

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static void die_pcoll(const char *prog, const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, pcoll_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static const char *prog = "pcoll-bench fusion";

typedef struct opts {
    const char *profile, *model_text, *table, *cost, *list;
    double forward_us; /* < 0: half the backward time */
    size_t cal_max;
    long iters, warmup;
    int json, measure, calibrate;
    char names[MAXS][32];
    pcoll_fusion_spec_t spec[MAXS];
    int ns;
} opts_t;

/* the flags; 1 if --help was given (printed at rank 0) */
static int parse_flags(int argc, char **argv, int rank, opts_t *o)
{
    *o = (opts_t){.list = "wfbp,single,fixed:25M,mgwfbp,optimal", .forward_us = -1, .iters = 5, .warmup = 1};
    static struct option opts[] = {{"profile", required_argument, 0, 'p'},     {"forward-us", required_argument, 0, 'f'},
                                   {"model", required_argument, 0, 'm'},       {"model-table", required_argument, 0, 't'},
                                   {"calibrate", no_argument, 0, 'c'},         {"calibrate-max-bytes", required_argument, 0, 'C'},
                                   {"cost", required_argument, 0, 'k'},        {"strategies", required_argument, 0, 's'},
                                   {"measure", no_argument, 0, 'M'},           {"iters", required_argument, 0, 'i'},
                                   {"warmup", required_argument, 0, 'w'},      {"json", no_argument, 0, 'j'},
                                   {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': o->profile = optarg; break;
        case 'f': o->forward_us = tool_flag_double(prog, "--forward-us", optarg, 0, 1e12); break;
        case 'm': o->model_text = optarg; break;
        case 't': o->table = optarg; break;
        case 'c': o->calibrate = 1; break;
        case 'C': o->cal_max = tool_flag_bytes(prog, "--calibrate-max-bytes", optarg); break;
        case 'k':
            if (strcmp(optarg, "linear") && strcmp(optarg, "piecewise"))
                tool_usage_error(prog, "--cost: \"%s\" is not linear or piecewise", optarg);
            o->cost = optarg;
            break;
        case 's': o->list = optarg; break;
        case 'M': o->measure = 1; break;
        case 'i': o->iters = tool_flag_long(prog, "--iters", optarg, 1, 100000); break;
        case 'w': o->warmup = tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'j': o->json = 1; break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            return 1;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    o->ns = tool_split_list(prog, "--strategies", o->list, o->names, MAXS);
    for (int k = 0; k < o->ns; k++)
        if (pcoll_fusion_spec_parse(o->names[k], &o->spec[k]) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--strategies: %s", pcoll_last_error());
    if (!o->profile) tool_usage_error(prog, "--profile FILE is required");
    if ((o->model_text != NULL) + (o->table != NULL) + o->calibrate > 1)
        tool_usage_error(prog, "give one of --model, --model-table and --calibrate");
    if (!o->model_text && !o->table) o->calibrate = 1;
    return 0;
}

/* the model's layers from the profile's CSV */
typedef struct layers {
    pcoll_fusion_profile_t prof;
    size_t *bytes, total;
    double *col[2]; /* the CSV's columns: elements or bytes, backward_us */
    double backward_us;
} layers_t;

static void read_profile(const opts_t *o, layers_t *m)
{
    char err[512];
    const char *pcols[2] = {"n_params|bytes", "backward_us"};
    int which[2], L = 0;
    if (tool_read_csv(o->profile, pcols, 2, m->col, which, &L, err, sizeof err) != 0)
        tool_usage_error(prog, "--profile: %s", err);
    if (L < 1) tool_usage_error(prog, "--profile: %s has no layers", o->profile);
    m->bytes = malloc(sizeof(size_t) * (size_t)L);
    if (!m->bytes) tool_usage_error(prog, "--profile: out of memory for %d layers", L);
    m->total = 0;
    m->backward_us = 0;
    for (int l = 0; l < L; l++) {
        if (m->col[0][l] < 0 || m->col[1][l] < 0) tool_usage_error(prog, "--profile: layer %d has a negative value", l);
        m->bytes[l] = (size_t)m->col[0][l] * (which[0] == 0 ? 4 : 1);
        m->total += m->bytes[l];
        m->backward_us += m->col[1][l];
    }
    m->prof = (pcoll_fusion_profile_t){.nlayers = L,
                                       .bytes = m->bytes,
                                       .backward_us = m->col[1],
                                       .forward_us = o->forward_us >= 0 ? o->forward_us : m->backward_us / 2};
}

/* the cost model: given, fitted to a table, or calibrated on this job */
static void get_model(const opts_t *o, pcoll_t *ctx, size_t total, pcoll_cost_model_t *model)
{
    if (o->model_text) {
        if (pcoll_cost_model_parse(o->model_text, model) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--model: %s", pcoll_last_error());
    } else if (o->table) {
        char err[512];
        const char *tcols[2] = {"bytes", "avg_latency_us|us"};
        double *t[2];
        int nt;
        if (tool_read_csv(o->table, tcols, 2, t, NULL, &nt, err, sizeof err) != 0)
            tool_usage_error(prog, "--model-table: %s", err);
        if (pcoll_cost_model_fit(t[0], t[1], nt, model) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--model-table: %s", pcoll_last_error());
        free(t[0]);
        free(t[1]);
    } else {
        pcoll_calibrate_config_t cc;
        pcoll_calibrate_config_default(&cc);
        size_t top = 4;
        while (top < total) top *= 2;
        cc.max_bytes = o->cal_max ? o->cal_max : top;
        if (pcoll_calibrate(ctx, NULL, 0, &cc, model) != PCOLL_SUCCESS) die_pcoll(prog, "pcoll_calibrate");
    }
    if (o->cost) model->piecewise = !strcmp(o->cost, "piecewise") && model->nsegments > 0;
    if (o->cost && !strcmp(o->cost, "piecewise") && !model->piecewise)
        tool_usage_error(prog, "--cost piecewise: the model was given as A,B, not fitted");
}

/* the predicted iteration of one strategy */
static double predicted_us(const layers_t *m, const pcoll_cost_model_t *model, pcoll_fusion_strategy_t strategy)
{
    pcoll_fusion_spec_t spec = {.strategy = strategy};
    pcoll_fusion_plan_t *pl;
    if (pcoll_fusion_plan_create(&m->prof, model, &spec, &pl) != PCOLL_SUCCESS) die_pcoll(prog, "plan");
    double t = pl->iter_us;
    pcoll_fusion_plan_free(&pl);
    return t;
}

/* --measure: the plans run with sleeps for the compute, taking turns;
 * meas[k]: the median of the slowest rank's iteration */
static void measure_plans(const opts_t *o, pcoll_t *ctx, const layers_t *m, pcoll_fusion_plan_t **pl, double *meas)
{
    int L = m->prof.nlayers, ns = o->ns;
    long iters = o->iters;
    size_t count = m->total / 4 + 1;
    size_t *off = malloc(sizeof(size_t) * (size_t)L), *cnt = malloc(sizeof(size_t) * (size_t)L);
    float *grad = calloc(count, sizeof(float));
    double *ready = malloc(sizeof(double) * (size_t)L), *times = malloc(sizeof(double) * (size_t)(ns * iters));
    if (!off || !cnt || !grad || !ready || !times) {
        fprintf(stderr, "%s: out of memory for %zu bytes of gradients\n", prog, m->total);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    size_t at = 0;
    for (int l = 0; l < L; l++) {
        off[l] = at;
        cnt[l] = m->bytes[l] / 4; /* float32 gradients */
        at += cnt[l];
    }
    double t = m->prof.forward_us;
    for (int l = L - 1; l >= 0; l--) ready[l] = t += m->col[1][l];
    pcoll_fusion_t *f[MAXS];
    for (int k = 0; k < ns; k++)
        if (pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, off, cnt, pl[k], &f[k]) != PCOLL_SUCCESS)
            die_pcoll(prog, "pcoll_fusion_create");
    for (long it = -o->warmup; it < iters; it++)
        for (int k = 0; k < ns; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = mono_us();
            for (int l = L - 1; l >= 0; l--) {
                sleep_until(t0 + ready[l]);
                if (pcoll_fusion_ready(f[k], l) != PCOLL_SUCCESS) die_pcoll(prog, "pcoll_fusion_ready");
            }
            if (pcoll_fusion_wait(f[k]) != PCOLL_SUCCESS) die_pcoll(prog, "pcoll_fusion_wait");
            double dt = mono_us() - t0, slow;
            MPI_Allreduce(&dt, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (it >= 0) times[k * iters + it] = slow;
        }
    for (int k = 0; k < ns; k++) {
        meas[k] = tool_median(times + k * iters, (size_t)iters);
        pcoll_fusion_free(&f[k]);
    }
    free(off);
    free(cnt);
    free(grad);
    free(ready);
    free(times);
}

/* what every row compares with */
typedef struct refs {
    double wfbp, single;     /* predicted */
    double m_wfbp, m_single; /* measured, if they ran (else NAN) */
    const char *cost;
    const pcoll_cost_model_t *model;
} refs_t;

static void json_row(const opts_t *o, int size, const char *nm, const pcoll_fusion_plan_t *pl, double meas,
                     const refs_t *r)
{
    tool_json_t j;
    tool_json_begin(&j);
    tool_json_fusion_plan(&j, nm, size, pl, r->wfbp, r->single, r->model);
    if (o->measure) tool_json_fusion_measured(&j, pl, meas, r->m_wfbp, r->m_single);
    tool_json_end(&j, stdout);
}

static void text_row(const opts_t *o, const char *nm, const pcoll_fusion_plan_t *pl, double meas, const refs_t *r)
{
    printf("%-14s %8d %12.2f %11.2f %10.2fx %9.2fx %10.2f", nm, pl->nbuckets, pl->iter_us / 1e3, pl->exposed_us / 1e3,
           r->wfbp / pl->iter_us, r->single / pl->iter_us, pl->comm_us / 1e3);
    if (o->measure) {
        printf(" %12.2f %10.3f", meas / 1e3, meas / pl->iter_us);
        if (!isnan(r->m_wfbp))
            printf(" %9.2fx", r->m_wfbp / meas);
        else
            printf(" %10s", "-");
    }
    printf("\n");
}

static void print_header(const opts_t *o, const layers_t *m, const pcoll_cost_model_t *model, const char *cost,
                         int size)
{
    printf("# pcoll-bench fusion: %s, %d layers, %.1f MB of gradients, forward %.1f ms, backward %.1f ms; %d ranks\n",
           o->profile, m->prof.nlayers, m->total / 1e6, m->prof.forward_us / 1e3, m->backward_us / 1e3, size);
    printf("# model (%s): T(M) = %.2f us + %.6f us/B x M", o->model_text ? "given" : o->table ? o->table : "calibrated",
           model->a_us, model->b_us);
    if (model->nsamples)
        printf(" (%d sizes; rms %.1f us, worst %.1f%%); piecewise %d segments (rms %.1f us, worst %.1f%%)",
               model->nsamples, model->linear_rms_us, 100 * model->linear_max_rel, model->nsegments,
               model->piecewise_rms_us, 100 * model->piecewise_max_rel);
    printf("; the planner uses the %s model\n", cost);
    printf("%-14s %8s %12s %11s %11s %10s %10s", "strategy", "buckets", "predicted_ms", "exposed_ms", "vs_wfbp",
           "vs_single", "comm_ms");
    if (o->measure) printf(" %12s %10s %10s", "measured_ms", "meas/pred", "m_vs_wfbp");
    printf("\n");
}

int bench_fusion(int argc, char **argv, int rank, int size)
{
    opts_t o;
    if (parse_flags(argc, argv, rank, &o)) return 0;
    layers_t m;
    read_profile(&o, &m);
    pcoll_t *ctx = tool_pcoll_init();
    pcoll_cost_model_t model;
    get_model(&o, ctx, m.total, &model);
    refs_t r = {.wfbp = predicted_us(&m, &model, PCOLL_FUSION_WFBP),
                .single = predicted_us(&m, &model, PCOLL_FUSION_SINGLE),
                .m_wfbp = NAN,
                .m_single = NAN,
                .cost = model.piecewise ? "piecewise" : "linear",
                .model = &model};
    pcoll_fusion_plan_t *pl[MAXS];
    for (int k = 0; k < o.ns; k++)
        if (pcoll_fusion_plan_create(&m.prof, &model, &o.spec[k], &pl[k]) != PCOLL_SUCCESS)
            die_pcoll(prog, o.names[k]);
    double meas[MAXS];
    for (int k = 0; k < o.ns; k++) meas[k] = NAN;
    if (o.measure) measure_plans(&o, ctx, &m, pl, meas);
    for (int k = 0; k < o.ns; k++) {
        if (o.spec[k].strategy == PCOLL_FUSION_WFBP) r.m_wfbp = meas[k];
        if (o.spec[k].strategy == PCOLL_FUSION_SINGLE) r.m_single = meas[k];
    }
    if (rank == 0 && !o.json) print_header(&o, &m, &model, r.cost, size);
    for (int k = 0; k < o.ns && rank == 0; k++) {
        char nm[64];
        pcoll_fusion_spec_name(&o.spec[k], nm, sizeof nm);
        if (o.json)
            json_row(&o, size, nm, pl[k], meas[k], &r);
        else
            text_row(&o, nm, pl[k], meas[k], &r);
    }
    for (int k = 0; k < o.ns; k++) pcoll_fusion_plan_free(&pl[k]);
    pcoll_finalize(&ctx);
    free(m.bytes);
    free(m.col[0]);
    free(m.col[1]);
    return 0;
}
