/*
 * Timelines (core/timeline.c, docs/timeline.md):
 *   - arguments: a NULL or empty prefix, one that cannot be created (at one
 *     rank: every rank fails), a stop without a start, a start while
 *     recording, bad marks;
 *   - a session with every kind of call: each rank's file has a header, a
 *     stop line, and exactly the events of what it did (blocking, group,
 *     nonblocking and plan allreduces, partial calls and every round the
 *     observer saw, preduce calls with their members, the fusion plan,
 *     layers, buckets and waits, marks), every line a JSON object;
 *   - the clock offsets: on one machine every rank's clock is rank 0's, so
 *     the measured offset must lie within its error bound;
 *   - a second session records only its own events; two contexts of one
 *     process cannot record into one file; PCOLL_TIMELINE starts one in
 *     pcoll_init (a later context of the process: PREFIX.ctxN) and
 *     pcoll_finalize stops it;
 *   - a start that fails at one rank leaves an earlier run's files alone.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static int rank, size;
static char dir[256];

/* ---- reading a rank's file ---- */

typedef struct lines {
    char **line;
    int n;
} lines_t;

static lines_t read_lines(const char *path)
{
    lines_t l = {NULL, 0};
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    char buf[8192];
    while (fgets(buf, sizeof buf, f)) {
        l.line = realloc(l.line, sizeof *l.line * (size_t)(l.n + 1));
        l.line[l.n++] = strdup(buf);
    }
    fclose(f);
    return l;
}

static void free_lines(lines_t *l)
{
    for (int i = 0; i < l->n; i++) free(l->line[i]);
    free(l->line);
}

/* lines of event `ev` that contain `also` (NULL: any) */
static int count(const lines_t *l, const char *ev, const char *also)
{
    char key[64];
    snprintf(key, sizeof key, "{\"ev\":\"%s\",", ev);
    int n = 0;
    for (int i = 0; i < l->n; i++)
        if (strncmp(l->line[i], key, strlen(key)) == 0 && (!also || strstr(l->line[i], also))) n++;
    return n;
}

static long long field(const char *line, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *at = strstr(line, k);
    CHECK_MSG(at != NULL, "no %s in %s", key, line);
    return atoll(at + strlen(k));
}

/* header first, stop last, every line an object, the stop's count right */
static void check_frame(const lines_t *l)
{
    CHECK(l->n >= 2);
    CHECK_MSG(count(l, "header", "\"pcoll_timeline\":1") == 1 && strncmp(l->line[0], "{\"ev\":\"header\"", 14) == 0,
              "header: %s", l->line[0]);
    CHECK(field(l->line[0], "rank") == rank && field(l->line[0], "size") == size);
    CHECK_MSG(strncmp(l->line[l->n - 1], "{\"ev\":\"stop\"", 12) == 0, "last line: %s", l->line[l->n - 1]);
    CHECK_MSG(field(l->line[l->n - 1], "events") == l->n - 2, "stop says %lld events, the file has %d",
              field(l->line[l->n - 1], "events"), l->n - 2);
    for (int i = 0; i < l->n; i++) {
        size_t len = strlen(l->line[i]);
        CHECK_MSG(len > 2 && l->line[i][0] == '{' && l->line[i][len - 2] == '}' && l->line[i][len - 1] == '\n',
                  "line %d: %s", i, l->line[i]);
    }
    /* one machine: rank 0's clock is everyone's; the offset is within its bound */
    for (int k = 0; k < 2; k++) {
        const char *line = l->line[k ? l->n - 1 : 0];
        long long off = field(line, "offset_ns"), err = field(line, "offset_err_ns");
        CHECK_MSG(err >= 0 && llabs(off) <= err + 1000, "offset %lld ns, error bound %lld ns (%s)", off, err,
                  k ? "stop" : "start");
        if (rank == 0) CHECK(off == 0 && err == 0);
    }
}

/* ---- the calls ---- */

static void path_of(char *buf, size_t len, const char *prefix, int r) { snprintf(buf, len, "%s.%d.jsonl", prefix, r); }

