/*
 * The model's factors: what a message, a data step and a doorbell cost, and
 * the platform's links.  Defaults are the factors `pcoll-sim calibrate`
 * fitted to the emulated cluster (results/sim/calibration.json); every
 * factor has a flag, and --model FILE loads a calibration's output.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "tool.h"
#include "util/parse.h"

const char *sim_common_help =
    "simulated platform and model:\n"
    "  --ranks P          ranks (default 8)\n"
    "  --ranks-per-node K ranks per node, which share its memory and its link\n"
    "                     (default 1)\n"
    "  --platform X       switch (every node's link on one ideal switch), fattree\n"
    "                     (a two-level fat tree of full bisection), or cluster (the\n"
    "                     emulated cluster of scripts/cluster.sh: one link per node\n"
    "                     to a software bridge, the calibrated host costs)\n"
    "                     (default cluster)\n"
    "  --link-rate R      each node link's rate, each way: 1gbit, 100mbit, ...\n"
    "                     (default 1gbit)\n"
    "  --latency L        one-way latency of a link: 5us, 0.1ms, ...\n"
    "  --model FILE       the factors a `pcoll-sim calibrate` wrote\n"
    "  --msg-cost L       CPU time of a message at each end\n"
    "  --bw-factor F      share of the link rate one stream reaches (0-1]\n"
    "  --wake L           a call's doorbell to its progress thread\n"
    "  --loss-factor F    bytes that reach a full tbf queue (beyond 50 ms of the\n"
    "                     rate) are sent 1 + F times (TCP's resends)\n"
    "                     (these five and --poll-load: on cluster the factors\n"
    "                     pcoll-sim calibrate fitted to data/cluster; elsewhere\n"
    "                     a datacenter node's: 2us per link, 1us per message,\n"
    "                     0.95 of the rate, 2us to wake, no losses)\n"
    "  --reduce-rate R    bytes per second of a reduction step: 4G, 800M, ...\n"
    "  --shm-rate R       bytes per second between ranks of one node\n"
    "  --burst B          the emulated cluster's tbf bucket per link direction\n"
    "                     (default: scripts/cluster.sh's, 4 ms of the rate, at\n"
    "                     least 32K; 0 on switch and fattree)\n"
    "  --backbone-rate R  switch and cluster: a capacity all nodes' traffic shares\n"
    "                     (a switch's backplane), e.g. 25gbit (default none:\n"
    "                     every pair of nodes meets only its own two links)\n"
    "  --poll-load F      the share of a core each rank's progress thread takes\n"
    "                     polling MPI while idle (a message across nodes cannot\n"
    "                     wake it); work runs on the rest of the machine (cluster)\n"
    "                     or of its node (default 0; cluster: fitted)\n"
    "  --cores N          CPUs: per node on switch and fattree (default 2 per rank),\n"
    "                     of the one machine every node runs on for cluster\n"
    "                     (default 2: the machine the measurements came from)\n";

const char *sim_platform_name(sim_platform_kind_t k)
{
    return k == SIM_SWITCH ? "switch" : k == SIM_FATTREE ? "fattree" : "cluster";
}

void sim_model_defaults(sim_model_t *m, sim_platform_kind_t kind)
{
    memset(m, 0, sizeof *m);
    m->platform = kind;
    m->ranks = 8;
    m->ranks_per_node = 1;
    m->link_bps = 1e9;
    /* the host and link factors depend on the platform: sim_model_finish */
    m->link_lat_s = m->bw_factor = m->msg_cost_s = m->wake_s = m->loss_factor = m->poll_load = -1;
    m->reduce_Bps = 2e9;
    m->shm_Bps = 4e9;
    m->shm_lat_s = 1e-6;
    m->rendezvous_bytes = 0;
    m->burst_bytes = -1; /* the cluster's, from the rate (sim_model_finish) */
}

static void set_unset(double *field, double value)
{
    if (*field < 0) *field = value;
}

