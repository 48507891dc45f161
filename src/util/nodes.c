/* Ranks by node: see nodes.h. */
#include "nodes.h"

#include <stdlib.h>
#include <string.h>

#include "pcoll.h"

int pc_nodes_init(pc_nodes_t *nodes, int P, const int *labels)
{
    memset(nodes, 0, sizeof *nodes);
    nodes->P = P;
    nodes->node_of = malloc(sizeof(int) * (size_t)P);
    nodes->local_of = malloc(sizeof(int) * (size_t)P);
    nodes->first = calloc((size_t)P + 2, sizeof(int));
    nodes->rank_at = malloc(sizeof(int) * (size_t)P);
    if (!nodes->node_of || !nodes->local_of || !nodes->first || !nodes->rank_at) {
        pc_nodes_destroy(nodes);
        return PCOLL_ERR_NOMEM;
    }
    /* node numbers in the order of their smallest rank (O(P^2) at worst:
     * done once, at setup) */
    for (int r = 0; r < P; r++) {
        nodes->node_of[r] = -1;
        for (int q = 0; q < r; q++)
            if (labels[q] == labels[r]) {
                nodes->node_of[r] = nodes->node_of[q];
                break;
            }
        if (nodes->node_of[r] < 0) nodes->node_of[r] = nodes->count++;
    }
    for (int r = 0; r < P; r++) nodes->first[nodes->node_of[r] + 1]++;
    for (int n = 0; n < nodes->count; n++) nodes->first[n + 1] += nodes->first[n];
    int *fill = calloc((size_t)nodes->count + 1, sizeof(int));
    if (!fill) {
        pc_nodes_destroy(nodes);
        return PCOLL_ERR_NOMEM;
    }
    for (int r = 0; r < P; r++) {
        int n = nodes->node_of[r];
        nodes->local_of[r] = fill[n]++;
        nodes->rank_at[nodes->first[n] + nodes->local_of[r]] = r;
    }
    free(fill);
    return 0;
}

int pc_nodes_init_blocks(pc_nodes_t *nodes, int P, int per_node)
{
    int *labels = malloc(sizeof(int) * (size_t)(P > 0 ? P : 1));
    if (!labels) return PCOLL_ERR_NOMEM;
    for (int r = 0; r < P; r++) labels[r] = per_node > 0 ? r / per_node : 0;
    int rc = pc_nodes_init(nodes, P, labels);
    free(labels);
    return rc;
}

void pc_nodes_destroy(pc_nodes_t *nodes)
{
    free(nodes->node_of);
    free(nodes->local_of);
    free(nodes->first);
    free(nodes->rank_at);
    memset(nodes, 0, sizeof *nodes);
}
