/* The node leaders' exchange of node-shared rounds: see internode.h. */
#include "internode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../algo/allreduce.h"
#include "../core/stall.h"
#include "../util/log.h"
#include "links.h"

/* what a leader did with a round's activation (rounds r % 2: at most two
 * rounds are activated and not done at a node) */
typedef struct fwd_slot {
    uint64_t round;
    uint64_t used; /* out-links it went on */
    int by_msg;    /* this leader activated the node from a message */
} fwd_slot_t;

struct pc_internode {
    pc_backend_env_t env;
    pc_internode_hooks_t hooks;
    const int *leaders;
    int n, node;
    pc_links_t links;
    fwd_slot_t slot[2];
    pc_sched_t *sched; /* allreduce in place over the leaders */
    int running;
    uint64_t running_round;
};

int pc_internode_create(const pc_backend_env_t *env, const int *leaders, int n, int node,
                        pcoll_allreduce_algo_t forced, size_t small_bytes, const pc_internode_hooks_t *hooks,
                        pc_internode_t **out)
{
    *out = NULL;
    pc_internode_t *in = calloc(1, sizeof *in);
    if (!in) return PCOLL_ERR_NOMEM;
    in->env = *env;
    in->hooks = *hooks;
    in->leaders = leaders;
    in->n = n;
    in->node = node;
    pc_links_init(&in->links, n, node, leaders);
    for (int i = 0; i < 2; i++) in->slot[i].round = UINT64_MAX;
    /* as the message backend's rounds (leaders join one by one as the
     * activation reaches them), in place in the node sum */
    int rc = pc_round_sched_build(env, forced, small_bytes, n, node, 1, &in->sched);
    if (rc != PCOLL_SUCCESS) {
        free(in);
        return rc;
    }
    pc_sched_bind_ranks(in->sched, leaders);
    *out = in;
    return PCOLL_SUCCESS;
}

void pc_internode_destroy(pc_internode_t *in)
{
    if (!in) return;
    pc_sched_free(in->sched);
    free(in);
}

static fwd_slot_t *slot_of(pc_internode_t *in, uint64_t r)
{
    fwd_slot_t *s = &in->slot[r % 2];
    if (s->round != r) *s = (fwd_slot_t){r, 0, 0}; /* it held round r - 2, done here */
    return s;
}

/* Passes round r on along the out-links that the rule gives for link h. */
static int pass_on(pc_internode_t *in, fwd_slot_t *s, int h, int root, uint32_t flags, const unsigned char *counted)
{
    uint64_t mask = pc_links_forward(&in->links, h) & ~s->used;
    s->used |= mask;
    return pc_links_activate(&in->links, &in->env, s->round, root, flags, counted, mask);
}

int pc_internode_initiated(pc_internode_t *in, uint64_t r, int root, uint32_t flags, const unsigned char *counted)
{
    if (in->links.closed) return 0;
    fwd_slot_t *s = slot_of(in, r);
    if (s->by_msg) return 0; /* it came from another node: passed on by the rule already */
    return pass_on(in, s, -1, root, flags, counted);
}

void pc_internode_message(pc_internode_t *in, int src, const void *msg, size_t bytes, uint64_t done)
{
    const pc_obj_msg_t *h = msg;
    int link = pc_links_from(&in->links, src);
    if (link < 0) {
        pc_log(PCOLL_LOG_ERROR, "partial: a message from rank %d, which is not a node leader linked to this one", src);
        return;
    }
    if (h->type == PC_MSG_FIN) {
        if (pc_links_fin(&in->links, link)) in->hooks.drained(in->hooks.arg);
        return;
    }
    if (h->type != PC_MSG_ACTIVATE || in->links.closed || h->round < done) return;
    if (h->counted && bytes < sizeof *h + in->env.bitmap_bytes) {
        pc_log(PCOLL_LOG_ERROR, "partial: a truncated activation from rank %d", src);
        return;
    }
    const unsigned char *counted = h->counted ? (const unsigned char *)(h + 1) : NULL;
    fwd_slot_t *s = slot_of(in, h->round);
    int rc = in->hooks.activate(in->hooks.arg, h->round, h->root, h->flags, counted, link);
    if (rc < 0) return;
    if (rc == 1) s->by_msg = 1;
    pass_on(in, s, link, h->root, h->flags, counted);
}

static void exchange_done(pc_sched_t *sched, int status, void *arg)
{
    pc_internode_t *in = arg;
    in->running = 0;
    if (status != PCOLL_SUCCESS) {
        char what[400];
        snprintf(what, sizeof what, "round %llu failed between the nodes: %s", (unsigned long long)in->running_round,
                 pc_sched_fault(sched)->msg);
        in->env.failed(in->env.owner, status, what);
        return;
    }
    in->hooks.exchanged(in->hooks.arg, in->running_round);
}

int pc_internode_exchange(pc_internode_t *in, uint64_t r, void *buf)
{
    if (in->running) return 0;
    in->running = 1;
    in->running_round = r;
    pc_sched_bind(in->sched, PC_SLOT_OUT, buf);
    pc_sched_set_tags(in->sched, pc_tag_base(pc_engine_tags(in->env.engine), in->env.obj->channel, r), NULL);
    pc_sched_on_done(in->sched, exchange_done, in);
    int rc = pc_engine_run(in->env.engine, in->sched);
    if (rc != PCOLL_SUCCESS) {
        pc_sched_fail_run(in->sched, rc, "the exchange between nodes could not start");
        exchange_done(in->sched, rc, in);
        return -1;
    }
    return 1;
}

void pc_internode_close(pc_internode_t *in)
{
    if (pc_links_close(&in->links, &in->env)) in->hooks.drained(in->hooks.arg);
}

void pc_internode_describe(pc_internode_t *in, uint64_t r, pc_stall_probe_t *p)
{
    if (!in->running || in->running_round != r) return;
    int *peers = malloc(sizeof(int) * (size_t)in->n);
    if (!peers) return;
    int k = pc_sched_waiting_on(in->sched, peers, in->n);
    for (int i = 0; i < k; i++)
        pc_probe_fallback(p, in->leaders[peers[i]],
                          "its node's sum of the round has not arrived (it leads its node; its progress thread may "
                          "be stopped)");
    free(peers);
}
