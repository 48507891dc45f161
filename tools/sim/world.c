/*
 * The simulated ranks: an app actor and a progress actor per rank, and the
 * S4U issuer through which src/engine's scheduler runs pcoll's schedules.
 *
 *   app actor                progress actor (daemon)
 *   ---------                -----------------------
 *   sim_call(fn) --doorbell--> wakes (model.wake_s), runs fn
 *   waits on app_sem          loop: a queued data step -> sleep for its bytes
 *                                   a queued request    -> run it
 *                                   else wait for any pending message,
 *                                        charge msg_cost_s, run its handler
 *   <----- sim_call_done ----  (a schedule's on_done, a round's completion)
 *
 * Messages are S4U communications of the real sizes on mailboxes named by
 * (channel, destination, source, tag): MPI's matching of (source, tag)
 * within a communicator.  A receiver registered as the mailbox's permanent
 * receiver gets its data flowing before it posts the receive (eager); above
 * model.rendezvous_bytes a message waits for its receive.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <simgrid/barrier.h>
#include <xbt/config.h>

#include "sim.h"

sim_world_t sim;

/* S4U refuses a null payload: messages without one carry this */
static char no_payload;

static void die(const char *what)
{
    fprintf(stderr, "pcoll-sim: %s\n", what);
    exit(1);
}

static void *grow(void *p, int *cap, size_t elem)
{
    *cap = *cap ? *cap * 2 : 16;
    void *q = realloc(p, (size_t)*cap * elem);
    if (!q) die("out of memory");
    return q;
}

/* ---- mailboxes ---- */

static sg_mailbox_t sched_box(int channel, int dst, int src, int tag)
{
    char name[64];
    snprintf(name, sizeof name, "s%d.%d.%d.%d", channel, dst, src, tag);
    return sg_mailbox_by_name(name);
}

static sg_mailbox_t ctl_box(int channel, int dst, int tag)
{
    char name[48];
    snprintf(name, sizeof name, "c%d.%d.%d", channel, dst, tag);
    return sg_mailbox_by_name(name);
}

static sg_mailbox_t bell_box(int rank)
{
    char name[32];
    snprintf(name, sizeof name, "bell.%d", rank);
    return sg_mailbox_by_name(name);
}

static void make_eager(sg_mailbox_t box, long bytes)
{
    if (sim.model.rendezvous_bytes > 0 && (double)bytes > sim.model.rendezvous_bytes) return;
    sg_mailbox_set_receiver(sg_mailbox_get_name(box));
}

/* ---- the progress actor ---- */

static sim_pending_t *add_pending(sim_rank_t *r, sg_comm_t c, void (*done)(sim_rank_t *, sim_pending_t *))
{
    if (r->npend == r->cappend) {
        int cap = r->cappend;
        r->pend = grow(r->pend, &r->cappend, sizeof *r->pend);
        r->comms = realloc(r->comms, (size_t)r->cappend * sizeof *r->comms);
        if (!r->comms) die("out of memory");
        (void)cap;
    }
    sim_pending_t *p = &r->pend[r->npend];
    memset(p, 0, sizeof *p);
    p->comm = c;
    p->done = done;
    r->comms[r->npend++] = c;
    return p;
}

void sim_charge(sim_rank_t *r, double seconds)
{
    if (seconds <= 0) return;
    r->busy_s += seconds;
    sg_actor_sleep_for(seconds);
}

static void bell_rang(sim_rank_t *r, sim_pending_t *p);

static void arm_bell(sim_rank_t *r)
{
    sim_pending_t *p = add_pending(r, NULL, bell_rang);
    p->comm = r->comms[r->npend - 1] = sg_mailbox_get_async(bell_box(r->rank), &p->payload);
}

static void bell_rang(sim_rank_t *r, sim_pending_t *p)
{
    (void)p;
    r->bell_pending = 0;
    sim_charge(r, sim.model.wake_s);
    arm_bell(r);
}

