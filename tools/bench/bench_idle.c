/*
 * pcoll-bench idle: how much CPU an initialized process uses while the
 * application does nothing (its progress thread must sleep).  Each rank
 * measures its own user + system time over --seconds of wall time.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"
#include "tool.h"

static const char *help =
    "usage: mpirun -np P pcoll-bench idle [flags]\n"
    "  --seconds S      how long to stay idle (default 10)\n"
    "  --partial KIND   keep a partial allreduce object (solo, majority, quorum:Q)\n"
    "                   alive meanwhile: the progress thread then listens for\n"
    "                   activations instead of sleeping until woken\n"
    "  --json           one JSON object: bench, ranks, seconds, partial, cpu_pct_max,\n"
    "                   cpu_pct_mean\n"
    "Reports the CPU time of each process (all its threads) as % of one core.\n";

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

int bench_idle(int argc, char **argv, int rank, int size)
{
    const char *prog = "pcoll-bench idle";
    double seconds = 10;
    int json = 0;
    const char *partial = NULL;
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    static struct option opts[] = {{"seconds", required_argument, 0, 's'}, {"partial", required_argument, 0, 'p'},
                                   {"json", no_argument, 0, 'j'},          {"help", no_argument, 0, 'h'},
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': seconds = tool_flag_double(prog, "--seconds", optarg, 0.1, 3600); break;
        case 'p':
            partial = optarg;
            if (pcoll_partial_config_parse(optarg, &cfg) != PCOLL_SUCCESS)
                tool_usage_error(prog, "--partial: \"%s\" is not solo, majority or quorum:Q", optarg);
            break;
        case 'j': json = 1; break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    pcoll_t *ctx = tool_pcoll_init();
    pcoll_partial_t *p = NULL;
    if (partial && pcoll_partial_create(ctx, 1, PCOLL_FLOAT32, &cfg, &p) != PCOLL_SUCCESS) {
        if (rank == 0) fprintf(stderr, "%s: %s\n", prog, pcoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double c0 = cpu_seconds(), w0 = tool_now_us();
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    double pct = 100.0 * (cpu_seconds() - c0) / ((tool_now_us() - w0) * 1e-6);
    double mx = 0, total = 0;
    MPI_Reduce(&pct, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&pct, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        if (json) {
            tool_json_t j;
            tool_json_begin(&j);
            tool_json_str(&j, "bench", "idle");
            tool_json_int(&j, "ranks", size);
            tool_json_num(&j, "seconds", seconds);
            tool_json_str(&j, "partial", partial ? partial : "none");
            tool_json_num(&j, "cpu_pct_max", mx);
            tool_json_num(&j, "cpu_pct_mean", total / size);
            tool_json_end(&j, stdout);
        } else {
            printf("# pcoll-bench idle: %d ranks initialized and idle for %.1f s%s%s\n", size, seconds,
                   partial ? ", with a partial object: " : "", partial ? partial : "");
            printf("cpu %% of one core per process: max %.2f, mean %.2f\n", mx, total / size);
        }
    }
    if (p) pcoll_partial_free(&p);
    pcoll_finalize(&ctx);
    return 0;
}
