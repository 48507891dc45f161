/*
 * Collective setup calls agree: a difference between ranks, or a failure at
 * one rank, fails every rank at once with a message naming it (never a hang,
 * never a crash later):
 *   - pcoll_init with a must-agree PCOLL_* variable different at one rank
 *     (PCOLL_ALLREDUCE_ALGO, PCOLL_ALLREDUCE_DIRECT_BYTES): PCOLL_ERR_CONFIG
 *     naming the variable; a malformed variable at one rank: that rank names
 *     it, the others name the rank; per-rank variables may differ;
 *   - strict parsing: "5 " and " 5" are not numbers, "quorum: 3" not a quorum;
 *   - pcoll_partial_create with count, dtype, kind, quorum, mode or
 *     sync_every different at one rank, or invalid at one rank only:
 *     PCOLL_ERR_ARG naming it, at every rank; a valid create works after;
 *   - messages name the public call, never an internal function;
 *   - pcoll_agree (for bindings and applications): equal values pass; a
 *     value that differs at one rank, a different number of values, or a
 *     local failure at one rank (with its reason) fails every rank naming it;
 *   - PCOLL_CHECK=1: an allreduce on all ranks called with a different
 *     count, type or op at one rank, or with a bad argument at one rank
 *     only, fails every rank naming it (without the check the ranks would
 *     hang or reduce garbage); matching calls still reduce;
 *   - an MPI failure (two ranks on different algorithms: a message too long
 *     for its receive) fails the operation with PCOLL_ERR_MPI and a message
 *     naming the MPI call (2 ranks; with a timeout so nothing can hang).
 */
#include <stdint.h>
#include <string.h>

#include "../testutil.h"

static int rank, size;

/* the message starts with the public call's name */
static void names_call(const char *call)
{
    CHECK_MSG(strncmp(pcoll_last_error(), call, strlen(call)) == 0, "message \"%s\" does not start with %s",
              pcoll_last_error(), call);
}

/* pcoll_init with `name` set to `value` at rank `at` only (value NULL:
 * unset there); returns the status and leaves a context to finalize */
static int init_with(const char *name, const char *value_at, int at, const char *value_else, pcoll_t **ctx)
{
    const char *v = rank == at ? value_at : value_else;
    if (v)
        setenv(name, v, 1);
    else
        unsetenv(name);
    int rc = pcoll_init(MPI_COMM_WORLD, ctx);
    unsetenv(name);
    return rc;
}

static void config_agreement(void)
{
    pcoll_t *ctx = NULL;
    int last = size - 1;
    if (size > 1) {
        EXPECT_ERR(init_with("PCOLL_ALLREDUCE_ALGO", "ring", last, "auto", &ctx), PCOLL_ERR_CONFIG,
                   "PCOLL_ALLREDUCE_ALGO differs between ranks");
        names_call("pcoll_init");
        CHECK(strstr(pcoll_last_error(), "ring") && strstr(pcoll_last_error(), "auto"));
        CHECK(ctx == NULL);
        EXPECT_ERR(init_with("PCOLL_ALLREDUCE_DIRECT_BYTES", "0", last, NULL, &ctx), PCOLL_ERR_CONFIG,
                   "PCOLL_ALLREDUCE_DIRECT_BYTES differs");
        EXPECT_ERR(init_with("PCOLL_PARTIAL_SHM_BYTES", "1K", 0, "2K", &ctx), PCOLL_ERR_CONFIG,
                   "PCOLL_PARTIAL_SHM_BYTES differs");
    }
    /* malformed at one rank: it names the variable, the others the rank */
    int rc = init_with("PCOLL_SPIN_US", "5 ", last, NULL, &ctx);
    CHECK(rc == PCOLL_ERR_CONFIG && ctx == NULL);
    names_call("pcoll_init");
    if (rank == last)
        CHECK_MSG(strstr(pcoll_last_error(), "PCOLL_SPIN_US=\"5 \""), "%s", pcoll_last_error());
    else
        CHECK_MSG(strstr(pcoll_last_error(), "PCOLL_SPIN_US") && strstr(pcoll_last_error(), "rank"), "%s",
                  pcoll_last_error());
    EXPECT_ERR(init_with("PCOLL_SPIN_US", " 5", 0, " 5", &ctx), PCOLL_ERR_CONFIG, "PCOLL_SPIN_US");
    EXPECT_ERR(init_with("PCOLL_TIMEOUT_S", "-1", 0, "-1", &ctx), PCOLL_ERR_CONFIG, "PCOLL_TIMEOUT_S");
    EXPECT_ERR(init_with("PCOLL_STALL_WARN_S", "soon", 0, "soon", &ctx), PCOLL_ERR_CONFIG, "PCOLL_STALL_WARN_S");
    CHECK(strstr(pcoll_last_error(), "env_int") == NULL);
    /* per-rank variables may differ */
    CHECK_RC(init_with("PCOLL_SPIN_US", "7", last, "3", &ctx));
    double warn, tmo;
    CHECK_RC(pcoll_get_timeouts(ctx, &warn, &tmo));
    CHECK(warn == 60 && tmo == 0);
    CHECK_RC(pcoll_finalize(&ctx));
    CHECK_RC(init_with("PCOLL_TIMEOUT_S", "2.5", 0, "4", &ctx));
    CHECK_RC(pcoll_get_timeouts(ctx, &warn, &tmo));
    CHECK(tmo == (rank == 0 ? 2.5 : 4.0));
    CHECK_RC(pcoll_finalize(&ctx));
}