static void run_pending(sim_rank_t *r, ssize_t i)
{
    sim_pending_t p = r->pend[i];
    r->pend[i] = r->pend[r->npend - 1];
    r->comms[i] = r->comms[r->npend - 1];
    r->npend--;
    p.done(r, &p);
}

static void progress_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    sim_rank_t *r = sg_actor_self_get_data();
    /* ends with the last app actor, like a progress thread at finalize */
    sg_actor_daemonize(sg_actor_self());
    sg_mailbox_set_receiver(sg_mailbox_get_name(bell_box(r->rank)));
    arm_bell(r);
    for (;;) {
        if (r->lhead < r->ltail) {
            struct sim_local l = r->localq[r->lhead++ % r->lcap];
            sim_charge(r, (double)pc_sched_step_bytes(l.s, l.step) / sim.model.reduce_Bps);
            pc_sched_step_done(l.s, l.step, PCOLL_SUCCESS, &r->issuer);
            continue;
        }
        if (r->rhead < r->rtail) {
            struct sim_req q = r->reqs[r->rhead++ % r->rcap];
            q.fn(r, q.arg);
            continue;
        }
        ssize_t i = sg_comm_wait_any(r->comms, (size_t)r->npend);
        if (i < 0) die("a wait for messages failed");
        run_pending(r, i);
    }
}

/* ---- the issuer ---- */

static void sched_msg_done(sim_rank_t *r, sim_pending_t *p)
{
    sim_charge(r, sim.model.msg_cost_s);
    pc_sched_step_done(p->sched, p->step, PCOLL_SUCCESS, &r->issuer);
}

static int channel_of(pc_sched_t *s, int step) { return (int)*pc_sched_step_aux(s, step); }

static int issue_post(void *self, pc_sched_t *s, int step)
{
    sim_rank_t *r = self;
    pc_step_kind_t kind = pc_sched_step_kind(s, step);
    int peer = pc_sched_peer_rank(s, pc_sched_step_peer(s, step));
    int tag = pc_sched_step_tag(s, step, 0xfffff);
    long bytes = (long)pc_sched_step_bytes(s, step);
    sim_pending_t *p;
    if (kind == PC_STEP_SEND) {
        sim_charge(r, sim.model.msg_cost_s);
        sg_comm_t c = sg_mailbox_put_async(sched_box(channel_of(s, step), peer, r->rank, tag), &no_payload, bytes);
        p = add_pending(r, c, sched_msg_done);
        sim.messages++;
        sim.bytes_sent += bytes;
    } else if (kind == PC_STEP_RECV) {
        p = add_pending(r, NULL, sched_msg_done);
        p->comm = r->comms[r->npend - 1] =
            sg_mailbox_get_async(sched_box(channel_of(s, step), r->rank, peer, tag), &p->payload);
    } else {
        return PCOLL_ERR_ARG; /* node-shared barriers: not simulated */
    }
    p->sched = s;
    p->step = step;
    return PCOLL_SUCCESS;
}

static int issue_local(void *self, pc_sched_t *s, int step)
{
    sim_rank_t *r = self;
    if (r->ltail - r->lhead == r->lcap) {
        /* keep the ring's order when it grows */
        int old = r->lcap;
        struct sim_local *q = malloc(sizeof *q * (size_t)(old ? old * 2 : 16));
        if (!q) die("out of memory");
        for (int i = r->lhead; i < r->ltail; i++) q[i - r->lhead] = r->localq[i % old];
        r->ltail -= r->lhead;
        r->lhead = 0;
        free(r->localq);
        r->localq = q;
        r->lcap = old ? old * 2 : 16;
    }
    r->localq[r->ltail++ % r->lcap] = (struct sim_local){s, step};
    return PCOLL_SUCCESS;
}

