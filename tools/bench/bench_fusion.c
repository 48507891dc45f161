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
    "                     model_b_us, cost; with --measure: measured_iter_us,\n"
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

int bench_fusion(int argc, char **argv, int rank, int size)
{
    const char *prog = "pcoll-bench fusion";
    const char *profile = NULL, *model_text = NULL, *table = NULL, *cost = NULL;
    const char *list = "wfbp,single,fixed:25M,mgwfbp,optimal";
    double forward_us = -1;
    size_t cal_max = 0;
    long iters = 5, warmup = 1;
    int json = 0, measure = 0, calibrate = 0;
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
        case 'p': profile = optarg; break;
        case 'f': forward_us = tool_flag_double(prog, "--forward-us", optarg, 0, 1e12); break;
        case 'm': model_text = optarg; break;
        case 't': table = optarg; break;
        case 'c': calibrate = 1; break;
        case 'C': cal_max = tool_flag_bytes(prog, "--calibrate-max-bytes", optarg); break;
        case 'k':
            if (strcmp(optarg, "linear") && strcmp(optarg, "piecewise"))
                tool_usage_error(prog, "--cost: \"%s\" is not linear or piecewise", optarg);
            cost = optarg;
            break;
        case 's': list = optarg; break;
        case 'M': measure = 1; break;
        case 'i': iters = tool_flag_long(prog, "--iters", optarg, 1, 100000); break;
        case 'w': warmup = tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'j': json = 1; break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    /* the strategies */
    char names[MAXS][32];
    int ns = tool_split_list(prog, "--strategies", list, names, MAXS);
    pcoll_fusion_spec_t spec[MAXS];
    for (int k = 0; k < ns; k++)
        if (pcoll_fusion_spec_parse(names[k], &spec[k]) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--strategies: %s", pcoll_last_error());
    if (!profile) tool_usage_error(prog, "--profile FILE is required");
    if ((model_text != NULL) + (table != NULL) + calibrate > 1)
        tool_usage_error(prog, "give one of --model, --model-table and --calibrate");
    if (!model_text && !table) calibrate = 1;

    /* the profile */
    char err[512];
    const char *pcols[2] = {"n_params|bytes", "backward_us"};
    double *col[2];
    int which[2], L = 0;
    if (tool_read_csv(profile, pcols, 2, col, which, &L, err, sizeof err) != 0)
        tool_usage_error(prog, "--profile: %s", err);
    if (L < 1) tool_usage_error(prog, "--profile: %s has no layers", profile);
    size_t *bytes = malloc(sizeof(size_t) * (size_t)L), total = 0;
    double tbsum = 0;
    for (int l = 0; l < L; l++) {
        if (col[0][l] < 0 || col[1][l] < 0) tool_usage_error(prog, "--profile: layer %d has a negative value", l);
        bytes[l] = (size_t)col[0][l] * (which[0] == 0 ? 4 : 1);
        total += bytes[l];
        tbsum += col[1][l];
    }
    pcoll_fusion_profile_t prof = {L, bytes, col[1], forward_us >= 0 ? forward_us : tbsum / 2};

    /* the model */
    pcoll_t *ctx = tool_pcoll_init();
    pcoll_cost_model_t model;
    if (model_text) {
        if (pcoll_cost_model_parse(model_text, &model) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--model: %s", pcoll_last_error());
    } else if (table) {
        const char *tcols[2] = {"bytes", "avg_latency_us|us"};
        double *t[2];
        int nt;
        if (tool_read_csv(table, tcols, 2, t, NULL, &nt, err, sizeof err) != 0)
            tool_usage_error(prog, "--model-table: %s", err);
        if (pcoll_cost_model_fit(t[0], t[1], nt, &model) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--model-table: %s", pcoll_last_error());
        free(t[0]);
        free(t[1]);
    } else {
        pcoll_calibrate_config_t cc;
        pcoll_calibrate_config_default(&cc);
        size_t top = 4;
        while (top < total) top *= 2;
        cc.max_bytes = cal_max ? cal_max : top;
        if (pcoll_calibrate(ctx, NULL, 0, &cc, &model) != PCOLL_SUCCESS) die_pcoll(prog, "pcoll_calibrate");
    }
    if (cost) model.piecewise = !strcmp(cost, "piecewise") && model.nsegments > 0;
    if (cost && !strcmp(cost, "piecewise") && !model.piecewise)
        tool_usage_error(prog, "--cost piecewise: the model was given as A,B, not fitted");
    const char *cost_name = model.piecewise ? "piecewise" : "linear";

    if (rank == 0 && !json) {
        printf("# pcoll-bench fusion: %s, %d layers, %.1f MB of gradients, forward %.1f ms, backward %.1f ms; %d ranks\n",
               profile, L, total / 1e6, prof.forward_us / 1e3, tbsum / 1e3, size);
        printf("# model (%s): T(M) = %.2f us + %.6f us/B x M", model_text ? "given" : table ? table : "calibrated",
               model.a_us, model.b_us);
        if (model.nsamples)
            printf(" (%d sizes; rms %.1f us, worst %.1f%%); piecewise %d segments (rms %.1f us, worst %.1f%%)",
                   model.nsamples, model.linear_rms_us, 100 * model.linear_max_rel, model.nsegments,
                   model.piecewise_rms_us, 100 * model.piecewise_max_rel);
        printf("; the planner uses the %s model\n", cost_name);
    }

    /* plans, and what they predict */
    pcoll_fusion_plan_t *pl[MAXS];
    double ref_w = NAN, ref_s = NAN;
    pcoll_fusion_spec_t ws = {PCOLL_FUSION_WFBP, 0}, ss = {PCOLL_FUSION_SINGLE, 0};
    pcoll_fusion_plan_t *tmp;
    if (pcoll_fusion_plan_create(&prof, &model, &ws, &tmp) != PCOLL_SUCCESS) die_pcoll(prog, "plan");
    ref_w = tmp->iter_us;
    pcoll_fusion_plan_free(&tmp);
    if (pcoll_fusion_plan_create(&prof, &model, &ss, &tmp) != PCOLL_SUCCESS) die_pcoll(prog, "plan");
    ref_s = tmp->iter_us;
    pcoll_fusion_plan_free(&tmp);
    for (int k = 0; k < ns; k++)
        if (pcoll_fusion_plan_create(&prof, &model, &spec[k], &pl[k]) != PCOLL_SUCCESS) die_pcoll(prog, names[k]);

    /* measured: the strategies take turns */
    double meas[MAXS];
    for (int k = 0; k < ns; k++) meas[k] = NAN;
    if (measure) {
        size_t count = total / 4 + 1;
        size_t *off = malloc(sizeof(size_t) * (size_t)L), *cnt = malloc(sizeof(size_t) * (size_t)L);
        float *grad = calloc(count, sizeof(float));
        double *ready = malloc(sizeof(double) * (size_t)L), *times = malloc(sizeof(double) * (size_t)(ns * iters));
        if (!off || !cnt || !grad || !ready || !times) {
            fprintf(stderr, "%s: out of memory for %zu bytes of gradients\n", prog, total);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        size_t at = 0;
        for (int l = 0; l < L; l++) {
            off[l] = at;
            cnt[l] = bytes[l] / 4; /* float32 gradients */
            at += cnt[l];
        }
        double t = prof.forward_us;
        for (int l = L - 1; l >= 0; l--) ready[l] = t += col[1][l];
        pcoll_fusion_t *f[MAXS];
        for (int k = 0; k < ns; k++)
            if (pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, off, cnt, pl[k], &f[k]) !=
                PCOLL_SUCCESS)
                die_pcoll(prog, "pcoll_fusion_create");
        for (long it = -warmup; it < iters; it++)
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
    double mw = NAN, msg = NAN; /* measured wfbp and single, if they ran */
    for (int k = 0; k < ns; k++) {
        if (spec[k].strategy == PCOLL_FUSION_WFBP) mw = meas[k];
        if (spec[k].strategy == PCOLL_FUSION_SINGLE) msg = meas[k];
    }

    if (rank == 0 && !json) {
        printf("%-14s %8s %12s %11s %11s %10s %10s", "strategy", "buckets", "predicted_ms", "exposed_ms", "vs_wfbp",
               "vs_single", "comm_ms");
        if (measure) printf(" %12s %10s %10s", "measured_ms", "meas/pred", "m_vs_wfbp");
        printf("\n");
    }
    for (int k = 0; k < ns && rank == 0; k++) {
        char nm[64];
        pcoll_fusion_spec_name(&spec[k], nm, sizeof nm);
        if (json) {
            tool_json_t j;
            tool_json_begin(&j);
            tool_json_str(&j, "bench", "fusion");
            tool_json_str(&j, "strategy", nm);
            tool_json_int(&j, "ranks", size);
            tool_json_int(&j, "layers", L);
            tool_json_int(&j, "buckets", pl[k]->nbuckets);
            tool_json_num(&j, "predicted_iter_us", pl[k]->iter_us);
            tool_json_num(&j, "compute_us", pl[k]->compute_us);
            tool_json_num(&j, "comm_us", pl[k]->comm_us);
            tool_json_num(&j, "exposed_us", pl[k]->exposed_us);
            tool_json_num(&j, "speedup_vs_wfbp", ref_w / pl[k]->iter_us);
            tool_json_num(&j, "speedup_vs_single", ref_s / pl[k]->iter_us);
            tool_json_num(&j, "model_a_us", model.a_us);
            tool_json_num(&j, "model_b_us", model.b_us);
            tool_json_str(&j, "cost", cost_name);
            if (measure) {
                tool_json_num(&j, "measured_iter_us", meas[k]);
                tool_json_num(&j, "measured_over_predicted", meas[k] / pl[k]->iter_us);
                if (!isnan(mw)) tool_json_num(&j, "measured_speedup_vs_wfbp", mw / meas[k]);
                if (!isnan(msg)) tool_json_num(&j, "measured_speedup_vs_single", msg / meas[k]);
            }
            tool_json_end(&j, stdout);
        } else {
            printf("%-14s %8d %12.2f %11.2f %10.2fx %9.2fx %10.2f", nm, pl[k]->nbuckets, pl[k]->iter_us / 1e3,
                   pl[k]->exposed_us / 1e3, ref_w / pl[k]->iter_us, ref_s / pl[k]->iter_us, pl[k]->comm_us / 1e3);
            if (measure) {
                printf(" %12.2f %10.3f", meas[k] / 1e3, meas[k] / pl[k]->iter_us);
                if (!isnan(mw))
                    printf(" %9.2fx", mw / meas[k]);
                else
                    printf(" %10s", "-");
            }
            printf("\n");
        }
    }
    for (int k = 0; k < ns; k++) pcoll_fusion_plan_free(&pl[k]);
    pcoll_finalize(&ctx);
    free(bytes);
    free(col[0]);
    free(col[1]);
    return 0;
}
