/*
 * Rounds by messages that go on without a stopped rank
 * (partial/backend_msg_view.c), P >= 3, run with PCOLL_PARTIAL_SHM_BYTES=0
 * (PCOLL_EXCLUDE_MS=100 is set here).  For SOLO and then MAJORITY objects
 * (ACCUMULATE, 1000 float64): every rank contributes a vector of ones (times
 * its rank + 1) at every call, CALLS calls with a short sleep, then a flush.
 * Rank 1 stops itself (SIGSTOP; a child sends SIGCONT after 0.8 s) a third
 * of the way, and, with P >= 4, rank P - 1 two thirds of the way (rank 0
 * stays: MAJORITY's leader).  Checks, at every rank:
 *   - every contribution is delivered once: what the calls returned adds
 *     up to sum over ranks (r + 1) * CALLS in every element, and the
 *     delivered contribution counts to P * CALLS;
 *   - the rounds went on without the stopped rank: the others report
 *     rounds that left it out, and it reports a catch-up;
 *   - the results are the same at every rank (the last flush's).
 * With the argument "churn": nobody stops, PCOLL_EXCLUDE_MS=1 and ranks
 * spin 0-3 ms between calls instead of sleeping, so that busy ranks are
 * taken for silent, left out and taken back again and again (on an
 * oversubscribed machine); the run must end, with the same conservation
 * checks (the limit backs off by itself).
 * Run plain and under ASan and TSan.
 */
#include <sys/wait.h>
#include <time.h>

#include "../testutil.h"

#define COUNT 1000
#define CALLS 300

static int rank, size, churn;

static void stop_self(int ms)
{
    pid_t parent = getpid(), child = fork();
    if (child == 0) {
        usleep((useconds_t)ms * 1000);
        kill(parent, SIGCONT);
        _exit(0);
    }
    raise(SIGSTOP);
    waitpid(child, NULL, 0);
}

static void spin_ms(int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000.0 + (t.tv_nsec - t0.tv_nsec) / 1e6 < ms);
}

static void run(pcoll_t *ctx, pcoll_partial_kind_t kind)
{
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    cfg.kind = kind;
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, COUNT, PCOLL_FLOAT64, &cfg, &p));
    static double mine[COUNT], out[COUNT], total[COUNT];
    for (int i = 0; i < COUNT; i++) {
        mine[i] = rank + 1;
        total[i] = 0;
    }
    uint64_t contributions = 0, left_out_rounds = 0, caught_up = 0;
    pcoll_partial_info_t info;
    for (int c = 0; c < CALLS; c++) {
        if (!churn && ((rank == 1 && c == CALLS / 3) || (size >= 4 && rank == size - 1 && c == 2 * CALLS / 3)))
            stop_self(800);
        CHECK_RC(pcoll_partial_allreduce(p, mine, out, &info));
        for (int i = 0; i < COUNT; i++) total[i] += out[i];
        contributions += info.contributions;
        left_out_rounds += info.left_out_rounds;
        caught_up += info.caught_up;
        if (churn) spin_ms((rank * 7 + c) % 4); /* busy, unevenly: the machine stays full */
        else usleep(1000);
    }
    CHECK_RC(pcoll_partial_flush(p, out, &info));
    for (int i = 0; i < COUNT; i++) total[i] += out[i];
    contributions += info.contributions;
    double want = (double)size * (size + 1) / 2 * CALLS;
    for (int i = 0; i < COUNT; i++)
        CHECK_MSG(total[i] == want, "%s: element %d adds up to %.1f, not %.1f", pcoll_partial_kind_name(kind), i,
                  total[i], want);
    CHECK_MSG(contributions == (uint64_t)size * CALLS, "%s: %llu contributions delivered, not %d",
              pcoll_partial_kind_name(kind), (unsigned long long)contributions, size * CALLS);
    int stopped = rank == 1 || (size >= 4 && rank == size - 1);
    if (churn) {
        uint64_t all = 0;
        MPI_Reduce(&left_out_rounds, &all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("test_exclude churn %s: %llu rounds left a rank out (over all ranks)\n",
                   pcoll_partial_kind_name(kind), (unsigned long long)all);
    } else if (stopped)
        CHECK_MSG(caught_up > 0, "%s: rank %d was stopped and caught up no round", pcoll_partial_kind_name(kind), rank);
    else
        CHECK_MSG(left_out_rounds > 0, "%s: no round went on without the stopped rank",
                  pcoll_partial_kind_name(kind));
    /* the same totals everywhere */
    double mx = total[0], mn = total[0];
    MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    CHECK(mx == mn);
    if (rank == 0 && !churn)
        printf("test_exclude %s: %llu rounds went on without a stopped rank at rank 0; every contribution "
               "delivered once\n",
               pcoll_partial_kind_name(kind), (unsigned long long)left_out_rounds);
    CHECK_RC(pcoll_partial_free(&p));
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 300, &rank, &size);
    churn = argc > 1 && strcmp(argv[1], "churn") == 0;
    setenv("PCOLL_EXCLUDE_MS", churn ? "1" : "100", 1);
    CHECK_MSG(size >= 3, "test_exclude needs 3 ranks or more, not %d", size);
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    run(ctx, PCOLL_PARTIAL_SOLO);
    run(ctx, PCOLL_PARTIAL_MAJORITY);
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_exclude: %ld checks passed at rank 0\n", (long)tu_checks_);
    MPI_Finalize();
    return 0;
}
