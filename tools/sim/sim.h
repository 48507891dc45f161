/*
 * pcoll-sim: pcoll's own schedules, rules and planners on SimGrid's S4U
 * engine, at rank counts this machine cannot run (docs/sim.md).
 *
 *   command (cmd_*.c)          app actor of rank r    progress actor of rank r
 *   -----------------          -------------------    ------------------------
 *   builds schedules with      sleeps its compute /   posts messages as S4U
 *   src/algo, rules from       skew, calls into its   comms of the real sizes,
 *   src/partial, src/groups,   progress actor (the    charges data steps and
 *   src/fusion                 doorbell), waits       message overheads as time,
 *                                                     runs src/engine's scheduler
 *
 * Platform (platform.c): nodes of K ranks on one switch, a fat tree or the
 * emulated cluster's shape, generated as SimGrid XML.  Model (model.c): the
 * factors calibrate.c fits to pcoll-bench JSON of the emulated cluster.
 */
#ifndef PC_SIM_H
#define PC_SIM_H

#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/sched.h"

/* ---- the model (model.c) ---- */

typedef enum { SIM_SWITCH, SIM_FATTREE, SIM_CLUSTER } sim_platform_kind_t;

typedef struct sim_model {
    sim_platform_kind_t platform;
    int ranks, ranks_per_node;
    double link_bps;    /* each node's link, each way, bits per second */
    double link_lat_s;  /* one way, per link */
    double bw_factor;   /* share of the link rate one stream reaches */
    double msg_cost_s;  /* CPU time per message at each end (progress actor) */
    double wake_s;      /* doorbell: from a call to its progress actor */
    double reduce_Bps;  /* bytes per second a data step (reduce, copy) runs at */
    double shm_Bps;     /* node-shared memory between ranks of one node */
    double shm_lat_s;
    double rendezvous_bytes; /* messages above it wait for their receive (MPI's
                                eager limit); 0: every message eager */
    double burst_bytes; /* the cluster's tbf buckets (world.c); 0: none */
    double loss_factor; /* bytes beyond a full tbf queue are sent 1 + this times */
    double poll_load;   /* cluster: the share of a core each rank's idle
                           progress thread takes polling MPI (every
                           PCOLL_POLL_MAX_US across nodes); the machine's
                           work runs on what the ranks leave */
    double backbone_bps; /* switch and cluster: a capacity all nodes' traffic
                            shares, bits per second; 0: none (ideal switch) */
    int cores;          /* CPUs per node; on the cluster platform, of the one
                           machine every node runs on */
} sim_model_t;

/* Defaults for a platform (the emulated cluster's calibrated factors for
 * SIM_CLUSTER when a calibration file is given, else documented guesses). */
void sim_model_defaults(sim_model_t *m, sim_platform_kind_t kind);
/* Reads the factors a `pcoll-sim calibrate` wrote (JSON); returns 0, or -1
 * with a message in err. */
int sim_model_load(sim_model_t *m, const char *path, char *err, size_t errlen);
/* The factors as one JSON object's fields (for files and --json lines). */
void sim_model_print(const sim_model_t *m, FILE *out);
const char *sim_platform_name(sim_platform_kind_t k);

/* Flags every command takes (--ranks, --ranks-per-node, --platform,
 * --link-rate, --latency, --model FILE, model factors): parsed by
 * sim_common_flag; returns 1 if the flag was one of them. */
int sim_common_flag(const char *prog, sim_model_t *m, int opt, const char *arg);
/* getopt_long entries of the common flags (ids >= 1000), terminated. */
extern const char *sim_common_help;
#define SIM_COMMON_OPTS                                                                                              \
    {"ranks", required_argument, 0, 1000}, {"ranks-per-node", required_argument, 0, 1001},                            \
        {"platform", required_argument, 0, 1002}, {"link-rate", required_argument, 0, 1003},                          \
        {"latency", required_argument, 0, 1004}, {"model", required_argument, 0, 1005},                               \
        {"msg-cost", required_argument, 0, 1006}, {"bw-factor", required_argument, 0, 1007},                          \
        {"reduce-rate", required_argument, 0, 1008}, {"wake", required_argument, 0, 1009},                           \
        {"shm-rate", required_argument, 0, 1010}, {"burst", required_argument, 0, 1011},                             \
        {"loss-factor", required_argument, 0, 1012}, {"cores", required_argument, 0, 1013},                           \
        {"backbone-rate", required_argument, 0, 1014}, {"poll-load", required_argument, 0, 1015}
