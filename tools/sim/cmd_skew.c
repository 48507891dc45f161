/*
 * pcoll-sim skew / group: pcoll-bench's eager-SGD microbenchmark with the
 * partial rounds' own rules (src/partial/policy.h: the call's step, who
 * starts a round, the leader's decisions, a round's members), the
 * activation tree (src/algo/activation.h), WAGMA's rotation
 * (src/groups/rotation.h, through pc_policy_members) and the rounds'
 * schedules (pc_round_spec + src/algo), on the simulated ranks.  This is the
 * message backend's driver (src/partial/backend_msg.c, driver.c) without
 * its threads, locks and MPI: the same decisions in the same order; a test
 * compares its rounds with a real run's.
 *
 *   app actor of rank i                progress actor of rank i
 *   -------------------                ------------------------
 *   sleep i x skew                     call: contribute; pc_policy_call_step
 *   call (doorbell) ---------------->    RESULTS: take, release the app
 *                                        RUNNING: wait for the round
 *                                        NEXT: arrive (start the round, or
 *                                              WAIT to the leader), wait
 *                                      activation (link h): forward on links
 *                                        > h; the leader learns; try_start
 *                                      try_start: the next activated round
 *                                        takes pending; its allreduce over
 *                                        pc_policy_members runs
 *   <------------- release ---------   round done: deliver; the app's round?
 *   barrier (as MPI_Barrier)           leader (rank 0): pc_leader_arrival,
 *                                        pc_leader_activated, pc_leader_decide
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/activation.h"
#include "groups/rotation.h"
#include "partial/backend.h"
#include "partial/policy.h"
#include "sim.h"
#include "tool.h"

enum { TAG_ACTIVATE = 1, TAG_WAIT = 2 };
enum { RING = 64 }; /* rounds whose active flags are kept (far more than open at once) */

typedef struct act_msg {
    uint64_t round;
    int root, src;
    uint32_t flags;
} act_msg_t;

typedef struct slot {
    uint64_t round;
    int activated, root;
    uint32_t flags;
    uint64_t used_links;
} slot_t;

typedef struct group_sched {
    int n, idx;
    pc_sched_t *s;
} group_sched_t;

struct obj;

/* One rank's part of a partial object (its progress actor's state). */
typedef struct part {
    struct obj *o;
    sim_rank_t *r;
    uint64_t started, done, activated_upto, waiting_from;
    uint64_t pending;   /* contributions not yet taken */
    uint64_t delivered; /* rounds completed here and not yet taken by a call */
    uint64_t wait_until;
    int app_waiting;
    slot_t *slot;
    int nslots;
    int running;
    uint64_t running_round;
    uint32_t running_flags;
    pc_sched_t *all;
    group_sched_t *groups;
    int ngroups;
    int *members;
    /* what the last call got: for the bench's averages */
    int last_active, last_members;
    uint64_t last_rounds;
    long long sent_bytes;
    uint64_t rounds_done;
    pc_leader_t leader; /* rank PC_LEADER only */
    int *scratch;
} part_t;

typedef struct obj {
    pc_policy_t pol;
    size_t count;
    int channel;
    int seq;                /* partial objects in creation order: 0, 1, ... */
    part_t *parts;          /* by rank */
    unsigned char *active;  /* [RING][P]: rank started round r active */
    FILE *trace;            /* --trace: one line per completed round and rank */
} obj_t;

/* ---- the leader ---- */

static int never_elsewhere(void *arg, int rank)
{
    (void)arg;
    (void)rank;
    return 0; /* between calls the bench's ranks sleep or wait in MPI_Barrier: no pcoll call */
}

static void activate(part_t *p, uint64_t round, int root, uint32_t flags, int from_link);

static void leader_decide(part_t *p)
{
    pc_decision_t d;
    if (pc_leader_decide(&p->leader, p->r->rank, never_elsewhere, NULL, &d))
        activate(p, d.round, d.root, d.flags, -1);
}

