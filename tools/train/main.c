/* pcoll-train: data-parallel training of an MLP (Fashion-MNIST) or a linear
 * model (hyperplane regression) over MPI, exchanging gradients with
 * MPI_Allreduce, pcoll_allreduce or a pcoll partial allreduce (eager-SGD),
 * under simulated load imbalance.  See --help. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "err.h"
#include "exchange.h"
#include "options.h"
#include "report.h"
#include "tool.h"
#include "train.h"

int main(int argc, char **argv)
{
    int rank, size;
    tool_mpi_init(&argc, &argv, &rank, &size);
    train_opts_t o;
    if (train_opts_parse(argc, argv, rank, &o) == 1) { /* --help */
        return MPI_Finalize() == MPI_SUCCESS ? 0 : 1;
    }
    /* the mpi baseline runs without pcoll's progress thread, unless it
       records a timeline */
    const char *env = getenv("PCOLL_TIMELINE");
    pcoll_t *ctx = exchange_needs_pcoll(o.algo) || o.timeline || (env && env[0]) ? tool_pcoll_init() : NULL;
    if (ctx && o.timeline && pcoll_timeline_recording(ctx)) {
        if (rank == 0)
            fprintf(stderr, "pcoll-train: --timeline %s ignored: PCOLL_TIMELINE=%s records already\n", o.timeline, env);
    } else if (ctx && o.timeline && pcoll_timeline_start(ctx, o.timeline) != PCOLL_SUCCESS) {
        if (rank == 0) fprintf(stderr, "pcoll-train: --timeline: %s\n", pcoll_last_error());
        pcoll_finalize(&ctx);
        MPI_Finalize();
        return 1;
    }
    train_result_t res;
    int rc = train_run(&o, ctx, &res);
    if (rc != 0) {
        if (rank == 0) fprintf(stderr, "pcoll-train: %s\n", tr_error());
    } else if (rank == 0) {
        if (!o.quiet) {
            report_header(stdout, &res);
            report_table(stdout, &res);
        }
        report_summary(stdout, &res);
        if (o.csv_path && report_csv(o.csv_path, &res)) {
            fprintf(stderr, "pcoll-train: %s\n", tr_error());
            rc = -1;
        }
        if (o.json_path && report_json(o.json_path, &res)) {
            fprintf(stderr, "pcoll-train: %s\n", tr_error());
            rc = -1;
        }
        fflush(stdout);
    }
    train_result_free(&res);
    if (rc == 0 && res.shrinks) {
        /* ranks died: the survivors' context is closed among them, the
           caller's (replaced) only stops; MPI_Finalize could wait for the
           dead, so the process ends here, its output written */
        if (pcoll_finalize(&res.ctx_at_end) != PCOLL_SUCCESS) {
            fprintf(stderr, "pcoll-train: pcoll_finalize: %s\n", pcoll_last_error());
            rc = -1;
        }
        pcoll_finalize(&ctx);
        fflush(NULL);
        _exit(rc == 0 ? 0 : 1);
    }
    if (ctx && pcoll_finalize(&ctx) != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-train: pcoll_finalize: %s\n", pcoll_last_error());
        rc = -1;
    }
    if (MPI_Finalize() != MPI_SUCCESS) {
        fprintf(stderr, "pcoll-train: MPI_Finalize failed\n");
        rc = -1;
    }
    return rc == 0 ? 0 : 1;
}