/* The cluster's tbf bucket for a link rate (scripts/cluster.sh's rule). */
double sim_cluster_burst(double link_bps);
/* Fills what depends on other factors (the cluster's burst from its rate);
 * sim_setup calls it. */
void sim_model_finish(sim_model_t *m);
/* Checks the model after the flags (ranks divisible by K, ...); exits 2 with
 * a message naming the flag. */
void sim_model_check(const char *prog, const sim_model_t *m);

/* ---- the simulated world (world.c) ---- */

typedef struct sim_rank sim_rank_t;
typedef void (*sim_fn)(sim_rank_t *r, void *arg);

/* One pending message of a progress actor: what to do when it completes. */
typedef struct sim_pending {
    sg_comm_t comm;
    void (*done)(sim_rank_t *r, struct sim_pending *p);
    pc_sched_t *sched; /* schedule message: its step */
    int step;
    void *payload; /* received control payload */
    void *arg;
} sim_pending_t;

/* A FIFO of fixed-size entries (world.c). */
typedef struct sim_fifo {
    char *buf;
    size_t esize;
    int head, tail, cap;
} sim_fifo_t;

struct sim_local {
    pc_sched_t *s;
    int step;
};

struct sim_req {
    sim_fn fn;
    void *arg;
};

struct sim_rank {
    int rank, node;
    sg_host_t host;
    sg_host_t cpu; /* where its CPU time runs (sim_charge) */
    sg_actor_t app, progress;
    /* the progress actor's state */
    sim_pending_t **pend;
    sg_comm_t *comms;
    int npend, cappend;
    sim_fifo_t localq; /* struct sim_local: data steps to charge */
    sim_fifo_t reqs;   /* struct sim_req: calls posted by the app actor */
    int bell_pending;
    pc_issuer_t issuer;
    sg_sem_t app_sem; /* the app waits for its calls here */
    double busy_s;    /* progress actor's charged CPU time */
    void *barrier_payload;
    void *cmd;        /* the command's per-rank state */
};

typedef struct sim_world {
    sim_model_t model;
    int P;
    sim_rank_t *ranks;
    double wall_s; /* host time the simulation took */
    int cpu_shared; /* more busy actors than cores can meet (sim_charge) */
    long messages; /* messages sent */
    long long bytes_sent;
} sim_world_t;

extern sim_world_t sim;

/* Sets up SimGrid with the platform of m (argv: for SimGrid's own --cfg
 * flags). Returns 0, or -1 with a message on stderr. */
int sim_setup(int *argc, char **argv, const sim_model_t *m);
/* Starts every rank's progress actor and an app actor running main(rank),
 * runs the simulation to its end, and returns its simulated duration. */
double sim_run(void (*app_main)(sim_rank_t *r));
void sim_teardown(void);
/* Every app actor waits here for the others (no simulated time). */
void sim_barrier(void);
/* From the app actor: the benchmarks' MPI_Barrier between repetitions: on
 * the cluster platform as messages (they take time, during which the tbf
 * buckets refill, and use the links), elsewhere sim_barrier. */
void sim_mpi_barrier(sim_rank_t *r);

/* Simulated time now, seconds. */
static inline double sim_now(void) { return simgrid_get_clock(); }

/* From the app actor: runs fn(r, arg) on r's progress actor (the doorbell:
 * wakes it after model.wake_s); fn, or what it starts, calls
 * sim_call_done(r) to release the app; sim_call waits for that. */