static void leader_arrival(part_t *p, int from, uint64_t round)
{
    if (pc_leader_arrival(&p->leader, PC_ARR_WAIT, from, round) != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-sim: the leader refused an arrival of rank %d for round %llu\n", from,
                (unsigned long long)round);
        exit(1);
    }
    leader_decide(p);
}

static void on_wait_msg(sim_rank_t *r, sim_pending_t *pm)
{
    part_t *p = pm->arg;
    act_msg_t *m = pm->payload;
    sim_ctl_recv(r, p->o->channel, TAG_WAIT, on_wait_msg, p);
    leader_arrival(p, m->src, m->round);
    free(m);
}

/* ---- the data phase ---- */

static void round_done(pc_sched_t *s, int status, void *arg);

static pc_sched_t *round_sched(part_t *p, uint64_t round, uint32_t flags)
{
    const pc_policy_t *pol = &p->o->pol;
    int n = pc_policy_members(pol, round, flags, p->r->rank, p->members);
    int idx = 0;
    while (p->members[idx] != p->r->rank) idx++;
    pc_sched_t **slot = NULL;
    if (n == pol->P) {
        slot = &p->all;
    } else {
        for (int i = 0; i < p->ngroups && !slot; i++)
            if (p->groups[i].n == n && p->groups[i].idx == idx) slot = &p->groups[i].s;
        if (!slot) {
            p->groups = realloc(p->groups, sizeof *p->groups * (size_t)(p->ngroups + 1));
            if (!p->groups) exit(1);
            p->groups[p->ngroups] = (group_sched_t){n, idx, NULL};
            slot = &p->groups[p->ngroups++].s;
        }
    }
    if (!*slot) {
        pc_allreduce_spec_t spec;
        pcoll_allreduce_algo_t algo = pc_round_spec(p->o->count, PCOLL_FLOAT32, PCOLL_ALGO_AUTO, sim_small_bytes(), n, idx,
                                                     0, &spec);
        spec.no_data = 1;
        if (pc_allreduce_build(&spec, algo, slot) != PCOLL_SUCCESS) {
            fprintf(stderr, "pcoll-sim: a round's schedule could not be built\n");
            exit(1);
        }
    }
    sim_sched_prepare(p->r, *slot, p->members, p->o->channel);
    for (int i = 0; i < pc_sched_nsteps(*slot); i++)
        if (pc_sched_step_kind(*slot, i) == PC_STEP_SEND) p->sent_bytes += (long long)pc_sched_step_bytes(*slot, i);
    return *slot;
}

static void try_start(part_t *p)
{
    if (p->running) return;
    uint64_t r = p->started;
    slot_t *s = &p->slot[r % (uint64_t)p->nslots];
    if (s->round != r || !s->activated) return;
    int active = r >= p->waiting_from;
    p->o->active[(r % RING) * (uint64_t)p->o->pol.P + (uint64_t)p->r->rank] = (unsigned char)active;
    p->pending = 0;
    p->started = r + 1;
    pc_sched_t *sched = round_sched(p, r, s->flags);
    p->running = 1;
    p->running_round = r;
    p->running_flags = s->flags;
    pc_sched_on_done(sched, round_done, p);
    if (sim_sched_start(p->r, sched) != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-sim: a round's schedule did not start\n");
        exit(1);
    }
}

static void finish_call(part_t *p);

static void round_done(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    part_t *p = arg;
    if (status != PCOLL_SUCCESS) exit(1);
    uint64_t r = p->running_round;
    p->running = 0;
    p->done = r + 1;
    p->delivered++;
    p->rounds_done++;
    int n = pc_policy_members(&p->o->pol, r, p->running_flags, p->r->rank, p->members), active = 0;
    for (int i = 0; i < n; i++) active += p->o->active[(r % RING) * (uint64_t)p->o->pol.P + (uint64_t)p->members[i]];
    p->last_active = active;
    p->last_members = n;
    if (p->o->trace) {
        slot_t *sl = &p->slot[r % (uint64_t)p->nslots];
        fprintf(p->o->trace,
                "{\"obj\": %d, \"kind\": \"%s\", \"rank\": %d, \"round\": %llu, \"root\": %d, \"active\": %d, "
                "\"sync\": %d, \"standin\": %d, \"group\": [",
                p->o->seq, pc_policy_kind_name(p->o->pol.kind), p->r->rank, (unsigned long long)r, sl->root, active,
                (p->running_flags & PC_ROUND_SYNC) != 0, (p->running_flags & PC_ROUND_STANDIN) != 0);
        for (int i = 0; i < n; i++) fprintf(p->o->trace, "%s%d", i ? ", " : "", p->members[i]);
        fprintf(p->o->trace, "], \"t_us\": %.3f}\n", sim_now() * 1e6);
    }
    if (p->app_waiting && p->done >= p->wait_until) finish_call(p);
    try_start(p);
}

