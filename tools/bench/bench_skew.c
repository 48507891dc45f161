/*
 * pcoll-bench skew and pcoll-bench group: the eager-SGD microbenchmark
 * (paper Fig. 8), for global partial rounds (skew) and for WAGMA's group
 * rounds next to them (group).  Each iteration rank i sleeps i * skew, sets
 * its buffer to 1.0, times one collective, resets the buffer to 0 and meets
 * the others at a barrier.  Reported per mode and size:
 *   - the latency averaged over ranks and iterations (and, with
 *     --per-rank, per rank: the late ranks of a linear skew wait least);
 *   - NAP, the number of active processes per round: every rank for the
 *     synchronous modes, info.active for the partial ones (the ranks, among
 *     those the round summed, whose application was waiting for it);
 *   - the ranks a round summed at this rank (P, or the group's size);
 *   - the data bytes a rank sent per round (pcoll_get_stats; MPI's own
 *     traffic is not visible, `sync` is pcoll's global allreduce for that).
 * Every mode runs in the same job, so the ratios compare like with like.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "tool.h"

static const char *skew_help =
    "usage: mpirun -np P pcoll-bench skew [flags]\n"
    "  --modes LIST    comma-separated: mpi (MPI_Allreduce), sync (pcoll_allreduce),\n"
    "                  solo, majority, quorum:Q, group, group:S (default mpi,solo,majority)\n";

static const char *group_help =
    "usage: mpirun -np P pcoll-bench group [flags]\n"
    "WAGMA's group rounds (a partial object of kind GROUP: activated by the first\n"
    "rank to arrive, summed inside groups of S that rotate every round) against a\n"
    "global allreduce and global partial rounds, in one run.\n"
    "  --modes LIST    comma-separated: mpi (MPI_Allreduce), sync (pcoll_allreduce),\n"
    "                  solo, majority, quorum:Q, group (S = max(2, round(sqrt(P)))),\n"
    "                  group:S (default mpi,sync,solo,majority,group)\n";

static const char *common_help =
    "  --min-bytes B   smallest message (default 64)\n"
    "  --max-bytes B   largest message (default 4M); sizes grow 8x:\n"
    "                  64, 512, 4K, 32K, 256K, 4M\n"
    "  --skew-us U     rank i sleeps i * U microseconds per iteration (default 1000)\n"
    "  --iters N       timed iterations per mode and size (default 64)\n"
    "  --warmup N      untimed iterations before them (default 2)\n"
    "  --data-phase D  auto: partial objects on one node use node-shared memory\n"
    "                  (no messages), others messages; messages: every partial\n"
    "                  object uses messages (PCOLL_PARTIAL_SHM_BYTES=0)\n"
    "                  (default auto)\n"
    "  --per-rank      also print each rank's average latency per mode\n"
    "                  (default on for group)\n"
    "  --json          one JSON object per mode and size: bench, mode, ranks, bytes,\n"
    "                  skew_us, avg_latency_us, nap, members, data_phase,\n"
    "                  sent_bytes_per_round (null for mpi), rounds_per_iter,\n"
    "                  left_out_rounds (partial: rounds that went on without a\n"
    "                  rank silent for PCOLL_EXCLUDE_MS, summed over the ranks),\n"
    "                  speedup_vs_mpi, latency_us_by_rank\n"
    "float32 sum.  The partial modes accumulate (a late rank's 1.0 is not lost:\n"
    "it goes into a later round); each mode/size ends with a flush.\n";

#define MAX_MODES TOOL_MAX_MODES

static void sleep_us(double us)
{
    if (us <= 0) return;
    struct timespec ts = {(time_t)(us / 1e6), (long)((us - (double)(time_t)(us / 1e6) * 1e6) * 1e3)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void die(const char *prog, const char *what)
{
    fprintf(stderr, "%s: %s\n", prog, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One mode at one size: averages over the ranks (rank 0 gets the per-rank
 * latencies too). */
typedef struct result {
    double latency_us, nap, members, rounds_per_iter;
    double left_out_rounds; /* summed over the ranks */
    double sent_per_round; /* < 0: not measured */
    const char *data_phase;
} result_t;