void sim_call(sim_rank_t *r, sim_fn fn, void *arg);
void sim_call_done(sim_rank_t *r);
/* From the app actor: only queues fn (the progress actor runs it), no wait. */
void sim_post(sim_rank_t *r, sim_fn fn, void *arg);

/* Message channels: a channel id keeps one object's messages apart
 * from another's.  Schedules: binds the group map and the channel, and makes
 * the schedule's receives eager (model.rendezvous_bytes) before its first run. */
void sim_sched_prepare(sim_rank_t *r, pc_sched_t *s, const int *group_ranks, int channel);
/* Starts a schedule on r's progress actor (called there); on_done as usual. */
int sim_sched_start(sim_rank_t *r, pc_sched_t *s);

/* Control messages (activations, requests): `bytes` simulated, payload
 * handed to the receiver's handler.  Receives on (channel, tag) from any
 * rank: one posted receive per channel and tag, re-posted by the caller. */
void sim_ctl_send(sim_rank_t *r, int dst, int channel, int tag, void *payload, long bytes);
void sim_ctl_recv(sim_rank_t *r, int channel, int tag, void (*done)(sim_rank_t *r, sim_pending_t *p), void *arg);
/* Charges CPU time to the calling actor (progress or app): an execution on
 * the rank's CPU, shared with the other ranks there. */
void sim_charge(sim_rank_t *r, double seconds);
#define SIM_FLOPS 1e9 /* the platform's CPU speed: 1 s of CPU = 1e9 flops */

/* ---- blocking allreduces (calls.c) ---- */
#include "algo/allreduce.h"
/* Open MPI 4.1's allreduce rule as pcoll schedules (a stand-in for
 * MPI_Allreduce): recursive doubling below 10000 bytes, then Rabenseifner
 * for a power of two, ring otherwise. */
pcoll_allreduce_algo_t sim_mpi_rule(size_t bytes, int n);
/* pcoll_allreduce's message algorithm with the context's defaults. */
pcoll_allreduce_algo_t sim_pcoll_rule(pcoll_allreduce_algo_t forced, size_t bytes, int n);
/* The default PCOLL_ALLREDUCE_SMALL_BYTES (pc_config_defaults). */
size_t sim_small_bytes(void);
/* The schedule without data of an allreduce of `bytes` (float32) over n
 * members, this rank the idx-th (ranks: index -> rank, NULL for 0..n-1),
 * prepared on `channel`. */
pc_sched_t *sim_allreduce_sched(sim_rank_t *r, size_t bytes, pcoll_allreduce_algo_t algo, int n, int idx,
                                const int *ranks, int channel);
/* From the app actor: runs s on the progress actor and waits for it. */
void sim_allreduce_run(sim_rank_t *r, pc_sched_t *s);
/* 1 if a blocking pcoll_allreduce of every rank takes the node-shared path
 * (core/shm_allreduce.h) on the simulated platform, by the library's own
 * shape rules and default sizes. */
int sim_pcoll_takes_shm(pcoll_allreduce_algo_t forced, size_t bytes);
/* From the app actor: that path (calls.c), its parts across nodes on
 * channels channel * 16 + 0..7. */
void sim_pcoll_shm_run(sim_rank_t *r, size_t bytes, int channel);

/* ---- output ---- */
/* Peak resident memory of this process, MiB. */
double sim_peak_rss_mib(void);
/* The run's last line: wall time, memory, messages and the model (JSON:
 * {"bench": "sim", ...}). */
void sim_print_summary(const char *command, int json);
/* Writes the platform of m as SimGrid XML (platform.c); 0 or -1. */
int sim_platform_write(const char *path, const sim_model_t *m);

/* ---- commands ---- */
int sim_cmd_allreduce(int argc, char **argv);
int sim_cmd_skew(int argc, char **argv, int group);
int sim_cmd_preduce(int argc, char **argv);
int sim_cmd_fusion(int argc, char **argv);
int sim_cmd_train(int argc, char **argv);
int sim_cmd_calibrate(int argc, char **argv);

#endif