/* ---- activation ---- */

static void send_activation(part_t *p, uint64_t round, int root, uint32_t flags, uint64_t links)
{
    int P = p->o->pol.P;
    for (int k = 0; links; k++, links >>= 1) {
        if (!(links & 1)) continue;
        act_msg_t *m = malloc(sizeof *m);
        if (!m) exit(1);
        *m = (act_msg_t){round, root, p->r->rank, flags};
        sim_ctl_send(p->r, pc_act_peer(P, p->r->rank, k), p->o->channel, TAG_ACTIVATE, m, (long)sizeof(pc_obj_msg_t));
    }
}

static void activate(part_t *p, uint64_t round, int root, uint32_t flags, int from_link)
{
    const pc_policy_t *pol = &p->o->pol;
    slot_t *s = &p->slot[round % (uint64_t)p->nslots];
    if (round < p->done) {
        /* complete here: a late duplicate, unless summed inside groups (the
         * ranks behind this one may not have it yet) */
        if (!pc_policy_in_groups(pol, round, flags)) return;
        uint64_t links = pc_act_forward_mask(pol->P, from_link);
        if (s->round == round) {
            links &= ~s->used_links;
            s->used_links |= links;
        }
        send_activation(p, round, root, flags, links);
        return;
    }
    if (s->round != round) {
        if (s->activated && s->round >= p->done) {
            fprintf(stderr, "pcoll-sim: rank %d: round %llu activated while round %llu is open\n", p->r->rank,
                    (unsigned long long)round, (unsigned long long)s->round);
            exit(1);
        }
        memset(s, 0, sizeof *s);
        s->round = round;
    }
    int first = !s->activated;
    if (first) {
        s->activated = 1;
        s->root = root;
        s->flags = flags;
        if (p->activated_upto < round + 1) p->activated_upto = round + 1;
    }
    uint64_t links = pc_act_forward_mask(pol->P, from_link) & ~s->used_links;
    s->used_links |= links;
    send_activation(p, round, s->root, s->flags, links);
    if (first) {
        if (p->r->rank == PC_LEADER) {
            pc_leader_activated(&p->leader, round, flags);
            leader_decide(p);
        }
        try_start(p);
    }
}

static void on_activation(sim_rank_t *r, sim_pending_t *pm)
{
    part_t *p = pm->arg;
    act_msg_t *m = pm->payload;
    sim_ctl_recv(r, p->o->channel, TAG_ACTIVATE, on_activation, p);
    int link = pc_act_dim_from(p->o->pol.P, r->rank, m->src);
    activate(p, m->round, m->root, m->flags, link);
    free(m);
}

/* ---- the call ---- */

static void finish_call(part_t *p)
{
    p->app_waiting = 0;
    p->waiting_from = UINT64_MAX;
    p->last_rounds = p->delivered;
    p->delivered = 0;
    sim_call_done(p->r);
}

