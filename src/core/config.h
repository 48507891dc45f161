/* Run-time configuration: defaults, overridden by PCOLL_* environment
 * variables at pcoll_init, then by the pcoll_set_* calls. */
#ifndef PC_CORE_CONFIG_H
#define PC_CORE_CONFIG_H

#include <stddef.h>

#include "pcoll.h"

typedef struct pc_config {
    pcoll_allreduce_algo_t algo; /* PCOLL_ALLREDUCE_ALGO                        */
    size_t direct_bytes;         /* PCOLL_ALLREDUCE_DIRECT_BYTES                */
    size_t small_bytes;          /* PCOLL_ALLREDUCE_SMALL_BYTES                 */
    size_t partial_shm_bytes;    /* PCOLL_PARTIAL_SHM_BYTES                     */
    double stall_warn_s;         /* PCOLL_STALL_WARN_S                          */
    double timeout_s;            /* PCOLL_TIMEOUT_S                             */
    pcoll_progress_policy_t policy; /* PCOLL_SPIN_US, PCOLL_WAIT_SPIN_US,
                                       PCOLL_ACTIVE_SPIN_US, PCOLL_POLL_MAX_US */
} pc_config_t;

/* oversubscribed: this node runs more threads than it has CPUs */
void pc_config_defaults(pc_config_t *cfg, int oversubscribed);

/* Applies the PCOLL_* variables (and PCOLL_LOG_LEVEL to the logger).
 * Returns PCOLL_ERR_CONFIG naming the variable (under the name fn) when one
 * is malformed; *bad is then its index in the table below (else -1). */
int pc_config_from_env(pc_config_t *cfg, const char *fn, int *bad);

/* The variables, in a fixed order (the same at every rank). */
int pc_config_nvars(void);
const char *pc_config_var_name(int i);
/* 1 if every rank must have the same value (the schedules depend on it). */
int pc_config_var_must_agree(int i);
/* The value of variable i in cfg, as a number to compare, and as text. */
double pc_config_var_value(const pc_config_t *cfg, int i);
void pc_config_var_text(const pc_config_t *cfg, int i, char *buf, size_t len);

int pc_config_parse_algo(const char *text, pcoll_allreduce_algo_t *algo);

#endif
