/* pcoll-bench subcommands. Each parses its own flags and returns an exit code. */
#ifndef PCOLL_BENCH_H
#define PCOLL_BENCH_H

int bench_allreduce(int argc, char **argv, int rank, int size);
/* allreduce --tune FILE (bench_tune.c): returns an exit code */
#include "pcoll.h"
int bench_allreduce_tune(pcoll_t *ctx, const char *file, size_t min_bytes, size_t max_bytes, long iters, int json,
                         int rank, int size);
int bench_idle(int argc, char **argv, int rank, int size);
int bench_cacheline(int argc, char **argv, int rank, int size);
int bench_skew(int argc, char **argv, int rank, int size);
int bench_group(int argc, char **argv, int rank, int size);
int bench_objects(int argc, char **argv, int rank, int size);
int bench_preduce(int argc, char **argv, int rank, int size);
int bench_fusion(int argc, char **argv, int rank, int size);
int bench_timeline(int argc, char **argv, int rank, int size);

#endif
