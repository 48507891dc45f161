/*
 * The configuration table (core/config.c) without MPI: every variable's
 * default text is the default it has, a valid value sets it (and marks it
 * set), a malformed one fails naming it, parsing has no side effect (the
 * log level is applied by pcoll_init, after the ranks agree), the machine's
 * defaults touch only variables the environment did not set, the
 * must-agree flags, and pcoll_config_get / pcoll_config_var.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "pcoll.h"
#include "unit_check.h"


static int index_of(const char *name)
{
    for (int i = 0; pcoll_config_var(i); i++)
        if (strcmp(pcoll_config_var(i)->name, name) == 0) return i;
    return -1;
}

/* every variable: its default text, when set in the environment, gives the
 * same configuration as the defaults (the table does not lie) */
static void defaults_are_what_they_say(void)
{
    /* the log level's default is the process's own (PCOLL_LOG_LEVEL overrides
     * it); the process starts at warn */
    pcoll_log_level_t level = pcoll_get_log_level();
    pcoll_set_log_level(PCOLL_LOG_WARN);
    int n = 0;
    for (int i = 0; pcoll_config_var(i); i++, n++) {
        const pcoll_config_var_t *v = pcoll_config_var(i);
        CHECK(v->name && v->range && v->default_value && v->description && v->api);
        CHECK(strncmp(v->name, "PCOLL_", 6) == 0 && strlen(v->description) > 10);
        pc_config_t d, e;
        pc_config_defaults(&d);
        pc_config_defaults(&e);
        char text[64];
        snprintf(text, sizeof text, "%s", v->default_value);
        char *paren = strchr(text, ' '); /* "50 (0 oversubscribed)": the first word */
        if (paren) *paren = '\0';
        setenv(v->name, text, 1);
        int bad = -2;
        CHECK(pc_config_from_env(&e, "test", &bad) == PCOLL_SUCCESS && bad == -1);
        unsetenv(v->name);
        e.set = 0;
        CHECK(memcmp(&d, &e, sizeof d) == 0);
    }
    CHECK(n == pc_config_nvars() && n <= PC_CONFIG_MAX_VARS);
    pcoll_set_log_level(level);
}

static void values_and_errors(void)
{
    char long_path[300];
    memset(long_path, 'x', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    struct {
        const char *name, *good, *bad;
    } cases[] = {
        {"PCOLL_LOG_LEVEL", "debug", "loud"},          {"PCOLL_ALLREDUCE_ALGO", "ring", "fastest"},
        {"PCOLL_ALLREDUCE_DIRECT_BYTES", "4K", "4 K"}, {"PCOLL_ALLREDUCE_SMALL_BYTES", "0", "-1"},
        {"PCOLL_PARTIAL_SHM_BYTES", "1M", "1T"},       {"PCOLL_EXCLUDE_MS", "0", "3600001"},
        {"PCOLL_NODE_DEPUTY", "2", "3"},
        {"PCOLL_SHM_ALLREDUCE_BYTES", "2G", "2 M"},
        {"PCOLL_SHM_SLICE_BYTES", "0", "2M"},          {"PCOLL_SHM_CHUNK_BYTES", "4K", "4095"},
        {"PCOLL_TUNING_FILE", "", "/nonexistent/pcoll-tuning"},
        {"PCOLL_TIMELINE", "/tmp/run/t", long_path},
        {"PCOLL_TIMELINE_SHIFT_NS", "-5000000", "1000000001"},
        {"PCOLL_RANKS_PER_NODE", "2", "-2"},
        {"PCOLL_CHECK", "1", "2"},                     {"PCOLL_STALL_WARN_S", "2.5", "+3"},
        {"PCOLL_TIMEOUT_S", "0", "1e9"},               {"PCOLL_SPIN_US", "7", "7us"},
        {"PCOLL_ACTIVE_SPIN_US", "10000000", "10000001"}, {"PCOLL_WAIT_SPIN_US", "0", " 0"},
        {"PCOLL_POLL_MAX_US", "1", "0"},
    };
    CHECK((int)(sizeof cases / sizeof cases[0]) == pc_config_nvars());
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int i = index_of(cases[k].name), bad = -2;
        CHECK(i >= 0);
        pc_config_t c, d;
        pc_config_defaults(&c);
        pc_config_defaults(&d);
        setenv(cases[k].name, cases[k].good, 1);
        CHECK(pc_config_from_env(&c, "test", &bad) == PCOLL_SUCCESS && bad == -1);
        CHECK(c.set == 1u << i);
        char value[64];
        CHECK(pcoll_config_get(cases[k].name, value, sizeof value) == PCOLL_SUCCESS);
        setenv(cases[k].name, cases[k].bad, 1);
        CHECK(pc_config_from_env(&d, "test", &bad) == PCOLL_ERR_CONFIG && bad == i);
        CHECK(strstr(pcoll_last_error(), cases[k].name) && strstr(pcoll_last_error(), cases[k].bad));
        CHECK(pcoll_config_get(cases[k].name, value, sizeof value) == PCOLL_ERR_CONFIG);
        unsetenv(cases[k].name);
    }
    /* parsing sets no level: pcoll_init applies it once the ranks agreed */
    pcoll_log_level_t before = pcoll_get_log_level();
    setenv("PCOLL_LOG_LEVEL", before == PCOLL_LOG_DEBUG ? "none" : "debug", 1);
    pc_config_t c;
    pc_config_defaults(&c);
    int bad;
    CHECK(pc_config_from_env(&c, "test", &bad) == PCOLL_SUCCESS && pcoll_get_log_level() == before);
    CHECK(c.log_level == (before == PCOLL_LOG_DEBUG ? PCOLL_LOG_NONE : PCOLL_LOG_DEBUG));
    unsetenv("PCOLL_LOG_LEVEL");
}

