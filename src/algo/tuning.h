/*
 * The allreduce tuning table: which algorithm a call of a given size takes,
 * measured on this machine by `pcoll-bench allreduce --tune FILE` and read
 * by pcoll_init from PCOLL_TUNING_FILE.  Pure: no MPI, no file access.
 *
 *   # ranks  nodes  up-to-bytes  algorithm       (text, one row per line)
 *   4        1      64K          shm
 *   4        1      max          shm
 *   8        2      2K           direct
 *   8        2      1M           recdbl
 *
 * A call of n ranks whose context spans `nodes` nodes and `bytes` bytes takes
 * the algorithm of the first row of (n, nodes) whose up-to-bytes is at least
 * bytes; no such row: the built-in rule (algo/allreduce.h).  Rows of other
 * rank or node counts are never borrowed: a table says only what it measured.
 */
#ifndef PC_ALGO_TUNING_H
#define PC_ALGO_TUNING_H

#include <stddef.h>
#include <stdint.h>

#include "pcoll.h"

#define PC_TUNING_MAX_ROWS 256

typedef struct pc_tuning_row {
    int32_t ranks, nodes;
    int32_t algo; /* a pcoll_allreduce_algo_t other than AUTO */
    int32_t unused;
    uint64_t max_bytes; /* UINT64_MAX: "max" */
} pc_tuning_row_t;

typedef struct pc_tuning {
    int nrows; /* sorted by ranks, nodes, max_bytes */
    pc_tuning_row_t rows[PC_TUNING_MAX_ROWS];
} pc_tuning_t;

/* Parses a table's text into t (rows sorted).  0, or -1 with why (for
 * example "line 3: \"fast\" is not an algorithm") filled in. */
int pc_tuning_parse(const char *text, pc_tuning_t *t, char *why, size_t why_len);
/* The table's algorithm for the call, or PCOLL_ALGO_AUTO (no row: the
 * built-in rule).  t may be NULL. */
pcoll_allreduce_algo_t pc_tuning_lookup(const pc_tuning_t *t, int ranks, int nodes, size_t bytes);
/* 1 if t has rows of (ranks, nodes). */
int pc_tuning_has(const pc_tuning_t *t, int ranks, int nodes);
/* A number that differs between tables with different rows (the ranks
 * agree on it). */
uint64_t pc_tuning_hash(const pc_tuning_t *t);
/* Writes t as text (the format above, with a header line), at most len
 * bytes; returns the length it needed (as snprintf). */
size_t pc_tuning_format(const pc_tuning_t *t, char *buf, size_t len);

#endif
