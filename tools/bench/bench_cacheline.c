/*
 * pcoll-bench cacheline: what a shared cache line costs on this node, the
 * yardstick of the node-shared allreduce's latency path.
 *
 *   rtt        ranks 0 and 1 bounce one line (MPI_Win_allocate_shared):
 *              0 writes k, 1 sees it and writes -k, 0 sees that: one round
 *              trip of a line between two cores; the other ranks sleep
 *   arrival    every rank adds 1 to one shared counter and waits until it
 *              reaches P x k (spinning, then yielding the CPU as pcoll
 *              does), then reads every other rank's line: the floor of one
 *              all-ranks exchange without data, at P ranks
 *
 * The latency target of the node-shared allreduce is stated against these:
 * budget = 2 x P x rtt (one line round trip per rank, twice).
 */
#include <getopt.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tool.h"

static const char *help =
    "usage: mpirun -np P pcoll-bench cacheline [flags]   (P >= 2, one node)\n"
    "  --iters N   round trips and arrivals timed (default 20000)\n"
    "  --json      one JSON object: bench, ranks, rtt_us, arrival_us, budget_us\n";

#define LINE 64

typedef struct line {
    _Atomic int64_t v;
    char pad[LINE - sizeof(int64_t)];
} line_t;

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* spins a little, then yields: ranks may share cores */
static void wait_until_eq(_Atomic int64_t *v, int64_t want)
{
    for (int i = 0; atomic_load(v) != want; i++)
        if (i > 256) sched_yield();
        else relax();
}

static void wait_until_ge(_Atomic int64_t *v, int64_t want)
{
    for (int i = 0; atomic_load(v) < want; i++)
        if (i > 256) sched_yield();
        else relax();
}

int bench_cacheline(int argc, char **argv, int rank, int size)
{
    const char *prog = "pcoll-bench cacheline";
    long iters = 20000;
    int json = 0;
    static struct option opts[] = {
        {"iters", required_argument, 0, 'i'}, {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'i': iters = (long)tool_flag_double(prog, "--iters", optarg, 10, 1e9); break;
        case 'j': json = 1; break;
        case 'h':
            if (rank == 0) fputs(help, stdout);
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nsize;
    MPI_Comm_size(node, &nsize);
    MPI_Comm_free(&node);
    if (size < 2 || nsize != size) {
        if (rank == 0) fprintf(stderr, "%s: needs 2 ranks or more, all on one node (got %d, %d here)\n", prog, size, nsize);
        return 2;
    }
    /* in rank 0's memory: line 0 the counter, line 1 the end of phase 1,
     * rank r's line r + 2 */
    line_t *base;
    MPI_Win win;
    MPI_Win_allocate_shared((MPI_Aint)(rank == 0 ? (size + 2) * LINE : 0), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                            &win);
    MPI_Aint bytes;
    int disp;
    MPI_Win_shared_query(win, 0, &bytes, &disp, &base);
    line_t *counter = &base[0], *done = &base[1], *lines = &base[2];
    if (rank == 0) memset(base, 0, (size_t)(size + 2) * LINE);
    MPI_Barrier(MPI_COMM_WORLD);

    /* 1. round trips between ranks 0 and 1 */
    double t0 = MPI_Wtime();
    if (rank == 0) {
        for (long k = 1; k <= iters; k++) {
            atomic_store(&lines[0].v, k);
            wait_until_eq(&lines[1].v, -k);
        }
        atomic_store(&done->v, 1);
    } else if (rank == 1) {
        for (long k = 1; k <= iters; k++) {
            wait_until_eq(&lines[0].v, k);
            atomic_store(&lines[1].v, -k);
        }
    } else {
        while (!atomic_load(&done->v)) usleep(200); /* out of the way */
    }
    double rtt_us = (MPI_Wtime() - t0) / (double)iters * 1e6;
    MPI_Bcast(&rtt_us, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    /* 2. arrivals of all ranks on one counter, then a read of every line */
    long arrivals = iters / 10 > 10 ? iters / 10 : 10;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    int64_t sink = 0;
    for (long k = 1; k <= arrivals; k++) {
        atomic_store(&lines[rank].v, k);
        atomic_fetch_add(&counter->v, 1);
        wait_until_ge(&counter->v, k * size);
        for (int r = 0; r < size; r++) sink += atomic_load(&lines[r].v);
    }
    double mine = (MPI_Wtime() - t0) / (double)arrivals * 1e6, arrival_us;
    MPI_Reduce(&mine, &arrival_us, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Win_free(&win);
    if (sink == -1) printf("(never)\n");
    if (rank == 0) {
        double budget = 2.0 * size * rtt_us;
        if (json)
            printf("{\"bench\":\"cacheline\",\"ranks\":%d,\"rtt_us\":%.4f,\"arrival_us\":%.4f,\"budget_us\":%.4f}\n",
                   size, rtt_us, arrival_us, budget);
        else
            printf("ranks %d: line round trip %.3f us (ranks 0-1); all ranks arrive and read every line %.3f us; "
                   "budget 2 x P x round trip = %.3f us\n",
                   size, rtt_us, arrival_us, budget);
    }
    return 0;
}
