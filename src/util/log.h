/* Logging to stderr, filtered by a process-wide level (PCOLL_LOG_LEVEL). */
#ifndef PC_UTIL_LOG_H
#define PC_UTIL_LOG_H

#include "pcoll.h"
#include "error.h"

void pc_log(pcoll_log_level_t level, const char *fmt, ...) PC_PRINTF(2, 3);
int pc_log_enabled(pcoll_log_level_t level);
/* The rank shown in log lines (set once the context knows it). */
void pc_log_set_rank(int rank);
/* Parses none|error|warn|info|debug or 0-4; returns -1 when invalid. */
int pc_log_parse_level(const char *text);

#define PC_DEBUG(...)                                                                              \
    do {                                                                                           \
        if (pc_log_enabled(PCOLL_LOG_DEBUG)) pc_log(PCOLL_LOG_DEBUG, __VA_ARGS__);                 \
    } while (0)

#endif