static void partial_call(sim_rank_t *r, void *arg)
{
    part_t *p = arg;
    p->pending++;
    uint64_t taken = p->started;
    pc_call_step_t step = pc_policy_call_step(p->delivered > 0, p->done, taken);
    if (step == PC_STEP_RESULTS) {
        finish_call(p);
        return;
    }
    p->app_waiting = 1;
    if (step == PC_STEP_RUNNING) {
        p->wait_until = taken;
    } else {
        p->waiting_from = taken;
        p->wait_until = taken + 1;
        if (p->activated_upto <= taken) {
            if (pc_policy_arrival(&p->o->pol, r->rank, taken, p->scratch) == PC_ARRIVE_START) {
                activate(p, taken, r->rank, 0, -1);
            } else if (r->rank == PC_LEADER) {
                leader_arrival(p, r->rank, taken);
            } else {
                act_msg_t *m = malloc(sizeof *m);
                if (!m) exit(1);
                *m = (act_msg_t){taken, r->rank, r->rank, 0};
                sim_ctl_send(r, PC_LEADER, p->o->channel, TAG_WAIT, m, (long)sizeof(pc_obj_msg_t));
            }
        }
    }
    if (p->done >= p->wait_until) finish_call(p);
}

static void open_part(sim_rank_t *r, void *arg)
{
    part_t *p = arg;
    sim_ctl_recv(r, p->o->channel, TAG_ACTIVATE, on_activation, p);
    if (r->rank == PC_LEADER) sim_ctl_recv(r, p->o->channel, TAG_WAIT, on_wait_msg, p);
    sim_call_done(r);
}

static void obj_init(obj_t *o, const pcoll_partial_config_t *cfg, size_t count, int channel, FILE *trace)
{
    static int seq;
    int P = sim.P;
    o->seq = seq++;
    o->pol = pc_policy_of(cfg, P);
    o->count = count;
    o->channel = channel;
    o->trace = trace;
    o->parts = calloc((size_t)P, sizeof *o->parts);
    o->active = calloc((size_t)RING * (size_t)P, 1);
    if (!o->parts || !o->active) exit(1);
    for (int i = 0; i < P; i++) {
        part_t *p = &o->parts[i];
        p->o = o;
        p->r = &sim.ranks[i];
        p->waiting_from = UINT64_MAX;
        p->nslots = pc_policy_window(&o->pol);
        p->slot = calloc((size_t)p->nslots, sizeof *p->slot);
        p->members = malloc(sizeof(int) * (size_t)P);
        p->scratch = malloc(sizeof(int) * (size_t)P);
        if (!p->slot || !p->members || !p->scratch) exit(1);
        for (int k = 0; k < p->nslots; k++) p->slot[k].round = UINT64_MAX;
        if (i == PC_LEADER && pc_leader_init(&p->leader, &o->pol) != PCOLL_SUCCESS) exit(1);
    }
}

/* ---- the benchmark ---- */

#define MAX_MODES TOOL_MAX_MODES

static struct {
    tool_mode_t modes[MAX_MODES];
    int nmodes;
    size_t min_bytes, max_bytes;
    double skew_s;
    int iters, warmup;
    int nsizes;
    /* [size][mode][rank]: summed over iterations */
    double *lat, *nap, *members, *rounds, *sent;
    FILE *trace;
} S;

static size_t at(int k, int m, int rank) { return ((size_t)k * MAX_MODES + (size_t)m) * (size_t)sim.P + (size_t)rank; }

static obj_t *objs; /* [size][mode] */

