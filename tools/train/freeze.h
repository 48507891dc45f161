/*
 * --inject freeze: this process stopped from outside, at a moment it does
 * not choose (as a scheduler, a debugger or a virtual machine's pause
 * would stop it: in the middle of whatever its threads do), for a while.
 *
 *   tr_freeze_start                      helper process
 *   ---------------                      --------------
 *   spawn the helper  ---------------->  sleep delay; SIGSTOP this process;
 *   start the watcher thread             sleep seconds; SIGCONT
 *   (the caller goes on)
 *                                        watcher: wakes every millisecond;
 *                                        a wake-up much later than asked is
 *                                        the stop: its start and end
 *   tr_freeze_end: join both, the stop's times
 */
#ifndef PCOLL_TRAIN_FREEZE_H
#define PCOLL_TRAIN_FREEZE_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

typedef struct tr_freeze {
    pthread_t watcher;
    pid_t helper;
    int started;
    atomic_int cancel;            /* the watcher ends (no helper) */
    double seconds;               /* how long the helper keeps it stopped */
    double stopped_at, resumed_at; /* CLOCK_MONOTONIC; 0: not seen */
} tr_freeze_t;

/* CLOCK_MONOTONIC in seconds: one clock for every process of the machine,
 * that of the stop's times and of pcoll-train's step ends. */
double tr_mono_now(void);

/* Starts the helper that stops this process after delay_s for seconds, and
 * the thread that sees when it happened; 0, or -1 (nothing started). */
int tr_freeze_start(tr_freeze_t *f, double delay_s, double seconds);
/* Waits until the stop happened and is over (the helper ended); the stop's
 * times are in *f then. */
void tr_freeze_end(tr_freeze_t *f);

#endif