void sim_sched_prepare(sim_rank_t *r, pc_sched_t *s, const int *group_ranks, int channel)
{
    pc_sched_bind_ranks(s, group_ranks);
    pc_sched_set_tags(s, 0, NULL);
    for (int i = 0; i < pc_sched_nsteps(s); i++) {
        *pc_sched_step_aux(s, i) = channel;
        if (pc_sched_step_kind(s, i) == PC_STEP_RECV) {
            int peer = pc_sched_peer_rank(s, pc_sched_step_peer(s, i));
            make_eager(sched_box(channel, r->rank, peer, pc_sched_step_tag(s, i, 0xfffff)),
                       (long)pc_sched_step_bytes(s, i));
        }
    }
}

int sim_sched_start(sim_rank_t *r, pc_sched_t *s) { return pc_sched_start(s, &r->issuer); }

/* ---- control messages ---- */

void sim_ctl_send(sim_rank_t *r, int dst, int channel, int tag, void *payload, long bytes)
{
    sim_charge(r, sim.model.msg_cost_s);
    sg_comm_t c = sg_mailbox_put_init(ctl_box(channel, dst, tag), payload ? payload : &no_payload, bytes);
    sg_comm_detach(c, NULL);
    sim.messages++;
    sim.bytes_sent += bytes;
}

static void ctl_done(sim_rank_t *r, sim_pending_t *p)
{
    sim_charge(r, sim.model.msg_cost_s);
    void (*fn)(sim_rank_t *, sim_pending_t *) = (void (*)(sim_rank_t *, sim_pending_t *))p->sched;
    p->sched = NULL;
    fn(r, p);
}

void sim_ctl_recv(sim_rank_t *r, int channel, int tag, void (*done)(sim_rank_t *r, sim_pending_t *p), void *arg)
{
    sg_mailbox_t box = ctl_box(channel, r->rank, tag);
    make_eager(box, 0);
    sim_pending_t *p = add_pending(r, NULL, ctl_done);
    p->sched = (pc_sched_t *)(void *)done; /* the handler, taken back in ctl_done */
    p->arg = arg;
    p->comm = r->comms[r->npend - 1] = sg_mailbox_get_async(box, &p->payload);
}

/* ---- calls from the app actor ---- */

void sim_post(sim_rank_t *r, sim_fn fn, void *arg)
{
    if (r->rtail - r->rhead == r->rcap) {
        int old = r->rcap;
        struct sim_req *q = malloc(sizeof *q * (size_t)(old ? old * 2 : 16));
        if (!q) die("out of memory");
        for (int i = r->rhead; i < r->rtail; i++) q[i - r->rhead] = r->reqs[i % old];
        r->rtail -= r->rhead;
        r->rhead = 0;
        free(r->reqs);
        r->reqs = q;
        r->rcap = old ? old * 2 : 16;
    }
    r->reqs[r->rtail++ % r->rcap] = (struct sim_req){fn, arg};
    if (!r->bell_pending) {
        r->bell_pending = 1;
        sg_comm_detach(sg_mailbox_put_init(bell_box(r->rank), &no_payload, 0), NULL);
    }
}

void sim_call(sim_rank_t *r, sim_fn fn, void *arg)
{
    sim_post(r, fn, arg);
    sg_sem_acquire(r->app_sem);
}

void sim_call_done(sim_rank_t *r) { sg_sem_release(r->app_sem); }

/* ---- the world ---- */

static void (*app_entry)(sim_rank_t *r);
static sg_bar_t app_barrier;

void sim_barrier(void) { sg_barrier_wait(app_barrier); }

static void app_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    sim_rank_t *r = sg_actor_self_get_data();
    app_entry(r);
}

