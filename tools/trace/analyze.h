/* What the report says, computed from a merged trace (docs/timeline.md,
 * "The straggler report"): exchanges and who was late to them, time shares
 * per kind of exchange, fusion buckets against their plan, the clock check.
 * The picture uses the waiting time it finds in each call. */
#ifndef PCOLL_TRACE_ANALYZE_H
#define PCOLL_TRACE_ANALYZE_H

#include <stddef.h>

#include "merged.h"

/* A lateness that several exchanges had (consecutive iteration steps with
 * the same arrivals are scored once) */
typedef struct lateness {
    double ms;
    size_t count;
} lateness_t;

typedef struct rank_stats {
    size_t exchanges, last;
    lateness_t *lateness; /* its lateness at the exchanges it arrived at */
    size_t nlateness, cap_lateness;
    double late_median_ms, late_p90_ms, late_max_ms, late_mean_ms; /* NaN without exchanges */
    size_t missed_rounds;
    double caused_us, avoided_us;
    double *preduce_wait_ms;
    size_t npreduce, cap_preduce;
    double preduce_median_ms, preduce_max_ms; /* NaN without preduce calls */
    size_t left_out_rounds;  /* rounds (of any object) that went on without it while it was silent */
    size_t caught_up, caught_up_rounds; /* its catch-ups, and the rounds they held */
    double traced_us;   /* its first event's start to its last event's end */
    double calls_us;    /* the union of its calls' spans (of every kind) */
    double compute_share;
} rank_stats_t;

typedef struct kind_stats {
    int32_t name;       /* in the analysis' kind_names */
    double *exchange_us; /* [rank]: the union of its calls' spans of this kind */
    double *waiting_us;  /* [rank]: the union of their waiting parts */
} kind_stats_t;

typedef struct bucket_stats {
    int32_t obj; /* in the trace's strings */
    long long bucket;
    size_t steps;
    double measured_exposed_ms, predicted_exposed_ms; /* NaN: unknown */
    double measured_duration_ms, predicted_duration_ms;
} bucket_stats_t;

typedef struct clock_check {
    size_t pairs, violations;
    double worst_us; /* the largest (cause - effect), at least 0 */
    double bound_us;
    int ok;
} clock_check_t;

typedef struct analysis {
    int ranks;
    rank_stats_t *rank;
    size_t allreduces, allreduces_incomplete, rounds, sync_rounds;
    size_t groups;          /* dynamic groups: (obj, group_id) with a call of status 0 */
    size_t iteration_steps; /* the exchanges of dynamic groups: (obj, iteration) */
    kind_stats_t *kinds;
    size_t nkinds, cap_kinds;
    strtab_t kind_names;
    bucket_stats_t *buckets;
    size_t nbuckets, cap_buckets;
    clock_check_t clock;
    int straggler;      /* -1: nobody caused or avoided any waiting */
    double *waiting_us; /* [event]: the part of a call spent waiting for others */
} analysis_t;

void analyze(const trace_t *t, analysis_t *a);
void analysis_free(analysis_t *a);

#endif
