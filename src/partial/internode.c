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

/* a run given up that has not finished yet (pc_internode_give_up) */
typedef struct gone_run {
    struct gone_run *next;
    pc_internode_t *in;
    pc_sched_t *sched;
    void *out; /* its output */
    int owned; /* ... handed over (else lent: hooks.released) */
} gone_run_t;

/* the rounds of a give-up whose stale messages are dropped (the engine's
 * drain place, owned by this window) */
typedef struct drain_window {
    struct drain_window *next;
    uint64_t first; /* its first round */
} drain_window_t;

struct pc_internode {
    pc_backend_env_t env;
    pc_internode_hooks_t hooks;
    const int *leaders;
    int n, node;
    pc_links_t links;
    fwd_slot_t slot[2];
    pc_sched_t *sched; /* allreduce over the leaders: node sum in, total out */
    pcoll_allreduce_algo_t forced; /* how it was built */
    size_t small_bytes;
    int inplace;
    int running;
    uint64_t running_round;
    uint64_t next;     /* the first round not exchanged here */
    int given_up;      /* pc_internode_give_up: no exchange until pc_internode_resume */
    gone_run_t *gone;  /* runs given up, until they finish */
    drain_window_t *windows; /* rounds given up whose stale messages are dropped */
};

/* The allreduce over the leaders, as the message backend's rounds (leaders
 * join one by one as the activation reaches them); out of place, the node
 * sum stays as it is (a deputy may send it instead: backend_shm.c). */
static int build(pc_internode_t *in)
{
    int rc = pc_round_sched_build(&in->env, in->forced, in->small_bytes, in->n, in->node, in->inplace, &in->sched);
    if (rc == PCOLL_SUCCESS) pc_sched_bind_ranks(in->sched, in->leaders);
    return rc;
}

int pc_internode_create(const pc_backend_env_t *env, const int *leaders, int n, int node,
                        pcoll_allreduce_algo_t forced, size_t small_bytes, int inplace,
                        const pc_internode_hooks_t *hooks, pc_internode_t **out)
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
    in->forced = forced;
    in->small_bytes = small_bytes;
    in->inplace = inplace;
    int rc = build(in);
    if (rc != PCOLL_SUCCESS) {
        free(in);
        return rc;
    }
    *out = in;
    return PCOLL_SUCCESS;
}

int pc_internode_resume(pc_internode_t *in, uint64_t from)
{
    if (!in->given_up) return PCOLL_SUCCESS;
    in->next = from; /* the leaders' runs from here on are those of from and later */
    if (!in->sched) { /* the one given up went with its run */
        int rc = build(in);
        if (rc != PCOLL_SUCCESS) return rc;
    }
    in->given_up = 0;
    in->running = 0;
    return PCOLL_SUCCESS;
}

static void run_forgotten(pc_sched_t *s, int status, void *arg);

/* Ends the drains of the windows whose tags round r takes again (all:
 * UINT64_MAX): a full turn of the sequence after them, their stale
 * messages are long dropped. */
static void forget_windows(pc_internode_t *in, uint64_t r)
{
    uint64_t turn = pc_engine_tags(in->env.engine)->seq_mod;
    for (drain_window_t **at = &in->windows; *at;) {
        drain_window_t *w = *at;
        if (r != UINT64_MAX && r < w->first + turn) {
            at = &w->next;
            continue;
        }
        pc_engine_drain_forget(in->env.engine, w);
        *at = w->next;
        free(w);
    }
}

void pc_internode_destroy(pc_internode_t *in)
{
    if (!in) return;
    /* runs given up and not finished yet are let go: their schedules and
     * outputs stay for good (MPI may still read what their sends point to) */
    while (in->gone) {
        gone_run_t *g = in->gone;
        in->gone = g->next;
        pc_engine_let_go(in->env.engine, g->sched);
        pc_sched_on_done(g->sched, run_forgotten, NULL); /* a withdrawn receive may still complete */
        free(g);
    }
    forget_windows(in, UINT64_MAX);
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
    pc_internode_t *in = arg; /* (a run given up has another on_done: gone_finished) */
    in->running = 0;
    in->next = in->running_round + 1;
    if (status != PCOLL_SUCCESS) {
        char what[400];
        snprintf(what, sizeof what, "round %llu failed between the nodes: %s", (unsigned long long)in->running_round,
                 pc_sched_fault(sched)->msg);
        in->env.failed(in->env.owner, status, what);
        return;
    }
    in->hooks.exchanged(in->hooks.arg, in->running_round);
}

int pc_internode_exchange(pc_internode_t *in, uint64_t r, const void *sum, void *out)
{
    if (in->running || in->given_up) return 0;
    const pc_tags_t *t = pc_engine_tags(in->env.engine);
    forget_windows(in, r);
    in->running = 1;
    in->running_round = r;
    in->next = r;
    if (sum != out) pc_sched_bind(in->sched, PC_SLOT_IN, (void *)sum);
    pc_sched_bind(in->sched, PC_SLOT_OUT, out);
    pc_sched_set_tags(in->sched, pc_tag_base(t, in->env.obj->channel, r), NULL);
    pc_sched_on_done(in->sched, exchange_done, in);
    int rc = pc_engine_run(in->env.engine, in->sched);
    if (rc != PCOLL_SUCCESS) {
        pc_sched_fail_run(in->sched, rc, "the exchange between nodes could not start");
        exchange_done(in->sched, rc, in);
        return -1;
    }
    return 1;
}