/* PCOLL_TUNING_FILE: a table read at parse time, its rows (not its path)
 * what the ranks agree on, a malformed file named with its line */
static void tuning_file(void)
{
    char good[] = "/tmp/pcoll-tuning-XXXXXX", copy[] = "/tmp/pcoll-tuning-XXXXXX", bad[] = "/tmp/pcoll-tuning-XXXXXX";
    const char *rows = "# test\n4 1 64K direct\n4 1 max shm\n";
    int fds[3] = {mkstemp(good), mkstemp(copy), mkstemp(bad)};
    CHECK(fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0);
    CHECK(write(fds[0], rows, strlen(rows)) == (ssize_t)strlen(rows));
    CHECK(write(fds[1], rows + 7, strlen(rows) - 7) == (ssize_t)(strlen(rows) - 7)); /* same rows, no comment */
    CHECK(write(fds[2], "4 1 64K fast\n", 13) == 13);
    for (int k = 0; k < 3; k++) close(fds[k]);
    pc_config_t a, b;
    int bad_i, i = index_of("PCOLL_TUNING_FILE");
    pc_config_defaults(&a);
    pc_config_defaults(&b);
    setenv("PCOLL_TUNING_FILE", good, 1);
    CHECK(pc_config_from_env(&a, "test", &bad_i) == PCOLL_SUCCESS && bad_i == -1);
    CHECK(a.tuning.nrows == 2 && strcmp(a.tuning_file, good) == 0);
    CHECK(pc_tuning_lookup(&a.tuning, 4, 1, 100) == PCOLL_ALGO_DIRECT);
    char value[64];
    CHECK(pcoll_config_get("PCOLL_TUNING_FILE", value, sizeof value) == PCOLL_SUCCESS && strcmp(value, good) == 0);
    setenv("PCOLL_TUNING_FILE", copy, 1);
    CHECK(pc_config_from_env(&b, "test", &bad_i) == PCOLL_SUCCESS);
    pc_agree_field_t fa[PC_CONFIG_MAX_VARS], fb[PC_CONFIG_MAX_VARS];
    pc_config_fields(&a, fa);
    pc_config_fields(&b, fb);
    CHECK(fa[i].value == fb[i].value); /* the same rows from another path: agreed */
    pc_config_defaults(&b);
    pc_config_fields(&b, fb);
    CHECK(fa[i].value != fb[i].value); /* no table: differs */
    setenv("PCOLL_TUNING_FILE", bad, 1);
    CHECK(pc_config_from_env(&b, "test", &bad_i) == PCOLL_ERR_CONFIG && bad_i == i);
    CHECK(strstr(pcoll_last_error(), "line 1") && strstr(pcoll_last_error(), "\"fast\" is not an algorithm"));
    unsetenv("PCOLL_TUNING_FILE");
    unlink(good);
    unlink(copy);
    unlink(bad);
}

