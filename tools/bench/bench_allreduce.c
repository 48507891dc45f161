/*
 * pcoll-bench allreduce: for sizes doubling from --min-bytes to --max-bytes,
 * time pcoll_allreduce, MPI_Allreduce and MPI_Iallreduce + MPI_Wait in the
 * same run.  The repetitions of a size are split into blocks; each block runs
 * one variant, the variants take turns block by block, and every block starts
 * after a settle pause and warm-up operations, so that one variant's idle
 * threads (pcoll's progress thread polls for a while after an operation)
 * cannot slow down the next variant's measurement.  Each repetition starts
 * after a barrier; its time is the slowest rank's.  Reported: the median over
 * repetitions, and pcoll / MPI_Allreduce.  float32 sum of integer values, so
 * results can be compared bit for bit (--no-verify skips the comparison).
 *
 * With --link-rate R (the rate of each node's link, each way), also the
 * physical limit of an allreduce over N nodes: every node must send and
 * receive 2 (N - 1) / N of the vector on its link, so no allreduce takes
 * less than 2 (N - 1) / N x bytes / R; and the fraction of it each variant
 * reached (limit / time).
 */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "tool.h"

static const char *help =
    "usage: mpirun -np P pcoll-bench allreduce [flags]\n"
    "  --min-bytes B   smallest message (default 8)\n"
    "  --max-bytes B   largest message (default 64M); sizes double in between\n"
    "  --iters N       repetitions per size (default: 200 for small sizes,\n"
    "                  fewer for large ones, at least 10)\n"
    "  --warmup N      untimed operations before each block of a variant (default 3)\n"
    "  --algo A        force pcoll's algorithm: auto|recdbl|rabenseifner|ring|direct\n"
    "                  (default auto; PCOLL_ALLREDUCE_ALGO also works)\n"
    "  --plan          also a persistent plan (pcoll_allreduce_init once per\n"
    "                  size, then pcoll_start + pcoll_wait) and pcoll_iallreduce +\n"
    "                  pcoll_wait: columns plan_us, ipcoll_us, plan/pcoll\n"
    "  --json          one JSON object per size: bench, algo, ranks, bytes,\n"
    "                  pcoll_us, mpi_us, impi_us, ratio (+ pcoll_min_us, pcoll_avg_us;\n"
    "                  with --plan: plan_us, ipcoll_us, plan_ratio)\n"
    "  --no-verify     do not compare pcoll's results with MPI_Allreduce's\n"
    "  --group G       a group call: ranks 0..G-1 as the member list (pcoll) and\n"
    "                  their communicator (MPI); the other ranks wait (default:\n"
    "                  all ranks; JSON adds group_size)\n"
    "  --tune FILE     instead: time every algorithm that applies at each size and\n"
    "                  write the fastest as this rank and node count's rows of the\n"
    "                  tuning table FILE (other rows kept), for PCOLL_TUNING_FILE;\n"
    "                  --json: one object per size (bench \"tune\", ranks, nodes,\n"
    "                  bytes, algo, <algorithm>_us)\n"
    "  --link-rate R   each node's link rate (1gbit, 100mbit, ...): also the\n"
    "                  limit 2 (N-1)/N x bytes / R for N nodes and the fraction\n"
    "                  of it reached (columns limit_us, pcoll%, mpi%, impi%; JSON\n"
    "                  nodes, link_limit_us, pcoll_of_limit, mpi_of_limit,\n"
    "                  impi_of_limit)\n"
    "sizes take K, M, G suffixes (binary). Times are microseconds.\n";

enum { V_PCOLL, V_MPI, V_IMPI, V_PLAN, V_IPCOLL, NV };
enum { BLOCKS = 5, SETTLE_US = 2000 };

static pcoll_plan_t *plan; /* V_PLAN: the current size's */
/* --group: the member list 0..G-1 (pcoll), their communicator (MPI) */
static int *members, nmembers, member = 1;
static MPI_Comm peers = MPI_COMM_WORLD;

