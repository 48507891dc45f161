/*
 * When a rank counts as silent (PCOLL_EXCLUDE_MS): a pure rule over one
 * 64-bit word, so that the ranks of a node can share it in memory (updated
 * by CAS) and a unit test can drive it without a clock.
 *
 *   word:  | what (20 bits) | waited, ms (22) | last look, ms (22) |
 *
 *   look(what, now):  another thing than the word's (newer): waited = 0
 *                     the same thing: waited += min(now - last, limit / 4)
 *   silent:           waited >= limit
 *
 * "what" names the thing waited for (a blocked round, a ping not answered).
 * The waiting is summed over the gaps between looks, and no gap counts for
 * more than a quarter of the limit.  A pause of the whole machine, or of the
 * ranks that look (a throttled container, a host under load), shows as one
 * long gap: it counts a quarter, and the rank waited for must then stay
 * silent for three quarters of the limit while the others run and look.  A
 * rank that really stopped is found after the limit plus one gap, when the
 * others look at least every PC_SILENCE_NUDGES-th of it (waiting threads
 * do: pc_block's nudge).
 */
#ifndef PC_PARTIAL_SILENCE_H
#define PC_PARTIAL_SILENCE_H

#include <stdint.h>

/* Waiting threads look this many times per limit. */
#define PC_SILENCE_NUDGES 8

#define PC_SILENCE_WHAT_MASK ((1u << 20) - 1)
#define PC_SILENCE_MS_MASK ((1u << 22) - 1) /* the limit is at most 3,600,000 ms (config.c) */

static inline uint32_t pc_silence_what(uint64_t w) { return (uint32_t)(w >> 44); }
static inline uint32_t pc_silence_waited(uint64_t w) { return (uint32_t)(w >> 22) & PC_SILENCE_MS_MASK; }

static inline uint64_t pc_silence_word(uint32_t what, uint32_t waited, uint32_t last)
{
    return (uint64_t)(what & PC_SILENCE_WHAT_MASK) << 44 | (uint64_t)(waited & PC_SILENCE_MS_MASK) << 22 |
           (last & PC_SILENCE_MS_MASK);
}

/* The word after a look at `what` at time now_ms (any millisecond clock
 * that only goes forward).  A look at something older than the word's
 * leaves it as it is. */
static inline uint64_t pc_silence_look(uint64_t w, uint32_t what, uint32_t now_ms, uint32_t limit_ms)
{
    what &= PC_SILENCE_WHAT_MASK;
    uint32_t had = pc_silence_what(w);
    if (w == 0 || had != what) {
        uint32_t ahead = (what - had) & PC_SILENCE_WHAT_MASK; /* older: more than half the space ahead */
        if (w != 0 && ahead > PC_SILENCE_WHAT_MASK / 2) return w;
        return pc_silence_word(what, 0, now_ms);
    }
    uint32_t gap = (now_ms - (uint32_t)w) & PC_SILENCE_MS_MASK;
    uint32_t cap = limit_ms / 4 ? limit_ms / 4 : 1;
    uint64_t waited = (uint64_t)pc_silence_waited(w) + (gap < cap ? gap : cap);
    return pc_silence_word(what, waited > PC_SILENCE_MS_MASK ? PC_SILENCE_MS_MASK : (uint32_t)waited, now_ms);
}

/* Whether the word says `what` has been waited for the limit. */
static inline int pc_silence_reached(uint64_t w, uint32_t what, uint32_t limit_ms)
{
    return w != 0 && pc_silence_what(w) == (what & PC_SILENCE_WHAT_MASK) && pc_silence_waited(w) >= limit_ms;
}

/* Silence by pings: a rank is asked ping after ping (numbered, increasing),
 * the next once it answered the last, and what is waited for is the
 * ping's answer.  pinged: the last ping asked (0: none); answered: the
 * last ping the rank answered. */

/* Whether a new ping is due (the last one was answered, or none asked). */
static inline int pc_ping_due(uint64_t pinged, uint64_t answered) { return pinged == 0 || answered >= pinged; }

/* A look at the ping asked (*wait: its word): 1 once it has been
 * unanswered for the limit. */
static inline int pc_ping_look(uint64_t *wait, uint64_t pinged, uint32_t now_ms, uint32_t limit_ms)
{
    *wait = pc_silence_look(*wait, (uint32_t)pinged, now_ms, limit_ms);
    return pc_silence_reached(*wait, (uint32_t)pinged, limit_ms);
}

/* The verdict of the last look, while that ping is still unanswered. */
static inline int pc_ping_silent(uint64_t wait, uint64_t pinged, uint64_t answered, uint32_t limit_ms)
{
    return !pc_ping_due(pinged, answered) && pc_silence_reached(wait, (uint32_t)pinged, limit_ms);
}

#endif
