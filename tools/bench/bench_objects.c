/*
 * pcoll-bench objects: what a partial call costs when many partial objects
 * are alive.  For each number of objects N and each kind, N objects are
 * created; every rank calls them in turn (object 0, 1, ..., N-1, again) for
 * --calls calls in all, then flushes and frees them.  Reported: the time
 * per call (the mean over the calls, of the slowest rank), the creation time
 * per object, and the time per call relative to the first N of the list.
 * Nothing else runs meanwhile: a call costs what the library makes it cost.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tool.h"

static const char *help =
    "usage: mpirun -np P pcoll-bench objects [flags]\n"
    "  --counts LIST   numbers of live objects, comma-separated (default 10,100,1000)\n"
    "  --kinds LIST    solo, majority, quorum:Q, comma-separated (default solo,majority)\n"
    "  --calls N       calls per rank for each count and kind (default 3000; at\n"
    "                  least one sweep over the objects)\n"
    "  --count C       elements per object, float32 (default 16)\n"
    "  --json          one JSON object per count and kind: bench, kind, ranks,\n"
    "                  objects, calls, call_us, create_us, data_phase, ratio\n";

#define MAX_LIST 16

int bench_objects(int argc, char **argv, int rank, int size)
{
    const char *prog = "pcoll-bench objects";
    char counts_s[MAX_LIST][32], kinds[MAX_LIST][32];
    int ncounts = tool_split_list(prog, "--counts", "10,100,1000", counts_s, MAX_LIST);
    int nkinds = tool_split_list(prog, "--kinds", "solo,majority", kinds, MAX_LIST);
    long calls = 3000, count = 16;
    int json = 0;
    static struct option opts[] = {{"counts", required_argument, 0, 'c'}, {"kinds", required_argument, 0, 'k'},
                                   {"calls", required_argument, 0, 'n'},  {"count", required_argument, 0, 'e'},
                                   {"json", no_argument, 0, 'j'},         {"help", no_argument, 0, 'h'},
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': ncounts = tool_split_list(prog, "--counts", optarg, counts_s, MAX_LIST); break;
        case 'k': nkinds = tool_split_list(prog, "--kinds", optarg, kinds, MAX_LIST); break;
        case 'n': calls = tool_flag_long(prog, "--calls", optarg, 1, 100000000); break;
        case 'e': count = tool_flag_long(prog, "--count", optarg, 1, 1 << 24); break;
        case 'j': json = 1; break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    long counts[MAX_LIST];
    for (int i = 0; i < ncounts; i++) counts[i] = tool_flag_long(prog, "--counts", counts_s[i], 1, 100000);
    pcoll_partial_config_t cfgs[MAX_LIST];
    for (int k = 0; k < nkinds; k++) {
        pcoll_partial_config_default(&cfgs[k]);
        if (pcoll_partial_config_parse(kinds[k], &cfgs[k]) != PCOLL_SUCCESS)
            tool_usage_error(prog, "--kinds: \"%s\" is not solo, majority or quorum:Q", kinds[k]);
    }

    pcoll_t *ctx = tool_pcoll_init();
    float *in = calloc((size_t)count, sizeof(float)), *out = calloc((size_t)count, sizeof(float));
    if (!in || !out) {
        fprintf(stderr, "%s: out of memory\n", prog);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    in[0] = 1;
    if (rank == 0 && !json)
        printf("# pcoll-bench objects: %d ranks, %ld float32 per object; time per call = mean over the calls of the\n"
               "# slowest rank; ratio = time per call / time per call at the first count of the list\n"
               "%-12s %8s %8s %12s %12s %9s  %s\n",
               size, count, "kind", "objects", "calls", "call_us", "create_us", "ratio", "data phase");
    for (int k = 0; k < nkinds; k++) {
        double first = 0;
        for (int ci = 0; ci < ncounts; ci++) {
            long n = counts[ci], ncalls = calls < n ? n : calls;
            pcoll_partial_t **p = calloc((size_t)n, sizeof *p);
            if (!p) {
                fprintf(stderr, "%s: out of memory for %ld objects\n", prog, n);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = tool_now_us();
            for (long i = 0; i < n; i++)
                if (pcoll_partial_create(ctx, (size_t)count, PCOLL_FLOAT32, &cfgs[k], &p[i]) != PCOLL_SUCCESS) {
                    fprintf(stderr, "%s: pcoll_partial_create: %s\n", prog, pcoll_last_error());
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            double t1 = tool_now_us();
            MPI_Barrier(MPI_COMM_WORLD);
            double t2 = tool_now_us();
            for (long call = 0; call < ncalls; call++)
                if (pcoll_partial_allreduce(p[call % n], in, out, NULL) != PCOLL_SUCCESS) {
                    fprintf(stderr, "%s: pcoll_partial_allreduce: %s\n", prog, pcoll_last_error());
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            double t3 = tool_now_us();
            const char *phase = pcoll_partial_data_phase(p[0]);
            for (long i = n - 1; i >= 0; i--) {
                pcoll_partial_flush(p[i], out, NULL);
                pcoll_partial_free(&p[i]);
            }
            free(p);
            double mine[2] = {(t3 - t2) / (double)ncalls, (t1 - t0) / (double)n}, worst[2];
            MPI_Reduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank != 0) continue;
            if (ci == 0) first = worst[0];
            if (json) {
                tool_json_t j;
                tool_json_begin(&j);
                tool_json_str(&j, "bench", "objects");
                tool_json_str(&j, "kind", kinds[k]);
                tool_json_int(&j, "ranks", size);
                tool_json_int(&j, "objects", n);
                tool_json_int(&j, "calls", ncalls);
                tool_json_num(&j, "call_us", worst[0]);
                tool_json_num(&j, "create_us", worst[1]);
                tool_json_str(&j, "data_phase", phase);
                tool_json_num(&j, "ratio", worst[0] / first);
                tool_json_end(&j, stdout);
            } else {
                printf("%-12s %8ld %8ld %12.1f %12.1f %9.2f  %s\n", kinds[k], n, ncalls, worst[0], worst[1],
                       worst[0] / first, phase);
                fflush(stdout);
            }
        }
    }
    pcoll_finalize(&ctx);
    free(in);
    free(out);
    return 0;
}
