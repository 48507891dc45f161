/* pcoll-bench: benchmarks that compare pcoll with MPI in the same run. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "tool.h"

static const char *usage =
    "usage: mpirun -np P pcoll-bench <command> [flags]\n"
    "\n"
    "commands:\n"
    "  allreduce   size sweep: pcoll_allreduce vs MPI_Allreduce vs MPI_Iallreduce\n"
    "  skew        eager-SGD microbenchmark: linearly skewed ranks, MPI_Allreduce\n"
    "              vs solo / majority / quorum partial allreduce (latency, NAP)\n"
    "  group       the skew microbenchmark for WAGMA's group rounds (GROUP partial\n"
    "              objects) against MPI_Allreduce, solo and majority: latency per\n"
    "              rank, NAP, group size, bytes sent per round\n"
    "  objects     the cost of a partial call with many live partial objects\n"
    "  preduce     dynamic-group partial reduce: groups formed per second, time\n"
    "              from ready to group start, the controller's share of its rank,\n"
    "              per policy, against MPI_Allreduce\n"
    "  timeline    what recording a timeline costs: per event, and per blocking\n"
    "              allreduce with the timeline on against off\n"
    "  idle        CPU time used by initialized, idle processes\n"
    "  cacheline   what one shared cache line costs on this node (round trip,\n"
    "              all ranks arriving): the yardstick of the small-message path\n"
    "  fusion      merged-gradient plans (MG-WFBP) for a model's profile: the\n"
    "              predicted iteration per strategy, and with --measure the plans\n"
    "              run with sleeps for the compute and real allreduces\n"
    "\n"
    "pcoll-bench <command> --help lists the command's flags.\n";

int main(int argc, char **argv)
{
    int rank, size;
    tool_mpi_init(&argc, &argv, &rank, &size);
    int rc = 2;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (rank == 0) fputs(usage, argc < 2 ? stderr : stdout);
        rc = argc < 2 ? 2 : 0;
    } else if (strcmp(argv[1], "allreduce") == 0) {
        rc = bench_allreduce(argc - 1, argv + 1, rank, size);
    } else if (strcmp(argv[1], "skew") == 0) {
        rc = bench_skew(argc - 1, argv + 1, rank, size);
    } else if (strcmp(argv[1], "group") == 0) {
        rc = bench_group(argc - 1, argv + 1, rank, size);
    } else if (strcmp(argv[1], "objects") == 0) {
        rc = bench_objects(argc - 1, argv + 1, rank, size);
    } else if (strcmp(argv[1], "preduce") == 0) {
        rc = bench_preduce(argc - 1, argv + 1, rank, size);
    } else if (strcmp(argv[1], "fusion") == 0) {
        rc = bench_fusion(argc - 1, argv + 1, rank, size);
    } else if (strcmp(argv[1], "cacheline") == 0) {
        rc = bench_cacheline(argc - 1, argv + 1, rank, size);
    } else if (strcmp(argv[1], "timeline") == 0) {
        rc = bench_timeline(argc - 1, argv + 1, rank, size);
    } else if (strcmp(argv[1], "idle") == 0) {
        rc = bench_idle(argc - 1, argv + 1, rank, size);
    } else {
        if (rank == 0) fprintf(stderr, "pcoll-bench: unknown command \"%s\"\n\n%s", argv[1], usage);
    }
    MPI_Finalize();
    return rc;
}
