/* Run-time configuration: one table of the PCOLL_* variables (name, type,
 * default, range, whether ranks must agree, a one-line description, the
 * call that changes it later), read by pcoll_init and described to users
 * by pcoll_config_var / pcoll-info; then the pcoll_set_* calls. */
#ifndef PC_CORE_CONFIG_H
#define PC_CORE_CONFIG_H

#include <stddef.h>

#include "../algo/tuning.h"
#include "agree.h"
#include "pcoll.h"

/* PCOLL_EXCLUDE_MS's default: far above the longest a healthy,
 * oversubscribed run's progress engine took to copy a result (measured:
 * docs/design.md, section 9) */
#define PC_EXCLUDE_MS_DEFAULT 500
#define PC_STR_(x) #x
#define PC_STR(x) PC_STR_(x)

typedef struct pc_config {
    int log_level;               /* PCOLL_LOG_LEVEL                             */
    pcoll_allreduce_algo_t algo; /* PCOLL_ALLREDUCE_ALGO                        */
    size_t direct_bytes;         /* PCOLL_ALLREDUCE_DIRECT_BYTES                */
    size_t small_bytes;          /* PCOLL_ALLREDUCE_SMALL_BYTES                 */
    size_t partial_shm_bytes;    /* PCOLL_PARTIAL_SHM_BYTES                     */
    int exclude_ms;              /* PCOLL_EXCLUDE_MS                            */
    int node_deputy;             /* PCOLL_NODE_DEPUTY                           */
    size_t shm_allreduce_bytes;  /* PCOLL_SHM_ALLREDUCE_BYTES                   */
    size_t shm_slice_bytes;      /* PCOLL_SHM_SLICE_BYTES                       */
    size_t shm_chunk_bytes;      /* PCOLL_SHM_CHUNK_BYTES                       */
    char tuning_file[256];       /* PCOLL_TUNING_FILE ("": none)                */
    char timeline[256];          /* PCOLL_TIMELINE ("": no timeline)            */
    int timeline_shift_ns;       /* PCOLL_TIMELINE_SHIFT_NS                     */
    pc_tuning_t tuning;          /* its table (no rows: none)                   */
    int ranks_per_node;          /* PCOLL_RANKS_PER_NODE (0: the machine's)     */
    int check;                   /* PCOLL_CHECK                                 */
    double stall_warn_s;         /* PCOLL_STALL_WARN_S                          */
    double timeout_s;            /* PCOLL_TIMEOUT_S                             */
    pcoll_progress_policy_t policy; /* PCOLL_SPIN_US, PCOLL_WAIT_SPIN_US,
                                       PCOLL_ACTIVE_SPIN_US, PCOLL_POLL_MAX_US */
    unsigned set;                /* bit i: variable i came from the environment */
} pc_config_t;

/* The defaults (on a machine that is not oversubscribed). */
void pc_config_defaults(pc_config_t *cfg);
/* The defaults that depend on the machine, for the variables the
 * environment did not set; oversubscribed: this node runs more threads
 * than it has CPUs; nodes: the context's nodes. */
void pc_config_for_machine(pc_config_t *cfg, int oversubscribed, int nodes);

/* Parses the PCOLL_* variables that are set into cfg.  Returns
 * PCOLL_ERR_CONFIG naming the variable (under the name fn) when one is
 * malformed; *bad is then its index in the table (else -1). */
int pc_config_from_env(pc_config_t *cfg, const char *fn, int *bad);

/* The variables as agreement fields (fields: room for PC_CONFIG_MAX_VARS),
 * with cfg's values; the number written. */
#define PC_CONFIG_MAX_VARS 32
int pc_config_fields(const pc_config_t *cfg, pc_agree_field_t *fields);
int pc_config_nvars(void);

int pc_config_parse_algo(const char *text, pcoll_allreduce_algo_t *algo);

#endif
