/*
 * pcoll-sim allreduce: pcoll-bench allreduce's size sweep, simulated.  Every
 * rank builds the schedule src/algo builds for it (time-only: no data) and
 * src/engine's scheduler runs it on its progress actor; the time of a size
 * is the slowest rank's, from a common start.
 *
 *   per size:  barrier -> t0 -> call (doorbell, schedule, on_done) -> t1
 *              pcoll: pc_allreduce_choose's pick (or --algo)
 *              mpi:   Open MPI 4.1's rule as pcoll schedules (recursive
 *                     doubling below 10000 bytes, else Rabenseifner for a
 *                     power of two and ring otherwise): a stand-in, which
 *                     impi_us repeats
 *
 * The simulation is deterministic: one repetition per size, so the median,
 * the minimum and the mean are that one time.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "algo/allreduce.h"
#include "sim.h"
#include "tool.h"

static const char *help =
    "usage: pcoll-sim allreduce [flags]\n"
    "pcoll-bench allreduce's sweep on the simulated platform: pcoll's schedules\n"
    "(src/algo) run by its scheduler (src/engine) on SimGrid, time only.\n"
    "  --min-bytes B   smallest message (default 8)\n"
    "  --max-bytes B   largest message (default 64M); sizes double in between\n"
    "  --algo A        force pcoll's algorithm: auto|recdbl|rabenseifner|ring|direct\n"
    "  --group G       a group call of ranks 0..G-1 (JSON adds group_size)\n"
    "  --json          one JSON object per size, pcoll-bench allreduce's keys:\n"
    "                  bench, algo, ranks, bytes, pcoll_us, mpi_us, impi_us, ratio,\n"
    "                  pcoll_min_us, pcoll_avg_us, nodes, link_limit_us,\n"
    "                  pcoll_of_limit, mpi_of_limit, impi_of_limit, reps,\n"
    "                  verified (\"no\": nothing is computed); then one line\n"
    "                  {\"bench\": \"sim\", ...}: wall time, memory, messages, model\n"
    "  --iters N, --warmup N, --no-verify   accepted for pcoll-bench's command\n"
    "                  lines; the simulation is deterministic (one repetition)\n";

enum { V_PCOLL, V_MPI, NV };

static struct {
    size_t min_bytes, max_bytes;
    pcoll_allreduce_algo_t algo;
    int group; /* members 0..group-1 */
    int nsizes;
    double *t; /* [size][variant][rank] */
} A;

static pcoll_allreduce_algo_t mpi_rule(size_t bytes, int n)
{
    if (bytes < 10000 || n <= 2) return PCOLL_ALGO_RECDBL;
    return (n & (n - 1)) == 0 ? PCOLL_ALGO_RABENSEIFNER : PCOLL_ALGO_RING;
}

static pcoll_allreduce_algo_t pcoll_rule(size_t bytes, int n)
{
    /* the context's defaults: PCOLL_DIRECT_BYTES 32768, PCOLL_SMALL_BYTES 8192 */
    return pc_allreduce_choose(PC_USE_CALL, A.algo, PCOLL_ALGO_AUTO, 32768, 8192, bytes, n);
}

static void sched_finished(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    if (status != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-sim: a schedule failed: %s\n", pcoll_strerror(status));
        exit(1);
    }
    sim_call_done(arg);
}

static void start_on_progress(sim_rank_t *r, void *arg)
{
    if (sim_sched_start(r, arg) != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-sim: rank %d: a schedule did not start\n", r->rank);
        exit(1);
    }
}

