/* pcoll-trace merge: the per-rank files into one Chrome Trace Event Format
 * file, every rank's clock mapped onto rank 0's (docs/timeline.md). */
#ifndef PCOLL_TRACE_MERGE_H
#define PCOLL_TRACE_MERGE_H

/* Reads PREFIX.R.jsonl and writes the merged trace to out_path ("-": standard
 * output).  0, or 1 after a message (bad input or a write error). */
int merge_run(const char *prefix, const char *out_path);

#endif
