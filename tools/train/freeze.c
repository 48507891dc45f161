/* --inject freeze (freeze.h): a helper process stops this one from
 * outside, a watcher thread in it sees when. */
#include "freeze.h"

#include <signal.h>
#include <stdatomic.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

double tr_mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wakes every millisecond until a wake-up comes at least half the stop
 * late: the process was stopped in between.  Gives up a minute after the
 * stop should have ended (the helper failed: no stop is reported). */
static void *watch(void *arg)
{
    tr_freeze_t *f = arg;
    const double give_up = tr_mono_now() + f->seconds + 60;
    const struct timespec ms = {0, 1000000};
    for (double before = tr_mono_now(); before < give_up && !atomic_load(&f->cancel);) {
        nanosleep(&ms, NULL);
        double after = tr_mono_now();
        if (after - before >= f->seconds / 2) {
            f->stopped_at = before;
            f->resumed_at = after;
            break;
        }
        before = after;
    }
    return NULL;
}

int tr_freeze_start(tr_freeze_t *f, double delay_s, double seconds)
{
    *f = (tr_freeze_t){.seconds = seconds};
    atomic_init(&f->cancel, 0);
    if (pthread_create(&f->watcher, NULL, watch, f) != 0) return -1; /* first: it must see the stop begin */
    char cmd[160];
    snprintf(cmd, sizeof cmd, "sleep %.3f; kill -STOP %ld; sleep %.3f; kill -CONT %ld", delay_s, (long)getpid(),
             seconds, (long)getpid());
    char *argv[] = {"sh", "-c", cmd, NULL};
    if (posix_spawnp(&f->helper, "sh", NULL, NULL, argv, environ) != 0) {
        atomic_store(&f->cancel, 1);
        pthread_join(f->watcher, NULL);
        return -1;
    }
    f->started = 1;
    return 0;
}

void tr_freeze_end(tr_freeze_t *f)
{
    if (!f->started) return;
    waitpid(f->helper, NULL, 0);
    pthread_join(f->watcher, NULL);
    f->started = 0;
}
