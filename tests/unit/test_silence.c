/*
 * When a rank counts as silent (partial/silence.h), driven with a made-up
 * millisecond clock:
 *   - a stopped rank, looked at every limit / PC_SILENCE_NUDGES (with
 *     jitter): silent after the limit, and no later than one look more;
 *   - a pause of everyone (one long gap, any length) followed by looks for
 *     less than three quarters of the limit: never silent;
 *   - looks closer than a millisecond, or at an older thing, change nothing
 *     that matters; a newer thing starts again from zero;
 *   - the clock wraps around (every 2^22 ms in the word, every 2^32 outside);
 *   - the waiting saturates instead of wrapping;
 *   - by pings (pc_ping_*): a new ping is due only once the last one was
 *     answered; a rank that answers every ping is never silent, one that
 *     stops answering is after the limit, and an answer ends the verdict;
 * for limits from 1 ms to the largest PCOLL_EXCLUDE_MS (3,600,000).
 */
#include <stdint.h>
#include <stdio.h>

#include "../rng.h"
#include "partial/silence.h"
#include "unit_check.h"

/* Looks at `what` from `start` every `every` ms (plus 0..jitter) until it is
 * silent or `until` ms have passed; returns the time it became silent,
 * relative to start (-1: never). */
static int64_t look_until(uint64_t *w, uint32_t what, uint32_t start, uint32_t every, uint32_t jitter, uint32_t limit,
                          uint32_t until, rng_t *rng)
{
    uint32_t t = start;
    for (;;) {
        *w = pc_silence_look(*w, what, t, limit);
        if (pc_silence_reached(*w, what, limit)) return (int64_t)(uint32_t)(t - start);
        uint32_t step = every + (jitter ? (uint32_t)rng_below(rng, jitter + 1) : 0);
        if ((uint32_t)(t - start) + step > until) return -1;
        t += step;
    }
}

static void stopped_rank(uint32_t limit, uint32_t start, rng_t *rng)
{
    uint32_t every = limit / PC_SILENCE_NUDGES ? limit / PC_SILENCE_NUDGES : 1;
    uint32_t jitter = every / 4;
    uint64_t w = 0;
    int64_t at = look_until(&w, 7, start, every, jitter, limit, 4 * limit + 100, rng);
    CHECK(at >= (int64_t)limit);                          /* never before the limit */
    CHECK(at <= (int64_t)limit + every + jitter);         /* and one look after it at most */
    CHECK(pc_silence_reached(w, 7, limit));
    CHECK(!pc_silence_reached(w, 8, limit));              /* another thing has not waited */
    /* something newer starts from zero */
    w = pc_silence_look(w, 8, start + (uint32_t)at, limit);
    CHECK(!pc_silence_reached(w, 8, limit) && pc_silence_waited(w) == 0);
    /* an older thing changes nothing */
    uint64_t before = w;
    CHECK(pc_silence_look(w, 7, start + (uint32_t)at + limit, limit) == before);
}

static void paused_machine(uint32_t limit, uint32_t start, rng_t *rng)
{
    uint32_t every = limit / PC_SILENCE_NUDGES ? limit / PC_SILENCE_NUDGES : 1;
    for (int k = 0; k < 20; k++) {
        uint64_t w = 0;
        uint32_t t = start;
        w = pc_silence_look(w, 3, t, limit);
        /* a pause of any length: from a millisecond to 100 limits */
        uint32_t pause = 1 + (uint32_t)rng_below(rng, 100ull * limit);
        t += pause;
        w = pc_silence_look(w, 3, t, limit);
        if (limit < 4) continue; /* a quarter is at least a millisecond */
        /* then looks for as long as keeps the sum below the limit (a quarter
         * counted for the pause): not silent */
        uint32_t more = limit - limit / 4 - 1;
        int64_t at = look_until(&w, 3, t, every, 0, limit, more, rng);
        CHECK(at < 0);
        CHECK(!pc_silence_reached(w, 3, limit));
        /* and silent once it has stayed silent long enough */
        at = look_until(&w, 3, t + more, every, 0, limit, 2 * limit, rng);
        CHECK(at >= 0);
    }
}

