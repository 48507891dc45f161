/*
 * Platforms as SimGrid XML: N = ranks / K nodes named node-0 .. node-N-1,
 * each a host whose ranks share memory (the host's loopback: model.shm_*)
 * and one link each way (SPLITDUPLEX: tc's tbf limits each direction of a
 * veth on its own).
 *
 *   switch, cluster:   node-i --link-- [crossbar]     every pair of nodes
 *                                                    meets only its two links
 *                      (--backbone-rate: --link-- [backbone] --link--, one
 *                      capacity every flow between nodes shares)
 *   fattree:           node-i --link-- leaf --link-- spine   (two levels,
 *                      a leaf per a nodes, a spines: full bisection)
 *
 * cluster is the switch with the emulated cluster's calibrated host costs
 * (model.c); the three differ only in the topology written here.
 */
#include <math.h>
#include <stdio.h>

#include "sim.h"

/* a x b = n with a as close to sqrt(n) as n allows (a >= 2 when possible) */
static void fattree_shape(int n, int *a, int *b)
{
    int best = n;
    for (int x = 2; x * x <= n; x++)
        if (n % x == 0) best = x;
    *a = best == n ? n : n / best;
    *b = n / *a;
}

int sim_platform_write(const char *path, const sim_model_t *m)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "pcoll-sim: cannot write the platform file %s\n", path);
        return -1;
    }
    int nodes = m->ranks / m->ranks_per_node;
    double bw = m->link_bps / 8 * m->bw_factor; /* bytes per second */
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
               "<platform version=\"4.1\">\n<zone id=\"world\" routing=\"Full\">\n");
    /* the ranks' polling progress threads take their share of the CPU
     * first (--poll-load): of the one machine every emulated node runs on,
     * or of each node's cores */
    int pollers = m->platform == SIM_CLUSTER ? m->ranks : m->ranks_per_node;
    double left = fmax(0.05, 1 - (double)pollers * m->poll_load / m->cores);
    /* the emulated cluster's nodes all run on one machine: its cores are
     * the CPU every rank's work shares (no links: it only computes) */
    if (m->platform == SIM_CLUSTER)
        fprintf(f, "  <zone id=\"cpu\" routing=\"None\"><host id=\"machine\" speed=\"%.6gf\" core=\"%d\"/></zone>\n",
                SIM_FLOPS * left, m->cores);
    fprintf(f,
            "  <cluster id=\"nodes\" prefix=\"node-\" suffix=\"\" radical=\"0-%d\" speed=\"%.6gf\" bw=\"%.6gBps\" "
            "lat=\"%.6gs\" sharing_policy=\"SPLITDUPLEX\" loopback_bw=\"%.6gBps\" loopback_lat=\"%.6gs\" core=\"%d\"",
            nodes - 1, SIM_FLOPS * (m->platform == SIM_CLUSTER ? 1 : left), bw, m->link_lat_s, m->shm_Bps, m->shm_lat_s,
            m->platform == SIM_CLUSTER ? 1 : m->cores);
    if (m->platform == SIM_FATTREE && nodes >= 4) {
        int a, b;
        fattree_shape(nodes, &a, &b);
        fprintf(f, " topology=\"FAT_TREE\" topo_parameters=\"2;%d,%d;1,%d;1,1\"", a, b, a);
    }
    /* else a crossbar, where two nodes meet only their own links (an ideal
     * switch; no shared constraint, so SimGrid's solver stays small), or
     * with --backbone-rate a backplane every flow between nodes shares */
    else if (m->backbone_bps > 0)
        fprintf(f, " bb_bw=\"%.6gBps\" bb_lat=\"0s\"", m->backbone_bps / 8);
    fprintf(f, "/>\n</zone>\n</platform>\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "pcoll-sim: cannot write the platform file %s\n", path);
        return -1;
    }
    return 0;
}
