/*
 * The timeline recorder (util/recorder.h), without MPI:
 *   - threads record many times a buffer's worth at once: every event is in
 *     the file, each thread's in its order, lists and texts intact;
 *   - a close while threads still record: each thread's events in the file
 *     are a gapless prefix of what it recorded (nothing before the close is
 *     lost, nothing is half written);
 *   - a second session starts clean: no event of the first in its file.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/recorder.h"

#define THREADS 4
#define PER_THREAD (3 * PC_REC_BUF_EVENTS + 123)

static int failures;
#define CHECK(c, ...)                                                                                                   \
    do {                                                                                                                \
        if (!(c)) {                                                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                        \
            fprintf(stderr, __VA_ARGS__);                                                                               \
            fprintf(stderr, "\n");                                                                                      \
            failures++;                                                                                                 \
        }                                                                                                               \
    } while (0)

typedef struct worker {
    pc_rec_t *rec;
    int id;
    long count; /* events to record; -1: until stopped */
    atomic_long done;
    atomic_int *stop;
} worker_t;

static void *record(void *arg)
{
    worker_t *w = arg;
    pc_rec_thread_name("worker");
    for (long i = 0; w->count < 0 ? !atomic_load(w->stop) : i < w->count; i++) {
        int64_t f[PC_EV_FIELDS] = {w->id, i, (int)(i % 7)};
        if (pc_rec_on(w->rec)) {
            if (i % 1000 == 999) { /* now and then one with a list and a text */
                int ranks[3] = {w->id, (int)(i % 5), 7};
                int64_t g[PC_EV_FIELDS] = {pc_ev_str("pcoll_test"), i};
                pc_rec_event(w->rec, PC_EV_STALL, pc_rec_now(), 0, g, ranks, 3, "a \"quoted\"\nline");
            }
            pc_rec_event(w->rec, PC_EV_FUSION_READY, pc_rec_now(), 0, f, NULL, 0, NULL);
        }
        atomic_store(&w->done, i + 1);
    }
    return NULL;
}

/* Reads the file: per worker, the sequence numbers in order must be 0, 1,
 * ...; returns each worker's count in got[]. */
static void read_back(const char *path, long got[THREADS], int *stalls)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    char line[4096];
    int lines = 0, stopped = 0;
    *stalls = 0;
    for (int k = 0; k < THREADS; k++) got[k] = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        CHECK(line[0] == '{' && strstr(line, "}\n"), "line %d is not a whole object: %s", lines, line);
        if (lines == 1) CHECK(strstr(line, "\"ev\":\"header\",\"test\":1"), "first line is not the header: %s", line);
        if (strstr(line, "\"ev\":\"stop\"")) stopped++;
        const char *at = strstr(line, "\"ev\":\"fusion_ready\"");
        if (at) {
            int obj, layer;
            long step;
            CHECK(sscanf(strstr(line, "\"obj\":"), "\"obj\":%d,\"step\":%ld,\"layer\":%d", &obj, &step, &layer) == 3,
                  "unreadable: %s", line);
            CHECK(obj >= 0 && obj < THREADS, "obj %d", obj);
            if (obj >= 0 && obj < THREADS) {
                CHECK(step == got[obj], "worker %d: event %ld after %ld (lost or out of order)", obj, step, got[obj]);
                CHECK(layer == (int)(step % 7), "worker %d: field %d for %ld", obj, layer, step);
                got[obj] = step + 1;
            }
        }
        if (strstr(line, "\"ev\":\"stall\"")) {
            (*stalls)++;
            CHECK(strstr(line, "\"fn\":\"pcoll_test\"") && strstr(line, "\"what\":\"a \\\"quoted\\\"\\u000aline\"") &&
                      strstr(line, "\"ranks\":["),
                  "list or text wrong: %s", line);
        }
    }
    CHECK(stopped == 1, "%d stop lines", stopped);
    fclose(f);
}

static void session(pc_rec_t *rec, const char *path, long count)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot create %s", path);
    if (!f) exit(1);
    FILE *spill = tmpfile();
    CHECK(spill != NULL, "tmpfile");
    if (!spill) exit(1);
    pc_rec_open(rec, f, spill, "\"test\":1");
    atomic_int stop = 0;
    worker_t w[THREADS];
    pthread_t th[THREADS];
    for (int k = 0; k < THREADS; k++) {
        w[k] = (worker_t){rec, k, count, 0, &stop};
        pthread_create(&th[k], NULL, record, &w[k]);
    }
    if (count < 0) { /* close while they record */
        for (int k = 0; k < THREADS; k++)
            while (atomic_load(&w[k].done) < 2L * PC_REC_BUF_EVENTS) sched_yield();
        CHECK(pc_rec_close(rec, "\"x\":0") == 0, "close failed");
        atomic_store(&stop, 1);
        for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
    } else {
        for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
        CHECK(pc_rec_close(rec, "\"x\":0") == 0, "close failed");
    }
    long got[THREADS];
    int stalls;
    read_back(path, got, &stalls);
    for (int k = 0; k < THREADS; k++) {
        if (count >= 0)
            CHECK(got[k] == count, "worker %d: %ld of %ld events in the file", k, got[k], count);
        else
            CHECK(got[k] >= 2L * PC_REC_BUF_EVENTS && got[k] <= atomic_load(&w[k].done),
                  "worker %d: %ld events in the file, %ld recorded", k, got[k], atomic_load(&w[k].done));
    }
    if (count >= 0) CHECK(stalls == THREADS * (int)(count / 1000), "%d events with lists", stalls);
}

int main(void)
{
    pc_rec_t rec;
    CHECK(pc_rec_init(&rec) == 0, "init");
    char path[] = "/tmp/pcoll_test_recorder_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    session(&rec, path, PER_THREAD); /* every event, in order */
    session(&rec, path, -1);         /* closed while recording */
    session(&rec, path, 5000);       /* a new session: none of the old */
    CHECK(!pc_rec_on(&rec), "still on after close");
    pc_rec_destroy(&rec);
    remove(path);
    if (failures) {
        fprintf(stderr, "test_recorder: %d failures\n", failures);
        return 1;
    }
    printf("test_recorder: passed (%d threads, %d events each, a close while recording, a second session)\n", THREADS,
           PER_THREAD);
    return 0;
}
