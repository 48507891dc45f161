/*
 * Which ranks share a node: the context's node map (core/context.h), used
 * by the data phases of partial objects, the dynamic groups' rules (Ripples'
 * static schedule and inter-intra divisions) and the algorithm choice.
 * Pure: built from one node label per rank (any integers; equal labels =
 * one node).  Nodes are numbered in the
 * order of their smallest rank; within a node, ranks in increasing order
 * are its local workers 0, 1, ...
 *
 *   labels  7 7 3 3 7 3      ->  node 0: ranks 0,1,4 (local 0,1,2)
 *                                node 1: ranks 2,3,5 (local 0,1,2)
 */
#ifndef PC_UTIL_NODES_H
#define PC_UTIL_NODES_H

typedef struct pc_nodes {
    int P, count;  /* ranks, nodes */
    int *node_of;  /* [P] */
    int *local_of; /* [P] */
    int *first;    /* [count + 1]: node n's ranks are rank_at[first[n] .. first[n+1]) */
    int *rank_at;  /* [P] */
} pc_nodes_t;

/* PCOLL_SUCCESS, or PCOLL_ERR_NOMEM.  labels: P integers. */
int pc_nodes_init(pc_nodes_t *nodes, int P, const int *labels);
/* Consecutive blocks of per_node ranks (the last may be smaller). */
int pc_nodes_init_blocks(pc_nodes_t *nodes, int P, int per_node);
void pc_nodes_destroy(pc_nodes_t *nodes);

static inline int pc_nodes_size(const pc_nodes_t *n, int node) { return n->first[node + 1] - n->first[node]; }
static inline int pc_nodes_rank(const pc_nodes_t *n, int node, int local) { return n->rank_at[n->first[node] + local]; }
/* The smallest rank of node `node`: its leader. */
static inline int pc_nodes_leader(const pc_nodes_t *n, int node) { return n->rank_at[n->first[node]]; }

#endif
