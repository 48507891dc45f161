/* Simulated load imbalance: how long a rank sleeps in a training step.
 * Every choice is a function of (seed, step, rank), so ranks agree on who is
 * slow in step s whatever step each of them is at. */
#ifndef PCOLL_TRAIN_IMBALANCE_H
#define PCOLL_TRAIN_IMBALANCE_H

#include <stddef.h>
#include <stdint.h>

#define IMB_MAX_SLOW 64

typedef enum imbalance_kind {
    IMB_NONE = 0,
    IMB_RANDOM, /* random:K:MS   K ranks chosen per step sleep MS            */
    IMB_SKEW,   /* skew:MIN:MAX  delays MIN..MAX spread over the ranks,
                                 the assignment shifted by one rank a step  */
    IMB_SLOW,   /* slow:R[,R...]:F[:MS]  each listed rank sleeps (F-1) x MS,
                                 or (F-1) x its own compute time of the
                                 step without MS: F times slower than a
                                 step of MS (or of its compute)             */
    IMB_DIST    /* dist:MEAN:SD  lognormal per rank and step (ms)           */
} imbalance_kind_t;

typedef struct imbalance {
    imbalance_kind_t kind;
    long count;   /* RANDOM: K; SLOW: how many ranks are listed in slow[] */
    long slow[IMB_MAX_SLOW]; /* SLOW: the slow ranks, increasing, distinct */
    double a, b;  /* RANDOM: MS, -; SKEW: MIN, MAX; SLOW: FACTOR, MS (-1: none);
                     DIST: MEAN, SD */
    uint64_t seed;
    char spec[512]; /* canonical text, for logs */
} imbalance_t;

/* Parses "none", "random:K:MS", "skew:MIN:MAX", "slow:R[,R...]:FACTOR[:MS]" or
 * "dist:MEAN:SD" (milliseconds may be fractional).  -1 with a message. */
int imbalance_parse(const char *spec, uint64_t seed, imbalance_t *out);

/* Checks the spec against the number of ranks (K <= P, every slow rank < P). */
int imbalance_check(const imbalance_t *imb, int nranks);

/* Milliseconds rank `rank` sleeps in step `step`; compute_ms is the time
 * the rank spent computing this step (used by slow:). */
double imbalance_delay_ms(const imbalance_t *imb, int rank, int nranks, uint64_t step, double compute_ms);

/* Sleeps ms milliseconds (resuming after signals). */
void sleep_ms(double ms);

#endif
