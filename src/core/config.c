#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "../util/log.h"
#include "../util/parse.h"

void pc_config_defaults(pc_config_t *cfg, int oversubscribed)
{
    cfg->algo = PCOLL_ALGO_AUTO;
    cfg->direct_bytes = 32768;
    cfg->small_bytes = 8192;
    cfg->partial_shm_bytes = (size_t)4 << 20;
    cfg->stall_warn_s = 60;
    cfg->timeout_s = 0;
    /* with more threads than CPUs a spinning thread takes the CPU from the
     * very rank it waits for: block at once instead */
    cfg->policy.idle_spin_us = oversubscribed ? 0 : 50;
    cfg->policy.wait_spin_us = oversubscribed ? 0 : 50;
    cfg->policy.active_spin_us = 2000;
    cfg->policy.max_sleep_us = 200;
}

static const char *algo_names[] = {"auto", "recdbl", "rabenseifner", "ring", "direct"};

const char *pcoll_allreduce_algo_name(pcoll_allreduce_algo_t algo)
{
    if ((int)algo < 0 || algo > PCOLL_ALGO_DIRECT) return "unknown";
    return algo_names[algo];
}

int pc_config_parse_algo(const char *text, pcoll_allreduce_algo_t *algo)
{
    for (int i = 0; i <= PCOLL_ALGO_DIRECT; i++)
        if (strcmp(text, algo_names[i]) == 0) {
            *algo = (pcoll_allreduce_algo_t)i;
            return 0;
        }
    return -1;
}

/* ---- the variables ---- */

typedef enum { V_LOG, V_ALGO, V_BYTES, V_INT, V_SECONDS } var_kind_t;

typedef struct var {
    const char *name;
    var_kind_t kind;
    int must_agree;
    size_t off;           /* the field in pc_config_t */
    long min, max;        /* V_INT, V_SECONDS */
    const char *expected; /* what a valid value looks like */
} var_t;

#define FIELD(f) offsetof(pc_config_t, f)
static const var_t vars[] = {
    {"PCOLL_LOG_LEVEL", V_LOG, 0, 0, 0, 0, "none|error|warn|info|debug or 0-4"},
    {"PCOLL_ALLREDUCE_ALGO", V_ALGO, 1, FIELD(algo), 0, 0, "auto|recdbl|rabenseifner|ring|direct"},
    {"PCOLL_ALLREDUCE_DIRECT_BYTES", V_BYTES, 1, FIELD(direct_bytes), 0, 0, "a byte size (e.g. 4096, 4K)"},
    {"PCOLL_ALLREDUCE_SMALL_BYTES", V_BYTES, 1, FIELD(small_bytes), 0, 0, "a byte size (e.g. 8192, 64K)"},
    {"PCOLL_PARTIAL_SHM_BYTES", V_BYTES, 1, FIELD(partial_shm_bytes), 0, 0, "a byte size (e.g. 0, 256K)"},
    {"PCOLL_STALL_WARN_S", V_SECONDS, 0, FIELD(stall_warn_s), 0, 1000000, "seconds, 0 (off) to 1000000"},
    {"PCOLL_TIMEOUT_S", V_SECONDS, 0, FIELD(timeout_s), 0, 1000000, "seconds, 0 (never) to 1000000"},
    {"PCOLL_SPIN_US", V_INT, 0, FIELD(policy.idle_spin_us), 0, 10000000, "a whole number in 0..10000000"},
    {"PCOLL_WAIT_SPIN_US", V_INT, 0, FIELD(policy.wait_spin_us), 0, 10000000, "a whole number in 0..10000000"},
    {"PCOLL_ACTIVE_SPIN_US", V_INT, 0, FIELD(policy.active_spin_us), 0, 10000000, "a whole number in 0..10000000"},
    {"PCOLL_POLL_MAX_US", V_INT, 0, FIELD(policy.max_sleep_us), 1, 1000000, "a whole number in 1..1000000"},
};
#define NVARS ((int)(sizeof vars / sizeof vars[0]))

int pc_config_nvars(void) { return NVARS; }
const char *pc_config_var_name(int i) { return i >= 0 && i < NVARS ? vars[i].name : "?"; }
int pc_config_var_must_agree(int i) { return i >= 0 && i < NVARS && vars[i].must_agree; }

double pc_config_var_value(const pc_config_t *cfg, int i)
{
    const char *at = (const char *)cfg + vars[i].off;
    switch (vars[i].kind) {
    case V_ALGO: return (double)*(const pcoll_allreduce_algo_t *)at;
    case V_BYTES: return (double)*(const size_t *)at;
    case V_INT: return (double)*(const int *)at;
    case V_SECONDS: return *(const double *)at;
    default: return (double)pcoll_get_log_level();
    }
}

void pc_config_var_text(const pc_config_t *cfg, int i, char *buf, size_t len)
{
    double v = pc_config_var_value(cfg, i);
    if (vars[i].kind == V_ALGO)
        snprintf(buf, len, "%s", pcoll_allreduce_algo_name((pcoll_allreduce_algo_t)(int)v));
    else
        snprintf(buf, len, "%.15g", v);
}

/* 0 and the value stored, or -1 when the text is malformed */
static int parse(const var_t *var, const char *text, pc_config_t *cfg)
{
    char *at = (char *)cfg + var->off;
    switch (var->kind) {
    case V_LOG: {
        int level = pc_log_parse_level(text);
        if (level < 0) return -1;
        pcoll_set_log_level((pcoll_log_level_t)level);
        return 0;
    }
    case V_ALGO: return pc_config_parse_algo(text, (pcoll_allreduce_algo_t *)at);
    case V_BYTES: return pc_parse_bytes(text, (size_t *)at);
    case V_INT: {
        long x;
        if (pc_parse_long(text, var->min, var->max, &x) != 0) return -1;
        *(int *)at = (int)x;
        return 0;
    }
    case V_SECONDS: {
        double x;
        if (pc_parse_double(text, &x) != 0 || x < (double)var->min || x > (double)var->max) return -1;
        *(double *)at = x;
        return 0;
    }
    }
    return -1;
}

int pc_config_from_env(pc_config_t *cfg, const char *fn, int *bad)
{
    *bad = -1;
    for (int i = 0; i < NVARS; i++) {
        const char *v = getenv(vars[i].name);
        if (v && parse(&vars[i], v, cfg) != 0) {
            *bad = i;
            return pc_error(PCOLL_ERR_CONFIG, fn, "%s=\"%s\" is not %s", vars[i].name, v, vars[i].expected);
        }
    }
    return PCOLL_SUCCESS;
}
