/* pcoll-trace report: the straggler report of a merged trace. */
#ifndef PCOLL_TRACE_REPORT_H
#define PCOLL_TRACE_REPORT_H

/* Reads the merged trace and prints the report (text, or one JSON object)
 * on standard output.  0, or 1 after a message. */
int report_run(const char *path, int json);

#endif
