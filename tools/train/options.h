/* Command-line flags of pcoll-train: defaults, parsing, --help. */
#ifndef PCOLL_TRAIN_OPTIONS_H
#define PCOLL_TRAIN_OPTIONS_H

#include "train.h"

/* Parses argv into o (starting from train_opts_default).  Prints --help and
 * returns 1 when asked; a bad flag prints a clear error on rank 0 and exits
 * with status 2 at every rank (tools/common). */
int train_opts_parse(int argc, char **argv, int rank, train_opts_t *o);

#endif