static void app(sim_rank_t *r)
{
    int n = A.group, member = r->rank < n;
    int k = 0;
    for (size_t bytes = A.min_bytes; bytes <= A.max_bytes; bytes *= 2, k++) {
        for (int v = 0; v < NV; v++) {
            pc_sched_t *s = NULL;
            if (member) {
                pcoll_allreduce_algo_t algo = v == V_PCOLL ? pcoll_rule(bytes, n) : mpi_rule(bytes, n);
                pc_allreduce_spec_t sp = {n, r->rank, bytes / 4, PCOLL_FLOAT32, PCOLL_SUM, 0, 0, 0, 1};
                if (pc_allreduce_build(&sp, algo, &s) != PCOLL_SUCCESS) {
                    fprintf(stderr, "pcoll-sim: rank %d: building the %zu-byte schedule failed\n", r->rank, bytes);
                    exit(1);
                }
                sim_sched_prepare(r, s, NULL, k * NV + v);
                pc_sched_on_done(s, sched_finished, r);
            }
            /* one untimed call first, as pcoll-bench's warm-up: the
             * receivers' mailboxes are then known (eager) */
            sim_barrier();
            if (member) sim_call(r, start_on_progress, s);
            sim_barrier();
            double t0 = sim_now();
            if (member) sim_call(r, start_on_progress, s);
            A.t[((size_t)k * NV + (size_t)v) * (size_t)sim.P + (size_t)r->rank] = sim_now() - t0;
            sim_barrier();
            if (s) pc_sched_free(s);
        }
        if (bytes > SIZE_MAX / 2) break;
    }
}

