/* Clock offsets to rank 0 (timelines): see clocks.c. */
#ifndef PC_CORE_CLOCKS_H
#define PC_CORE_CLOCKS_H

#include <mpi.h>
#include <stdint.h>

/* How long a wait may take: a warning after stall_warn_s, PCOLL_ERR_TIMEOUT
 * after timeout_s (0: never), as for any blocking call. */
typedef struct pc_clock_limits {
    double stall_warn_s, timeout_s;
} pc_clock_limits_t;

/* Collective over comm: this rank's CLOCK_MONOTONIC (plus shift_ns, which
 * PCOLL_TIMELINE_SHIFT_NS sets for tests) minus rank 0's at the same
 * instant, and a bound on the error (rank 0: 0 and 0; -1 when it could
 * not be measured). */
int pc_clock_offset(MPI_Comm comm, int64_t shift_ns, const pc_clock_limits_t *limits, int64_t *offset_ns,
                    int64_t *err_ns, const char *fn);

#endif
