/*
 * Blocking allreduces on the simulated ranks: the schedule src/algo builds
 * for a size, algorithm and group, without data, run by the rank's progress
 * actor while its app actor waits (pcoll_allreduce's path, and the stand-in
 * for MPI_Allreduce).
 */
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/shm_allreduce.h"
#include "sim.h"

/* The library's defaults (PCOLL_ALLREDUCE_*_BYTES, PCOLL_SHM_*_BYTES), as
 * a context without PCOLL_* variables has them. */
static const pc_config_t *lib_config(void)
{
    static pc_config_t cfg;
    static int made;
    if (!made) {
        pc_config_defaults(&cfg);
        made = 1;
    }
    return &cfg;
}

static pc_shm_sizes_t lib_shm_sizes(void)
{
    const pc_config_t *c = lib_config();
    return (pc_shm_sizes_t){c->shm_allreduce_bytes, c->shm_slice_bytes, c->shm_chunk_bytes};
}

size_t sim_small_bytes(void) { return lib_config()->small_bytes; }

pcoll_allreduce_algo_t sim_mpi_rule(size_t bytes, int n)
{
    if (bytes < 10000 || n <= 2) return PCOLL_ALGO_RECDBL;
    return (n & (n - 1)) == 0 ? PCOLL_ALGO_RABENSEIFNER : PCOLL_ALGO_RING;
}

pcoll_allreduce_algo_t sim_pcoll_rule(pcoll_allreduce_algo_t forced, size_t bytes, int n)
{
    const pc_config_t *c = lib_config();
    return pc_allreduce_choose(PC_USE_CALL, forced, PCOLL_ALGO_AUTO, c->direct_bytes, c->small_bytes, bytes, n);
}

pc_sched_t *sim_allreduce_sched(sim_rank_t *r, size_t bytes, pcoll_allreduce_algo_t algo, int n, int idx,
                                const int *ranks, int channel)
{
    pc_sched_t *s = NULL;
    pc_allreduce_spec_t sp = {n, idx, bytes / 4, PCOLL_FLOAT32, PCOLL_SUM, 0, 0, 0, 1};
    if (pc_allreduce_build(&sp, algo, &s) != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-sim: rank %d: building a %zu-byte schedule failed\n", r->rank, bytes);
        exit(1);
    }
    sim_sched_prepare(r, s, ranks, channel);
    return s;
}

static void finished(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    if (status != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-sim: a schedule failed: %s\n", pcoll_strerror(status));
        exit(1);
    }
    sim_call_done(arg);
}

static void start_here(sim_rank_t *r, void *arg)
{
    if (sim_sched_start(r, arg) != PCOLL_SUCCESS) {
        fprintf(stderr, "pcoll-sim: rank %d: a schedule did not start\n", r->rank);
        exit(1);
    }
}

void sim_allreduce_run(sim_rank_t *r, pc_sched_t *s)
{
    pc_sched_on_done(s, finished, r);
    sim_call(r, start_here, s);
}

/* ---- pcoll_allreduce's node-shared path (core/shm_allreduce.c) ----
 *
 *   per piece j of at most a slot (pc_shm_slot_bytes): node: K members
 *     reduce: the node's K parts of the piece   -> charged: K x slice bytes
 *     across: this member's slice (piece / K) with its column (the ranks
 *             of the same place on every node): a schedule from src/algo,
 *             started on the progress actor, PC_SHM_PIPELINE_DEPTH pieces
 *             in flight
 *     gather: wait for piece j - PC_SHM_PIPELINE_DEPTH + 1, copy the K
 *             slices out
 *   small messages (pc_shm_slice_shape says no): the latency path, one
 *   piece of the whole message, every member with its column
 *
 * The node-shared barriers are not simulated apart: their cost is in the
 * calibrated wake and message costs.
 */
typedef struct piece_run {
    sim_rank_t *r;
    pc_sched_t *s;
    int done, waited;
    size_t bytes;
} piece_run_t;

