/*
 * The activation links and FIN of a partial object (partial/links.c),
 * over a simulated network that delivers messages in random order:
 *   - one initiator's activation reaches every participant, with its round,
 *     root, flags and counted bitmap intact, when each passes it on along
 *     the links above the one it came on that it has not used yet (as the
 *     backends do); every message names a link the receiver knows
 *     (pc_links_from); P a power of two: exactly once each, along the
 *     initiator's binomial tree (pc_act_parent);
 *   - participants given as a list of ranks (the nodes' leaders): messages
 *     go to those ranks only, and a rank outside the list has no link;
 *   - close: every participant sends its FINs and is drained exactly once,
 *     after the last FIN on its in-links, whatever the order of closes and
 *     deliveries (P = 1: drained at once);
 *   - a bitmap larger than the stack buffer (P > 512) is sent whole.
 */
#include <stdlib.h>
#include <string.h>

#include "algo/activation.h"
#include "partial/links.h"
#include "unit_check.h"

#define MAXP 1100

typedef struct msg {
    int src, dst; /* ranks */
    pc_obj_msg_t head;
    unsigned char bitmap[(MAXP + 7) / 8];
} msg_t;

typedef struct net {
    msg_t *q;
    int n, cap;
    int P;
    const int *ranks; /* index -> rank; NULL: identity */
    int sender;       /* the rank sending now */
    size_t bitmap_bytes;
} net_t;

static int send_msg(void *owner, int peer, void *m, size_t bytes)
{
    net_t *net = owner;
    CHECK(bytes == sizeof(pc_obj_msg_t) || bytes == sizeof(pc_obj_msg_t) + net->bitmap_bytes);
    if (net->n == net->cap) {
        net->cap = net->cap ? 2 * net->cap : 64;
        net->q = realloc(net->q, sizeof(msg_t) * (size_t)net->cap);
        CHECK(net->q != NULL);
    }
    msg_t *x = &net->q[net->n++];
    x->src = net->sender;
    x->dst = peer;
    memcpy(&x->head, m, sizeof x->head);
    if (bytes > sizeof(pc_obj_msg_t)) memcpy(x->bitmap, (const pc_obj_msg_t *)m + 1, net->bitmap_bytes);
    return PCOLL_SUCCESS;
}

static void failed(void *owner, int status, const char *what)
{
    (void)owner;
    fprintf(stderr, "links failed: %d %s\n", status, what);
    CHECK(0);
}

static unsigned rng = 12345;
static int pick(int n)
{
    rng = rng * 1103515245u + 12345u;
    return (int)((rng >> 8) % (unsigned)n);
}

/* a random message out of the network */
static msg_t take(net_t *net)
{
    int i = pick(net->n);
    msg_t m = net->q[i];
    net->q[i] = net->q[--net->n];
    return m;
}

static int rank_of(const net_t *net, int idx) { return net->ranks ? net->ranks[idx] : idx; }

static int index_of(const net_t *net, int rank)
{
    for (int i = 0; i < net->P; i++)
        if (rank_of(net, i) == rank) return i;
    return -1;
}

static void setup(net_t *net, pc_links_t *links, pc_backend_env_t *env, int P, const int *ranks)
{
    memset(net, 0, sizeof *net);
    net->P = P;
    net->ranks = ranks;
    net->bitmap_bytes = (size_t)(P + 7) / 8;
    for (int i = 0; i < P; i++) {
        pc_links_init(&links[i], P, i, ranks);
        memset(&env[i], 0, sizeof env[i]);
        env[i].P = P;
        env[i].me = rank_of(net, i);
        env[i].bitmap_bytes = net->bitmap_bytes;
        env[i].owner = net;
        env[i].send = send_msg;
        env[i].failed = failed;
    }
}