static void create_agreement(pcoll_t *ctx)
{
    int last = size - 1;
    pcoll_partial_config_t cfg;
    pcoll_partial_t *p = (pcoll_partial_t *)&cfg; /* must come back NULL */
    pcoll_partial_config_default(&cfg);
    EXPECT_ERR(pcoll_partial_config_parse("quorum: 3", &cfg), PCOLL_ERR_ARG, "quorum");
    EXPECT_ERR(pcoll_partial_config_parse("quorum:+3", &cfg), PCOLL_ERR_ARG, "quorum");
    if (size > 1) {
        EXPECT_ERR(pcoll_partial_create(ctx, rank == last ? 8 : 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG,
                   "count differs between ranks");
        CHECK(p == NULL);
        names_call("pcoll_partial_create");
        EXPECT_ERR(pcoll_partial_create(ctx, 4, rank == last ? PCOLL_INT32 : PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG,
                   "dtype differs");
        CHECK(strstr(pcoll_last_error(), "int32") && strstr(pcoll_last_error(), "float32"));
        cfg.kind = rank == last ? PCOLL_PARTIAL_MAJORITY : PCOLL_PARTIAL_SOLO;
        EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "cfg->kind differs");
        CHECK(strstr(pcoll_last_error(), "majority") && strstr(pcoll_last_error(), "solo"));
        cfg.kind = PCOLL_PARTIAL_QUORUM;
        cfg.quorum = rank == last ? 1 : size;
        EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "cfg->quorum differs");
        pcoll_partial_config_default(&cfg);
        cfg.mode = rank == last ? PCOLL_REPLACE : PCOLL_ACCUMULATE;
        EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "cfg->mode differs");
        pcoll_partial_config_default(&cfg);
        cfg.sync_every = rank == last ? 3 : 0;
        EXPECT_ERR(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p), PCOLL_ERR_ARG, "cfg->sync_every differs");
        CHECK(p == NULL);
    }
    /* invalid at one rank only: it says why, the others name it */
    pcoll_partial_config_default(&cfg);
    cfg.kind = PCOLL_PARTIAL_QUORUM;
    cfg.quorum = rank == last ? size + 1 : size;
    int rc = pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p);
    CHECK(rc == PCOLL_ERR_ARG && p == NULL);
    names_call("pcoll_partial_create");
    CHECK_MSG(strstr(pcoll_last_error(), "quorum"), "%s", pcoll_last_error());
    if (rank != last) CHECK_MSG(strstr(pcoll_last_error(), "rank"), "%s", pcoll_last_error());
    /* nothing was left half-done: a valid object works */
    pcoll_partial_config_default(&cfg);
    CHECK_RC(pcoll_partial_create(ctx, 4, PCOLL_FLOAT32, &cfg, &p));
    float one[4] = {1, 1, 1, 1}, out[4], total = 0;
    for (int i = 0; i < 5; i++) {
        CHECK_RC(pcoll_partial_allreduce(p, one, out, NULL));
        total += out[0];
    }
    CHECK_RC(pcoll_partial_flush(p, out, NULL));
    total += out[0];
    CHECK(total == 5.0f * (float)size);
    CHECK_RC(pcoll_partial_free(&p));
}

