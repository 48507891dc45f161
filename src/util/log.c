#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static atomic_int log_level = PCOLL_LOG_WARN;
static atomic_int first_rank = -1;   /* the process's first context's rank */
static _Thread_local int thread_rank = -1, thread_context = 0;

static const char *level_names[] = {"none", "error", "warn", "info", "debug"};

int pc_log_parse_level(const char *text)
{
    for (int i = 0; i <= PCOLL_LOG_DEBUG; i++)
        if (strcmp(text, level_names[i]) == 0) return i;
    if (text[0] >= '0' && text[0] <= '4' && text[1] == '\0') return text[0] - '0';
    return -1;
}

int pcoll_set_log_level(pcoll_log_level_t level)
{
    if ((int)level < PCOLL_LOG_NONE || level > PCOLL_LOG_DEBUG)
        return PC_ERR(PCOLL_ERR_ARG, "log level %d is not in 0..4", (int)level);
    atomic_store(&log_level, (int)level);
    return PCOLL_SUCCESS;
}

pcoll_log_level_t pcoll_get_log_level(void) { return (pcoll_log_level_t)atomic_load(&log_level); }

int pc_log_enabled(pcoll_log_level_t level) { return (int)level <= atomic_load(&log_level); }

void pc_log_set_rank(int rank, int context)
{
    int none = -1;
    if (context <= 1) atomic_compare_exchange_strong(&first_rank, &none, rank);
    thread_rank = rank;
    thread_context = context;
}

void pc_log(pcoll_log_level_t level, const char *fmt, ...)
{
    if (!pc_log_enabled(level) || level == PCOLL_LOG_NONE) return;
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char who[32];
    if (thread_context > 1)
        snprintf(who, sizeof who, "%d@%d", thread_rank, thread_context);
    else
        snprintf(who, sizeof who, "%d", thread_rank >= 0 ? thread_rank : atomic_load(&first_rank));
    /* one fprintf per line keeps lines from different threads whole */
    fprintf(stderr, "pcoll[%s] %s: %s\n", who, level_names[level], line);
}