static void run_one(int v, pcoll_t *ctx, const float *in, float *out, size_t count)
{
    if (!member) return;
    if (v == V_PLAN || v == V_IPCOLL) {
        pcoll_request_t *req;
        int rc = v == V_PLAN ? pcoll_start(plan, &req)
                             : pcoll_iallreduce(ctx, in, out, count, PCOLL_FLOAT32, PCOLL_SUM, members, nmembers, &req);
        if (rc == PCOLL_SUCCESS) rc = pcoll_wait(&req);
        if (rc != PCOLL_SUCCESS) {
            fprintf(stderr, "%s + pcoll_wait: %s\n", v == V_PLAN ? "pcoll_start" : "pcoll_iallreduce",
                    pcoll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    } else if (v == V_PCOLL) {
        int rc = pcoll_allreduce(ctx, in, out, count, PCOLL_FLOAT32, PCOLL_SUM, members, nmembers);
        if (rc != PCOLL_SUCCESS) {
            fprintf(stderr, "pcoll_allreduce: %s\n", pcoll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    } else if (v == V_MPI) {
        MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, peers);
    } else {
        MPI_Request r;
        MPI_Iallreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, peers, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
}

static int auto_iters(size_t bytes)
{
    double n = 2e8 / ((double)bytes + 1e5);
    return n > 200 ? 200 : n < BLOCKS * 2 ? BLOCKS * 2 : (int)n;
}

int bench_allreduce(int argc, char **argv, int rank, int size)
{
    const char *prog = "pcoll-bench allreduce";
    size_t min_bytes = 8, max_bytes = (size_t)64 << 20;
    long iters = 0, warmup = 3;
    int json = 0, verify = 1, with_plan = 0, group = 0;
    const char *tune_file = NULL;
    double link_rate = 0; /* bit/s; 0: not given */
    pcoll_allreduce_algo_t algo = PCOLL_ALGO_AUTO;
    static struct option opts[] = {{"min-bytes", required_argument, 0, 'm'}, {"max-bytes", required_argument, 0, 'M'},
                                   {"iters", required_argument, 0, 'i'},     {"warmup", required_argument, 0, 'w'},
                                   {"algo", required_argument, 0, 'a'},      {"json", no_argument, 0, 'j'},
                                   {"no-verify", no_argument, 0, 'n'},       {"plan", no_argument, 0, 'p'},
                                   {"link-rate", required_argument, 0, 'l'}, {"help", no_argument, 0, 'h'},
                                   {"tune", required_argument, 0, 't'},      {"group", required_argument, 0, 'g'},
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': min_bytes = tool_flag_bytes(prog, "--min-bytes", optarg); break;
        case 'M': max_bytes = tool_flag_bytes(prog, "--max-bytes", optarg); break;
        case 'i': iters = tool_flag_long(prog, "--iters", optarg, 1, 1000000); break;
        case 'w': warmup = tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'a': algo = tool_flag_algo(prog, "--algo", optarg); break;
        case 'j': json = 1; break;
        case 'n': verify = 0; break;
        case 'g': group = (int)tool_flag_long(prog, "--group", optarg, 2, size); break;
        case 'p': with_plan = 1; break;
        case 'l': link_rate = tool_flag_rate(prog, "--link-rate", optarg); break;
        case 't':
            if (!optarg[0]) tool_usage_error(prog, "--tune: the file name is empty");
            tune_file = optarg;
            break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    tool_byte_range(prog, &min_bytes, max_bytes);
    if (max_bytes / 4 > (size_t)INT32_MAX) tool_usage_error(prog, "--max-bytes: MPI counts are limited to 2^31-1");

    if (tune_file && (algo != PCOLL_ALGO_AUTO || with_plan || link_rate > 0 || group))
        tool_usage_error(prog,
                         "--tune measures every algorithm itself: no --algo, --plan, --link-rate or --group with it");
    if (group && link_rate > 0) tool_usage_error(prog, "--link-rate is for calls of all ranks: not with --group");
    if (group) {
        nmembers = group;
        if (!(members = malloc(sizeof(int) * (size_t)group))) {
            fprintf(stderr, "%s: out of memory\n", prog);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int i = 0; i < group; i++) members[i] = i;
        member = rank < group;
        MPI_Comm_split(MPI_COMM_WORLD, member, rank, &peers);
    }
    pcoll_t *ctx = tool_pcoll_init();
    if (tune_file) {
        int code = bench_allreduce_tune(ctx, tune_file, min_bytes, max_bytes, iters, json, rank, size);
        pcoll_finalize(&ctx);
        return code;
    }
    int nodes = link_rate > 0 ? tool_count_nodes() : 1;
    if (algo != PCOLL_ALGO_AUTO) pcoll_set_allreduce_algo(ctx, algo);
    size_t maxcount = max_bytes / 4;
    float *in = malloc(maxcount * sizeof(float));
    float *out[NV];
    for (int v = 0; v < NV; v++) out[v] = malloc(maxcount * sizeof(float));
    if (!in || !out[0] || !out[1] || !out[2] || !out[3] || !out[4]) {
        fprintf(stderr, "%s: out of memory for %zu-byte buffers\n", prog, max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < maxcount; i++) in[i] = (float)((int)((i * 7 + (size_t)rank * 13) % 97) - 48);

    if (rank == 0 && !json) {
        printf("# pcoll-bench allreduce: %d ranks%s, float32 sum; time = median over repetitions of the slowest rank\n",
               size, group ? " (a group call of the first --group ranks)" : "");
        printf("%10s  %-12s %6s %11s %11s %11s %9s", "bytes", "algo", "reps", "pcoll_us", "mpi_us", "impi_us",
               "pcoll/mpi");
        if (with_plan) printf(" %11s %11s %10s", "plan_us", "ipcoll_us", "plan/pcoll");
        if (link_rate > 0) printf(" %11s %7s %7s %7s", "limit_us", "pcoll%", "mpi%", "impi%");
        printf("\n");
    }
    int failures = 0, nv = with_plan ? NV : V_PLAN;
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        size_t count = bytes / 4;
        int reps = iters ? (int)iters : auto_iters(bytes);
        if (with_plan &&
            member &&
            pcoll_allreduce_init(ctx, in, out[V_PLAN], count, PCOLL_FLOAT32, PCOLL_SUM, members, nmembers, &plan) !=
                PCOLL_SUCCESS) {
            fprintf(stderr, "%s: pcoll_allreduce_init: %s\n", prog, pcoll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double *t[NV], *slow[NV], *fast[NV], *sum[NV];
        for (int v = 0; v < NV; v++) {
            t[v] = malloc(sizeof(double) * (size_t)reps);
            slow[v] = malloc(sizeof(double) * (size_t)reps);
            fast[v] = malloc(sizeof(double) * (size_t)reps);
            sum[v] = malloc(sizeof(double) * (size_t)reps);
        }
        for (int b = 0; b < BLOCKS; b++)
            for (int k = 0; k < nv; k++) {
                int v = (k + b) % nv;
                MPI_Barrier(MPI_COMM_WORLD);
                usleep(SETTLE_US);
                for (int w = 0; w < warmup; w++) run_one(v, ctx, in, out[v], count);
                for (int r = b * reps / BLOCKS; r < (b + 1) * reps / BLOCKS; r++) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    double t0 = tool_now_us();
                    run_one(v, ctx, in, out[v], count);
                    t[v][r] = tool_now_us() - t0;
                }
            }
        /* over the members (--group: rank 0 is one, and reports) */
        for (int v = 0; v < nv; v++) {
            MPI_Allreduce(t[v], slow[v], reps, MPI_DOUBLE, MPI_MAX, peers);
            MPI_Allreduce(t[v], fast[v], reps, MPI_DOUBLE, MPI_MIN, peers);
            MPI_Allreduce(t[v], sum[v], reps, MPI_DOUBLE, MPI_SUM, peers);
        }
        int bad = verify && member && (memcmp(out[V_PCOLL], out[V_MPI], count * sizeof(float)) != 0 ||
                             (with_plan && (memcmp(out[V_PLAN], out[V_MPI], count * sizeof(float)) != 0 ||
                                            memcmp(out[V_IPCOLL], out[V_MPI], count * sizeof(float)) != 0)));
        int anybad = 0;
        MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        failures += anybad;
        double med[NV] = {0};
        for (int v = 0; v < nv; v++) med[v] = tool_median(slow[v], (size_t)reps);
        for (int r = 0; r < reps; r++) sum[V_PCOLL][r] /= group ? group : size;
        double pmin = tool_median(fast[V_PCOLL], (size_t)reps), pavg = tool_median(sum[V_PCOLL], (size_t)reps);
        const char *aname = pcoll_allreduce_algo_name(pcoll_allreduce_algo_for(ctx, count * 4, group ? group : size));
        double limit = link_rate > 0 ? 2.0 * (nodes - 1) / nodes * (double)(count * 4) * 8 / link_rate * 1e6 : 0;
        if (rank == 0) {
            if (json) {
                tool_json_t j;
                tool_json_begin(&j);
                tool_json_str(&j, "bench", "allreduce");
                tool_json_str(&j, "algo", aname);
                tool_json_int(&j, "ranks", size);
                if (group) tool_json_int(&j, "group_size", group);
                tool_json_int(&j, "bytes", (long long)(count * 4));
                tool_json_num(&j, "pcoll_us", med[V_PCOLL]);
                tool_json_num(&j, "mpi_us", med[V_MPI]);
                tool_json_num(&j, "impi_us", med[V_IMPI]);
                tool_json_num(&j, "ratio", med[V_PCOLL] / med[V_MPI]);
                tool_json_num(&j, "pcoll_min_us", pmin);
                tool_json_num(&j, "pcoll_avg_us", pavg);
                if (with_plan) {
                    tool_json_num(&j, "plan_us", med[V_PLAN]);
                    tool_json_num(&j, "ipcoll_us", med[V_IPCOLL]);
                    tool_json_num(&j, "plan_ratio", med[V_PLAN] / med[V_PCOLL]);
                }
                if (link_rate > 0) {
                    tool_json_int(&j, "nodes", nodes);
                    tool_json_num(&j, "link_limit_us", limit);
                    tool_json_num(&j, "pcoll_of_limit", limit / med[V_PCOLL]);
                    tool_json_num(&j, "mpi_of_limit", limit / med[V_MPI]);
                    tool_json_num(&j, "impi_of_limit", limit / med[V_IMPI]);
                }
                tool_json_int(&j, "reps", reps);
                tool_json_str(&j, "verified", !verify ? "no" : anybad ? "FAILED" : "yes");
                tool_json_end(&j, stdout);
            } else {
                printf("%10zu  %-12s %6d %11.1f %11.1f %11.1f %9.2f", count * 4, aname, reps, med[V_PCOLL], med[V_MPI],
                       med[V_IMPI], med[V_PCOLL] / med[V_MPI]);
                if (with_plan) printf(" %11.1f %11.1f %10.2f", med[V_PLAN], med[V_IPCOLL], med[V_PLAN] / med[V_PCOLL]);
                if (link_rate > 0)
                    printf(" %11.1f %6.1f%% %6.1f%% %6.1f%%", limit, 100 * limit / med[V_PCOLL], 100 * limit / med[V_MPI],
                           100 * limit / med[V_IMPI]);
                printf("%s\n", anybad ? "  RESULT DIFFERS" : "");
                fflush(stdout);
            }
        }
        for (int v = 0; v < NV; v++) {
            free(t[v]);
            free(slow[v]);
            free(fast[v]);
            free(sum[v]);
        }
        if (with_plan && member) pcoll_plan_free(&plan);
        if (bytes > SIZE_MAX / 2) break;
    }
    if (rank == 0 && failures) fprintf(stderr, "%s: %d sizes gave results different from MPI_Allreduce\n", prog, failures);
    pcoll_finalize(&ctx);
    if (group) {
        MPI_Comm_free(&peers);
        free(members);
    }
    free(in);
    for (int v = 0; v < NV; v++) free(out[v]);
    return failures ? 1 : 0;
}
