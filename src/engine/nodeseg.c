#include "nodeseg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../util/error.h"
#include "../util/log.h"

int pc_nodeseg_create(MPI_Comm comm, size_t bytes, int use, pc_nodeseg_t *seg)
{
    static atomic_uint made;
    int me = 0, ok = use && bytes > 0;
    memset(seg, 0, sizeof *seg);
    MPI_Comm_rank(comm, &me);
    char name[64] = "";
    int fd = -1;
    if (me == 0 && ok) {
        /* a fresh name: this process, a count, the clock (a name left by a
         * crashed job, or a process of another PID namespace, is skipped) */
        for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            snprintf(name, sizeof name, "/pcoll-%ld-%u-%lx", (long)getpid(), atomic_fetch_add(&made, 1),
                     (unsigned long)ts.tv_nsec ^ (unsigned long)ts.tv_sec);
            fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
            if (fd < 0 && errno != EEXIST) break;
        }
        /* the memory reserved now (a full /dev/shm is an error here, not a
         * SIGBUS at the first write later) */
        ok = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0 && posix_fallocate(fd, 0, (off_t)bytes) == 0;
        if (!ok) pc_log(PCOLL_LOG_INFO, "node-shared segment %s of %zu B: %s", name, bytes, strerror(errno));
        if (!ok && fd >= 0) shm_unlink(name);
        if (!ok) name[0] = '\0';
    }
    if (MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm) != MPI_SUCCESS) name[0] = '\0';
    ok = ok && name[0];
    if (ok && me != 0) {
        fd = shm_open(name, O_RDWR, 0600);
        ok = fd >= 0;
    }
    void *base = MAP_FAILED;
    if (ok) base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ok = ok && base != MAP_FAILED;
    if (fd >= 0) close(fd);
    int all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
    if (me == 0 && name[0]) shm_unlink(name); /* every member mapped it, or none will */
    if (!all) {
        if (base != MAP_FAILED) munmap(base, bytes);
        return PCOLL_ERR_LIMIT;
    }
    seg->base = base; /* zeroed by ftruncate */
    seg->bytes = bytes;
    return PCOLL_SUCCESS;
}

void pc_nodeseg_destroy(pc_nodeseg_t *seg)
{
    if (seg->base) munmap(seg->base, seg->bytes);
    memset(seg, 0, sizeof *seg);
}
