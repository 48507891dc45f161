/*
 * A rank that never calls, or dies: the others get an error that names it,
 * never a hang.
 *
 * test_timeout (P >= 3): the last rank ("absent") makes no pcoll call while
 * the others, with PCOLL_TIMEOUT_S-like settings (warning after 0.5 s,
 * timeout after 1.5 s), call
 *   - pcoll_allreduce on all ranks, and on a group with the absent rank:
 *     PCOLL_ERR_TIMEOUT naming it ("has not started it"), after one stall
 *     warning on stderr naming it too;
 *   - SOLO and GROUP: calls complete (rounds need no application), a flush
 *     times out naming the absent rank; MAJORITY: a round it initiates times out
 *     naming it; QUORUM(P): times out naming it;
 *   - pcoll_allreduce_init: times out naming it;
 *   - pcoll_fusion_wait with four buckets in flight: one timeout naming it,
 *     after about PCOLL_TIMEOUT_S (not once per bucket).
 * Then the absent rank wakes up: the flushes are resumed and complete, the
 * objects are freed, every rank finalizes cleanly.
 *
 * test_timeout kill | kill-partial (run by kill_test.sh under a hard
 * timeout): rank 1 kills itself with SIGKILL in the middle of a run of
 * allreduces and majority partial calls (before an allreduce, or between
 * its allreduce and its partial call); every other rank must return
 * PCOLL_ERR_TIMEOUT (or an MPI error) naming rank 1 and says so on stdout,
 * then leaves without MPI.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../testutil.h"

static int rank, size, absent;

static char absent_words[64];

static void phase_end(void) { MPI_Barrier(MPI_COMM_WORLD); }

/* the stall warning goes to stderr: capture it around one call */
static int capture_begin(char *path, size_t len)
{
    snprintf(path, len, "/tmp/pcoll_stall_%d_%d.txt", (int)getpid(), rank);
    int saved = dup(2);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    CHECK(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    return saved;
}

static void capture_end(int saved, const char *path, char *text, size_t len)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, len - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    unlink(path);
}

static void allreduce_timeouts(pcoll_t *ctx)
{
    int32_t in = 1, out;
    if (rank != absent) {
        char path[128], text[4096];
        int saved = capture_begin(path, sizeof path);
        int rc = pcoll_allreduce(ctx, &in, &out, 1, PCOLL_INT32, PCOLL_SUM, NULL, 0);
        capture_end(saved, path, text, sizeof text);
        CHECK_MSG(rc == PCOLL_ERR_TIMEOUT, "pcoll_allreduce returned %d (%s)", rc, pcoll_strerror(rc));
        CHECK_MSG(strstr(pcoll_last_error(), absent_words) && strstr(pcoll_last_error(), "has not started it"),
                  "timeout message \"%s\"", pcoll_last_error());
        CHECK_MSG(strstr(text, "stalled for") && strstr(text, absent_words), "stall warning: \"%s\"", text);
        if (rank == 0) {
            printf("  allreduce, stall warning: %s", strstr(text, "pcoll_allreduce: stalled") ? strstr(text, "pcoll_allreduce: stalled") : text);
            printf("  allreduce, timeout: %s\n", pcoll_last_error());
        }
        /* the ranks are out of step on all ranks now: said at once */
        int st = pcoll_allreduce(ctx, &in, &out, 1, PCOLL_INT32, PCOLL_SUM, NULL, 0);
        CHECK_MSG(st == PCOLL_ERR_STATE, "after a timeout: %d", st);
    }
    phase_end();
    /* a group with the absent rank: its HELLO never comes */
    int group[2] = {0, absent};
    if (rank == 0) {
        EXPECT_ERR(pcoll_allreduce(ctx, &in, &out, 1, PCOLL_INT32, PCOLL_SUM, group, 2), PCOLL_ERR_TIMEOUT, absent_words);
        CHECK(strstr(pcoll_last_error(), "group [0, "));
        printf("  group allreduce: %s\n", pcoll_last_error());
    }
    phase_end();
}

