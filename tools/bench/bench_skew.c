/*
 * pcoll-bench skew: the eager-SGD microbenchmark (DESIGN section 7).  Each
 * iteration rank i sleeps i * skew, sets its buffer to 1.0, times one
 * collective, resets the buffer to 0 and meets the others at a barrier.
 * Reported per mode and size: the average latency over ranks and iterations,
 * and the number of active processes (NAP) per round: every rank for
 * MPI_Allreduce, info.active for the partial modes (the ranks whose
 * application was waiting for the round when it took their data).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "tool.h"

static const char *help =
    "usage: mpirun -np P pcoll-bench skew [flags]\n"
    "  --modes LIST    comma-separated: mpi, solo, majority, quorum:Q\n"
    "                  (default mpi,solo,majority)\n"
    "  --min-bytes B   smallest message (default 64)\n"
    "  --max-bytes B   largest message (default 4M); sizes grow 8x:\n"
    "                  64, 512, 4K, 32K, 256K, 4M\n"
    "  --skew-us U     rank i sleeps i * U microseconds per iteration (default 1000)\n"
    "  --iters N       timed iterations per mode and size (default 64)\n"
    "  --warmup N      untimed iterations before them (default 2)\n"
    "  --json          one JSON object per mode and size: bench, mode, ranks,\n"
    "                  bytes, skew_us, avg_latency_us, nap (+ speedup_vs_mpi)\n"
    "float32 sum.  The partial modes accumulate (a late rank's 1.0 is not lost:\n"
    "it goes into a later round); each mode/size ends with a flush.\n";

#define MAX_MODES 16

typedef struct mode {
    char name[32];
    int is_mpi;
    pcoll_partial_config_t cfg;
} mode_t_;

static void parse_modes(const char *prog, const char *list, mode_t_ *modes, int *n)
{
    char names[MAX_MODES][32];
    *n = tool_split_list(prog, "--modes", list, names, MAX_MODES);
    for (int i = 0; i < *n; i++) {
        mode_t_ *m = &modes[i];
        memcpy(m->name, names[i], sizeof m->name); /* both 32 characters */
        m->is_mpi = strcmp(names[i], "mpi") == 0;
        pcoll_partial_config_default(&m->cfg);
        if (!m->is_mpi && pcoll_partial_config_parse(names[i], &m->cfg) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--modes: \"%s\" is not mpi, solo, majority or quorum:Q", names[i]);
    }
}

