#include "shm_group.h"

#include <stdlib.h>
#include <string.h>

#include "../engine/nodebar.h"
#include "../engine/nodeseg.h"
#include "shm_allreduce.h"

#define LINE 64

struct pc_shm_group {
    pc_nodeseg_t seg;
    pc_nodebar_t bar;
    _Atomic uint64_t **arrived; /* member i's mark */
    char **slot0;               /* member i's slot 0 (slot 1 follows) */
    int *ranks;                 /* member -> rank */
    size_t stride;              /* bytes per slot */
    uint64_t uses, barriers;    /* so far */
    int uses_per_run, barriers_per_run;
};

static size_t up(size_t b) { return (b + LINE - 1) / LINE * LINE; }

int pc_shm_group_takes(const pcoll_t *ctx, const int *group, int n, size_t count, pcoll_dtype_t dtype,
                       pc_algo_use_t use)
{
    size_t es = pcoll_dtype_size(dtype);
    if (es == 0 || count > ctx->shm_sizes.max_bytes / es || !pc_shm_allowed(ctx, n, count * es, use == PC_USE_CALL))
        return 0;
    int node = ctx->nodes.node_of[group ? group[0] : 0];
    for (int i = 0; i < n; i++) {
        int r = group ? group[i] : i;
        if (ctx->nodes.node_of[r] != node || !pc_engine_can_kick(ctx->engine, r)) return 0;
    }
    return 1;
}

static void destroy(pc_shm_group_t *g)
{
    if (!g) return;
    pc_nodeseg_destroy(&g->seg);
    free(g->arrived);
    free(g->slot0);
    free(g->ranks);
    free(g);
}

void pc_shm_group_open(pcoll_t *ctx, const int *group, int n, int me, size_t count, pcoll_dtype_t dtype, int want,
                       pc_shm_group_t **out)
{
    *out = NULL;
    if (!want) return; /* the same at every member: nobody opens */
    size_t piece;
    int slice;
    pc_shm_shape(ctx, count, dtype, n, 1, &piece, &slice);
    size_t stride = up((piece < count ? piece : count) * pcoll_dtype_size(dtype)); /* a small message: its size */
    size_t member = LINE + 2 * stride;
    pc_shm_group_t *g = calloc(1, sizeof *g);
    if (g) {
        g->arrived = calloc((size_t)n, sizeof *g->arrived);
        g->slot0 = calloc((size_t)n, sizeof *g->slot0);
        g->ranks = malloc(sizeof(int) * (size_t)n);
    }
    int ok = g && g->arrived && g->slot0 && g->ranks;
    /* the members' own communicator (collective over the members only; a
     * tag of the member list keeps plan inits of other groups apart) */
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Group all, members;
    MPI_Comm_group(ctx->comm, &all);
    if (group) MPI_Group_incl(all, n, group, &members);
    else MPI_Comm_group(ctx->comm, &members);
    unsigned tag = 2166136261u;
    for (int i = 0; i < n; i++) tag = (tag ^ (unsigned)(group ? group[i] : i)) * 16777619u;
    if (MPI_Comm_create_group(ctx->comm, members, (int)(tag % 32768u), &comm) != MPI_SUCCESS) comm = MPI_COMM_NULL;
    MPI_Group_free(&members);
    MPI_Group_free(&all);
    /* a member without the communicator cannot take part: the others would
     * wait for it in the segment's creation (MPI reports such failures
     * alike at every member in practice) */
    pc_nodeseg_t seg = {0};
    int rc = comm != MPI_COMM_NULL ? pc_nodeseg_create(comm, LINE + (size_t)n * member, ok, &seg) : PCOLL_ERR_LIMIT;
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    if (rc != PCOLL_SUCCESS) { /* at every member: messages serve the plan */
        destroy(g);
        return;
    }
    g->seg = seg;
    char *base = seg.base;
    for (int i = 0; i < n; i++) {
        g->arrived[i] = (_Atomic uint64_t *)(base + LINE + (size_t)i * member);
        g->slot0[i] = base + LINE + (size_t)i * member + LINE;
        g->ranks[i] = group ? group[i] : i;
    }
    g->stride = stride;
    pc_allreduce_spec_t shape = {.count = count, .shm_piece = piece, .shm_slice = slice};
    g->barriers_per_run = pc_shm_barriers(&shape);
    g->uses_per_run = (int)((count + piece - 1) / piece);
    g->bar = (pc_nodebar_t){(_Atomic uint64_t *)base, g->arrived, g->ranks, n, me, 0};
    *out = g;
}

void pc_shm_group_bind(pc_shm_group_t *g, pc_sched_t *s)
{
    int flip = (int)(g->uses & 1);
    for (int i = 0; i < g->bar.n; i++)
        for (int q = 0; q < 2; q++) pc_sched_bind(s, pc_shm_slot_id(i, q), g->slot0[i] + (size_t)((q + flip) & 1) * g->stride);
    g->bar.base = g->barriers;
    pc_sched_bind_barrier(s, &g->bar);
    g->barriers += (uint64_t)g->barriers_per_run;
    g->uses += (uint64_t)g->uses_per_run;
}

void pc_shm_group_close(pc_shm_group_t *g) { destroy(g); }
