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
#include <simgrid/exec.h>
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

/* ---- FIFOs of fixed-size entries (a progress actor's queues) ---- */

static void fifo_init(sim_fifo_t *f, size_t esize)
{
    memset(f, 0, sizeof *f);
    f->esize = esize;
}

static void fifo_push(sim_fifo_t *f, const void *e)
{
    if (f->tail - f->head == f->cap) {
        /* grows keeping the order */
        int cap = f->cap ? f->cap * 2 : 16;
        char *buf = malloc(f->esize * (size_t)cap);
        if (!buf) die("out of memory");
        for (int i = f->head; i < f->tail; i++)
            memcpy(buf + (size_t)(i - f->head) * f->esize, f->buf + (size_t)(i % f->cap) * f->esize, f->esize);
        free(f->buf);
        f->buf = buf;
        f->tail -= f->head;
        f->head = 0;
        f->cap = cap;
    }
    memcpy(f->buf + (size_t)(f->tail++ % f->cap) * f->esize, e, f->esize);
}

static int fifo_pop(sim_fifo_t *f, void *e)
{
    if (f->head == f->tail) return 0;
    memcpy(e, f->buf + (size_t)(f->head++ % f->cap) * f->esize, f->esize);
    return 1;
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

/* ---- the emulated cluster's token buckets ----
 *
 * scripts/cluster.sh limits each direction of a node's link with tc's tbf:
 * a bucket of model.burst_bytes fills at the link rate, and a packet that
 * finds tokens leaves at once (the veth's own speed).  The bytes of a
 * message covered by tokens at both its node's uplink and the receiver's
 * downlink are taken off its simulated size; the rest goes through
 * SimGrid's rate-limited links, and while the links are busy with it the
 * buckets do not fill (tbf's tokens are spent by the backlog).
 */
typedef struct bucket {
    double tokens, last, busy_until;
} bucket_t;
static bucket_t *up, *down; /* by node */

static double bucket_level(bucket_t *b, double now, double rate)
{
    double from = b->last > b->busy_until ? b->last : b->busy_until;
    if (now > from) b->tokens += (now - from) * rate;
    if (b->tokens > sim.model.burst_bytes) b->tokens = sim.model.burst_bytes;
    b->last = now;
    return b->tokens;
}

static long shaped_bytes(int src_rank, int dst_rank, long bytes)
{
    const sim_model_t *m = &sim.model;
    int a = sim.ranks[src_rank].node, b = sim.ranks[dst_rank].node;
    if (m->burst_bytes <= 0 || a == b || !up) return bytes;
    double now = simgrid_get_clock(), rate = m->link_bps / 8;
    double credit = bucket_level(&up[a], now, rate), d = bucket_level(&down[b], now, rate);
    if (d < credit) credit = d;
    double use = (double)bytes < credit ? (double)bytes : credit;
    up[a].tokens -= use;
    down[b].tokens -= use;
    double rest = (double)bytes - use;
    /* tbf drops what arrives while its queue holds more than its limit
     * (50 ms of the rate, as scripts/cluster.sh sets it, plus the bucket);
     * TCP sends the dropped bytes again: those count loss_factor more */
    double backlog = up[a].busy_until > now ? (up[a].busy_until - now) * rate * m->bw_factor : 0;
    double over = backlog + rest - (0.05 * rate + m->burst_bytes);
    if (over > 0) rest += (over < rest ? over : rest) * m->loss_factor;
    double wire = rest / (rate * m->bw_factor);
    up[a].busy_until = (up[a].busy_until > now ? up[a].busy_until : now) + wire;
    down[b].busy_until = (down[b].busy_until > now ? down[b].busy_until : now) + wire;
    /* SimGrid skips the latency of an empty message: keep a byte */
    return rest < 1 ? 1 : (long)rest;
}

/* ---- the progress actor ---- */

/* Entries are allocated one by one: a receive writes its payload pointer
 * into its entry, which must not move while the receive is pending. */
static sim_pending_t *add_pending(sim_rank_t *r, sg_comm_t c, void (*done)(sim_rank_t *, sim_pending_t *))
{
    if (r->npend == r->cappend) {
        r->pend = grow(r->pend, &r->cappend, sizeof *r->pend);
        r->comms = realloc(r->comms, (size_t)r->cappend * sizeof *r->comms);
        if (!r->comms) die("out of memory");
    }
    sim_pending_t *p = calloc(1, sizeof *p);
    if (!p) die("out of memory");
    p->comm = c;
    p->done = done;
    r->pend[r->npend] = p;
    r->comms[r->npend++] = c;
    return p;
}

/* CPU time is an execution on the CPU the rank's processes share: its
 * node's cores, or on the emulated cluster the one machine's that every
 * node runs on (platform.c): with more busy actors than cores, each takes
 * longer, as the oversubscribed processes do. */
void sim_charge(sim_rank_t *r, double seconds)
{
    if (seconds <= 0) return;
    r->busy_s += seconds;
    if (!sim.cpu_shared) {
        /* a core for each of the rank's two actors: nothing to share, and a
         * sleep costs SimGrid far less than an execution */
        sg_actor_sleep_for(seconds);
        return;
    }
    sg_exec_t e = sg_actor_exec_init(seconds * SIM_FLOPS);
    sg_exec_set_host(e, r->cpu);
    sg_exec_wait(e);
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
    sim_pending_t *p = r->pend[i];
    r->pend[i] = r->pend[r->npend - 1];
    r->comms[i] = r->comms[r->npend - 1];
    r->npend--;
    p->done(r, p);
    free(p);
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
        struct sim_local l;
        struct sim_req q;
        if (fifo_pop(&r->localq, &l)) {
            sim_charge(r, (double)pc_sched_step_bytes(l.s, l.step) / sim.model.reduce_Bps);
            pc_sched_step_done(l.s, l.step, PCOLL_SUCCESS, &r->issuer);
            continue;
        }
        if (fifo_pop(&r->reqs, &q)) {
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
        sg_comm_t c = sg_mailbox_put_async(sched_box(channel_of(s, step), peer, r->rank, tag), &no_payload,
                                           shaped_bytes(r->rank, peer, bytes));
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
    struct sim_local l = {s, step};
    fifo_push(&r->localq, &l);
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
    sg_comm_t c = sg_mailbox_put_init(ctl_box(channel, dst, tag), payload ? payload : &no_payload,
                                      shaped_bytes(r->rank, dst, bytes));
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
    struct sim_req q = {fn, arg};
    fifo_push(&r->reqs, &q);
    if (!r->bell_pending) {
        r->bell_pending = 1;
        sg_comm_detach(sg_mailbox_put_init(bell_box(r->rank), &no_payload, 1), NULL);
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

/* MPI_Barrier's dissemination algorithm on the app actors, with messages:
 * round k sends to rank + 2^k and receives from rank - 2^k (mod P). */
void sim_mpi_barrier(sim_rank_t *r)
{
    int P = sim.P;
    if (sim.model.burst_bytes <= 0) {
        /* no tbf buckets to refill while it runs: where the ranks leave it
         * a few microseconds apart does not matter, and an instant barrier
         * saves most of a large simulation's messages */
        sim_barrier();
        return;
    }
    for (int k = 0, d = 1; d < P; k++, d *= 2) {
        char name[48];
        snprintf(name, sizeof name, "b.%d.%d", r->rank, k);
        sg_mailbox_set_receiver(name);
        sg_comm_t c = sg_mailbox_get_async(sg_mailbox_by_name(name), &r->barrier_payload);
        snprintf(name, sizeof name, "b.%d.%d", (r->rank + d) % P, k);
        sim_charge(r, sim.model.msg_cost_s);
        sg_comm_detach(sg_mailbox_put_init(sg_mailbox_by_name(name), &no_payload,
                                           shaped_bytes(r->rank, (r->rank + d) % P, 8)),
                       NULL);
        sg_comm_wait(c);
        sim_charge(r, sim.model.msg_cost_s);
    }
}

static void app_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    sim_rank_t *r = sg_actor_self_get_data();
    app_entry(r);
    /* the progress actor may have run the last call before its doorbell
     * arrived: end only once it did (SimGrid objects to a message in flight
     * when it kills the daemons) */
    while (r->bell_pending) sg_actor_sleep_for(1e-6);
}

int sim_setup(int *argc, char **argv, const sim_model_t *m)
{
    sim.model = *m;
    sim_model_finish(&sim.model);
    m = &sim.model;
    sim.P = m->ranks;
    /* a node whose cores its actors share, or slowed by polling (platform.c) */
    sim.cpu_shared = m->platform == SIM_CLUSTER || m->cores < 2 * m->ranks_per_node || m->poll_load > 0;
    /* the model's factors are ours (calibrate.c): SimGrid's network model
     * without its own latency and rate corrections or TCP window limit */
    char cfg_model[] = "--cfg=network/model:CM02";
    char cfg_cross[] = "--cfg=network/crosstraffic:0";
    char cfg_log[] = "--log=root.thres:error";
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
    int nodes = sim.P / m->ranks_per_node;
    up = calloc((size_t)nodes, sizeof *up);
    down = calloc((size_t)nodes, sizeof *down);
    if (!sim.ranks || !up || !down) die("out of memory");
    for (int v = 0; v < nodes; v++) up[v].tokens = down[v].tokens = m->burst_bytes;
    for (int i = 0; i < sim.P; i++) {
        sim_rank_t *r = &sim.ranks[i];
        r->rank = i;
        r->node = i / m->ranks_per_node;
        char host[32];
        snprintf(host, sizeof host, "node-%d", r->node);
        r->host = sg_host_by_name(host);
        r->cpu = m->platform == SIM_CLUSTER ? sg_host_by_name("machine") : r->host;
        if (!r->host || !r->cpu) die("the platform lacks a node");
        fifo_init(&r->localq, sizeof(struct sim_local));
        fifo_init(&r->reqs, sizeof(struct sim_req));
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
        for (int k = 0; k < r->npend; k++) free(r->pend[k]);
        if (r->app_sem) sg_sem_destroy(r->app_sem);
        free(r->pend);
        free(r->comms);
        free(r->localq.buf);
        free(r->reqs.buf);
    }
    free(sim.ranks);
    sim.ranks = NULL;
    free(up);
    free(down);
    up = down = NULL;
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