static void bad_arguments(pcoll_t *ctx)
{
    EXPECT_ERR(pcoll_timeline_stop(ctx), PCOLL_ERR_STATE, "no timeline");
    EXPECT_ERR(pcoll_timeline_start(ctx, ""), PCOLL_ERR_ARG, "prefix");
    EXPECT_ERR(pcoll_timeline_start(NULL, "x"), PCOLL_ERR_NULL, "ctx");
    /* one rank's prefix cannot be created: every rank fails, none records,
     * and the files of an earlier run stay as they were */
    char bad[300], old[400];
    snprintf(bad, sizeof bad, rank == size - 1 ? "%s/no/such/dir/t" : "%s/bad", dir);
    snprintf(old, sizeof old, "%s.%d.jsonl", bad, rank);
    FILE *f = rank == size - 1 ? NULL : fopen(old, "w");
    if (f) {
        fputs("an earlier run\n", f);
        fclose(f);
    }
    int rc = pcoll_timeline_start(ctx, bad);
    CHECK_MSG(rc != PCOLL_SUCCESS, "a start with an unusable prefix at rank %d succeeded", size - 1);
    if (rank == size - 1) CHECK_MSG(rc == PCOLL_ERR_ARG && strstr(pcoll_last_error(), "cannot create"), "%s",
                                    pcoll_last_error());
    CHECK(!pcoll_timeline_recording(ctx));
    if (rank != size - 1) {
        char line[64] = "";
        f = fopen(old, "r");
        CHECK_MSG(f && fgets(line, sizeof line, f) && strcmp(line, "an earlier run\n") == 0,
                  "the earlier run's %s was changed by a start that failed", old);
        fclose(f);
        unlink(old);
        strcat(old, ".part");
        CHECK_MSG(access(old, F_OK) != 0, "%s was left behind", old);
    }
    EXPECT_ERR(pcoll_timeline_mark(ctx, NULL, PCOLL_MARK_BEGIN), PCOLL_ERR_NULL, "name");
    EXPECT_ERR(pcoll_timeline_mark(ctx, "x", (pcoll_mark_phase_t)7), PCOLL_ERR_ARG, "phase");
    char longname[100];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    EXPECT_ERR(pcoll_timeline_mark(ctx, longname, PCOLL_MARK_BEGIN), PCOLL_ERR_ARG, "name");
    EXPECT_ERR(pcoll_timeline_mark(ctx, "", PCOLL_MARK_BEGIN), PCOLL_ERR_ARG, "name");
    CHECK_RC(pcoll_timeline_mark(ctx, "not recorded", PCOLL_MARK_BEGIN)); /* off: nothing */
}

typedef struct expected {
    int allreduce, group, iallreduce, start;
    int partial_calls, rounds, preduce, layers, buckets, waits, plan_buckets, marks, stalls;
} expected_t;

static void count_round(const pcoll_round_t *r, void *arg)
{
    (void)r;
    ((expected_t *)arg)->rounds++;
}

static void allreduces(pcoll_t *ctx, expected_t *x)
{
    float v[64];
    for (int i = 0; i < 5; i++, x->allreduce++) CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, v, 64, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0));
    int pair[2] = {size - 1, 0}; /* not in rank order: recorded as a list */
    if (size >= 2 && (rank == 0 || rank == size - 1))
        for (int i = 0; i < 3; i++, x->group++)
            CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, v, 8, PCOLL_FLOAT32, PCOLL_SUM, pair, 2));
    pcoll_request_t *req;
    CHECK_RC(pcoll_iallreduce(ctx, PCOLL_IN_PLACE, v, 64, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &req));
    CHECK_RC(pcoll_wait(&req));
    x->iallreduce++;
    pcoll_plan_t *plan;
    CHECK_RC(pcoll_allreduce_init(ctx, PCOLL_IN_PLACE, v, 64, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0, &plan));
    for (int i = 0; i < 4; i++, x->start++) {
        CHECK_RC(pcoll_start(plan, &req));
        CHECK_RC(pcoll_wait(&req));
    }
    CHECK_RC(pcoll_plan_free(&plan));
}

/* A blocking call that waits past the stall warning for a late rank: the
 * others record a stall event naming it */
static void stall(pcoll_t *ctx, expected_t *x)
{
    if (size < 2) return;
    double warn, timeout;
    CHECK_RC(pcoll_get_timeouts(ctx, &warn, &timeout));
    CHECK_RC(pcoll_set_timeouts(ctx, 0.2, timeout));
    if (rank == size - 1) usleep(900000);
    float v[64] = {0};
    CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, v, 64, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0));
    x->allreduce++;
    x->stalls = rank != size - 1;
    CHECK_RC(pcoll_set_timeouts(ctx, warn, timeout));
}

static void partial(pcoll_t *ctx, expected_t *x)
{
    pcoll_partial_config_t cfg;
    pcoll_partial_config_default(&cfg);
    cfg.kind = PCOLL_PARTIAL_MAJORITY;
    cfg.observer = count_round;
    cfg.observer_arg = x;
    pcoll_partial_t *p;
    CHECK_RC(pcoll_partial_create(ctx, 16, PCOLL_FLOAT32, &cfg, &p));
    float c[16] = {1}, out[16];
    for (int i = 0; i < 20; i++, x->partial_calls++) {
        if (rank == 1 && i % 4 == 0) usleep(2000);
        CHECK_RC(pcoll_partial_allreduce(p, c, out, NULL));
    }
    CHECK_RC(pcoll_partial_flush(p, out, NULL));
    CHECK_RC(pcoll_partial_free(&p));
    x->partial_calls += 2;
}