static void run_mode(sim_rank_t *r, int k, int mi, size_t bytes)
{
    const tool_mode_t *m = &S.modes[mi];
    obj_t *o = &objs[k * MAX_MODES + mi];
    pc_sched_t *s = NULL;
    part_t *p = NULL;
    int P = sim.P, channel = 10000 + k * MAX_MODES + mi;
    long long sent0 = 0;
    int shm = m->kind == M_SYNC && sim_pcoll_takes_shm(PCOLL_ALGO_AUTO, bytes);
    if (m->kind == M_PARTIAL) {
        p = &o->parts[r->rank];
        sim_call(r, open_part, p);
    } else if (!shm) {
        pcoll_allreduce_algo_t algo =
            m->kind == M_MPI ? sim_mpi_rule(bytes, P) : sim_pcoll_rule(PCOLL_ALGO_AUTO, bytes, P);
        s = sim_allreduce_sched(r, bytes, algo, P, r->rank, NULL, channel);
    }
    sim_barrier();
    for (int it = 0; it < S.warmup + S.iters; it++) {
        sg_actor_sleep_for(r->rank * S.skew_s);
        double t0 = sim_now();
        int active = P, members = P, nrounds = 1;
        if (p && it == S.warmup) sent0 = p->sent_bytes;
        if (p) {
            sim_call(r, partial_call, p);
            active = p->last_active;
            members = p->last_members;
            nrounds = (int)p->last_rounds;
        } else if (shm) {
            sim_pcoll_shm_run(r, bytes, channel);
        } else {
            sim_allreduce_run(r, s);
        }
        double t = sim_now() - t0;
        if (it >= S.warmup) {
            S.lat[at(k, mi, r->rank)] += t * 1e6;
            S.nap[at(k, mi, r->rank)] += active;
            S.members[at(k, mi, r->rank)] += members;
            S.rounds[at(k, mi, r->rank)] += nrounds;
        }
        sim_mpi_barrier(r);
    }
    /* data bytes this rank sent over the timed iterations (pcoll_stats_t's) */
    if (p) S.sent[at(k, mi, r->rank)] = (double)(p->sent_bytes - sent0);
    if (s) pc_sched_free(s);
}

static void app(sim_rank_t *r)
{
    int k = 0;
    for (size_t bytes = S.min_bytes; bytes <= S.max_bytes; bytes *= 8, k++)
        for (int mi = 0; mi < S.nmodes; mi++) run_mode(r, k, mi, bytes);
}

static const char *skew_help =
    "usage: pcoll-sim skew [flags]\n"
    "pcoll-bench skew on the simulated platform: rank i sleeps i x skew, then\n"
    "calls; partial rounds with pcoll's own rules, activation tree and schedules.\n"
    "  --modes LIST    comma-separated: mpi, sync, solo, majority, quorum:Q, group,\n"
    "                  group:S (default mpi,sync,solo,majority)\n";
static const char *group_help =
    "usage: pcoll-sim group [flags]\n"
    "pcoll-bench group on the simulated platform: WAGMA's group rounds (GROUP\n"
    "partial objects, groups of S rotating every round) against the others.\n"
    "  --modes LIST    comma-separated: mpi, sync, solo, majority, quorum:Q, group\n"
    "                  (S = max(2, round(sqrt(P)))), group:S (default\n"
    "                  mpi,sync,solo,majority,group)\n";
static const char *common_help =
    "  --min-bytes B   smallest message (default 64)\n"
    "  --max-bytes B   largest message (default 4M); sizes grow 8x\n"
    "  --skew-us U     rank i sleeps i * U microseconds per iteration (default 1000)\n"
    "  --iters N       timed iterations per mode and size (default 64)\n"
    "  --warmup N      untimed iterations before them (default 2)\n"
    "  --data-phase D  auto or messages: the simulated rounds always move data as\n"
    "                  messages (nodes of one rank; see docs/sim.md)\n"
    "  --per-rank      also print each rank's average latency per mode\n"
    "  --trace FILE    one JSON line per round completed at a rank (rank, round,\n"
    "                  root, active, sync, group, t_us): the rounds to compare\n"
    "                  with a real run's observer\n"
    "  --json          pcoll-bench's keys: bench, mode, ranks, bytes, skew_us,\n"
    "                  avg_latency_us, nap, members, data_phase,\n"
    "                  sent_bytes_per_round, rounds_per_iter, left_out_rounds\n"
    "                  (0: no simulated rank falls silent), speedup_vs_mpi,\n"
    "                  latency_us_by_rank; then the {\"bench\": \"sim\"} line\n";