int sim_cmd_allreduce(int argc, char **argv)
{
    const char *prog = "pcoll-sim allreduce";
    sim_model_t m;
    sim_model_defaults(&m, SIM_CLUSTER);
    A.min_bytes = 8;
    A.max_bytes = (size_t)64 << 20;
    A.algo = PCOLL_ALGO_AUTO;
    int json = 0;
    static struct option opts[] = {{"min-bytes", required_argument, 0, 'm'},
                                   {"max-bytes", required_argument, 0, 'M'},
                                   {"iters", required_argument, 0, 'i'},
                                   {"warmup", required_argument, 0, 'w'},
                                   {"algo", required_argument, 0, 'a'},
                                   {"json", no_argument, 0, 'j'},
                                   {"no-verify", no_argument, 0, 'n'},
                                   {"group", required_argument, 0, 'g'},
                                   {"plan", no_argument, 0, 'p'},
                                   {"tune", required_argument, 0, 't'},
                                   {"help", no_argument, 0, 'h'},
                                   SIM_COMMON_OPTS,
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (sim_common_flag(prog, &m, c, optarg)) continue;
        switch (c) {
        case 'm': A.min_bytes = tool_flag_bytes(prog, "--min-bytes", optarg); break;
        case 'M': A.max_bytes = tool_flag_bytes(prog, "--max-bytes", optarg); break;
        case 'i': tool_flag_long(prog, "--iters", optarg, 1, 1000000); break;
        case 'w': tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'a':
            if (!strcmp(optarg, "auto")) A.algo = PCOLL_ALGO_AUTO;
            else if (!strcmp(optarg, "recdbl")) A.algo = PCOLL_ALGO_RECDBL;
            else if (!strcmp(optarg, "rabenseifner")) A.algo = PCOLL_ALGO_RABENSEIFNER;
            else if (!strcmp(optarg, "ring")) A.algo = PCOLL_ALGO_RING;
            else if (!strcmp(optarg, "direct")) A.algo = PCOLL_ALGO_DIRECT;
            else tool_usage_error(prog, "--algo: \"%s\" is not auto|recdbl|rabenseifner|ring|direct", optarg);
            break;
        case 'j': json = 1; break;
        case 'n': break;
        case 'g': A.group = (int)tool_flag_long(prog, "--group", optarg, 2, 1 << 20); break;
        case 'p': tool_usage_error(prog, "--plan: persistent plans run the same schedules here: not simulated apart");
        case 't': tool_usage_error(prog, "--tune: tuning measures the real machine: not simulated");
        case 'h': fputs(help, stdout); fputs(sim_common_help, stdout); return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    tool_byte_range(prog, &A.min_bytes, A.max_bytes);
    if (A.min_bytes < 4) tool_usage_error(prog, "--min-bytes: at least one float (4 bytes)");
    sim_model_check(prog, &m);
    if (A.group > m.ranks) tool_usage_error(prog, "--group %d is more than --ranks %d", A.group, m.ranks);
    if (!A.group) A.group = m.ranks;
    for (size_t b = A.min_bytes; b <= A.max_bytes; b *= 2) {
        A.nsizes++;
        if (b > SIZE_MAX / 2) break;
    }
    A.t = calloc((size_t)A.nsizes * NV * (size_t)m.ranks, sizeof(double));
    if (!A.t) tool_usage_error(prog, "out of memory for %d ranks", m.ranks);
    if (sim_setup(&argc, argv, &m) != 0) return 1;
    sim_run(app);

    int nodes = m.ranks / m.ranks_per_node, n = A.group;
    if (!json) {
        printf("# pcoll-sim allreduce: %d ranks on %d nodes (%s, %.4g Gbit/s links)%s, float32 sum; time = the "
               "slowest rank's\n",
               m.ranks, nodes, sim_platform_name(m.platform), m.link_bps / 1e9,
               A.group < m.ranks ? " (a group call of the first --group ranks)" : "");
        printf("%10s  %-12s %11s %11s %9s %11s %7s %7s\n", "bytes", "algo", "pcoll_us", "mpi_us", "pcoll/mpi",
               "limit_us", "pcoll%", "mpi%");
    }
    int k = 0;
    for (size_t bytes = A.min_bytes; bytes <= A.max_bytes; bytes *= 2, k++) {
        double slow[NV], sum = 0, fast = 1e300;
        for (int v = 0; v < NV; v++) {
            slow[v] = 0;
            for (int i = 0; i < n; i++) {
                double t = A.t[((size_t)k * NV + (size_t)v) * (size_t)m.ranks + (size_t)i] * 1e6;
                if (t > slow[v]) slow[v] = t;
                if (v == V_PCOLL) {
                    sum += t;
                    if (t < fast) fast = t;
                }
            }
        }
        size_t rb = bytes / 4 * 4;
        double limit = 2.0 * (nodes - 1) / nodes * (double)rb * 8 / m.link_bps * 1e6;
        const char *aname = pcoll_allreduce_algo_name(pcoll_rule(rb, n));
        if (json) {
            tool_json_t j;
            tool_json_begin(&j);
            tool_json_str(&j, "bench", "allreduce");
            tool_json_str(&j, "algo", aname);
            tool_json_int(&j, "ranks", m.ranks);
            if (A.group < m.ranks) tool_json_int(&j, "group_size", A.group);
            tool_json_int(&j, "bytes", (long long)rb);
            tool_json_num(&j, "pcoll_us", slow[V_PCOLL]);
            tool_json_num(&j, "mpi_us", slow[V_MPI]);
            tool_json_num(&j, "impi_us", slow[V_MPI]);
            tool_json_num(&j, "ratio", slow[V_PCOLL] / slow[V_MPI]);
            tool_json_num(&j, "pcoll_min_us", fast);
            tool_json_num(&j, "pcoll_avg_us", sum / n);
            if (A.group == m.ranks) {
                tool_json_int(&j, "nodes", nodes);
                tool_json_num(&j, "link_limit_us", limit);
                tool_json_num(&j, "pcoll_of_limit", limit / slow[V_PCOLL]);
                tool_json_num(&j, "mpi_of_limit", limit / slow[V_MPI]);
                tool_json_num(&j, "impi_of_limit", limit / slow[V_MPI]);
            }
            tool_json_int(&j, "reps", 1);
            tool_json_str(&j, "verified", "no");
            tool_json_str(&j, "platform", sim_platform_name(m.platform));
            tool_json_int(&j, "ranks_per_node", m.ranks_per_node);
            tool_json_num(&j, "link_rate_bps", m.link_bps);
            tool_json_end(&j, stdout);
        } else {
            printf("%10zu  %-12s %11.1f %11.1f %9.2f %11.1f %6.1f%% %6.1f%%\n", rb, aname, slow[V_PCOLL], slow[V_MPI],
                   slow[V_PCOLL] / slow[V_MPI], limit, 100 * limit / slow[V_PCOLL], 100 * limit / slow[V_MPI]);
        }
        if (bytes > SIZE_MAX / 2) break;
    }
    sim_print_summary("allreduce", json);
    free(A.t);
    sim_teardown();
    return 0;
}