static void preduce(pcoll_t *ctx, expected_t *x)
{
    pcoll_preduce_config_t cfg;
    pcoll_preduce_config_default(&cfg);
    pcoll_preduce_t *o;
    CHECK_RC(pcoll_preduce_create(ctx, 8, PCOLL_FLOAT32, &cfg, &o));
    float m[8] = {0};
    for (int i = 0; i < 6; i++, x->preduce++) CHECK_RC(pcoll_preduce(o, m, (uint64_t)i + 1, NULL));
    CHECK_RC(pcoll_preduce_free(&o));
}

static void fusion(pcoll_t *ctx, expected_t *x)
{
    size_t cnt[3] = {100, 200, 50}, off[3] = {0, 100, 300}, bytes[3] = {400, 800, 200};
    double bw[3] = {50, 80, 20};
    pcoll_fusion_profile_t prof = {.nlayers = 3, .bytes = bytes, .backward_us = bw, .forward_us = 100};
    pcoll_cost_model_t model;
    CHECK_RC(pcoll_cost_model_linear(10, 0.001, &model));
    pcoll_fusion_spec_t spec = {.strategy = PCOLL_FUSION_WFBP};
    pcoll_fusion_plan_t *plan;
    CHECK_RC(pcoll_fusion_plan_create(&prof, &model, &spec, &plan));
    float grad[350];
    pcoll_fusion_t *f;
    CHECK_RC(pcoll_fusion_create(ctx, NULL, 0, grad, PCOLL_FLOAT32, PCOLL_SUM, off, cnt, plan, &f));
    x->plan_buckets += plan->nbuckets;
    for (int s = 0; s < 4; s++, x->waits++) {
        for (int l = 2; l >= 0; l--, x->layers++) CHECK_RC(pcoll_fusion_ready(f, l));
        CHECK_RC(pcoll_fusion_wait(f));
        x->buckets += plan->nbuckets;
    }
    CHECK_RC(pcoll_fusion_free(&f));
    pcoll_fusion_plan_free(&plan);
}

static void check_events(const lines_t *l, const expected_t *x)
{
    /* blocking calls of every rank (256 B; preduce's groups average by
     * blocking calls of 32 B too, recorded as lists unless every rank) */
    int world = 0;
    for (int i = 0; i < l->n; i++)
        world += strncmp(l->line[i], "{\"ev\":\"allreduce\",", 17) == 0 && strstr(l->line[i], "\"call\":\"allreduce\"") &&
                 strstr(l->line[i], "\"bytes\":256,") && !strstr(l->line[i], "\"group\":");
    CHECK_MSG(world == x->allreduce, "%d blocking allreduces of every rank recorded, %d made", world, x->allreduce);
    char pair[64];
    snprintf(pair, sizeof pair, "\"group\":[%d,0]", size - 1);
    CHECK_MSG(size < 2 || count(l, "allreduce", pair) == x->group, "%d calls on %s recorded, %d made",
              count(l, "allreduce", pair), pair, x->group);
    CHECK(count(l, "allreduce", "\"call\":\"iallreduce\"") == x->iallreduce);
    CHECK(count(l, "allreduce", "\"call\":\"start\"") >= x->start); /* and the buckets' plans */
    CHECK_MSG(count(l, "partial_call", NULL) == x->partial_calls, "%d partial calls recorded, %d made",
              count(l, "partial_call", NULL), x->partial_calls);
    CHECK(count(l, "partial_call", "\"fn\":\"flush\"") == 1 && count(l, "partial_call", "\"fn\":\"free\"") == 1);
    CHECK_MSG(count(l, "round", "\"kind\":\"majority\"") == x->rounds, "%d rounds recorded, the observer saw %d",
              count(l, "round", "\"kind\":\"majority\""), x->rounds);
    CHECK(count(l, "preduce", "\"members\":[") == x->preduce);
    CHECK(count(l, "fusion_plan", NULL) == x->plan_buckets);
    CHECK(count(l, "fusion_ready", NULL) == x->layers);
    CHECK(count(l, "fusion_bucket", NULL) == x->buckets);
    CHECK(count(l, "fusion_wait", NULL) == x->waits);
    CHECK(count(l, "mark", "\"ph\":\"B\",\"name\":\"phase \\\"one\\\"\"") == x->marks);
    CHECK(count(l, "mark", "\"ph\":\"E\"") == x->marks);
    CHECK(count(l, "mark", "not recorded") == 0);
    CHECK(count(l, "thread", "\"name\":\"application\"") == 1);
    /* the warning names the late rank (the largest: last in the list); on a
     * loaded machine another rank may be late with it */
    char alone[64], last[64];
    snprintf(alone, sizeof alone, "\"ranks\":[%d],", size - 1);
    snprintf(last, sizeof last, ",%d],", size - 1);
    int named = count(l, "stall", alone) + count(l, "stall", last);
    CHECK_MSG(named == x->stalls && count(l, "stall", "\"timeout\":0") == x->stalls,
              "%d stall events naming rank %d, %d expected", named, size - 1, x->stalls);
    /* spans have a duration; every status is 0 */
    for (int i = 0; i < l->n; i++) {
        if (strstr(l->line[i], "\"status\":")) CHECK_MSG(field(l->line[i], "status") == 0, "%s", l->line[i]);
        if (strncmp(l->line[i], "{\"ev\":\"allreduce\"", 17) == 0) CHECK(field(l->line[i], "dur") > 0);
    }
}