int sim_pcoll_takes_shm(pcoll_allreduce_algo_t forced, size_t bytes)
{
    const sim_model_t *m = &sim.model;
    int nodes = m->ranks / m->ranks_per_node, K = m->ranks_per_node;
    pc_shm_sizes_t z = lib_shm_sizes();
    if (forced != PCOLL_ALGO_AUTO || m->ranks < 2 || bytes > z.max_bytes) return 0;
    return pc_shm_blocking_shape(&z, bytes, K, nodes);
}

static void piece_done(pc_sched_t *s, int status, void *arg)
{
    (void)s;
    piece_run_t *p = arg;
    if (status != PCOLL_SUCCESS) exit(1);
    p->done = 1;
    if (p->waited) {
        p->waited = 0;
        sim_call_done(p->r);
    }
}

static void piece_start(sim_rank_t *r, void *arg)
{
    piece_run_t *p = arg;
    if (sim_sched_start(r, p->s) != PCOLL_SUCCESS) exit(1);
}

static void piece_wait(sim_rank_t *r, void *arg)
{
    piece_run_t *p = arg;
    if (p->done) sim_call_done(r);
    else p->waited = 1;
}

static void piece_begin(sim_rank_t *r, piece_run_t *p, size_t slice, int *column, int channel)
{
    const sim_model_t *m = &sim.model;
    int nodes = m->ranks / m->ranks_per_node;
    /* the node's parts added up: K slices read (the member's own and K-1) */
    sim_charge(r, (double)(slice * (size_t)m->ranks_per_node) / m->reduce_Bps);
    p->r = r;
    p->done = p->waited = 0;
    if (nodes == 1) {
        p->done = 1;
        return;
    }
    if (!p->s || p->bytes != slice) {
        if (p->s) pc_sched_free(p->s);
        p->s = sim_allreduce_sched(r, slice, sim_pcoll_rule(PCOLL_ALGO_AUTO, slice, nodes), nodes, r->node, column,
                                   channel);
        p->bytes = slice;
    }
    pc_sched_on_done(p->s, piece_done, p);
    sim_post(r, piece_start, p);
}

static void piece_end(sim_rank_t *r, piece_run_t *p, size_t piece)
{
    sim_call(r, piece_wait, p);
    /* the other members' slices copied out of node-shared memory */
    const sim_model_t *m = &sim.model;
    sim_charge(r, (double)piece * (double)(m->ranks_per_node - 1) / m->ranks_per_node / m->shm_Bps);
}

void sim_pcoll_shm_run(sim_rank_t *r, size_t bytes, int channel)
{
    const sim_model_t *m = &sim.model;
    int K = m->ranks_per_node, nodes = m->ranks / K;
    int column[nodes > 0 ? nodes : 1];
    for (int v = 0; v < nodes; v++) column[v] = v * K + r->rank % K;
    pc_shm_sizes_t z = lib_shm_sizes();
    int latency = !pc_shm_slice_shape(&z, bytes, K, nodes);
    size_t piece = latency ? bytes : pc_shm_slot_bytes(&z);
    size_t pieces = (bytes + piece - 1) / piece;
    piece_run_t run[PC_SHM_PIPELINE_DEPTH];
    memset(run, 0, sizeof run);
    size_t gathered = 0;
    for (size_t j = 0; j < pieces; j++) {
        size_t this = j + 1 < pieces ? piece : bytes - j * piece;
        size_t slice = latency ? this : (this + (size_t)K - 1) / (size_t)K;
        piece_begin(r, &run[j % PC_SHM_PIPELINE_DEPTH], slice, column, channel * 16 + (int)(j % PC_SHM_PIPELINE_DEPTH));
        while (j + 1 - gathered >= PC_SHM_PIPELINE_DEPTH) piece_end(r, &run[gathered++ % PC_SHM_PIPELINE_DEPTH], piece);
    }
    while (gathered < pieces) piece_end(r, &run[gathered++ % PC_SHM_PIPELINE_DEPTH], piece);
    for (int d = 0; d < PC_SHM_PIPELINE_DEPTH; d++)
        if (run[d].s) pc_sched_free(run[d].s);
}
