/*
 * Run by scripts/regroup-experiment.sh.  Can the live ranks go on without a
 * SIGSTOPped rank on a communicator of their own (MPI_Comm_create_group),
 * and take it back after SIGCONT?  A round is a recursive-doubling exchange
 * of BYTES by point-to-point messages on communicator A (P a power of two).
 * Rank 1 stops itself (a child sends SIGCONT after STOP_MS) once it has
 * posted step 0.  The others give the round up after GIVEUP_MS (receives
 * cancelled, sends let go with MPI_Request_free), make B over the live
 * ranks and run allreduces on it; rank 0 tells rank 1 (on a control
 * communicator) that it was left out.  Rank 1, back, gives its round up the
 * same way; then everyone makes C over all ranks and runs rounds on it with
 * the tags of the round given up on A.  Prints what each step cost and
 * whether every sum was right.
 *   mpirun -np P regroup-experiment BYTES STOP_MS GIVEUP_MS
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) { return MPI_Wtime(); }

/* one round on comm (size a power of two): sum of every member's value v
 * into all n doubles of buf; returns 1 when complete, 0 when given up
 * (deadline < 0: never) */
static int round_on(MPI_Comm comm, double *buf, double *tmp, int n, double v, double giveup_s, int stop_after_step0)
{
    int me, P;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &P);
    for (int i = 0; i < n; i++) buf[i] = v;
    double t0 = now();
    for (int step = 0, d = 1; d < P; step++, d <<= 1) {
        int peer = me ^ d;
        MPI_Request rq[2];
        MPI_Irecv(tmp, n, MPI_DOUBLE, peer, 100 + step, comm, &rq[0]);
        MPI_Isend(buf, n, MPI_DOUBLE, peer, 100 + step, comm, &rq[1]);
        if (stop_after_step0 && step == 0) {
            pid_t parent = getpid(), c = fork();
            if (c == 0) {
                usleep((useconds_t)stop_after_step0 * 1000);
                kill(parent, SIGCONT);
                _exit(0);
            }
            fprintf(stderr, "rank %d: stopping now\n", me);
            raise(SIGSTOP);
            waitpid(c, NULL, 0);
            fprintf(stderr, "rank %d: continued\n", me);
            MPI_Cancel(&rq[0]);
            MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
            MPI_Request_free(&rq[1]);
            return -1; /* the caller finds out what happened meanwhile */
        }
        int done[2] = {0, 0};
        while (!done[0] || !done[1]) {
            for (int k = 0; k < 2; k++)
                if (!done[k]) MPI_Test(&rq[k], &done[k], MPI_STATUS_IGNORE);
            if (giveup_s >= 0 && now() - t0 > giveup_s) {
                if (!done[0]) {
                    MPI_Cancel(&rq[0]);
                    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
                }
                if (!done[1]) MPI_Request_free(&rq[1]); /* let go */
                return 0;
            }
        }
        for (int i = 0; i < n; i++) buf[i] += tmp[i];
    }
    return 1;
}

int main(int argc, char **argv)
{
    int prov;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &prov);
    int me, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    long bytes = argc > 1 ? atol(argv[1]) : 1 << 20;
    int stop_ms = argc > 2 ? atoi(argv[2]) : 2000, giveup_ms = argc > 3 ? atoi(argv[3]) : 500;
    int n = (int)(bytes / 8), victim = 1, bad = 0;
    double *buf = malloc(bytes), *tmp = malloc(bytes);
    MPI_Comm A, ctl;
    MPI_Comm_dup(MPI_COMM_WORLD, &A);
    MPI_Comm_dup(MPI_COMM_WORLD, &ctl);
    MPI_Group world;
    MPI_Comm_group(A, &world);
    /* a healthy round first */
    if (round_on(A, buf, tmp, n, me + 1, -1, 0) != 1 || buf[0] != P * (P + 1) / 2.0) bad++;
    MPI_Barrier(A);
    if (me == victim) {
        round_on(A, buf, tmp, n, me + 1, -1, stop_ms);
        /* back: was it left out?  (rank 0 said so while it was stopped) */
        int note = 0;
        MPI_Recv(&note, 1, MPI_INT, 0, 9, ctl, MPI_STATUS_IGNORE);
        fprintf(stderr, "rank %d: told it was left out (%d); gives its round up\n", me, note);
        /* its round was given up in round_on (receive cancelled, send let go) */
    } else {
        double t0 = now();
        int r = round_on(A, buf, tmp, n, me + 1, giveup_ms / 1000.0, 0);
        double t1 = now();
        int live[64], nl = 0;
        for (int i = 0; i < P; i++)
            if (i != victim) live[nl++] = i;
        MPI_Group g;
        MPI_Group_incl(world, nl, live, &g);
        MPI_Comm B;
        MPI_Comm_create_group(A, g, 1, &B);
        double t2 = now();
        if (me == 0) {
            int note = 1;
            MPI_Send(&note, 1, MPI_INT, victim, 9, ctl);
        }
        /* rounds on B: an allreduce (B's size need not be a power of two) */
        double x = me + 1, y = 0;
        int rounds = 0;
        while (rounds < 2000) {
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, B);
            if (y != P * (P + 1) / 2.0 - (victim + 1)) bad++;
            rounds++;
        }
        fprintf(stderr, "rank %d: round on A %s after %.3f s; MPI_Comm_create_group of %d live ranks %.3f s; %d "
                        "allreduces on it\n",
                me, r == 1 ? "completed" : "given up", t1 - t0, nl, t2 - t1, rounds);
        MPI_Group_free(&g);
    }
    /* everyone again: C over all ranks, rounds with the tags of the round
     * given up on A */
    double t3 = now();
    MPI_Comm C;
    MPI_Comm_create_group(A, world, 2, &C);
    double t4 = now();
    for (int k = 0; k < 20; k++) {
        if (round_on(C, buf, tmp, n, me + 1, -1, 0) != 1) bad++;
        for (int i = 0; i < n; i += n / 7 + 1)
            if (buf[i] != P * (P + 1) / 2.0) bad++;
    }
    double t5 = now();
    int allbad = 0;
    MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, C);
    fprintf(stderr, "rank %d: create_group of all %.3f s (waited for the victim included); 20 rounds on it %.3f s\n", me,
            t4 - t3, t5 - t4);
    if (me == 0) printf("regroup %ld bytes: %s\n", bytes, allbad ? "WRONG SUMS" : "every sum right");
    fflush(stdout);
    double tf = now();
    MPI_Finalize();
    if (me == 0) fprintf(stderr, "MPI_Finalize %.3f s\n", now() - tf);
    return allbad != 0;
}
