"""Context.shrink after a rank died: rank 1 kills itself with SIGKILL in the
middle of partial allreduces; every other rank gets pcoll.Error
(ERR_TIMEOUT), calls shrink(), and goes on with the others: an allreduce and
a partial object on the survivors' context give the right sums, and the old
context's objects refuse; a solo object on the survivors delivers every
contribution exactly once (its flush included).  Each survivor prints "SHRUNK"; run by
shrink_kill.sh under mpirun (with --mca orte_abort_on_non_zero_status 0) and
a hard timeout.  The survivors end with os._exit (MPI_Finalize could wait for
the dead)."""
import os
import signal
import sys

import numpy as np
from mpi4py import MPI

import pcoll

VICTIM = 1


def main():
    world = MPI.COMM_WORLD
    me, size = world.Get_rank(), world.Get_size()
    ctx = pcoll.Context()
    ctx.set_timeouts(0, 2)
    p = ctx.partial(4, dtype="int64", kind="majority")
    x = np.ones(4, dtype=np.int64)
    err = None
    for it in range(1000):
        if me == VICTIM and it == 5:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            ctx.allreduce(x.copy())
            p.allreduce(x.copy())
        except pcoll.Error as e:
            err = e
            break
    assert err is not None and err.status == pcoll.ERR_TIMEOUT, err
    comm, new = ctx.shrink()
    assert comm.Get_size() == size - 1 and new.size == size - 1, (comm.Get_size(), new.size)
    assert new.rank == (me if me < VICTIM else me - 1)
    try:
        p.allreduce(x.copy())
        raise AssertionError("the replaced context's object did not refuse")
    except pcoll.Error as e:
        assert e.status == pcoll.ERR_STATE, e
    y = np.array([me + 1], dtype=np.int64)
    new.allreduce(y)
    want = size * (size + 1) // 2 - (VICTIM + 1)
    assert y[0] == want, (y[0], want)
    q = new.partial(1, dtype="int64", kind="solo")
    total, calls = 0, 20
    for _ in range(calls):
        buf = np.ones(1, dtype=np.int64)
        q.allreduce(buf)
        total += int(buf[0])
    buf = np.zeros(1, dtype=np.int64)
    q.flush(buf)
    total += int(buf[0])
    assert total == calls * (size - 1), (total, calls * (size - 1))
    q.free()
    new.finalize()
    print("SHRUNK %d: %d survivors, now rank %d, allreduce %d, partial delivered %d" %
          (me, comm.Get_size(), comm.Get_rank(), y[0], total), flush=True)
    comm.Barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
