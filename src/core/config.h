/* Run-time configuration: defaults, overridden by PCOLL_* environment
 * variables at pcoll_init, then by the pcoll_set_* calls. */
#ifndef PC_CORE_CONFIG_H
#define PC_CORE_CONFIG_H

#include <stddef.h>

#include "pcoll.h"

typedef struct pc_config {
    pcoll_allreduce_algo_t algo; /* PCOLL_ALLREDUCE_ALGO                       */
    size_t small_bytes;          /* PCOLL_ALLREDUCE_SMALL_BYTES: recdbl below   */
    int spin_us;                 /* PCOLL_SPIN_US: poll this long after activity */
    int max_sleep_us;            /* PCOLL_POLL_MAX_US: longest idle pause       */
} pc_config_t;

void pc_config_defaults(pc_config_t *cfg);

/* Applies the PCOLL_* variables (and PCOLL_LOG_LEVEL to the logger).
 * Returns PCOLL_ERR_CONFIG naming the variable when one is malformed. */
int pc_config_from_env(pc_config_t *cfg);

int pc_config_parse_algo(const char *text, pcoll_allreduce_algo_t *algo);

#endif
