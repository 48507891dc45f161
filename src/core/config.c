#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "../util/parse.h"
#include "error.h"
#include "log.h"

void pc_config_defaults(pc_config_t *cfg, int oversubscribed)
{
    cfg->algo = PCOLL_ALGO_AUTO;
    cfg->direct_bytes = 32768;
    cfg->small_bytes = 8192;
    cfg->partial_shm_bytes = (size_t)4 << 20;
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

static int env_int(const char *name, long min, long max, int *out)
{
    const char *v = getenv(name);
    if (!v) return PCOLL_SUCCESS;
    long x;
    if (pc_parse_long(v, min, max, &x) != 0)
        return PC_ERR(PCOLL_ERR_CONFIG, "%s=\"%s\" is not a whole number in %ld..%ld", name, v, min, max);
    *out = (int)x;
    return PCOLL_SUCCESS;
}

int pc_config_from_env(pc_config_t *cfg)
{
    const char *v;
    int rc;
    if ((v = getenv("PCOLL_LOG_LEVEL")) != NULL) {
        int level = pc_log_parse_level(v);
        if (level < 0)
            return PC_ERR(PCOLL_ERR_CONFIG, "PCOLL_LOG_LEVEL=\"%s\" is not none|error|warn|info|debug or 0-4", v);
        pcoll_set_log_level((pcoll_log_level_t)level);
    }
    if ((v = getenv("PCOLL_ALLREDUCE_ALGO")) != NULL && pc_config_parse_algo(v, &cfg->algo) != 0)
        return PC_ERR(PCOLL_ERR_CONFIG, "PCOLL_ALLREDUCE_ALGO=\"%s\" is not auto|recdbl|rabenseifner|ring|direct", v);
    if ((v = getenv("PCOLL_ALLREDUCE_SMALL_BYTES")) != NULL && pc_parse_bytes(v, &cfg->small_bytes) != 0)
        return PC_ERR(PCOLL_ERR_CONFIG, "PCOLL_ALLREDUCE_SMALL_BYTES=\"%s\" is not a byte size (e.g. 8192, 64K)", v);
    if ((v = getenv("PCOLL_PARTIAL_SHM_BYTES")) != NULL && pc_parse_bytes(v, &cfg->partial_shm_bytes) != 0)
        return PC_ERR(PCOLL_ERR_CONFIG, "PCOLL_PARTIAL_SHM_BYTES=\"%s\" is not a byte size (e.g. 0, 256K)", v);
    if ((v = getenv("PCOLL_ALLREDUCE_DIRECT_BYTES")) != NULL && pc_parse_bytes(v, &cfg->direct_bytes) != 0)
        return PC_ERR(PCOLL_ERR_CONFIG, "PCOLL_ALLREDUCE_DIRECT_BYTES=\"%s\" is not a byte size (e.g. 4096, 4K)", v);
    if ((rc = env_int("PCOLL_SPIN_US", 0, 10000000, &cfg->policy.idle_spin_us)) != PCOLL_SUCCESS) return rc;
    if ((rc = env_int("PCOLL_WAIT_SPIN_US", 0, 10000000, &cfg->policy.wait_spin_us)) != PCOLL_SUCCESS) return rc;
    if ((rc = env_int("PCOLL_ACTIVE_SPIN_US", 0, 10000000, &cfg->policy.active_spin_us)) != PCOLL_SUCCESS) return rc;
    if ((rc = env_int("PCOLL_POLL_MAX_US", 1, 1000000, &cfg->policy.max_sleep_us)) != PCOLL_SUCCESS) return rc;
    return PCOLL_SUCCESS;
}