static void machine_and_agreement(void)
{
    pc_config_t c;
    pc_config_defaults(&c);
    setenv("PCOLL_SPIN_US", "30", 1);
    int bad;
    CHECK(pc_config_from_env(&c, "test", &bad) == PCOLL_SUCCESS);
    pc_config_for_machine(&c, 1, 1); /* oversubscribed: the unset spin drops to 0, the set one stays */
    CHECK(c.policy.idle_spin_us == 30 && c.policy.wait_spin_us == 0 && c.policy.max_sleep_us == 200);
    unsetenv("PCOLL_SPIN_US");
    pc_config_defaults(&c);
    pc_config_for_machine(&c, 0, 1);
    CHECK(c.policy.idle_spin_us == 50 && c.policy.wait_spin_us == 50 && c.policy.max_sleep_us == 200);
    /* across nodes: shorter pauses between polls, unless set */
    pc_config_for_machine(&c, 0, 4);
    CHECK(c.policy.max_sleep_us == 20);
    setenv("PCOLL_POLL_MAX_US", "300", 1);
    pc_config_defaults(&c);
    CHECK(pc_config_from_env(&c, "test", &bad) == PCOLL_SUCCESS);
    pc_config_for_machine(&c, 0, 4);
    CHECK(c.policy.max_sleep_us == 300);
    unsetenv("PCOLL_POLL_MAX_US");
    pc_config_defaults(&c);
    pc_config_for_machine(&c, 0, 1);
    pc_agree_field_t f[PC_CONFIG_MAX_VARS];
    int n = pc_config_fields(&c, f);
    CHECK(n == pc_config_nvars());
    const char *agree[] = {"PCOLL_ALLREDUCE_ALGO", "PCOLL_ALLREDUCE_DIRECT_BYTES", "PCOLL_ALLREDUCE_SMALL_BYTES",
                           "PCOLL_PARTIAL_SHM_BYTES", "PCOLL_EXCLUDE_MS", "PCOLL_NODE_DEPUTY", "PCOLL_SHM_ALLREDUCE_BYTES",
                           "PCOLL_SHM_SLICE_BYTES",
                           "PCOLL_SHM_CHUNK_BYTES", "PCOLL_TUNING_FILE", "PCOLL_TIMELINE",
                           "PCOLL_RANKS_PER_NODE", "PCOLL_CHECK"};
    int must = 0;
    for (int i = 0; i < n; i++) {
        int listed = 0;
        for (size_t k = 0; k < sizeof agree / sizeof agree[0]; k++) listed |= strcmp(f[i].name, agree[k]) == 0;
        CHECK(f[i].must_agree == listed && pcoll_config_var(i)->must_agree == listed);
        must += f[i].must_agree;
    }
    CHECK(must == (int)(sizeof agree / sizeof agree[0]));
}

static void lookups(void)
{
    char v[64];
    CHECK(pcoll_config_get("PCOLL_TIMEOUT_S", v, sizeof v) == PCOLL_SUCCESS && strcmp(v, "0") == 0);
    setenv("PCOLL_PARTIAL_SHM_BYTES", "4K", 1);
    CHECK(pcoll_config_get("PCOLL_PARTIAL_SHM_BYTES", v, sizeof v) == PCOLL_SUCCESS && strcmp(v, "4096") == 0);
    unsetenv("PCOLL_PARTIAL_SHM_BYTES");
    CHECK(pcoll_config_get("PCOLL_NOTHING", v, sizeof v) == PCOLL_ERR_ARG);
    CHECK(pcoll_config_get(NULL, v, sizeof v) == PCOLL_ERR_NULL);
    CHECK(pcoll_config_var(-1) == NULL && pcoll_config_var(pc_config_nvars()) == NULL);
}

int main(void)
{
    pcoll_set_log_level(PCOLL_LOG_NONE);
    defaults_are_what_they_say();
    values_and_errors();
    machine_and_agreement();
    tuning_file();
    lookups();
    printf("test_config: %ld checks passed\n", checks);
    return 0;
}
