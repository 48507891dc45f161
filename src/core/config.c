/* The PCOLL_* variables: one table (config.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/error.h"
#include "../util/log.h"
#include "../util/parse.h"

void pc_config_defaults(pc_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->log_level = pcoll_get_log_level(); /* as the process has it: PCOLL_LOG_LEVEL overrides */
    cfg->algo = PCOLL_ALGO_AUTO;
    cfg->direct_bytes = 32768;
    cfg->small_bytes = 8192;
    cfg->partial_shm_bytes = (size_t)4 << 20;
    cfg->exclude_ms = PC_EXCLUDE_MS_DEFAULT;
    cfg->node_deputy = 1;
    cfg->shm_allreduce_bytes = (size_t)1 << 30;
    cfg->shm_slice_bytes = (size_t)64 << 10;
    cfg->shm_chunk_bytes = (size_t)256 << 10;
    cfg->ranks_per_node = 0;
    cfg->check = 0;
    cfg->stall_warn_s = 60;
    cfg->timeout_s = 0;
    cfg->policy.idle_spin_us = 50;
    cfg->policy.wait_spin_us = 50;
    cfg->policy.active_spin_us = 2000;
    cfg->policy.max_sleep_us = 200;
    cfg->set = 0;
}

static const char *algo_names[] = {"auto", "recdbl", "rabenseifner", "ring", "direct", "shm"};
static const char *level_names[] = {"none", "error", "warn", "info", "debug"};