static void one_initiator(int P, const int *ranks, int root, int with_bitmap)
{
    static pc_links_t links[MAXP];
    static pc_backend_env_t env[MAXP];
    static int got[MAXP];
    static uint64_t used[MAXP];
    static unsigned char counted[(MAXP + 7) / 8];
    net_t net;
    setup(&net, links, env, P, ranks);
    memset(got, 0, sizeof(int) * (size_t)P);
    memset(used, 0, sizeof(uint64_t) * (size_t)P);
    int power_of_two = (P & (P - 1)) == 0;
    for (size_t i = 0; i < net.bitmap_bytes; i++) counted[i] = (unsigned char)(i * 37 + (unsigned)root);
    const uint64_t round = 1000 + (uint64_t)root;
    const uint32_t flags = 5;
    net.sender = rank_of(&net, root);
    got[root] = 1;
    used[root] = pc_links_forward(&links[root], -1);
    CHECK(pc_links_activate(&links[root], &env[root], round, rank_of(&net, root), flags,
                            with_bitmap ? counted : NULL, used[root]) == PCOLL_SUCCESS);
    while (net.n > 0) {
        msg_t m = take(&net);
        int to = index_of(&net, m.dst), from = index_of(&net, m.src);
        CHECK(to >= 0 && from >= 0 && to != from);
        CHECK(m.head.type == PC_MSG_ACTIVATE && m.head.round == round && m.head.flags == flags);
        CHECK(m.head.root == rank_of(&net, root) && m.head.counted == with_bitmap);
        if (with_bitmap) CHECK(memcmp(m.bitmap, counted, net.bitmap_bytes) == 0);
        int h = pc_links_from(&links[to], m.src);
        CHECK(h >= 0 && pc_act_peer(P, from, h) == to);
        if (power_of_two) CHECK(pc_act_parent(P, root, to) == from); /* the binomial tree of root */
        got[to]++;
        uint64_t mask = pc_links_forward(&links[to], h) & ~used[to];
        used[to] |= mask;
        net.sender = m.dst;
        CHECK(pc_links_activate(&links[to], &env[to], m.head.round, m.head.root, m.head.flags,
                                m.head.counted ? m.bitmap : NULL, mask) == PCOLL_SUCCESS);
    }
    for (int i = 0; i < P; i++) CHECK(power_of_two ? got[i] == 1 : got[i] >= 1);
    free(net.q);
}

static void closing(int P, const int *ranks)
{
    static pc_links_t links[MAXP];
    static pc_backend_env_t env[MAXP];
    static int drained[MAXP], order[MAXP];
    net_t net;
    setup(&net, links, env, P, ranks);
    for (int i = 0; i < P; i++) {
        drained[i] = 0;
        order[i] = i;
    }
    for (int i = P - 1; i > 0; i--) { /* closes in a random order */
        int j = pick(i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int closed = 0;
    while (closed < P || net.n > 0) {
        if (closed < P && (net.n == 0 || pick(2))) {
            int i = order[closed++];
            net.sender = rank_of(&net, i);
            int before = net.n;
            if (pc_links_close(&links[i], &env[i])) drained[i]++;
            CHECK(net.n - before == pc_act_ndims(P)); /* one FIN per out-link */
            continue;
        }
        msg_t m = take(&net);
        int to = index_of(&net, m.dst);
        CHECK(to >= 0 && m.head.type == PC_MSG_FIN && m.head.root == m.src);
        int h = pc_links_from(&links[to], m.src);
        CHECK(h >= 0);
        CHECK(!drained[to]); /* drained only after the last FIN */
        if (pc_links_fin(&links[to], h)) drained[to]++;
    }
    for (int i = 0; i < P; i++) CHECK(drained[i] == 1);
    free(net.q);
}

static void outsiders(void)
{
    const int leaders[] = {0, 3, 5, 9, 12};
    pc_links_t l;
    pc_links_init(&l, 5, 2, leaders); /* rank 5 */
    CHECK(pc_links_from(&l, 4) == -1 && pc_links_from(&l, 13) == -1);
    CHECK(pc_links_from(&l, 3) == 0);  /* index 1 = 2 - 2^0 */
    CHECK(pc_links_from(&l, 0) == 1);  /* index 0 = 2 - 2^1 */
    CHECK(pc_links_from(&l, 9) == 2);   /* index 3 = 2 - 2^2 mod 5 */
    CHECK(pc_links_from(&l, 12) == -1); /* index 4: 2 - 4 = 3 mod 5, no power of two */
    CHECK(pc_links_forward(&l, -1) == 7 && pc_links_forward(&l, 0) == 6 && pc_links_forward(&l, 2) == 0);
}

int main(void)
{
    static int spread[MAXP];
    for (int P = 1; P <= 40; P++)
        for (int root = 0; root < P; root++) one_initiator(P, NULL, root, root % 2);
    for (int i = 0; i < MAXP; i++) spread[i] = 5 * i + (i % 4); /* leaders of uneven nodes */
    for (int P = 1; P <= 40; P += 3)
        for (int root = 0; root < P; root++) one_initiator(P, spread, root, 1);
    one_initiator(MAXP, NULL, 7, 1); /* a bitmap beyond the stack buffer */
    one_initiator(MAXP, NULL, MAXP - 1, 0);
    one_initiator(1024, NULL, 1000, 1);
    for (int P = 1; P <= 70; P++)
        for (int rep = 0; rep < 5; rep++) closing(P, rep % 2 ? spread : NULL);
    closing(MAXP, NULL);
    outsiders();
    printf("test_links: %ld checks passed\n", checks);
    return 0;
}