static void public_agreement(pcoll_t *ctx)
{
    int last = size - 1;
    const char *names[3] = {"layers", "conv1.weight: dimension 0", "conv1.weight: dtype"};
    int64_t v[3] = {7, 32, 0};
    CHECK_RC(pcoll_agree(ctx, "model check", PCOLL_SUCCESS, NULL, 3, names, v));
    CHECK_RC(pcoll_agree(ctx, NULL, PCOLL_SUCCESS, NULL, 0, NULL, NULL));
    if (size > 1) {
        v[1] = rank == last ? 16 : 32;
        EXPECT_ERR(pcoll_agree(ctx, "model check", PCOLL_SUCCESS, NULL, 3, names, v), PCOLL_ERR_ARG,
                   "conv1.weight: dimension 0 differs between ranks");
        names_call("model check");
        CHECK_MSG(strstr(pcoll_last_error(), "16 at rank(s)") && strstr(pcoll_last_error(), "32 at rank(s) 0"), "%s",
                  pcoll_last_error());
        v[1] = 32;
        EXPECT_ERR(pcoll_agree(ctx, "model check", PCOLL_SUCCESS, NULL, rank == last ? 2 : 3, names, v),
                   PCOLL_ERR_ARG, "the number of values differs");
    }
    /* a local failure: that rank keeps its reason, the others are told it */
    int rc = pcoll_agree(ctx, "model check", rank == last ? PCOLL_ERR_DTYPE : PCOLL_SUCCESS,
                         "parameter fc.bias is float16", 3, names, v);
    CHECK(rc == PCOLL_ERR_DTYPE);
    CHECK_MSG(strstr(pcoll_last_error(), "parameter fc.bias is float16"), "%s", pcoll_last_error());
    if (rank != last)
        CHECK_MSG(strstr(pcoll_last_error(), "rank") && strstr(pcoll_last_error(), "every rank fails"), "%s",
                  pcoll_last_error());
    /* bad arguments at one rank fail every rank */
    EXPECT_ERR(pcoll_agree(ctx, "x", PCOLL_SUCCESS, NULL, 3, rank == last ? NULL : names, v), PCOLL_ERR_NULL,
               "names");
    EXPECT_ERR(pcoll_agree(NULL, "x", PCOLL_SUCCESS, NULL, 0, NULL, NULL), PCOLL_ERR_NULL, "ctx");
    /* nothing was left half-done */
    CHECK_RC(pcoll_agree(ctx, "model check", PCOLL_SUCCESS, NULL, 3, names, v));
}

/* PCOLL_CHECK=1: every call first agrees on its arguments, so calls that
 * differ (count, dtype) or a NULL buffer at one rank fail at every rank,
 * naming the argument (and the rank), and the calls after them match. */