static void session(pcoll_t *ctx, const char *prefix)
{
    expected_t x;
    memset(&x, 0, sizeof x);
    CHECK_RC(pcoll_timeline_start(ctx, prefix));
    CHECK(pcoll_timeline_recording(ctx));
    EXPECT_ERR(pcoll_timeline_start(ctx, prefix), PCOLL_ERR_STATE, "already");
    for (int i = 0; i < 3; i++, x.marks++) {
        CHECK_RC(pcoll_timeline_mark(ctx, "phase \"one\"", PCOLL_MARK_BEGIN));
        CHECK_RC(pcoll_timeline_mark(ctx, "phase \"one\"", PCOLL_MARK_END));
    }
    allreduces(ctx, &x);
    stall(ctx, &x);
    partial(ctx, &x);
    preduce(ctx, &x);
    fusion(ctx, &x);
    CHECK_RC(pcoll_timeline_stop(ctx));
    CHECK(!pcoll_timeline_recording(ctx));
    char p[400];
    path_of(p, sizeof p, prefix, rank);
    lines_t l = read_lines(p);
    check_frame(&l);
    check_events(&l, &x);
    free_lines(&l);
}

/* Two contexts of one process cannot record into one file */
static void one_file_one_session(pcoll_t *ctx)
{
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s/shared", dir);
    pcoll_t *other;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &other));
    CHECK_RC(pcoll_timeline_start(ctx, prefix));
    EXPECT_ERR(pcoll_timeline_start(other, prefix), PCOLL_ERR_ARG, "another context");
    CHECK(!pcoll_timeline_recording(other));
    CHECK_RC(pcoll_timeline_stop(ctx));
    CHECK_RC(pcoll_timeline_start(other, prefix)); /* free again */
    CHECK_RC(pcoll_finalize(&other));               /* which stops it */
    char p[400];
    path_of(p, sizeof p, prefix, rank);
    lines_t l = read_lines(p);
    check_frame(&l);
    free_lines(&l);
}

/* PCOLL_TIMELINE: pcoll_init starts one, pcoll_finalize stops it; the
 * process's N-th context (contexts_before of them made already) writes
 * PREFIX.ctxN.R.jsonl */
static void from_environment(int contexts_before)
{
    char prefix[300], p[400], name[350];
    snprintf(prefix, sizeof prefix, "%s/env", dir);
    setenv("PCOLL_TIMELINE", prefix, 1);
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    unsetenv("PCOLL_TIMELINE");
    CHECK(pcoll_timeline_recording(ctx));
    int v = 1;
    for (int i = 0; i < 7; i++) CHECK_RC(pcoll_allreduce(ctx, PCOLL_IN_PLACE, &v, 1, PCOLL_INT32, PCOLL_SUM, NULL, 0));
    CHECK_RC(pcoll_finalize(&ctx));
    snprintf(name, sizeof name, "%s.ctx%d", prefix, contexts_before + 1);
    path_of(p, sizeof p, name, rank);
    lines_t l = read_lines(p);
    check_frame(&l);
    CHECK(count(&l, "allreduce", "\"call\":\"allreduce\"") == 7);
    free_lines(&l);
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 300, &rank, &size);
    if (rank == 0) {
        snprintf(dir, sizeof dir, "/tmp/pcoll_test_timeline_XXXXXX");
        CHECK(mkdtemp(dir) != NULL);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    bad_arguments(ctx);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s/one", dir);
    session(ctx, prefix);
    snprintf(prefix, sizeof prefix, "%s/two", dir);
    session(ctx, prefix); /* only its own events: the counts are exact again */
    one_file_one_session(ctx);
    CHECK_RC(pcoll_finalize(&ctx));
    from_environment(2);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0);
        printf("test_timeline: P=%d, %ld checks passed\n", size, (long)tu_checks_);
    }
    MPI_Finalize();
    return 0;
}