static void print_results(const char *bench, int json, int per_rank)
{
    int P = sim.P, k = 0;
    double *by_rank = malloc(sizeof(double) * (size_t)P);
    if (!by_rank) exit(1);
    if (!json)
        printf("%-12s %10s %-14s %14s %7s %8s %12s %9s %9s\n", "mode", "bytes", "data_phase", "avg_latency_us", "nap",
               "members", "sent/round", "rounds", "vs_mpi");
    for (size_t bytes = S.min_bytes; bytes <= S.max_bytes; bytes *= 8, k++) {
        double mpi_latency = 0;
        for (int mi = 0; mi < S.nmodes; mi++) {
            const tool_mode_t *m = &S.modes[mi];
            double lat = 0, nap = 0, mem = 0, rounds = 0, sent = 0;
            for (int i = 0; i < P; i++) {
                by_rank[i] = S.lat[at(k, mi, i)] / S.iters;
                lat += by_rank[i];
                nap += S.nap[at(k, mi, i)] / S.iters;
                mem += S.members[at(k, mi, i)] / S.iters;
                rounds += S.rounds[at(k, mi, i)] / S.iters;
                sent += S.sent[at(k, mi, i)];
            }
            lat /= P;
            if (m->kind == M_MPI) mpi_latency = lat;
            double per_round = m->kind == M_MPI ? NAN : rounds > 0 ? sent / (rounds * S.iters) : 0;
            const char *phase = m->kind == M_MPI ? "mpi" : "messages";
            if (json) {
                tool_json_t j;
                tool_json_begin(&j);
                tool_json_str(&j, "bench", bench);
                tool_json_str(&j, "mode", m->name);
                tool_json_int(&j, "ranks", P);
                tool_json_int(&j, "bytes", (long long)bytes);
                tool_json_num(&j, "skew_us", S.skew_s * 1e6);
                tool_json_num(&j, "avg_latency_us", lat);
                tool_json_num(&j, "nap", nap / P);
                tool_json_num(&j, "members", mem / P);
                tool_json_str(&j, "data_phase", phase);
                tool_json_num(&j, "sent_bytes_per_round", per_round);
                tool_json_num(&j, "rounds_per_iter", rounds / P);
                if (m->kind != M_MPI) tool_json_num(&j, "left_out_rounds", 0); /* no simulated rank falls silent */
                if (mpi_latency > 0) tool_json_num(&j, "speedup_vs_mpi", mpi_latency / lat);
                tool_json_nums(&j, "latency_us_by_rank", by_rank, (size_t)P);
                tool_json_end(&j, stdout);
            } else {
                char ratio[16] = "-";
                if (mpi_latency > 0) snprintf(ratio, sizeof ratio, "%.2f", mpi_latency / lat);
                printf("%-12s %10zu %-14s %14.1f %7.2f %8.2f %12.0f %9.2f %9s\n", m->name, bytes, phase, lat, nap / P,
                       mem / P, isnan(per_round) ? 0 : per_round, rounds / P, ratio);
                if (per_rank) {
                    printf("# latency per rank (us):");
                    for (int i = 0; i < P; i++) printf(" %.1f", by_rank[i]);
                    printf("\n");
                }
            }
        }
        if (bytes > SIZE_MAX / 8) break;
    }
    free(by_rank);
}