static void run_forgotten(pc_sched_t *s, int status, void *arg) { (void)s, (void)status, (void)arg; }

/* A run given up has finished (the other leaders dropped its sends): its
 * schedule and output go (from its own on_done: allowed, sched.c). */
static void gone_finished(pc_sched_t *s, int status, void *arg)
{
    (void)status;
    gone_run_t *g = arg;
    pc_internode_t *in = g->in;
    gone_run_t **at = &in->gone;
    while (*at != g) at = &(*at)->next;
    *at = g->next;
    pc_sched_free(s);
    if (g->owned) free(g->out);
    else in->hooks.released(in->hooks.arg, g->out);
    free(g);
}

/* The other leaders' runs of the rounds from - 1 .. from + 2, given up too,
 * may still send here: dropped as they come, until the object's end or an
 * exchange that takes those tags again (forget_windows).  A leader that
 * was stopped meanwhile is far behind its node: the rounds are those
 * around the first one it has not exchanged.  (The nodes go back to the
 * exchange at least 3 rounds after this window: a leader gives up before
 * it finishes a round node to node, and going back needs two such rounds
 * in a row; so no window holds a round of the exchange resumed.) */
static void drain_given_up(pc_internode_t *in, uint64_t from)
{
    if (in->next < from) from = in->next;
    pc_engine_t *e = in->env.engine;
    const pc_tags_t *t = pc_engine_tags(e);
    int nsteps = pc_sched_nsteps(in->sched), n = 0;
    int *tags = malloc(sizeof(int) * (size_t)(nsteps > 0 ? nsteps : 1) * 4);
    drain_window_t *w = malloc(sizeof *w);
    if (!tags || !w) {
        free(tags);
        free(w);
        pc_log(PCOLL_LOG_WARN, "partial ch%u: no memory to drain the exchange given up", in->env.obj->channel);
        return;
    }
    *w = (drain_window_t){in->windows, from > 0 ? from - 1 : 0};
    in->windows = w;
    for (uint64_t r = w->first; r <= from + 2; r++)
        for (int i = 0; i < nsteps; i++) {
            pc_step_kind_t k = pc_sched_step_kind(in->sched, i);
            if (k == PC_STEP_SEND || k == PC_STEP_RECV)
                tags[n++] = pc_tag_base(t, in->env.obj->channel, r) |
                            (int)((uint32_t)pc_sched_step_tag(in->sched, i, t->step_mask) & t->step_mask);
        }
    if (pc_engine_drain(e, NULL, tags, n, w) != PCOLL_SUCCESS)
        pc_log(PCOLL_LOG_WARN, "partial ch%u: no memory to drain the exchange given up", in->env.obj->channel);
    free(tags);
}

int pc_internode_give_up(pc_internode_t *in, uint64_t from, void *out, int owned)
{
    if (in->given_up) return 0;
    in->given_up = 1;
    drain_given_up(in, from);
    if (!in->running) return 0;
    /* it waits for a stopped leader, maybe for good: its receives are
     * withdrawn, its sends finish once their receivers drop them */
    pc_engine_t *e = in->env.engine;
    pc_sched_t *s = in->sched;
    in->sched = NULL; /* pc_internode_resume builds another */
    gone_run_t *g = malloc(sizeof *g);
    if (g) {
        *g = (gone_run_t){in->gone, in, s, out, owned};
        in->gone = g;
        pc_sched_on_done(s, gone_finished, g); /* it may come at once */
        pc_engine_abandon(e, s, PCOLL_SUCCESS);
        pc_engine_let_finish(e, s);
    } else { /* let go: it and its output stay for good */
        pc_log(PCOLL_LOG_WARN, "partial ch%u: no memory to follow the exchange given up", in->env.obj->channel);
        pc_sched_on_done(s, run_forgotten, NULL);
        pc_engine_abandon(e, s, PCOLL_SUCCESS);
        pc_engine_let_go(e, s);
    }
    return 1;
}

int pc_internode_running(const pc_internode_t *in) { return in->running && !in->given_up; }

uint64_t pc_internode_running_round(const pc_internode_t *in) { return in->running_round; }

int pc_internode_waiting_on(const pc_internode_t *in, int *out, int max)
{
    if (!pc_internode_running(in)) return 0;
    int k = pc_sched_waiting_on(in->sched, out, max);
    for (int i = 0; i < k; i++) out[i] = in->leaders[out[i]];
    return k;
}

void pc_internode_close(pc_internode_t *in)
{
    forget_windows(in, UINT64_MAX); /* a later object may take the tags */
    if (pc_links_close(&in->links, &in->env)) in->hooks.drained(in->hooks.arg);
}

void pc_internode_describe(pc_internode_t *in, uint64_t r, pc_stall_probe_t *p)
{
    if (!pc_internode_running(in) || in->running_round != r) return;
    int *peers = malloc(sizeof(int) * (size_t)in->n);
    if (!peers) return;
    int k = pc_sched_waiting_on(in->sched, peers, in->n);
    for (int i = 0; i < k; i++)
        pc_probe_fallback(p, in->leaders[peers[i]],
                          "its node's sum of the round has not arrived (it leads its node; its progress thread may "
                          "be stopped)");
    free(peers);
}
