/* Helpers shared by the command-line tools: statistics, JSON lines, MPI
 * start-up with a clear message, and flag parsing. */
#ifndef PCOLL_TOOL_H
#define PCOLL_TOOL_H

#include <stddef.h>
#include <stdio.h>

#include "pcoll.h"

/* Median of n values (sorts them in place). */
double tool_median(double *v, size_t n);
double tool_mean(const double *v, size_t n);

/* One JSON object per line: tool_json_begin, fields, tool_json_end. */
typedef struct tool_json {
    char buf[16384]; /* a longer object is cut short (and stays valid JSON) */
    size_t len;
    int fields;
    int full; /* a field did not fit: the rest are dropped */
} tool_json_t;
void tool_json_begin(tool_json_t *j);
void tool_json_str(tool_json_t *j, const char *key, const char *value);
void tool_json_num(tool_json_t *j, const char *key, double value);
void tool_json_int(tool_json_t *j, const char *key, long long value);
void tool_json_nums(tool_json_t *j, const char *key, const double *values, size_t n); /* an array */
void tool_json_end(tool_json_t *j, FILE *out);
/* The keys of a fusion plan's row, the same in pcoll-bench fusion and
 * pcoll-sim fusion: strategy, ranks, layers, buckets, the predicted times,
 * the speedups against WFBP's and a single bucket's predicted iteration,
 * the cost model, bucket_first_layer; then, measured (or simulated) >= 0,
 * measured_iter_us and its ratios (the references' measured times, NAN
 * when they did not run). */
void tool_json_fusion_plan(tool_json_t *j, const char *strategy, int ranks, const pcoll_fusion_plan_t *pl,
                           double wfbp_us, double single_us, const pcoll_cost_model_t *model);
void tool_json_fusion_measured(tool_json_t *j, const pcoll_fusion_plan_t *pl, double measured_us, double wfbp_us,
                               double single_us);
/* Reading a field of a flat JSON object (one line, as the tools write them):
 * 1 and *out set, 0 if the key is absent, -1 if its value is not a finite
 * number (a string). */
int tool_json_get_num(const char *text, const char *key, double *out);
int tool_json_get_str(const char *text, const char *key, char *out, size_t len);

/* MPI_Init_thread(MULTIPLE) or exit with a message. */
/* The modes of the skew and group benchmarks (pcoll-bench, pcoll-sim):
 * "mpi" (MPI_Allreduce), "sync" (pcoll_allreduce) or a partial object's
 * kind (pcoll_partial_config_parse: solo, majority, quorum:Q, group,
 * group:S). */
#define TOOL_MAX_MODES 16
typedef enum { M_MPI, M_SYNC, M_PARTIAL } tool_mode_kind_t;
typedef struct tool_mode {
    char name[32];
    tool_mode_kind_t kind;
    pcoll_partial_config_t cfg;
} tool_mode_t;
/* A comma-separated --modes list into modes (room for max); returns their
 * number; exits with a usage error naming a bad one. */
int tool_parse_modes(const char *prog, const char *list, tool_mode_t *modes, int max);

void tool_mpi_init(int *argc, char ***argv, int *rank, int *size);
/* pcoll_init on MPI_COMM_WORLD or MPI_Abort with pcoll's message. */
pcoll_t *tool_pcoll_init(void);

/* Flag values; on a bad value print "<prog>: --flag: reason" on rank 0 and
 * exit(2) at every rank (all ranks parse the same arguments). */
size_t tool_flag_bytes(const char *prog, const char *flag, const char *value);
long tool_flag_long(const char *prog, const char *flag, const char *value, long min, long max);
double tool_flag_double(const char *prog, const char *flag, const char *value, double min, double max);
/* --algo: auto|recdbl|rabenseifner|ring|direct (PCOLL_ALLREDUCE_ALGO's names). */
pcoll_allreduce_algo_t tool_flag_algo(const char *prog, const char *flag, const char *value);
/* A comma-separated flag value into at most max entries of 32 characters
 * (a longer entry, too many, or none: a usage error).  Returns how many. */
int tool_split_list(const char *prog, const char *flag, const char *text, char out[][32], int max);
/* --min-bytes / --max-bytes: at least one 4-byte element, max >= min. */
void tool_byte_range(const char *prog, size_t *min_bytes, size_t max_bytes);
void tool_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* A link rate in tc's units (1gbit, 100mbit, 500kbit, 64bit), in bit/s. */
double tool_flag_rate(const char *prog, const char *flag, const char *value);
/* Collective over MPI_COMM_WORLD: how many nodes (MPI_COMM_TYPE_SHARED). */
int tool_count_nodes(void);

/* A CSV file with a header line: the columns named in `names` (n of them;
 * a name "a|b" takes whichever of a or b the header has, *which = the
 * index of the one found, per column) as numbers, rows in file order into
 * cols[c] (malloc'ed, *nrows of them).  0, or -1 with a message in err. */
int tool_read_csv(const char *path, const char *const *names, int n, double **cols, int *which, int *nrows, char *err,
                  size_t errlen);

/* Wall-clock microseconds (MPI_Wtime). */
double tool_now_us(void);

#endif
