#include "nodemem.h"

#include <stdlib.h>
#include <string.h>

#include "../util/log.h"

/* logs a failed MPI call here (the caller only learns "no shared memory",
 * and falls back to messages) */
static int ok_mpi(int rc, const char *what)
{
    if (rc == MPI_SUCCESS) return 1;
    char why[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, why, &len) != MPI_SUCCESS) why[0] = '\0';
    pc_log(PCOLL_LOG_INFO, "node-shared memory: %s failed: %s", what, why);
    return 0;
}

int pc_nodemem_create(MPI_Comm comm, MPI_Comm node, size_t bytes, int use, pc_nodemem_t *m)
{
    int size;
    memset(m, 0, sizeof *m);
    m->win = MPI_WIN_NULL;
    m->node = node;
    if (!ok_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size")) return PCOLL_ERR_LIMIT;
    int ok = use && (m->seg = calloc((size_t)size, sizeof *m->seg)) != NULL;
    /* agree before allocating */
    if (!ok_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, m->node), "MPI_Allreduce")) ok = 0;
    void *base = NULL;
    if (ok) {
        MPI_Info info;
        ok = ok_mpi(MPI_Info_create(&info), "MPI_Info_create");
        if (ok) {
            /* each segment near its owner */
            ok_mpi(MPI_Info_set(info, "alloc_shared_noncontig", "true"), "MPI_Info_set");
            ok = ok_mpi(MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, m->node, &base, &m->win),
                        "MPI_Win_allocate_shared");
            MPI_Info_free(&info);
        }
        if (!ok) m->win = MPI_WIN_NULL;
    }
    if (ok) ok = ok_mpi(MPI_Comm_size(m->node, &m->local_size), "MPI_Comm_size");
    if (ok) {
        MPI_Group g_comm = MPI_GROUP_NULL, g_node = MPI_GROUP_NULL;
        ok = ok_mpi(MPI_Comm_group(comm, &g_comm), "MPI_Comm_group") &&
             ok_mpi(MPI_Comm_group(m->node, &g_node), "MPI_Comm_group");
        for (int lr = 0; lr < m->local_size && ok; lr++) {
            MPI_Aint sz;
            int disp, cr = MPI_UNDEFINED;
            void *ptr = NULL;
            ok = ok_mpi(MPI_Win_shared_query(m->win, lr, &sz, &disp, &ptr), "MPI_Win_shared_query") &&
                 (ptr || sz == 0) &&
                 ok_mpi(MPI_Group_translate_ranks(g_node, 1, &lr, g_comm, &cr), "MPI_Group_translate_ranks");
            if (ok && cr != MPI_UNDEFINED) m->seg[cr] = ptr;
        }
        if (g_comm != MPI_GROUP_NULL) MPI_Group_free(&g_comm);
        if (g_node != MPI_GROUP_NULL) MPI_Group_free(&g_node);
        if (ok && bytes) memset(base, 0, bytes);
    }
    /* agree again (the window may not work everywhere); doubles as the
     * barrier after which every segment is initialized */
    int all = 0;
    if (!ok_mpi(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, m->node), "MPI_Allreduce")) all = 0;
    if (!all) {
        pc_nodemem_destroy(m);
        return PCOLL_ERR_LIMIT;
    }
    return PCOLL_SUCCESS;
}

void pc_nodemem_destroy(pc_nodemem_t *m)
{
    /* every rank of the node is done with every segment before any goes */
    if (m->node != MPI_COMM_NULL) ok_mpi(MPI_Barrier(m->node), "MPI_Barrier");
    if (m->win != MPI_WIN_NULL) ok_mpi(MPI_Win_free(&m->win), "MPI_Win_free");
    free(m->seg);
    memset(m, 0, sizeof *m);
    m->win = MPI_WIN_NULL;
    m->node = MPI_COMM_NULL;
}