static void run(const char *prog, pcoll_t *ctx, const tool_mode_t *m, size_t count, double skew_us, int iters,
                int warmup, int rank, int size, result_t *res, double *by_rank)
{
    float *buf = calloc(count, sizeof(float)), *out = calloc(count, sizeof(float));
    if (!buf || !out) die(prog, "out of memory");
    pcoll_partial_t *p = NULL;
    res->data_phase = m->kind == M_MPI ? "mpi" : "messages";
    if (m->kind == M_PARTIAL) {
        if (pcoll_partial_create(ctx, count, PCOLL_FLOAT32, &m->cfg, &p) != PCOLL_SUCCESS)
            die(prog, pcoll_last_error());
        res->data_phase = pcoll_partial_data_phase(p);
    }
    double lat_sum = 0, nap_sum = 0, members_sum = 0, rounds = 0, left_out = 0;
    pcoll_stats_t s0 = {0}, s1 = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < warmup + iters; it++) {
        if (it == warmup && pcoll_get_stats(ctx, &s0) != PCOLL_SUCCESS) die(prog, pcoll_last_error());
        sleep_us(rank * skew_us);
        for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
        double t0 = tool_now_us();
        int active = size, members = size, nrounds = 1;
        if (m->kind == M_MPI) {
            MPI_Allreduce(buf, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else if (m->kind == M_SYNC) {
            if (pcoll_allreduce(ctx, buf, out, count, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0) != PCOLL_SUCCESS)
                die(prog, pcoll_last_error());
        } else {
            pcoll_partial_info_t info;
            if (pcoll_partial_allreduce(p, buf, out, &info) != PCOLL_SUCCESS) die(prog, pcoll_last_error());
            active = info.active;
            members = info.group_size;
            nrounds = (int)info.rounds;
            left_out += (double)info.left_out_rounds;
        }
        double t = tool_now_us() - t0;
        memset(buf, 0, count * sizeof(float));
        if (it >= warmup) {
            lat_sum += t;
            nap_sum += active;
            members_sum += members;
            rounds += nrounds;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (pcoll_get_stats(ctx, &s1) != PCOLL_SUCCESS) die(prog, pcoll_last_error());
    if (p) {
        pcoll_partial_flush(p, out, NULL);
        pcoll_partial_free(&p);
    }
    double sent = (double)(s1.data_bytes_sent - s0.data_bytes_sent);
    double mine[6] = {lat_sum / iters, nap_sum / iters, members_sum / iters, rounds / iters,
                      rounds > 0 ? sent / rounds : 0, left_out},
           all[6];
    MPI_Allreduce(mine, all, 6, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Gather(&mine[0], 1, MPI_DOUBLE, by_rank, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    res->latency_us = all[0] / size;
    res->nap = all[1] / size;
    res->members = all[2] / size;
    res->rounds_per_iter = all[3] / size;
    res->left_out_rounds = all[5];
    res->sent_per_round = m->kind == M_MPI ? -1 : all[4] / size;
    free(buf);
    free(out);
}

static void print_json(const char *bench, const tool_mode_t *m, int size, size_t bytes, double skew_us,
                       const result_t *r, double mpi_latency, const double *by_rank)
{
    tool_json_t j;
    tool_json_begin(&j);
    tool_json_str(&j, "bench", bench);
    tool_json_str(&j, "mode", m->name);
    tool_json_int(&j, "ranks", size);
    tool_json_int(&j, "bytes", (long long)bytes);
    tool_json_num(&j, "skew_us", skew_us);
    tool_json_num(&j, "avg_latency_us", r->latency_us);
    tool_json_num(&j, "nap", r->nap);
    tool_json_num(&j, "members", r->members);
    tool_json_str(&j, "data_phase", r->data_phase);
    tool_json_num(&j, "sent_bytes_per_round", r->sent_per_round < 0 ? NAN : r->sent_per_round);
    tool_json_num(&j, "rounds_per_iter", r->rounds_per_iter);
    if (r->sent_per_round >= 0) tool_json_num(&j, "left_out_rounds", r->left_out_rounds);
    if (mpi_latency > 0) tool_json_num(&j, "speedup_vs_mpi", mpi_latency / r->latency_us);
    tool_json_nums(&j, "latency_us_by_rank", by_rank, (size_t)size);
    tool_json_end(&j, stdout);
}

static int skew_main(const char *bench, const char *prog, const char *help, const char *default_modes,
                     int per_rank, int argc, char **argv, int rank, int size)
{
    tool_mode_t modes[MAX_MODES];
    int nmodes = 0;
    nmodes = tool_parse_modes(prog, default_modes, modes, MAX_MODES);
    size_t min_bytes = 64, max_bytes = (size_t)4 << 20;
    double skew_us = 1000;
    long iters = 64, warmup = 2;
    int json = 0, messages = 0;
    static struct option opts[] = {{"modes", required_argument, 0, 'o'},      {"min-bytes", required_argument, 0, 'm'},
                                   {"max-bytes", required_argument, 0, 'M'},  {"skew-us", required_argument, 0, 's'},
                                   {"iters", required_argument, 0, 'i'},      {"warmup", required_argument, 0, 'w'},
                                   {"data-phase", required_argument, 0, 'd'}, {"per-rank", no_argument, 0, 'r'},
                                   {"json", no_argument, 0, 'j'},             {"help", no_argument, 0, 'h'},
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'o': nmodes = tool_parse_modes(prog, optarg, modes, MAX_MODES); break;
        case 'm': min_bytes = tool_flag_bytes(prog, "--min-bytes", optarg); break;
        case 'M': max_bytes = tool_flag_bytes(prog, "--max-bytes", optarg); break;
        case 's': skew_us = tool_flag_double(prog, "--skew-us", optarg, 0, 1e7); break;
        case 'i': iters = tool_flag_long(prog, "--iters", optarg, 1, 1000000); break;
        case 'w': warmup = tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'd':
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "messages") != 0)
                tool_usage_error(prog, "--data-phase: \"%s\" is not auto or messages", optarg);
            messages = strcmp(optarg, "messages") == 0;
            break;
        case 'r': per_rank = 1; break;
        case 'j': json = 1; break;
        case 'h':
            if (rank == 0) {
                fputs(help, stdout);
                fputs(common_help, stdout);
            }
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    tool_byte_range(prog, &min_bytes, max_bytes);
    for (int k = 0; k < nmodes; k++)
        if (modes[k].kind == M_PARTIAL && modes[k].cfg.kind == PCOLL_PARTIAL_QUORUM && modes[k].cfg.quorum > size)
            tool_usage_error(prog, "--modes: %s needs at least %d ranks", modes[k].name, modes[k].cfg.quorum);
    /* read by pcoll_init: every partial object takes the message path */
    if (messages && setenv("PCOLL_PARTIAL_SHM_BYTES", "0", 1) != 0) die(prog, "setenv failed");

    pcoll_t *ctx = tool_pcoll_init();
    result_t *res = calloc((size_t)nmodes, sizeof *res);
    double *by_rank = calloc((size_t)nmodes * (size_t)size, sizeof *by_rank);
    if (!res || !by_rank) die(prog, "out of memory");
    if (rank == 0 && !json) {
        printf("# %s: %d ranks, rank i sleeps i * %.0f us, %ld iterations; latency averaged over ranks and "
               "iterations;\n# nap: active ranks per round; members: ranks a round sums; sent/round: data bytes a "
               "rank sent per round\n",
               prog, size, skew_us, iters);
        printf("%-12s %10s %-14s %14s %7s %8s %12s %9s %9s\n", "mode", "bytes", "data_phase", "avg_latency_us", "nap",
               "members", "sent/round", "rounds/it", "mpi/mode");
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 8) {
        size_t count = bytes / 4;
        /* MPI_Allreduce first: the others' ratios need it */
        int mpi = -1;
        for (int k = 0; k < nmodes; k++)
            if (modes[k].kind == M_MPI) mpi = k;
        for (int i = -1; i < nmodes; i++) {
            int k = i < 0 ? mpi : i;
            if (k < 0 || (i >= 0 && k == mpi)) continue;
            run(prog, ctx, &modes[k], count, skew_us, (int)iters, (int)warmup, rank, size, &res[k],
                by_rank + (size_t)k * (size_t)size);
        }
        double mpi_latency = mpi >= 0 ? res[mpi].latency_us : 0;
        if (rank != 0) continue;
        for (int k = 0; k < nmodes; k++) {
            const result_t *r = &res[k];
            if (json) {
                print_json(bench, &modes[k], size, count * 4, skew_us, r, mpi_latency, by_rank + (size_t)k * size);
                continue;
            }
            char ratio[32] = "-", sent[32] = "-";
            if (mpi_latency > 0) snprintf(ratio, sizeof ratio, "%.2f", mpi_latency / r->latency_us);
            if (r->sent_per_round >= 0) snprintf(sent, sizeof sent, "%.0f", r->sent_per_round);
            printf("%-12s %10zu %-14s %14.1f %7.2f %8.2f %12s %9.2f %9s\n", modes[k].name, count * 4, r->data_phase,
                   r->latency_us, r->nap, r->members, sent, r->rounds_per_iter, ratio);
        }
        if (per_rank && !json) {
            printf("# latency per rank (us), %zu bytes\n%6s", count * 4, "rank");
            for (int k = 0; k < nmodes; k++) printf(" %12s", modes[k].name);
            printf("\n");
            for (int i = 0; i < size; i++) {
                printf("%6d", i);
                for (int k = 0; k < nmodes; k++) printf(" %12.1f", by_rank[(size_t)k * size + (size_t)i]);
                printf("\n");
            }
        }
        fflush(stdout);
        if (bytes > SIZE_MAX / 8) break;
    }
    free(res);
    free(by_rank);
    pcoll_finalize(&ctx);
    return 0;
}

int bench_skew(int argc, char **argv, int rank, int size)
{
    return skew_main("skew", "pcoll-bench skew", skew_help, "mpi,solo,majority", 0, argc, argv, rank, size);
}

int bench_group(int argc, char **argv, int rank, int size)
{
    return skew_main("group", "pcoll-bench group", group_help, "mpi,sync,solo,majority,group", 1, argc, argv, rank,
                     size);
}