/* "5us", "0.1ms", "2s", "30ns": seconds; -1 if not a duration */
static double parse_duration(const char *v)
{
    static const struct {
        const char *unit;
        double s;
    } units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
    size_t len = strlen(v);
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t ul = strlen(units[u].unit);
        char num[64];
        double x;
        if (len <= ul || len - ul >= sizeof num || strcmp(v + len - ul, units[u].unit) != 0) continue;
        memcpy(num, v, len - ul);
        num[len - ul] = '\0';
        if (pc_parse_double(num, &x) == 0 && x >= 0 && x < 1e6) return x * units[u].s;
        return -1;
    }
    return -1;
}

static double flag_duration(const char *prog, const char *flag, const char *v)
{
    double d = parse_duration(v ? v : "");
    if (d < 0) tool_usage_error(prog, "%s: \"%s\" is not a duration such as 20us, 0.5ms", flag, v ? v : "");
    return d;
}

int sim_common_flag(const char *prog, sim_model_t *m, int opt, const char *arg)
{
    char err[256];
    switch (opt) {
    case 1000: m->ranks = (int)tool_flag_long(prog, "--ranks", arg, 1, 1 << 20); return 1;
    case 1001: m->ranks_per_node = (int)tool_flag_long(prog, "--ranks-per-node", arg, 1, 1024); return 1;
    case 1002: {
        sim_platform_kind_t k;
        if (!strcmp(arg, "switch")) k = SIM_SWITCH;
        else if (!strcmp(arg, "fattree")) k = SIM_FATTREE;
        else if (!strcmp(arg, "cluster")) k = SIM_CLUSTER;
        else tool_usage_error(prog, "--platform: \"%s\" is not switch, fattree or cluster", arg);
        m->platform = k;
        return 1;
    }
    case 1003: m->link_bps = tool_flag_rate(prog, "--link-rate", arg); return 1;
    case 1004: m->link_lat_s = flag_duration(prog, "--latency", arg); return 1;
    case 1005:
        if (sim_model_load(m, arg, err, sizeof err) != 0) tool_usage_error(prog, "--model: %s", err);
        return 1;
    case 1006: m->msg_cost_s = flag_duration(prog, "--msg-cost", arg); return 1;
    case 1007: m->bw_factor = tool_flag_double(prog, "--bw-factor", arg, 1e-3, 1); return 1;
    case 1008: m->reduce_Bps = (double)tool_flag_bytes(prog, "--reduce-rate", arg); return 1;
    case 1009: m->wake_s = flag_duration(prog, "--wake", arg); return 1;
    case 1010: m->shm_Bps = (double)tool_flag_bytes(prog, "--shm-rate", arg); return 1;
    case 1011: m->burst_bytes = (double)tool_flag_bytes(prog, "--burst", arg); return 1;
    case 1012: m->loss_factor = tool_flag_double(prog, "--loss-factor", arg, 0, 100); return 1;
    case 1013: m->cores = (int)tool_flag_long(prog, "--cores", arg, 1, 1 << 20); return 1;
    case 1014: m->backbone_bps = tool_flag_rate(prog, "--backbone-rate", arg); return 1;
    case 1015: m->poll_load = tool_flag_double(prog, "--poll-load", arg, 0, 1); return 1;
    default: return 0;
    }
}

/* scripts/cluster.sh's tbf bucket: 4 ms of the rate, at least 32 KiB */
double sim_cluster_burst(double link_bps)
{
    double b = link_bps / 8 * 0.004;
    return b < 32768 ? 32768 : b;
}

void sim_model_finish(sim_model_t *m)
{
    if (m->platform == SIM_CLUSTER) {
        /* fitted by pcoll-sim calibrate to data/cluster (runs r1 and r2,
         * 2 to 8 nodes, 100 Mbit/s and 1 Gbit/s; data/cluster/calibration.json
         * has every point's error) */
        set_unset(&m->msg_cost_s, 6.1e-6);
        set_unset(&m->wake_s, 5.06e-6);
        set_unset(&m->link_lat_s, 17.29e-6);
        set_unset(&m->bw_factor, 0.8785);
        set_unset(&m->loss_factor, 0.3901);
        set_unset(&m->poll_load, 0.1582);
    } else {
        /* a datacenter node with a core per thread and a switched network:
         * a few microseconds per message, no tbf queue to overflow */
        set_unset(&m->msg_cost_s, 1e-6);
        set_unset(&m->wake_s, 2e-6);
        set_unset(&m->link_lat_s, 2e-6);
        set_unset(&m->bw_factor, 0.95);
        set_unset(&m->loss_factor, 0);
        set_unset(&m->poll_load, 0);
    }
    if (m->cores <= 0) m->cores = m->platform == SIM_CLUSTER ? 2 : 2 * m->ranks_per_node;
    if (m->platform == SIM_CLUSTER && m->burst_bytes < 0) m->burst_bytes = sim_cluster_burst(m->link_bps);
    if (m->burst_bytes < 0) m->burst_bytes = 0;
}

