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
 *                     power of two and ring otherwise): a stand-in
 *              impi:  the same stand-in in a block of its own on the
 *                     cluster platform (elsewhere impi_us is mpi_us)
 *
 * Off the cluster platform the simulation is deterministic: one repetition
 * per size, so the median, the minimum and the mean are that one time; on
 * it pcoll-bench's repetitions, since the tbf buckets' state carries over.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

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
    "  --iters N       repetitions per size (default: pcoll-bench's rule on the\n"
    "                  cluster platform, whose tbf buckets drain over repetitions;\n"
    "                  elsewhere 1: the simulation is deterministic)\n"
    "  --max-iters N   at most N repetitions per size (a cap on that rule)\n"
    "  --warmup N      untimed calls before each block of a variant (default 3)\n"
    "  --no-verify     accepted for pcoll-bench's command lines (no data here)\n";

/* impi: MPI_Iallreduce in pcoll-bench, the same stand-in here; it runs only
 * on the cluster platform, where its block drains the tbf buckets between
 * the others' as the real one does (elsewhere it would repeat mpi's times
 * exactly) */
enum { V_PCOLL, V_MPI, V_IMPI, NV };
enum { BLOCKS = 5, MAX_REPS = 200 };
#define SETTLE_S 2e-3

static struct {
    size_t min_bytes, max_bytes;
    pcoll_allreduce_algo_t algo;
    int group; /* members 0..group-1 */
    int nsizes;
    int iters, warmup; /* 0 iters: reps_of's rule */
    int max_iters;     /* a cap on the rule (0: none) */
    double *t; /* [size][variant][rep][rank] */
} A;

/* pcoll_allreduce of all ranks takes the node-shared path where the real
 * one does (calls.c); group calls and forced algorithms the schedule */
static int takes_shm(size_t bytes) { return A.group == sim.P && sim_pcoll_takes_shm(A.algo, bytes); }

static int runs(int v) { return v != V_IMPI || sim.model.burst_bytes > 0; }

static int reps_of(size_t bytes)
{
    if (A.iters) return A.iters;
    /* pcoll-bench's rule on the cluster, whose tbf buckets make a size's
     * time depend on the repetitions before it; elsewhere one is exact */
    if (sim.model.burst_bytes <= 0) return 1;
    double n = 2e8 / ((double)bytes + 1e5);
    int reps = n > 200 ? 200 : n < BLOCKS * 2 ? BLOCKS * 2 : (int)n;
    return A.max_iters && reps > A.max_iters ? A.max_iters : reps;
}

static double *t_at(int k, int v, int rep, int rank)
{
    return &A.t[(((size_t)k * NV + (size_t)v) * MAX_REPS + (size_t)rep) * (size_t)sim.P + (size_t)rank];
}

static void one_call(sim_rank_t *r, int v, size_t bytes, pc_sched_t *s, int channel)
{
    if (r->rank >= A.group) return;
    if (v == V_PCOLL && takes_shm(bytes)) sim_pcoll_shm_run(r, bytes, channel);
    else sim_allreduce_run(r, s);
}

/* pcoll-bench's procedure: blocks of repetitions, the variants taking turns
 * block by block, each block after a settle pause and warm-up calls, each
 * repetition after a barrier */