static void sleep_us(double us)
{
    if (us <= 0) return;
    struct timespec ts = {(time_t)(us / 1e6), (long)((us - (double)(time_t)(us / 1e6) * 1e6) * 1e3)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Runs one mode at one size; returns the average latency over ranks and
 * iterations and the average NAP (at every rank). */
static void run(pcoll_t *ctx, const mode_t_ *m, size_t count, double skew_us, int iters, int warmup, int rank,
                int size, double *avg_latency, double *nap)
{
    float *buf = calloc(count, sizeof(float)), *out = calloc(count, sizeof(float));
    if (!buf || !out) {
        fprintf(stderr, "pcoll-bench skew: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    pcoll_partial_t *p = NULL;
    if (!m->is_mpi) {
        int rc = pcoll_partial_create(ctx, count, PCOLL_FLOAT32, &m->cfg, &p);
        if (rc != PCOLL_SUCCESS) {
            if (rank == 0) fprintf(stderr, "pcoll-bench skew: %s: %s\n", m->name, pcoll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    double lat_sum = 0, nap_sum = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < warmup + iters; it++) {
        sleep_us(rank * skew_us);
        for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
        double t0 = tool_now_us();
        int active = size;
        if (m->is_mpi) {
            MPI_Allreduce(buf, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else {
            pcoll_partial_info_t info;
            int rc = pcoll_partial_allreduce(p, buf, out, &info);
            if (rc != PCOLL_SUCCESS) {
                fprintf(stderr, "pcoll-bench skew: %s\n", pcoll_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            active = info.active;
        }
        double t = tool_now_us() - t0;
        memset(buf, 0, count * sizeof(float));
        if (it >= warmup) {
            lat_sum += t;
            nap_sum += active;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (p) {
        pcoll_partial_flush(p, out, NULL);
        pcoll_partial_free(&p);
    }
    double mine[2] = {lat_sum / iters, nap_sum / iters}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *avg_latency = all[0] / size;
    *nap = all[1] / size;
    free(buf);
    free(out);
}

int bench_skew(int argc, char **argv, int rank, int size)
{
    const char *prog = "pcoll-bench skew";
    mode_t_ modes[MAX_MODES];
    int nmodes = 0;
    parse_modes(prog, "mpi,solo,majority", modes, &nmodes);
    size_t min_bytes = 64, max_bytes = (size_t)4 << 20;
    double skew_us = 1000;
    long iters = 64, warmup = 2;
    int json = 0;
    static struct option opts[] = {{"modes", required_argument, 0, 'o'},     {"min-bytes", required_argument, 0, 'm'},
                                   {"max-bytes", required_argument, 0, 'M'}, {"skew-us", required_argument, 0, 's'},
                                   {"iters", required_argument, 0, 'i'},     {"warmup", required_argument, 0, 'w'},
                                   {"json", no_argument, 0, 'j'},            {"help", no_argument, 0, 'h'},
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'o': parse_modes(prog, optarg, modes, &nmodes); break;
        case 'm': min_bytes = tool_flag_bytes(prog, "--min-bytes", optarg); break;
        case 'M': max_bytes = tool_flag_bytes(prog, "--max-bytes", optarg); break;
        case 's': skew_us = tool_flag_double(prog, "--skew-us", optarg, 0, 1e7); break;
        case 'i': iters = tool_flag_long(prog, "--iters", optarg, 1, 1000000); break;
        case 'w': warmup = tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'j': json = 1; break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    tool_byte_range(prog, &min_bytes, max_bytes);
    for (int k = 0; k < nmodes; k++)
        if (!modes[k].is_mpi && modes[k].cfg.kind == PCOLL_PARTIAL_QUORUM && modes[k].cfg.quorum > size)
            tool_usage_error(prog, "--modes: %s needs at least %d ranks", modes[k].name, modes[k].cfg.quorum);

    pcoll_t *ctx = tool_pcoll_init();
    if (rank == 0 && !json) {
        printf("# pcoll-bench skew: %d ranks, rank i sleeps i * %.0f us, %ld iterations; latency averaged over ranks "
               "and iterations\n",
               size, skew_us, iters);
        printf("%-12s %10s %16s %8s %14s\n", "mode", "bytes", "avg_latency_us", "nap", "mpi/mode");
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 8) {
        size_t count = bytes / 4;
        double mpi_latency = 0;
        for (int k = 0; k < nmodes; k++)
            if (modes[k].is_mpi) {
                double nap;
                run(ctx, &modes[k], count, skew_us, (int)iters, (int)warmup, rank, size, &mpi_latency, &nap);
                break;
            }
        for (int k = 0; k < nmodes; k++) {
            double lat, nap;
            if (modes[k].is_mpi) {
                lat = mpi_latency;
                nap = size;
            } else {
                run(ctx, &modes[k], count, skew_us, (int)iters, (int)warmup, rank, size, &lat, &nap);
            }
            double speedup = mpi_latency > 0 ? mpi_latency / lat : 0;
            if (rank != 0) continue;
            if (json) {
                tool_json_t j;
                tool_json_begin(&j);
                tool_json_str(&j, "bench", "skew");
                tool_json_str(&j, "mode", modes[k].name);
                tool_json_int(&j, "ranks", size);
                tool_json_int(&j, "bytes", (long long)(count * 4));
                tool_json_num(&j, "skew_us", skew_us);
                tool_json_num(&j, "avg_latency_us", lat);
                tool_json_num(&j, "nap", nap);
                if (mpi_latency > 0) tool_json_num(&j, "speedup_vs_mpi", speedup);
                tool_json_end(&j, stdout);
            } else {
                char ratio[32] = "-";
                if (mpi_latency > 0) snprintf(ratio, sizeof ratio, "%.2f", speedup);
                printf("%-12s %10zu %16.1f %8.2f %14s\n", modes[k].name, count * 4, lat, nap, ratio);
                fflush(stdout);
            }
        }
        if (bytes > SIZE_MAX / 8) break;
    }
    pcoll_finalize(&ctx);
    return 0;
}