int sim_setup(int *argc, char **argv, const sim_model_t *m)
{
    sim.model = *m;
    sim.P = m->ranks;
    /* the model's factors are ours (calibrate.c): SimGrid's network model
     * without its own latency and rate corrections or TCP window limit */
    char cfg_model[] = "--cfg=network/model:CM02";
    char cfg_cross[] = "--cfg=network/crosstraffic:0";
    char cfg_log[] = "--log=root.thres:critical";
    char cfg_stack[] = "--cfg=contexts/stack-size:128";
    int n = *argc;
    char **args = malloc(sizeof(char *) * (size_t)(n + 5));
    if (!args) die("out of memory");
    args[0] = argv[0];
    args[1] = cfg_model;
    args[2] = cfg_cross;
    args[3] = cfg_log;
    args[4] = cfg_stack;
    int k = 5;
    for (int i = 1; i < n; i++) args[k++] = argv[i];
    int nargs = k;
    simgrid_init(&nargs, args);
    free(args);
    char path[64];
    snprintf(path, sizeof path, "/tmp/pcoll-sim-%d.xml", (int)getpid());
    if (sim_platform_write(path, m) != 0) return -1;
    simgrid_load_platform(path);
    remove(path);
    sim.ranks = calloc((size_t)sim.P, sizeof *sim.ranks);
    if (!sim.ranks) die("out of memory");
    for (int i = 0; i < sim.P; i++) {
        sim_rank_t *r = &sim.ranks[i];
        r->rank = i;
        r->node = i / m->ranks_per_node;
        char host[32];
        snprintf(host, sizeof host, "node-%d", r->node);
        r->host = sg_host_by_name(host);
        if (!r->host) die("the platform lacks a node");
        r->issuer.post = issue_post;
        r->issuer.local = issue_local;
        r->issuer.self = r;
    }
    return 0;
}

double sim_run(void (*entry)(sim_rank_t *r))
{
    app_entry = entry;
    app_barrier = sg_barrier_init((unsigned)sim.P);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < sim.P; i++) {
        sim_rank_t *r = &sim.ranks[i];
        r->app_sem = sg_sem_init(0);
        char name[32];
        snprintf(name, sizeof name, "progress-%d", i);
        r->progress = sg_actor_init(name, r->host);
        sg_actor_set_data(r->progress, r);
        sg_actor_start(r->progress, progress_main, 0, NULL);
        snprintf(name, sizeof name, "rank-%d", i);
        r->app = sg_actor_init(name, r->host);
        sg_actor_set_data(r->app, r);
        sg_actor_start(r->app, app_main, 0, NULL);
    }
    double start = simgrid_get_clock();
    simgrid_run();
    sg_barrier_destroy(app_barrier);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sim.wall_s += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return simgrid_get_clock() - start;
}

void sim_teardown(void)
{
    for (int i = 0; i < sim.P; i++) {
        sim_rank_t *r = &sim.ranks[i];
        free(r->pend);
        free(r->comms);
        free(r->localq);
        free(r->reqs);
    }
    free(sim.ranks);
    sim.ranks = NULL;
}

double sim_peak_rss_mib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0;
}

void sim_print_summary(const char *command, int json)
{
    const sim_model_t *m = &sim.model;
    if (json) {
        printf("{\"bench\": \"sim\", \"command\": \"%s\", \"ranks\": %d, \"ranks_per_node\": %d, \"platform\": \"%s\", "
               "\"link_rate_bps\": %.6g, \"wall_s\": %.3f, \"peak_rss_mib\": %.1f, \"messages\": %ld, "
               "\"bytes_sent\": %lld, ",
               command, m->ranks, m->ranks_per_node, sim_platform_name(m->platform), m->link_bps, sim.wall_s,
               sim_peak_rss_mib(), sim.messages, sim.bytes_sent);
        sim_model_print(m, stdout);
        printf("}\n");
    } else {
        printf("# simulated %d ranks in %.2f s of wall time, peak memory %.0f MiB, %ld messages\n", m->ranks,
               sim.wall_s, sim_peak_rss_mib(), sim.messages);
    }
    fflush(stdout);
}
