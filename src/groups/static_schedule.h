/*
 * Ripples' static schedule: a conflict-free, periodic group schedule that
 * every rank computes alone from the node layout and the step number, so
 * no controller is asked (Ripples, section 4.2 and figure 10, generalized
 * to any number of nodes M and any number of workers per node).  Pure.
 *
 * Four phases, step mod 4 (L = a node's local workers 0 .. K-1):
 *
 *   phase 0  inter: local 0 of every node, one group across all nodes;
 *            the other locals pair up inside the node from the top:
 *            (K-1, K-2), (K-3, K-4), ...; one left over sits out
 *   phase 1  intra: all workers of a node
 *   phase 2  inter: local 1 (local 0 on a node of one worker) with the
 *            same local of the opposite node of the ring (n and n + M/2;
 *            an odd M's last node joins the pair before it); the others
 *            pair up from the outside in: (0, K-1), (2, K-2), ...
 *   phase 3  intra, as phase 1
 *
 *   4 nodes x 4 workers (figure 10), node n's locals a..d:
 *     phase 0: {0a,1a,2a,3a}  {b}  {c,d}         per node
 *     phase 2: {0b,2b} {1b,3b}  {a,d}  {c}       per node
 *
 * One node (M = 1): the inter phases are pairs inside the node.  Every
 * rank is in exactly one group per step (a group of one: no sync that
 * step), every member of a group computes the same group, and within two
 * periods (8 steps) every rank's value reaches every other rank (unit
 * test over node layouts up to 12 x 12).
 */
#ifndef PC_GROUPS_STATIC_SCHEDULE_H
#define PC_GROUPS_STATIC_SCHEDULE_H

#include <stdint.h>

#include "../util/nodes.h"

/* Rank's group at `step`: its members in increasing order into members
 * (room for pc_static_max_group(nodes) ints); returns their number (>= 1). */
int pc_static_group(const pc_nodes_t *nodes, int rank, uint64_t step, int *members);

/* The largest group the schedule forms. */
int pc_static_max_group(const pc_nodes_t *nodes);

/* Steps after which the schedule repeats. */
#define PC_STATIC_PERIOD 4

#endif
