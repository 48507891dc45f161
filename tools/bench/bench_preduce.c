/*
 * pcoll-bench preduce: the controller of the dynamic-group partial reduce
 * under load, with no compute between calls.  Every rank calls
 * pcoll_preduce --calls times back to back on a small model, for each
 * policy in turn; the peer, in the same run, is MPI_Allreduce of the same
 * model on every rank, --calls times.
 *
 *   for each policy:  barrier; t0
 *                     repeat calls: pcoll_preduce(obj, model, k, &info)
 *                     the controller's rank: its statistics at its last call
 *                     pcoll_preduce_free (drains; untimed)
 *
 * Reported (at the controller's rank, over its own timed loop):
 *   groups/s          groups the controller formed per second
 *   steps/s           ranks' calls per second (the READY requests the
 *                     controller received: a group of n serves n of them);
 *                     MPI_Allreduce serves P per round
 *   vs_mpi            steps/s over MPI_Allreduce's
 *   wait_us           ready to the group's start (info.wait_s): the median
 *                     over ranks of each rank's median, and the largest
 *                     rank's 99th percentile
 *   ctl_busy_pct      the controller's decisions as % of its rank's time
 *   ctl_us_per_group  decision time per group; 1e6 / it is the rate the
 *                     controller alone could sustain (ctl_limit_groups_s)
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tool.h"

static const char *help =
    "usage: mpirun -np P pcoll-bench preduce [flags]\n"
    "  --policies L     comma-separated pcoll_preduce_config_parse specs (default\n"
    "                   fifo:3:const,fifo:3:dyn,ripples:random:3,ripples:smart:3,\n"
    "                   ripples:static)\n"
    "  --calls N        pcoll_preduce calls per rank and policy (default 2000)\n"
    "  --count C        floats in the model (default 16)\n"
    "  --json           one JSON object per policy and one for MPI_Allreduce: bench,\n"
    "                   ranks, policy, calls, count, seconds, groups, groups_per_s,\n"
    "                   mean_group_size (calls per group), steps_per_s, vs_mpi,\n"
    "                   wait_us_median,\n"
    "                   wait_us_p99, ctl_busy_pct, ctl_us_per_group,\n"
    "                   ctl_limit_groups_s\n"
    "No compute between calls: every rank is ready again as soon as its group is\n"
    "done, so the controller and the group allreduces are all there is.  Run it\n"
    "at P = 8, 16, 32 to see how the controller scales.\n";

#define MAX_POLICIES 16

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the q-quantile of v[0..n) (sorted in place; q = 0.5: the median, the
 * mean of the middle two for even n) */
static double quantile(double *v, int n, double q)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    if (q == 0.5) return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

typedef struct result {
    double seconds, groups, steps, busy_s, wait_med_us, wait_p99_us;
} result_t;

