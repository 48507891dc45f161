/* Ripples' static schedule: see static_schedule.h. */
#include "static_schedule.h"

static void sort_ints(int *a, int n)
{
    for (int i = 1; i < n; i++) {
        int x = a[i], j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

/* The local that represents node n in phase 2's inter group. */
static int inter_local(const pc_nodes_t *nodes, int n) { return pc_nodes_size(nodes, n) >= 2 ? 1 : 0; }

/* Phase 2's node group of node n (M >= 2): n with the opposite node of the
 * ring, an odd M's last node with the last pair. */
static int node_group(int M, int n, int *out)
{
    int h = M / 2, k = 0;
    int base = n < h ? n : n < 2 * h ? n - h : h - 1; /* the pair's first node */
    out[k++] = base;
    out[k++] = base + h;
    if (M % 2 == 1 && base == h - 1) out[k++] = M - 1;
    return k;
}

/* Pairs inside a node of K locals among all of them but `skip` (-1:
 * none), numbered 0 .. n-1 in order: from the top (last two, then the two
 * before) or from the outside in.  Returns the partner of local `me`, or
 * -1 when it sits out. */
static int partner_in(int K, int skip, int me, int outside_in)
{
    int n = skip >= 0 ? K - 1 : K;
    int at = skip >= 0 && me > skip ? me - 1 : me;
    int other;
    if (outside_in) {
        other = n - 1 - at;
        if (other == at) return -1;
    } else {
        /* from the top: (n-1, n-2), (n-3, n-4), ...; with n odd, 0 sits out */
        if (n % 2 == 1 && at == 0) return -1;
        other = (n - 1 - at) % 2 == 0 ? at - 1 : at + 1;
    }
    return skip >= 0 && other >= skip ? other + 1 : other;
}

int pc_static_group(const pc_nodes_t *nodes, int rank, uint64_t step, int *members)
{
    int M = nodes->count, n = nodes->node_of[rank], me = nodes->local_of[rank], K = pc_nodes_size(nodes, n);
    int phase = (int)(step % PC_STATIC_PERIOD), k = 0;
    if (phase == 1 || phase == 3) {
        for (int l = 0; l < K; l++) members[k++] = pc_nodes_rank(nodes, n, l);
        sort_ints(members, k);
        return k;
    }
    /* the inter group, if this rank is in it */
    int il = phase == 0 ? 0 : inter_local(nodes, n);
    if (M >= 2 && me == il) {
        if (phase == 0) {
            for (int m = 0; m < M; m++) members[k++] = pc_nodes_rank(nodes, m, 0);
        } else {
            int ng[3], c = node_group(M, n, ng);
            for (int i = 0; i < c; i++) members[k++] = pc_nodes_rank(nodes, ng[i], inter_local(nodes, ng[i]));
        }
        sort_ints(members, k);
        return k;
    }
    /* a pair inside the node, among the locals not in the inter group */
    int p = partner_in(K, M >= 2 ? il : -1, me, phase == 2);
    members[k++] = rank;
    if (p >= 0) members[k++] = pc_nodes_rank(nodes, n, p);
    sort_ints(members, k);
    return k;
}

int pc_static_max_group(const pc_nodes_t *nodes)
{
    int most = nodes->count >= 2 ? nodes->count : 2;
    for (int n = 0; n < nodes->count; n++)
        if (pc_nodes_size(nodes, n) > most) most = pc_nodes_size(nodes, n);
    return most < 3 ? 3 : most;
}