void sim_model_check(const char *prog, const sim_model_t *m)
{
    if (m->ranks % m->ranks_per_node != 0)
        tool_usage_error(prog, "--ranks %d is not a multiple of --ranks-per-node %d", m->ranks, m->ranks_per_node);
    if (m->reduce_Bps <= 0) tool_usage_error(prog, "--reduce-rate must be positive");
    if (m->shm_Bps <= 0) tool_usage_error(prog, "--shm-rate must be positive");
    if (m->backbone_bps > 0 && m->platform == SIM_FATTREE)
        tool_usage_error(prog, "--backbone-rate: the fat tree has its own spine (switch or cluster only)");
}

int sim_model_load(sim_model_t *m, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open \"%s\"", path);
        return -1;
    }
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    static const struct {
        const char *key;
        size_t off;
        double scale;
    } keys[] = {
        {"msg_cost_us", offsetof(sim_model_t, msg_cost_s), 1e-6},
        {"wake_us", offsetof(sim_model_t, wake_s), 1e-6},
        {"link_latency_us", offsetof(sim_model_t, link_lat_s), 1e-6},
        {"bw_factor", offsetof(sim_model_t, bw_factor), 1},
        {"reduce_bytes_per_s", offsetof(sim_model_t, reduce_Bps), 1},
        {"shm_bytes_per_s", offsetof(sim_model_t, shm_Bps), 1},
        {"shm_latency_us", offsetof(sim_model_t, shm_lat_s), 1e-6},
        {"rendezvous_bytes", offsetof(sim_model_t, rendezvous_bytes), 1},
        {"loss_factor", offsetof(sim_model_t, loss_factor), 1},
        {"backbone_rate_bps", offsetof(sim_model_t, backbone_bps), 1},
        {"poll_load", offsetof(sim_model_t, poll_load), 1},
    };
    int found = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        double v;
        int rc = tool_json_get_num(text, keys[k].key, &v);
        if (rc < 0 || (rc > 0 && v < 0)) {
            snprintf(err, errlen, "\"%s\": %s is not a valid number", path, keys[k].key);
            return -1;
        }
        if (rc > 0) {
            *(double *)((char *)m + keys[k].off) = v * keys[k].scale;
            found++;
        }
    }
    if (!found) {
        snprintf(err, errlen, "\"%s\" has none of the model's factors (msg_cost_us, bw_factor, ...)", path);
        return -1;
    }
    return 0;
}

void sim_model_print(const sim_model_t *m, FILE *out)
{
    fprintf(out,
            "\"msg_cost_us\": %.4g, \"wake_us\": %.4g, \"link_latency_us\": %.4g, \"bw_factor\": %.4g, "
            "\"reduce_bytes_per_s\": %.4g, \"shm_bytes_per_s\": %.4g, \"shm_latency_us\": %.4g, "
            "\"rendezvous_bytes\": %.0f, \"loss_factor\": %.4g, \"burst_bytes\": %.0f, \"backbone_rate_bps\": %.4g, "
            "\"poll_load\": %.4g",
            m->msg_cost_s * 1e6, m->wake_s * 1e6, m->link_lat_s * 1e6, m->bw_factor, m->reduce_Bps, m->shm_Bps,
            m->shm_lat_s * 1e6, m->rendezvous_bytes, m->loss_factor, m->burst_bytes, m->backbone_bps,
            m->poll_load);
}
