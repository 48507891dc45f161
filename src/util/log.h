/* Logging to stderr, filtered by a process-wide level (PCOLL_LOG_LEVEL). */
#ifndef PC_UTIL_LOG_H
#define PC_UTIL_LOG_H

#include "pcoll.h"
#include "error.h"

void pc_log(pcoll_log_level_t level, const char *fmt, ...) PC_PRINTF(2, 3);
int pc_log_enabled(pcoll_log_level_t level);
/* Whose log lines the calling thread writes: rank `rank` of context
 * number `context` (1, 2, ... in this process): "pcoll[3]" for the first
 * context, "pcoll[3@2]" for the second.  Set by pcoll_init, by every
 * public call that takes a context or an object (pc_ctx_check) and by the
 * context's progress thread; a thread that never set it writes as the
 * process's first context. */
void pc_log_set_rank(int rank, int context);
/* Parses none|error|warn|info|debug or 0-4; returns -1 when invalid. */
int pc_log_parse_level(const char *text);

#define PC_DEBUG(...)                                                                              \
    do {                                                                                           \
        if (pc_log_enabled(PCOLL_LOG_DEBUG)) pc_log(PCOLL_LOG_DEBUG, __VA_ARGS__);                 \
    } while (0)

#endif
