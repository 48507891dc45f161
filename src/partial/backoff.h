/*
 * How long a rank must be silent before rounds by messages leave it out,
 * under churn (partial/backend_msg_view.c): a pure rule, unit-tested
 * without a clock.
 *
 *   limit = PCOLL_EXCLUDE_MS << shift, at most max(PC_BACKOFF_CAP_MS,
 *           PCOLL_EXCLUDE_MS)
 *
 *   the coordinator, at a view change: a rank that asks to come back within
 *     PC_BACKOFF_SOON limits of being left out was not stopped for long (or
 *     not at all: a busy machine took it for silent) -> shift + 1, once per
 *     view change, however many come back with it; the FREEZE carries the
 *     shift to every rank
 *   every rank: PC_BACKOFF_CALM_ROUNDS rounds completed without a view
 *     change -> shift - 1
 *
 * Each view change costs every rank its running round: with a limit below
 * what the machine reaches, views would follow each other without a round
 * completed.  A rank stopped for real (seconds, against the default 500 ms)
 * comes back after more than PC_BACKOFF_SOON limits and changes nothing.
 */
#ifndef PC_PARTIAL_BACKOFF_H
#define PC_PARTIAL_BACKOFF_H

#include <stdint.h>

enum { PC_BACKOFF_SOON = 8, PC_BACKOFF_CALM_ROUNDS = 100, PC_BACKOFF_CAP_MS = 5000, PC_BACKOFF_MAX_SHIFT = 16 };

typedef struct pc_backoff {
    uint32_t shift; /* the limit in use is the base << shift (capped) */
    uint32_t calm;  /* rounds completed since the last change of view or of shift */
} pc_backoff_t;

/* The limit in use, ms (base_ms >= 1). */
static inline uint32_t pc_backoff_limit(uint32_t base_ms, const pc_backoff_t *b)
{
    uint64_t shift = b->shift < PC_BACKOFF_MAX_SHIFT ? b->shift : PC_BACKOFF_MAX_SHIFT;
    uint64_t ms = (uint64_t)base_ms << shift, cap = base_ms > PC_BACKOFF_CAP_MS ? base_ms : PC_BACKOFF_CAP_MS;
    return (uint32_t)(ms < cap ? ms : cap);
}

/* Whether a rank that asks to come back away_ms after it was left out came
 * back soon. */
static inline int pc_backoff_soon(uint32_t base_ms, const pc_backoff_t *b, uint32_t away_ms)
{
    return (uint64_t)away_ms < (uint64_t)PC_BACKOFF_SOON * pc_backoff_limit(base_ms, b);
}

/* The coordinator's view change after a rank came back soon: 1 if the
 * limit grew (not at the cap). */
static inline int pc_backoff_raise(uint32_t base_ms, pc_backoff_t *b)
{
    uint32_t before = pc_backoff_limit(base_ms, b);
    if (b->shift >= PC_BACKOFF_MAX_SHIFT) return 0;
    b->shift++;
    if (pc_backoff_limit(base_ms, b) == before) {
        b->shift--;
        return 0;
    }
    b->calm = 0;
    return 1;
}

/* A view installed with the coordinator's shift. */
static inline void pc_backoff_set(pc_backoff_t *b, uint32_t shift)
{
    b->shift = shift < PC_BACKOFF_MAX_SHIFT ? shift : PC_BACKOFF_MAX_SHIFT;
    b->calm = 0;
}

/* A round completed: after PC_BACKOFF_CALM_ROUNDS of them without a view
 * change, the limit halves. */
static inline void pc_backoff_round(pc_backoff_t *b)
{
    if (b->shift && ++b->calm >= PC_BACKOFF_CALM_ROUNDS) {
        b->shift--;
        b->calm = 0;
    }
}

#endif
