/* Output of a run on rank 0: the per-epoch table on stdout, the CSV log and
 * the JSON summary. */
#ifndef PCOLL_TRAIN_REPORT_H
#define PCOLL_TRAIN_REPORT_H

#include <stdio.h>

#include "train.h"

void report_header(FILE *out, const train_result_t *r);
void report_table(FILE *out, const train_result_t *r);
void report_summary(FILE *out, const train_result_t *r);
/* -1 with a message naming the file on error */
int report_csv(const char *path, const train_result_t *r);
int report_json(const char *path, const train_result_t *r);

#endif
