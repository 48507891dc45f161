#include "nodemem.h"

#include <stdlib.h>
#include <string.h>

int pc_nodemem_create(MPI_Comm comm, size_t bytes, int use, pc_nodemem_t *m)
{
    int size;
    MPI_Comm_size(comm, &size);
    memset(m, 0, sizeof *m);
    m->win = MPI_WIN_NULL;
    m->node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &m->node) != MPI_SUCCESS) return -1;
    int ok = use && (m->seg = calloc((size_t)size, sizeof *m->seg)) != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, m->node); /* agree before allocating */
    void *base = NULL;
    if (ok) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "alloc_shared_noncontig", "true"); /* each segment near its owner */
        ok = MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, m->node, &base, &m->win) == MPI_SUCCESS;
        MPI_Info_free(&info);
        if (!ok) m->win = MPI_WIN_NULL;
    }
    if (ok) {
        MPI_Comm_size(m->node, &m->local_size);
        MPI_Group g_comm, g_node;
        MPI_Comm_group(comm, &g_comm);
        MPI_Comm_group(m->node, &g_node);
        for (int lr = 0; lr < m->local_size && ok; lr++) {
            MPI_Aint sz;
            int disp, cr = MPI_UNDEFINED;
            void *ptr = NULL;
            ok = MPI_Win_shared_query(m->win, lr, &sz, &disp, &ptr) == MPI_SUCCESS && (ptr || sz == 0);
            MPI_Group_translate_ranks(g_node, 1, &lr, g_comm, &cr);
            if (ok && cr != MPI_UNDEFINED) m->seg[cr] = ptr;
        }
        MPI_Group_free(&g_comm);
        MPI_Group_free(&g_node);
        if (ok && bytes) memset(base, 0, bytes);
    }
    /* agree again (the window may not work everywhere); doubles as the
     * barrier after which every segment is initialized */
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, m->node);
    if (!all) {
        pc_nodemem_destroy(m);
        return -1;
    }
    return 0;
}

void pc_nodemem_destroy(pc_nodemem_t *m)
{
    /* every rank of the node is done with every segment before any goes */
    if (m->node != MPI_COMM_NULL) MPI_Barrier(m->node);
    if (m->win != MPI_WIN_NULL) MPI_Win_free(&m->win);
    if (m->node != MPI_COMM_NULL) MPI_Comm_free(&m->node);
    free(m->seg);
    memset(m, 0, sizeof *m);
    m->win = MPI_WIN_NULL;
    m->node = MPI_COMM_NULL;
}