int sim_cmd_skew(int argc, char **argv, int group)
{
    const char *prog = group ? "pcoll-sim group" : "pcoll-sim skew";
    sim_model_t m;
    sim_model_defaults(&m, SIM_CLUSTER);
    S.min_bytes = 64;
    S.max_bytes = (size_t)4 << 20;
    S.skew_s = 1e-3;
    S.iters = 64;
    S.warmup = 2;
    const char *modes = group ? "mpi,sync,solo,majority,group" : "mpi,sync,solo,majority";
    const char *trace = NULL;
    int json = 0, per_rank = group;
    static struct option opts[] = {{"modes", required_argument, 0, 'o'},   {"min-bytes", required_argument, 0, 'm'},
                                   {"max-bytes", required_argument, 0, 'M'}, {"skew-us", required_argument, 0, 's'},
                                   {"iters", required_argument, 0, 'i'},     {"warmup", required_argument, 0, 'w'},
                                   {"data-phase", required_argument, 0, 'd'}, {"per-rank", no_argument, 0, 'r'},
                                   {"json", no_argument, 0, 'j'},            {"trace", required_argument, 0, 't'},
                                   {"help", no_argument, 0, 'h'},            SIM_COMMON_OPTS,
                                   {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (sim_common_flag(prog, &m, c, optarg)) continue;
        switch (c) {
        case 'o': modes = optarg; break;
        case 'm': S.min_bytes = tool_flag_bytes(prog, "--min-bytes", optarg); break;
        case 'M': S.max_bytes = tool_flag_bytes(prog, "--max-bytes", optarg); break;
        case 's': S.skew_s = tool_flag_double(prog, "--skew-us", optarg, 0, 1e9) * 1e-6; break;
        case 'i': S.iters = (int)tool_flag_long(prog, "--iters", optarg, 1, 1000000); break;
        case 'w': S.warmup = (int)tool_flag_long(prog, "--warmup", optarg, 0, 1000); break;
        case 'd':
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "messages") != 0)
                tool_usage_error(prog, "--data-phase: \"%s\" is not auto or messages", optarg);
            break;
        case 'r': per_rank = 1; break;
        case 'j': json = 1; break;
        case 't': trace = optarg; break;
        case 'h':
            fputs(group ? group_help : skew_help, stdout);
            fputs(common_help, stdout);
            fputs(sim_common_help, stdout);
            return 0;
        default: tool_usage_error(prog, "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc) tool_usage_error(prog, "unexpected argument \"%s\"", argv[optind]);
    S.nmodes = tool_parse_modes(prog, modes, S.modes, MAX_MODES);
    tool_byte_range(prog, &S.min_bytes, S.max_bytes);
    if (S.min_bytes < 4) tool_usage_error(prog, "--min-bytes: at least one float (4 bytes)");
    sim_model_check(prog, &m);
    if (m.ranks_per_node != 1)
        tool_usage_error(prog, "--ranks-per-node: partial rounds are simulated with one rank per node (the message "
                               "backend); node-shared rounds are not simulated");
    for (size_t b = S.min_bytes; b <= S.max_bytes; b *= 8) {
        S.nsizes++;
        if (b > SIZE_MAX / 8) break;
    }
    size_t cells = (size_t)S.nsizes * MAX_MODES * (size_t)m.ranks;
    S.lat = calloc(cells, sizeof(double));
    S.nap = calloc(cells, sizeof(double));
    S.members = calloc(cells, sizeof(double));
    S.rounds = calloc(cells, sizeof(double));
    S.sent = calloc(cells, sizeof(double));
    objs = calloc((size_t)S.nsizes * MAX_MODES, sizeof *objs);
    if (!S.lat || !S.nap || !S.members || !S.rounds || !S.sent || !objs)
        tool_usage_error(prog, "out of memory for %d ranks", m.ranks);
    if (trace && !(S.trace = fopen(trace, "w"))) tool_usage_error(prog, "--trace: cannot write \"%s\"", trace);
    if (sim_setup(&argc, argv, &m) != 0) return 1;
    int k = 0;
    for (size_t b = S.min_bytes; b <= S.max_bytes; b *= 8, k++) {
        for (int mi = 0; mi < S.nmodes; mi++)
            if (S.modes[mi].kind == M_PARTIAL)
                obj_init(&objs[k * MAX_MODES + mi], &S.modes[mi].cfg, b / 4, 10000 + k * MAX_MODES + mi, S.trace);
        if (b > SIZE_MAX / 8) break;
    }
    if (!json)
        printf("# %s: %d ranks (%d nodes, %s, %.4g Gbit/s links), rank i sleeps i * %.0f us, %d iterations; latency "
               "averaged over ranks and iterations\n",
               prog, m.ranks, m.ranks / m.ranks_per_node, sim_platform_name(m.platform), m.link_bps / 1e9,
               S.skew_s * 1e6, S.iters);
    sim_run(app);
    print_results(group ? "group" : "skew", json, per_rank);
    if (S.trace) fclose(S.trace);
    sim_print_summary(group ? "group" : "skew", json);
    sim_teardown();
    return 0;
}