static pcoll_partial_t *make(pcoll_t *ctx, const char *kind)
{
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_config_parse(kind, &cfg));
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, 3, PCOLL_INT32, &cfg, &p)); /* the absent rank creates it too */
    return p;
}

/* the absent rank joins: the flush (resumed where it timed out) and free */
static void finish(pcoll_partial_t *p)
{
    int32_t out[3];
    CHECK_RC(pcoll_partial_flush(p, out, NULL));
    CHECK_RC(pcoll_partial_free(&p));
}

static void partial_timeouts(pcoll_t *ctx)
{
    int32_t in[3] = {1, 2, 3}, out[3];
    char q[32];
    snprintf(q, sizeof q, "quorum:%d", size);
    const char *kinds[4] = {"solo", "majority", q, "group:2"};
    for (int k = 0; k < 4; k++) {
        pcoll_partial_t *p = make(ctx, kinds[k]);
        if (rank != absent) {
            if (k == 0 || k == 3) {
                /* solo and group rounds need no application: they go on
                 * without it */
                for (int i = 0; i < 5; i++) CHECK_RC(pcoll_partial_allreduce(p, in, out, NULL));
                EXPECT_ERR(pcoll_partial_flush(p, out, NULL), PCOLL_ERR_TIMEOUT, absent_words);
                CHECK(strstr(pcoll_last_error(), "has not called pcoll_partial_flush"));
            } else {
                /* majority: within P rounds the absent rank initiates one;
                 * quorum(P): the first round */
                int rc = PCOLL_SUCCESS, calls = 0;
                while (rc == PCOLL_SUCCESS && calls < 3 * size) {
                    rc = pcoll_partial_allreduce(p, in, out, NULL);
                    calls++;
                }
                CHECK_MSG(rc == PCOLL_ERR_TIMEOUT, "%s: %d calls, last status %d", kinds[k], calls, rc);
                CHECK_MSG(strstr(pcoll_last_error(), absent_words), "%s: \"%s\"", kinds[k], pcoll_last_error());
                CHECK(strstr(pcoll_last_error(), k == 1 ? "initiates" : "has not arrived"));
            }
            if (rank == 0) printf("  %s: %s\n", kinds[k], pcoll_last_error());
        }
        phase_end(); /* the absent rank "wakes up" */
        /* solo: the others resume their timed-out flush only after the
         * absent rank's arrival let it complete in the background: the
         * resumed call delivers it (it must not begin a second flush) */
        if (k == 0 && rank != absent) usleep(300000);
        finish(p);
    }
}

static void plan_timeout(pcoll_t *ctx)
{
    if (rank != absent) {
        float in[4] = {0}, out[4];
        pcoll_plan_t *plan = NULL;
        EXPECT_ERR(pcoll_allreduce_init(ctx, in, out, 4, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &plan),
                   PCOLL_ERR_TIMEOUT, absent_words);
        CHECK(plan == NULL);
        if (rank == 0) printf("  pcoll_allreduce_init: %s\n", pcoll_last_error());
    }
    phase_end();
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* on a context of its own: the earlier world timeouts left this one's
 * world operations out of step, and fusion_create agrees through them */
static void fusion_timeout(void)
{
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    if (rank != absent) CHECK_RC(pcoll_set_timeouts(ctx, 0.5, 1.5));
    enum { L = 4 };
    float grad[L * 100];
    size_t bytes[L], off[L], cnt[L];
    double tb[L];
    for (int l = 0; l < L; l++) bytes[l] = 400, off[l] = 100 * (size_t)l, cnt[l] = 100, tb[l] = 10;
    pcoll_fusion_profile_t prof = {.nlayers = L, .bytes = bytes, .backward_us = tb, .forward_us = 0};
    pcoll_cost_model_t m;
    pcoll_fusion_spec_t spec;
    pcoll_fusion_plan_t *pl;
    pcoll_fusion_t *f;
    CHECK_RC(pcoll_cost_model_linear(0, 0, &m));
    CHECK_RC(pcoll_fusion_spec_parse("wfbp", &spec));
    CHECK_RC(pcoll_fusion_plan_create(&prof, &m, &spec, &pl));
    CHECK(pl->nbuckets == L);
    CHECK_RC(pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, off, cnt, pl, &f));
    if (rank != absent) {
        for (int l = L - 1; l >= 0; l--) CHECK_RC(pcoll_fusion_ready(f, l));
        double t = seconds();
        EXPECT_ERR(pcoll_fusion_wait(f), PCOLL_ERR_TIMEOUT, absent_words);
        t = seconds() - t;
        CHECK_MSG(t < 1.5 + 2.0, "pcoll_fusion_wait failed after %.1f s with PCOLL_TIMEOUT_S 1.5 (4 buckets)", t);
        if (rank == 0) printf("  pcoll_fusion_wait (%d buckets, %.1f s): %s\n", L, t, pcoll_last_error());
    }
    phase_end();
    CHECK_RC(pcoll_fusion_free(&f));
    pcoll_fusion_plan_free(&pl);
    CHECK_RC(pcoll_finalize(&ctx));
}