static void tight_looks(uint32_t limit, uint32_t start)
{
    /* looks within the same millisecond add nothing */
    uint64_t w = pc_silence_look(0, 5, start, limit);
    for (int i = 0; i < 1000; i++) CHECK(pc_silence_look(w, 5, start, limit) == w);
    /* looks every millisecond add a millisecond each */
    uint32_t t = start;
    for (uint32_t i = 1; i <= 50; i++) {
        w = pc_silence_look(w, 5, ++t, limit);
        CHECK(pc_silence_waited(w) == i);
    }
}

static void saturates(void)
{
    uint32_t limit = 3600000; /* the largest PCOLL_EXCLUDE_MS */
    uint64_t w = pc_silence_look(0, 1, 0, limit);
    uint32_t t = 0;
    for (int i = 0; i < 100; i++) {
        t += limit / 4;
        w = pc_silence_look(w, 1, t, limit);
    }
    CHECK(pc_silence_waited(w) == PC_SILENCE_MS_MASK);
    CHECK(pc_silence_reached(w, 1, limit));
}

static void what_wraps(void)
{
    /* round numbers beyond 2^20 (the word keeps 20 bits): newer still
     * restarts, older still changes nothing */
    uint32_t what = PC_SILENCE_WHAT_MASK; /* the last value before the wrap */
    uint64_t w = pc_silence_look(0, what, 10, 100);
    w = pc_silence_look(w, what, 30, 100);
    CHECK(pc_silence_waited(w) == 20);
    uint64_t n = pc_silence_look(w, what + 1, 40, 100); /* wraps to 0 */
    CHECK(pc_silence_what(n) == 0 && pc_silence_waited(n) == 0);
    CHECK(pc_silence_look(n, what, 50, 100) == n);
    CHECK(pc_silence_look(n, what + 1, 50, 100) != n);
}

/* A rank pinged by one that looks every 10 ms (limit 100): it answers
 * each ping 5 ms after it, until it stops at 500 ms; it goes on at 800. */
static void pings(void)
{
    uint64_t pinged = 0, answered = 0, wait = 0, seq = 0;
    CHECK(pc_ping_due(pinged, answered));
    CHECK(!pc_ping_silent(wait, pinged, answered, 100));
    int64_t silent_at = -1;
    uint64_t asked_at = 0;
    for (uint32_t t = 0; t <= 1000; t += 5) {
        int answering = t < 500 || t >= 800;
        if (answering && pinged > answered && t >= asked_at + 5) answered = pinged;
        if (t % 10) continue;
        if (pc_ping_due(pinged, answered)) {
            pinged = ++seq;
            asked_at = t;
        } else {
            CHECK(pinged == seq); /* no new ping while one is unanswered */
        }
        int silent = pc_ping_look(&wait, pinged, t, 100);
        CHECK(silent == pc_ping_silent(wait, pinged, answered, 100) || pinged <= answered);
        if (t < 500) CHECK(!silent);
        if (silent && silent_at < 0) silent_at = t;
        if (t > 805) CHECK(!pc_ping_silent(wait, pinged, answered, 100) || pinged > answered);
    }
    /* stopped at 500 after answering the ping of 490 (at 495): the ping of
     * 500 is waited for from 500, silent at 600 */
    CHECK(silent_at == 600);
    CHECK(!pc_ping_silent(wait, pinged, answered, 100)); /* it answered again */
}

int main(void)
{
    rng_t rng;
    rng_seed(&rng, 20261127);
    uint32_t limits[] = {1, 2, 3, 7, 8, 20, 100, 500, 501, 2000, 60000, 3600000};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        for (int rep = 0; rep < 50; rep++) {
            /* clocks anywhere, wrap-arounds of the word's 22 bits and of
             * the 32-bit clock included */
            uint32_t starts[] = {0, (uint32_t)rng_next(&rng), PC_SILENCE_MS_MASK - 3, UINT32_MAX - 5};
            for (int s = 0; s < 4; s++) {
                stopped_rank(limits[i], starts[s], &rng);
                paused_machine(limits[i], starts[s], &rng);
                tight_looks(limits[i], starts[s]);
            }
        }
    }
    saturates();
    what_wraps();
    pings();
    printf("test_silence: %ld checks passed\n", checks);
    return 0;
}
