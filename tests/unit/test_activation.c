/*
 * The activation rule (algo/activation.c), no MPI: for P = 1..64, one to four
 * simultaneous initiators (some starting after messages already reached them)
 * and random delivery order, every rank is reached; each link is used at most
 * once per round; one initiator costs exactly P - 1 messages when P is a
 * power of two; links and their sources are consistent; the parent chain
 * of a rank in a root's tree leads to the root over decreasing links.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "algo/activation.h"
#include "rng.h"
#include "unit_check.h"


typedef struct msg {
    int dst, link;
} msg_t;

typedef struct net {
    msg_t *q;
    int n, cap;
    long sent;
} net_t;

static void push(net_t *net, int dst, int link)
{
    if (net->n == net->cap) {
        net->cap = net->cap ? 2 * net->cap : 64;
        net->q = realloc(net->q, sizeof(msg_t) * (size_t)net->cap);
    }
    net->q[net->n].dst = dst;
    net->q[net->n].link = link;
    net->n++;
    net->sent++;
}

/* the rank-local rule: forward on unused links above `link` */
static void on_activation(int P, int me, int link, uint64_t *used, net_t *net)
{
    uint64_t mask = pc_act_forward_mask(P, link) & ~used[me];
    used[me] |= mask;
    for (int k = 0; mask; k++, mask >>= 1)
        if (mask & 1) push(net, pc_act_peer(P, me, k), k);
}

/* returns the number of messages sent */
static long one_round(int P, int ninit, rng_t *r)
{
    uint64_t *used = calloc((size_t)P, sizeof(uint64_t));
    int *reached = calloc((size_t)P, sizeof(int));
    int *inits = malloc(sizeof(int) * (size_t)ninit);
    net_t net = {0};
    for (int i = 0; i < ninit; i++) inits[i] = (int)rng_below(r, (uint64_t)P);
    int started = 0;
    while (started < ninit || net.n > 0) {
        /* either an initiator starts (late ones may have heard already) or a
         * random pending message is delivered */
        if (started < ninit && (net.n == 0 || rng_below(r, 3) == 0)) {
            int me = inits[started++];
            reached[me] = 1;
            on_activation(P, me, -1, used, &net);
            continue;
        }
        int i = (int)rng_below(r, (uint64_t)net.n);
        msg_t m = net.q[i];
        net.q[i] = net.q[--net.n];
        CHECK(pc_act_dim_from(P, m.dst, pc_act_source(P, m.dst, m.link)) == m.link);
        reached[m.dst] = 1;
        on_activation(P, m.dst, m.link, used, &net);
    }
    for (int x = 0; x < P; x++) CHECK(reached[x]);
    /* each rank sends at most once per link */
    CHECK(net.sent <= (long)P * pc_act_ndims(P));
    free(used);
    free(reached);
    free(inits);
    free(net.q);
    return net.sent;
}

int main(void)
{
    rng_t r;
    rng_seed(&r, 2024);
    long rounds = 0;
    for (int P = 1; P <= 64; P++) {
        int d = pc_act_ndims(P);
        CHECK((P == 1 && d == 0) || ((1LL << (d - 1)) < P && (1LL << d) >= P));
        /* the parent in a root's tree sends to the rank on a link (the
         * forwarding rule: above the link it heard on), and following
         * parents reaches the root in at most d steps */
        for (int root = 0; root < P; root++)
            for (int me = 0; me < P; me++) {
                int x = me, steps = 0, link_in = 64;
                while (x != root) {
                    int parent = pc_act_parent(P, root, x);
                    int k = pc_act_dim_from(P, x, parent);
                    CHECK(parent >= 0 && k >= 0 && k < link_in);
                    link_in = k;
                    x = parent;
                    CHECK(++steps <= d);
                }
                CHECK(pc_act_parent(P, root, root) == -1);
            }
        for (int me = 0; me < P; me++)
            for (int k = 0; k < d; k++) {
                int peer = pc_act_peer(P, me, k);
                CHECK(peer != me);
                CHECK(pc_act_source(P, peer, k) == me);
                CHECK(pc_act_dim_from(P, peer, me) == k);
            }
        long single = one_round(P, 1, &r);
        if ((P & (P - 1)) == 0) CHECK(single == P - 1); /* the binomial tree, nothing more */
        rounds++;
        for (int t = 0; t < 400; t++) {
            one_round(P, 1 + (int)rng_below(&r, 4), &r);
            rounds++;
        }
    }
    printf("test_activation: %ld checks, %ld rounds with random initiators and delivery passed\n", checks, rounds);
    return 0;
}