const char *pcoll_allreduce_algo_name(pcoll_allreduce_algo_t algo)
{
    if ((int)algo < 0 || algo > PCOLL_ALGO_SHM) return "unknown";
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

/* ---- the table ---- */

typedef enum { V_LEVEL, V_ALGO, V_BYTES, V_INT, V_BOOL, V_SECONDS, V_TABLE, V_PATH } var_kind_t;

typedef struct var {
    pcoll_config_var_t pub; /* name, range, default, description, api, must_agree */
    var_kind_t kind;
    size_t off;             /* the field in pc_config_t */
    long min, max;          /* V_INT, V_SECONDS; V_BYTES (max 0: none) */
} var_t;

#define FIELD(f) offsetof(pc_config_t, f)
static const var_t vars[] = {
    {{"PCOLL_LOG_LEVEL", "none|error|warn|info|debug or 0-4", "warn",
      "what pcoll prints: errors returned to the caller are logged at warn (unset: the level the process has, warn "
      "unless pcoll_set_log_level changed it)",
      "pcoll_set_log_level", 0},
     V_LEVEL, FIELD(log_level), 0, 4},
    {{"PCOLL_ALLREDUCE_ALGO", "auto|recdbl|rabenseifner|ring|direct", "auto",
      "the allreduce algorithm, or auto: chosen by size and group size", "pcoll_set_allreduce_algo", 1},
     V_ALGO, FIELD(algo), 0, 0},
    {{"PCOLL_ALLREDUCE_DIRECT_BYTES", "a byte size (e.g. 4096, 4K)", "32768",
      "auto uses the direct algorithm when (bytes + 1 KiB) x (group size - 1) is at most this",
      "pcoll_set_allreduce_thresholds", 1},
     V_BYTES, FIELD(direct_bytes), 0, 0},
    {{"PCOLL_ALLREDUCE_SMALL_BYTES", "a byte size (e.g. 8192, 64K)", "8192",
      "otherwise auto uses recursive doubling up to this size, then Rabenseifner (power-of-two groups) or ring",
      "pcoll_set_allreduce_thresholds", 1},
     V_BYTES, FIELD(small_bytes), 0, 0},
    {{"PCOLL_SHM_ALLREDUCE_BYTES", "a byte size (e.g. 0, 64K, 1G)", "1073741824",
      "allreduces up to this size go through node-shared memory: blocking calls of all ranks (inside each node, "
      "then across nodes of equal size by columns), blocking group calls and plans of ranks on one node (0: never)",
      "",
      1},
     V_BYTES, FIELD(shm_allreduce_bytes), 0, 0},
    {{"PCOLL_SHM_SLICE_BYTES", "a byte size up to 1M (e.g. 0, 64K)", "65536",
      "node-shared allreduces of bytes x (ranks - 1) above this let each rank add up a slice (else every rank adds "
      "up everything)",
      "", 1},
     V_BYTES, FIELD(shm_slice_bytes), 0, 1L << 20},
    {{"PCOLL_SHM_CHUNK_BYTES", "a byte size from 4K to 64M (e.g. 256K)", "262144",
      "node-shared memory per rank and slot for the allreduce: larger messages go through it in pieces (across "
      "nodes: the pipeline's segment)",
      "", 1},
     V_BYTES, FIELD(shm_chunk_bytes), 4096, 64L << 20},
    {{"PCOLL_PARTIAL_SHM_BYTES", "a byte size (e.g. 0, 256K)", "4M",
      "partial objects up to this size run their rounds in node-shared memory (0: never)", "", 1},
     V_BYTES, FIELD(partial_shm_bytes), 0, 0},
    {{"PCOLL_EXCLUDE_MS", "a whole number in 0..3600000", PC_STR(PC_EXCLUDE_MS_DEFAULT),
      "partial rounds go on without a rank whose progress engine has not answered for this long (a stopped "
      "process): in node-shared memory its published part is taken as it stands; by messages (solo, majority, "
      "quorum) the others go on in a view without it (a rank that comes back soon doubles the limit there, "
      "up to 5 s); what it missed is kept and delivered at once when it "
      "answers again (0: wait for every rank, as synchronous rounds always do)",
      "", 1},
     V_INT, FIELD(exclude_ms), 0, 3600000},
    {{"PCOLL_NODE_DEPUTY", "0, 1 or 2", "1",
      "across nodes, with PCOLL_EXCLUDE_MS, node-shared partial rounds: 1: a node leader silent for the limit has "
      "its rounds taken over by its deputy (the node's second rank), and each node's sum goes directly to the "
      "leader and the deputy of every other node (costly between nodes) until every node's comes from its leader "
      "again, then back to the leaders' allreduce (docs/design.md, section 9); 2: directly for the object's life "
      "(testing that path); 0: the node leaders' allreduce only, which waits for a stopped leader",
      "", 1},
     V_INT, FIELD(node_deputy), 0, 2},
    {{"PCOLL_TUNING_FILE", "a file written by pcoll-bench allreduce --tune, or empty", "",
      "the allreduce's algorithm per size, ranks and nodes, as measured on this machine (sizes, rank or node counts "
      "it has no row for: the built-in rule)",
      "", 1},
     V_TABLE, FIELD(tuning_file), 0, 0},
    {{"PCOLL_TIMELINE", "a path prefix, or empty", "",
      "record a timeline from pcoll_init on: rank R writes PREFIX.R.jsonl (a process's N-th context "
      "PREFIX.ctxN.R.jsonl; pcoll-trace merges them; set at every rank or at none)",
      "pcoll_timeline_start", 1},
     V_PATH, FIELD(timeline), 0, 0},
    {{"PCOLL_TIMELINE_SHIFT_NS", "a whole number in -1000000000..1000000000", "0",
      "testing the clock alignment on one machine: rank R's timeline clock reads R times this many ns ahead (the "
      "offsets measured at start and stop must remove it)",
      "", 0},
     V_INT, FIELD(timeline_shift_ns), -1000000000L, 1000000000L},
    {{"PCOLL_RANKS_PER_NODE", "a whole number in 0..1073741824", "0",
      "0: nodes are the machine's (shared memory); K: each also split into blocks of K consecutive ranks", "", 1},
     V_INT, FIELD(ranks_per_node), 0, 1L << 30},
    {{"PCOLL_CHECK", "0|1", "0",
      "1: every allreduce on all ranks first checks that the ranks call it with the same count, type and op "
      "(pcoll_iallreduce then returns once every rank called it; group operations, plans and objects always check)",
      "",
      1},
     V_BOOL, FIELD(check), 0, 1},
    {{"PCOLL_STALL_WARN_S", "seconds, 0 (off) to 1000000", "60",
      "a blocking call that has waited this long prints one warning naming what it waits for and which ranks",
      "pcoll_set_timeouts", 0},
     V_SECONDS, FIELD(stall_warn_s), 0, 1000000},
    {{"PCOLL_TIMEOUT_S", "seconds, 0 (never) to 1000000", "0",
      "a blocking call that has waited this long fails with PCOLL_ERR_TIMEOUT, naming them", "pcoll_set_timeouts",
      0},
     V_SECONDS, FIELD(timeout_s), 0, 1000000},
    {{"PCOLL_SPIN_US", "a whole number in 0..10000000", "50 (0 oversubscribed)",
      "the progressing thread polls this long after the last activity when only idle receives are posted",
      "pcoll_set_progress_policy", 0},
     V_INT, FIELD(policy.idle_spin_us), 0, 10000000},
    {{"PCOLL_ACTIVE_SPIN_US", "a whole number in 0..10000000", "2000",
      "the same while operations are in flight", "pcoll_set_progress_policy", 0},
     V_INT, FIELD(policy.active_spin_us), 0, 10000000},
    {{"PCOLL_WAIT_SPIN_US", "a whole number in 0..10000000", "50 (0 oversubscribed)",
      "an application thread waiting while another one progresses pcoll polls this long before it blocks",
      "pcoll_set_progress_policy", 0},
     V_INT, FIELD(policy.wait_spin_us), 0, 10000000},
    {{"PCOLL_POLL_MAX_US", "a whole number in 1..1000000", "200 (20 across nodes)",
      "the longest pause between polls of a thread waiting for messages that cannot wake it",
      "pcoll_set_progress_policy", 0},
     V_INT, FIELD(policy.max_sleep_us), 1, 1000000},
};
#define NVARS ((int)(sizeof vars / sizeof vars[0]))
_Static_assert(sizeof vars / sizeof vars[0] <= PC_CONFIG_MAX_VARS && PC_CONFIG_MAX_VARS <= 32,
               "PC_CONFIG_MAX_VARS: too small, or more than the bits of pc_config_t.set");

int pc_config_nvars(void) { return NVARS; }

const pcoll_config_var_t *pcoll_config_var(int i) { return i >= 0 && i < NVARS ? &vars[i].pub : NULL; }

/* The table of the file at path into cfg: 0, or -1 with why. */
static int read_table(const char *path, pc_config_t *cfg, char *why, size_t len)
{
    if (strlen(path) >= sizeof cfg->tuning_file) return snprintf(why, len, "the path is too long"), -1;
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(why, len, "%s", strerror(errno)), -1;
    enum { MAX_TEXT = 1 << 16 };
    char *text = malloc(MAX_TEXT + 1);
    size_t n = text ? fread(text, 1, MAX_TEXT + 1, f) : 0;
    int failed = ferror(f);
    fclose(f);
    int rc = -1;
    if (!text) snprintf(why, len, "no memory to read it");
    else if (failed) snprintf(why, len, "cannot read it");
    else if (n > MAX_TEXT) snprintf(why, len, "longer than %d bytes", MAX_TEXT);
    else {
        text[n] = '\0';
        rc = pc_tuning_parse(text, &cfg->tuning, why, len);
    }
    free(text);
    if (rc == 0) snprintf(cfg->tuning_file, sizeof cfg->tuning_file, "%s", path);
    return rc;
}

/* 0 and the value stored, or -1 when the text is malformed (why: what is
 * wrong beyond the range, or "") */
static int parse(const var_t *var, const char *text, pc_config_t *cfg, char *why, size_t why_len)
{
    why[0] = '\0';
    char *at = (char *)cfg + var->off;
    long x;
    double d;
    switch (var->kind) {
    case V_LEVEL: {
        int level = pc_log_parse_level(text);
        if (level < 0) return -1;
        *(int *)at = level;
        return 0;
    }
    case V_ALGO: return pc_config_parse_algo(text, (pcoll_allreduce_algo_t *)at);
    case V_BYTES: /* max 0: no upper bound */
        if (pc_parse_bytes(text, (size_t *)at) != 0 || *(size_t *)at < (size_t)var->min) return -1;
        return var->max > 0 && *(size_t *)at > (size_t)var->max ? -1 : 0;
    case V_INT:
    case V_BOOL:
        if (pc_parse_long(text, var->min, var->max, &x) != 0) return -1;
        *(int *)at = (int)x;
        return 0;
    case V_SECONDS:
        if (pc_parse_double(text, &d) != 0 || d < (double)var->min || d > (double)var->max) return -1;
        *(double *)at = d;
        return 0;
    case V_TABLE:
        memset(&cfg->tuning, 0, sizeof cfg->tuning);
        memset(cfg->tuning_file, 0, sizeof cfg->tuning_file);
        return text[0] ? read_table(text, cfg, why, why_len) : 0;
    case V_PATH:
        if (strlen(text) >= sizeof cfg->timeline) {
            snprintf(why, why_len, "longer than %zu bytes", sizeof cfg->timeline - 1);
            return -1;
        }
        snprintf(at, sizeof cfg->timeline, "%s", text);
        return 0;
    }
    return -1;
}

/* variable i of cfg as a number to compare between ranks */
static int64_t value_of(const pc_config_t *cfg, int i)
{
    const char *at = (const char *)cfg + vars[i].off;
    switch (vars[i].kind) {
    case V_ALGO: return (int64_t)*(const pcoll_allreduce_algo_t *)at;
    case V_BYTES: return (int64_t)*(const size_t *)at;
    case V_SECONDS: return (int64_t)(*(const double *)at * 1e6); /* microseconds */
    case V_TABLE: return (int64_t)pc_tuning_hash(&cfg->tuning);        /* the rows, not the path */
    case V_PATH: return at[0] != '\0';                                  /* on or off, not the path */
    default: return *(const int *)at;
    }
}

/* variable i of cfg as text */
static void text_of(const pc_config_t *cfg, int i, char *buf, size_t len)
{
    const char *at = (const char *)cfg + vars[i].off;
    switch (vars[i].kind) {
    case V_LEVEL: snprintf(buf, len, "%s", level_names[*(const int *)at]); break;
    case V_ALGO: snprintf(buf, len, "%s", pcoll_allreduce_algo_name(*(const pcoll_allreduce_algo_t *)at)); break;
    case V_BYTES: snprintf(buf, len, "%zu", *(const size_t *)at); break;
    case V_SECONDS: snprintf(buf, len, "%g", *(const double *)at); break;
    case V_TABLE:
    case V_PATH: snprintf(buf, len, "%s", at); break;
    default: snprintf(buf, len, "%d", *(const int *)at); break;
    }
}

int pc_config_from_env(pc_config_t *cfg, const char *fn, int *bad)
{
    *bad = -1;
    for (int i = 0; i < NVARS; i++) {
        const char *v = getenv(vars[i].pub.name);
        if (!v) continue;
        char why[192];
        if (parse(&vars[i], v, cfg, why, sizeof why) != 0) {
            *bad = i;
            return pc_error(PCOLL_ERR_CONFIG, fn, "%s=\"%s\" is not %s%s%s", vars[i].pub.name, v, vars[i].pub.range,
                            why[0] ? ": " : "", why);
        }
        cfg->set |= 1u << i;
    }
    return PCOLL_SUCCESS;
}

static int is_set(const pc_config_t *cfg, size_t off)
{
    for (int i = 0; i < NVARS; i++)
        if (vars[i].off == off) return (cfg->set >> i) & 1;
    return 0;
}

void pc_config_for_machine(pc_config_t *cfg, int oversubscribed, int nodes)
{
    /* across nodes a message cannot wake its receiver (it comes through
     * MPI's network transport): the pause between polls adds to every
     * round's latency (measured on the emulated cluster, 4 x 2 at 1 Gbit/s:
     * 8 B to 4 KiB 0.96 to 1.22 x MPI_Allreduce at 200 us, 0.73 to 0.93 x
     * at 20 us) */
    if (nodes > 1 && !is_set(cfg, FIELD(policy.max_sleep_us))) cfg->policy.max_sleep_us = 20;
    /* with more threads than CPUs a spinning thread takes the CPU from the
     * very rank it waits for: block at once instead */
    if (!oversubscribed) return;
    if (!is_set(cfg, FIELD(policy.idle_spin_us))) cfg->policy.idle_spin_us = 0;
    if (!is_set(cfg, FIELD(policy.wait_spin_us))) cfg->policy.wait_spin_us = 0;
}

static const char *algo_text(int64_t v, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return pcoll_allreduce_algo_name((pcoll_allreduce_algo_t)v);
}

int pc_config_fields(const pc_config_t *cfg, pc_agree_field_t *f)
{
    for (int i = 0; i < NVARS; i++)
        f[i] = (pc_agree_field_t){vars[i].pub.name, value_of(cfg, i), vars[i].pub.must_agree,
                                  vars[i].kind == V_ALGO ? algo_text : NULL};
    return NVARS;
}

int pcoll_config_get(const char *name, char *value, size_t len)
{
    static const char *fn = "pcoll_config_get";
    if (!name || !value) return pc_error(PCOLL_ERR_NULL, fn, "%s is NULL", !name ? "name" : "value");
    for (int i = 0; i < NVARS; i++) {
        if (strcmp(name, vars[i].pub.name) != 0) continue;
        const char *v = getenv(name);
        if (!v) { /* the default (its text: some depend on the machine) */
            snprintf(value, len, "%s", vars[i].pub.default_value);
            return PCOLL_SUCCESS;
        }
        pc_config_t cfg;
        pc_config_defaults(&cfg);
        char why[192];
        if (parse(&vars[i], v, &cfg, why, sizeof why) != 0)
            return pc_error(PCOLL_ERR_CONFIG, fn, "%s=\"%s\" is not %s%s%s", name, v, vars[i].pub.range,
                            why[0] ? ": " : "", why);
        text_of(&cfg, i, value, len);
        return PCOLL_SUCCESS;
    }
    return pc_error(PCOLL_ERR_ARG, fn, "name \"%s\" is not a PCOLL_* variable of pcoll_init", name);
}