/* MPI_Allreduce of the model, `calls` times: seconds at rank 0 (max over ranks) */
static double run_mpi(float *model, int count, long calls)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = tool_now_us();
    for (long i = 0; i < calls; i++) MPI_Allreduce(MPI_IN_PLACE, model, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double s = (tool_now_us() - t0) * 1e-6, mx = 0;
    MPI_Allreduce(&s, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return mx;
}

static int run_policy(pcoll_t *ctx, const char *spec, float *model, int count, long calls, int rank, int size,
                      double *waits, result_t *res)
{
    pcoll_preduce_config_t cfg;
    pcoll_preduce_config_default(&cfg);
    if (pcoll_preduce_config_parse(spec, &cfg) != PCOLL_SUCCESS) return -1;
    pcoll_preduce_t *obj = NULL;
    if (pcoll_preduce_create(ctx, (size_t)count, PCOLL_FLOAT32, &cfg, &obj) != PCOLL_SUCCESS) return -1;
    const int ctl = cfg.controller;
    pcoll_preduce_stats_t before, after;
    MPI_Barrier(MPI_COMM_WORLD);
    pcoll_preduce_get_stats(obj, &before);
    double t0 = tool_now_us();
    uint64_t k = 0;
    for (long i = 0; i < calls; i++) {
        pcoll_preduce_info_t info;
        if (pcoll_preduce(obj, model, ++k, &info) != PCOLL_SUCCESS) return -1;
        if (info.iteration > k) k = info.iteration;
        waits[i] = info.wait_s * 1e6;
    }
    double seconds = (tool_now_us() - t0) * 1e-6;
    pcoll_preduce_get_stats(obj, &after);
    if (pcoll_preduce_free(&obj) != PCOLL_SUCCESS) return -1;

    /* the controller's figures, sent to rank 0 */
    double mine[4] = {seconds, (double)(after.groups - before.groups), (double)(after.requests - before.requests),
                      after.busy_s - before.busy_s};
    double theirs[4];
    if (cfg.policy == PCOLL_PREDUCE_RIPPLES_STATIC) {
        /* no controller: every rank follows the schedule; the slowest
           rank's time, no groups counted */
        double mx = 0;
        MPI_Allreduce(&seconds, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        theirs[0] = mx;
        theirs[1] = NAN;
        theirs[2] = (double)calls * size;
        theirs[3] = 0;
    } else if (ctl == 0) {
        memcpy(theirs, mine, sizeof theirs);
    } else {
        if (rank == ctl) MPI_Send(mine, 4, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
        if (rank == 0) MPI_Recv(theirs, 4, MPI_DOUBLE, ctl, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    /* waits: each rank's median and 99th percentile */
    double q[2] = {quantile(waits, (int)calls, 0.5), quantile(waits, (int)calls, 0.99)};
    double *all = rank == 0 ? malloc(sizeof(double) * 3 * (size_t)size) : NULL;
    if (rank == 0 && !all) {
        fprintf(stderr, "pcoll-bench preduce: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(q, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double *med = all + 2 * size;
        double p99 = 0;
        for (int r = 0; r < size; r++) {
            med[r] = all[2 * r];
            if (all[2 * r + 1] > p99) p99 = all[2 * r + 1];
        }
        res->wait_med_us = quantile(med, size, 0.5);
        res->wait_p99_us = p99;
        free(all);
        res->seconds = theirs[0];
        res->steps = theirs[2];
        res->groups = theirs[1];
        res->busy_s = theirs[3];
    }
    return 0;
}

int bench_preduce(int argc, char **argv, int rank, int size)
{
    const char *prog = "pcoll-bench preduce";
    const char *policies = "fifo:3:const,fifo:3:dyn,ripples:random:3,ripples:smart:3,ripples:static";
    long calls = 2000, count = 16;
    int json = 0;
    static struct option opts[] = {{"policies", required_argument, 0, 'p'}, {"calls", required_argument, 0, 'n'},
                                   {"count", required_argument, 0, 'c'},    {"json", no_argument, 0, 'j'},
                                   {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': policies = optarg; break;
        case 'n': calls = tool_flag_long(prog, "--calls", optarg, 1, 100000000); break;
        case 'c': count = tool_flag_long(prog, "--count", optarg, 1, 1L << 28); break;
        case 'j': json = 1; break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    /* the policies, checked before anything runs */
    char buf[1024];
    if (strlen(policies) >= sizeof buf) tool_usage_error(prog, "--policies: the list is too long");
    strcpy(buf, policies);
    char *spec[MAX_POLICIES];
    int np = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (np == MAX_POLICIES) tool_usage_error(prog, "--policies: more than %d", MAX_POLICIES);
        pcoll_preduce_config_t cfg;
        pcoll_preduce_config_default(&cfg);
        if (pcoll_preduce_config_parse(t, &cfg) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--policies: %s", pcoll_last_error());
        if (cfg.controller >= size)
            tool_usage_error(prog, "--policies %s: the controller's rank %d does not exist (%d ranks)", t,
                             cfg.controller, size);
        spec[np++] = t;
    }
    if (np == 0) tool_usage_error(prog, "--policies: empty");

    pcoll_t *ctx = tool_pcoll_init();
    float *model = calloc((size_t)count, sizeof *model);
    double *waits = malloc(sizeof(double) * (size_t)calls);
    if (!model || !waits) {
        fprintf(stderr, "%s: out of memory\n", prog);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const double mpi_s = run_mpi(model, (int)count, calls);
    const double mpi_steps_s = (double)calls * size / mpi_s;
    if (rank == 0) {
        if (json) {
            tool_json_t j;
            tool_json_begin(&j);
            tool_json_str(&j, "bench", "preduce");
            tool_json_int(&j, "ranks", size);
            tool_json_str(&j, "policy", "MPI_Allreduce");
            tool_json_int(&j, "calls", calls);
            tool_json_int(&j, "count", count);
            tool_json_num(&j, "seconds", mpi_s);
            tool_json_num(&j, "groups_per_s", calls / mpi_s);
            tool_json_num(&j, "mean_group_size", size);
            tool_json_num(&j, "steps_per_s", mpi_steps_s);
            tool_json_num(&j, "vs_mpi", 1.0);
            tool_json_end(&j, stdout);
        } else {
            printf("# pcoll-bench preduce: %d ranks, %ld calls per rank, %ld floats, no compute between calls\n",
                   size, calls, count);
            printf("# steps/s: calls (READY requests at the controller) per second; vs_mpi: over MPI_Allreduce's in this run; wait: ready to "
                   "group start (median of the ranks' medians, largest p99);\n# ctl: the controller's decisions "
                   "(%% of its rank's time, us per group, the groups/s it alone could form)\n");
            printf("%-22s %8s %10s %6s %10s %7s %10s %10s %7s %8s %12s\n", "policy", "groups", "groups/s", "size",
                   "steps/s", "vs_mpi", "wait_med", "wait_p99", "ctl_%", "ctl_us", "ctl_limit/s");
            printf("%-22s %8ld %10.0f %6d %10.0f %7.2f %10s %10s %7s %8s %12s\n", "MPI_Allreduce", calls,
                   calls / mpi_s, size, mpi_steps_s, 1.0, "-", "-", "-", "-", "-");
        }
    }
    for (int i = 0; i < np; i++) {
        result_t r;
        memset(&r, 0, sizeof r);
        if (run_policy(ctx, spec[i], model, (int)count, calls, rank, size, waits, &r) != 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, spec[i], pcoll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank != 0) continue;
        const int is_static = isnan(r.groups);
        double steps_s = r.steps / r.seconds;
        const double groups = r.groups;
        double mean_size = is_static ? NAN : (groups > 0 ? r.steps / groups : NAN);
        double busy_pct = is_static ? NAN : 100.0 * r.busy_s / r.seconds;
        double us_group = is_static || groups <= 0 ? NAN : 1e6 * r.busy_s / groups;
        double limit = us_group > 0 ? 1e6 / us_group : NAN;
        if (json) {
            tool_json_t j;
            tool_json_begin(&j);
            tool_json_str(&j, "bench", "preduce");
            tool_json_int(&j, "ranks", size);
            tool_json_str(&j, "policy", spec[i]);
            tool_json_int(&j, "calls", calls);
            tool_json_int(&j, "count", count);
            tool_json_num(&j, "seconds", r.seconds);
            tool_json_num(&j, "groups", groups);
            tool_json_num(&j, "groups_per_s", groups / r.seconds);
            tool_json_num(&j, "mean_group_size", mean_size);
            tool_json_num(&j, "steps_per_s", steps_s);
            tool_json_num(&j, "vs_mpi", steps_s / mpi_steps_s);
            tool_json_num(&j, "wait_us_median", r.wait_med_us);
            tool_json_num(&j, "wait_us_p99", r.wait_p99_us);
            tool_json_num(&j, "ctl_busy_pct", busy_pct);
            tool_json_num(&j, "ctl_us_per_group", us_group);
            tool_json_num(&j, "ctl_limit_groups_s", limit);
            tool_json_end(&j, stdout);
        } else {
            char g[32] = "-", gs[32] = "-", ms[32] = "-", bp[32] = "-", ug[32] = "-", li[32] = "-";
            if (!is_static) {
                snprintf(g, sizeof g, "%.0f", groups);
                snprintf(gs, sizeof gs, "%.0f", groups / r.seconds);
                snprintf(ms, sizeof ms, "%.2f", mean_size);
                snprintf(bp, sizeof bp, "%.2f", busy_pct);
                snprintf(ug, sizeof ug, "%.2f", us_group);
                snprintf(li, sizeof li, "%.0f", limit);
            }
            printf("%-22s %8s %10s %6s %10.0f %7.2f %10.1f %10.1f %7s %8s %12s\n", spec[i], g, gs, ms, steps_s,
                   steps_s / mpi_steps_s, r.wait_med_us, r.wait_p99_us, bp, ug, li);
        }
    }
    if (rank == 0 && !json) printf("(wait in us; static: no controller, each rank follows the schedule)\n");
    free(model);
    free(waits);
    pcoll_finalize(&ctx);
    return 0;
}