/* ---- a rank killed with SIGKILL ---- */

static void killed(int before_partial)
{
    int victim = 1;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 3));
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_config_parse("majority", &cfg));
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, 16, PCOLL_FLOAT32, &cfg, &p));
    float x[16] = {1}, y[16];
    int rc = PCOLL_SUCCESS;
    const char *where = "";
    for (int it = 0; it < 1000 && rc == PCOLL_SUCCESS; it++) {
        if (rank == victim && it == 5 && !before_partial) {
            fflush(stdout);
            raise(SIGKILL);
        }
        where = "pcoll_allreduce";
        rc = pcoll_allreduce(ctx, x, y, 16, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0);
        if (rc != PCOLL_SUCCESS) break;
        if (rank == victim && it == 5 && before_partial) {
            fflush(stdout);
            raise(SIGKILL);
        }
        where = "pcoll_partial_allreduce";
        rc = pcoll_partial_allreduce(p, x, y, NULL);
    }
    /* the victim never gets here */
    int names = strstr(pcoll_last_error(), "rank 1 ") != NULL || strstr(pcoll_last_error(), "ranks 1,") != NULL;
    printf("SURVIVOR %d: %s returned %s (%s)%s\n", rank, where, rc == PCOLL_ERR_TIMEOUT ? "PCOLL_ERR_TIMEOUT"
                                                              : rc == PCOLL_ERR_MPI   ? "PCOLL_ERR_MPI"
                                                                                      : "something else",
           pcoll_last_error(), names ? " NAMES-VICTIM" : "");
    fflush(stdout);
    /* a dead peer: MPI_Finalize could wait for it, so leave without it; the
     * runtime ends the job when the first survivor leaves that way, so the
     * others get a few seconds to report first */
    sleep(6);
    _exit(0);
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 300, &rank, &size);
    if (argc > 1 && strcmp(argv[1], "kill") == 0) killed(0);
    if (argc > 1 && strcmp(argv[1], "kill-partial") == 0) killed(1);
    if (size < 3) {
        if (rank == 0) printf("test_timeout: needs 3 ranks or more\n");
        MPI_Finalize();
        return 0;
    }
    absent = size - 1;
    snprintf(absent_words, sizeof absent_words, "rank %d (", absent);
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    if (rank != absent) CHECK_RC(pcoll_set_timeouts(ctx, 0.5, 1.5));
    if (rank == 0) printf("test_timeout: P=%d, rank %d makes no call while the others wait\n", size, absent);
    pcoll_log_level_t old = pcoll_get_log_level();
    allreduce_timeouts(ctx);
    pcoll_set_log_level(PCOLL_LOG_NONE); /* the warnings from here on are expected */
    partial_timeouts(ctx);
    plan_timeout(ctx);
    fusion_timeout();
    pcoll_set_log_level(old);
    CHECK_RC(pcoll_finalize(&ctx));
    if (rank == 0) printf("test_timeout: P=%d, %ld checks passed\n", size, tu_checks_);
    MPI_Finalize();
    return 0;
}