static void checked_calls(void)
{
    pcoll_t *ctx;
    CHECK_RC(init_with("PCOLL_CHECK", "1", 0, "1", &ctx));
    int last = size - 1;
    float in[4] = {1, 2, 3, 4}, out[4];
    CHECK_RC(pcoll_allreduce(ctx, in, out, 4, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0));
    CHECK(out[0] == size && out[3] == 4 * size);
    if (size > 1) {
        EXPECT_ERR(pcoll_allreduce(ctx, in, out, rank == last ? 3 : 4, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0),
                   PCOLL_ERR_ARG, "count differs");
        names_call("pcoll_allreduce");
        CHECK_MSG(strstr(pcoll_last_error(), "count"), "\"%s\" does not name count", pcoll_last_error());
        pcoll_request_t *req = NULL;
        EXPECT_ERR(pcoll_iallreduce(ctx, in, out, 4, rank == last ? PCOLL_INT32 : PCOLL_FLOAT32, PCOLL_SUM, NULL, 0,
                                    &req),
                   PCOLL_ERR_ARG, "dtype differs");
        CHECK(req == NULL && strstr(pcoll_last_error(), "dtype") && strstr(pcoll_last_error(), "int32"));
        EXPECT_ERR(pcoll_allreduce(ctx, in, out, 4, PCOLL_FLOAT32, rank == last ? PCOLL_AVG : PCOLL_SUM, NULL, 0),
                   PCOLL_ERR_ARG, "op differs");
        CHECK(strstr(pcoll_last_error(), "op"));
        /* a bad argument at one rank: its own status there, the others
         * learn which rank */
        int rc = pcoll_allreduce(ctx, in, rank == last ? NULL : out, 4, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0);
        CHECK(rc == PCOLL_ERR_NULL);
        char words[32];
        snprintf(words, sizeof words, "rank %d", last);
        if (rank != last)
            CHECK_MSG(strstr(pcoll_last_error(), words), "\"%s\" does not name %s", pcoll_last_error(), words);
    }
    /* matching calls after the failures: nothing left out of step */
    pcoll_request_t *req;
    CHECK_RC(pcoll_iallreduce(ctx, in, out, 4, PCOLL_FLOAT32, PCOLL_AVG, NULL, 0, &req));
    CHECK_RC(pcoll_wait(&req));
    CHECK(out[0] == 1 && out[3] == 4);
    CHECK_RC(pcoll_finalize(&ctx));
}

/* Two ranks on different algorithms: rank 0 sends its whole vector where
 * rank 1 receives half of it.  MPI reports the truncation; the operation
 * fails with it at rank 1 (rank 0 receives a shorter message: no error). */
static void mpi_failure(void)
{
    if (size != 2) return;
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    CHECK_RC(pcoll_set_timeouts(ctx, 0, 20)); /* a hang fails the test */
    CHECK_RC(pcoll_set_allreduce_algo(ctx, rank == 0 ? PCOLL_ALGO_DIRECT : PCOLL_ALGO_RING));
    float in[1000], out[1000];
    for (int i = 0; i < 1000; i++) in[i] = 1;
    int rc = pcoll_allreduce(ctx, in, out, 1000, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0);
    if (rank == 1) {
        CHECK_MSG(rc == PCOLL_ERR_MPI, "pcoll_allreduce returned %d (%s)", rc, pcoll_strerror(rc));
        names_call("pcoll_allreduce");
        CHECK_MSG(strstr(pcoll_last_error(), "MPI_Irecv from rank 0"), "message \"%s\" does not name the call",
                  pcoll_last_error());
        /* the ranks are out of step on this group now: later operations say so */
        EXPECT_ERR(pcoll_allreduce(ctx, in, out, 1000, PCOLL_FLOAT32, PCOLL_SUM, NULL, 0), PCOLL_ERR_STATE,
                   "out of step");
    } else if (rc != PCOLL_SUCCESS) {
        CHECK_MSG(pcoll_last_error()[0] != '\0', "status %d with an empty message", rc);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_RC(pcoll_finalize(&ctx));
}

int main(int argc, char **argv)
{
    tu_mpi_start(&argc, &argv, 120, &rank, &size);
    pcoll_set_log_level(PCOLL_LOG_NONE); /* the errors below are expected */
    config_agreement();
    pcoll_t *ctx;
    CHECK_RC(pcoll_init(MPI_COMM_WORLD, &ctx));
    create_agreement(ctx);
    public_agreement(ctx);
    CHECK_RC(pcoll_finalize(&ctx));
    checked_calls();
    mpi_failure();
    if (rank == 0) printf("test_agree: P=%d, %ld checks passed\n", size, tu_checks_);
    MPI_Finalize();
    return 0;
}