static void app(sim_rank_t *r)
{
    int n = A.group, k = 0;
    for (size_t bytes = A.min_bytes; bytes <= A.max_bytes; bytes *= 2, k++) {
        pc_sched_t *s[NV] = {NULL};
        for (int v = 0; v < NV; v++)
            if (r->rank < n && !(v == V_PCOLL && takes_shm(bytes)) && runs(v))
                s[v] = sim_allreduce_sched(r, bytes,
                                           v == V_PCOLL ? sim_pcoll_rule(A.algo, bytes, n) : sim_mpi_rule(bytes, n), n,
                                           r->rank, NULL, k * NV + v);
        int reps = reps_of(bytes), blocks = reps < BLOCKS ? 1 : BLOCKS;
        for (int b = 0; b < blocks; b++)
            for (int i = 0; i < NV; i++) {
                int v = (i + b) % NV;
                if (!runs(v)) continue;
                sim_mpi_barrier(r);
                sg_actor_sleep_for(SETTLE_S);
                for (int w = 0; w < A.warmup; w++) one_call(r, v, bytes, s[v], k * NV + v);
                for (int rep = b * reps / blocks; rep < (b + 1) * reps / blocks; rep++) {
                    sim_mpi_barrier(r);
                    double t0 = sim_now();
                    one_call(r, v, bytes, s[v], k * NV + v);
                    *t_at(k, v, rep, r->rank) = sim_now() - t0;
                }
            }
        for (int v = 0; v < NV; v++)
            if (s[v]) pc_sched_free(s[v]);
        if (bytes > SIZE_MAX / 2) break;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the median over repetitions of the slowest (or fastest, or mean) rank */
static double summary(int k, int v, int reps, int how)
{
    double per[MAX_REPS];
    for (int rep = 0; rep < reps; rep++) {
        double x = how == 1 ? 1e300 : 0;
        for (int i = 0; i < A.group; i++) {
            double t = *t_at(k, v, rep, i) * 1e6;
            if (how == 0 && t > x) x = t;
            if (how == 1 && t < x) x = t;
            if (how == 2) x += t / A.group;
        }
        per[rep] = x;
    }
    qsort(per, (size_t)reps, sizeof per[0], cmp_double);
    return reps % 2 ? per[reps / 2] : (per[reps / 2 - 1] + per[reps / 2]) / 2;
}

int sim_cmd_allreduce(int argc, char **argv)
{
    const char *prog = "pcoll-sim allreduce";
    sim_model_t m;
    sim_model_defaults(&m, SIM_CLUSTER);
    A.min_bytes = 8;
    A.max_bytes = (size_t)64 << 20;
    A.algo = PCOLL_ALGO_AUTO;
    A.warmup = 3;
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
                                   {"max-iters", required_argument, 0, 'x'},
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
        case 'i': A.iters = (int)tool_flag_long(prog, "--iters", optarg, 1, MAX_REPS); break;
        case 'x': A.max_iters = (int)tool_flag_long(prog, "--max-iters", optarg, 1, MAX_REPS); break;
        case 'w': A.warmup = (int)tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'a': A.algo = tool_flag_algo(prog, "--algo", optarg); break;
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
    A.t = calloc((size_t)A.nsizes * NV * MAX_REPS * (size_t)m.ranks, sizeof(double));
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
        int reps = reps_of(bytes);
        double slow[NV];
        for (int v = 0; v < NV; v++) slow[v] = summary(k, runs(v) ? v : V_MPI, reps, 0);
        double fast = summary(k, V_PCOLL, reps, 1), mean = summary(k, V_PCOLL, reps, 2);
        size_t rb = bytes / 4 * 4;
        double limit = 2.0 * (nodes - 1) / nodes * (double)rb * 8 / m.link_bps * 1e6;
        const char *aname = takes_shm(rb) ? "shm" : pcoll_allreduce_algo_name(sim_pcoll_rule(A.algo, rb, n));
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
            tool_json_num(&j, "impi_us", slow[V_IMPI]);
            tool_json_num(&j, "ratio", slow[V_PCOLL] / slow[V_MPI]);
            tool_json_num(&j, "pcoll_min_us", fast);
            tool_json_num(&j, "pcoll_avg_us", mean);
            if (A.group == m.ranks) {
                tool_json_int(&j, "nodes", nodes);
                tool_json_num(&j, "link_limit_us", limit);
                tool_json_num(&j, "pcoll_of_limit", limit / slow[V_PCOLL]);
                tool_json_num(&j, "mpi_of_limit", limit / slow[V_MPI]);
                tool_json_num(&j, "impi_of_limit", limit / slow[V_IMPI]);
            }
            tool_json_int(&j, "reps", reps);
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
