"""pcoll: collectives for data-parallel training that keeps going when some
workers are slow (eager-SGD's partial collectives, WAGMA-SGD's group rounds,
Partial Reduce / Ripples' dynamic groups, MG-WFBP's merged buckets), over MPI.

    import pcoll
    ctx = pcoll.Context()                  # collective over mpi4py's COMM_WORLD
    ctx.allreduce(array)                   # in place, sum over every rank
    p = ctx.partial(n, kind="solo")        # eager-SGD: fast ranks never wait
    info = p.allreduce(grad)               # the sum of every round since the last call
    p.flush(grad); p.free()
    ctx.finalize()                         # or at exit, automatically

Buffers are anything with the buffer protocol (numpy arrays) or CPU torch
tensors: the library works on their memory, no copy.  Launch with
`mpirun -np N python3 script.py`.  `pcoll.torch` wraps PyTorch optimizers.
The C API this mirrors is include/pcoll.h; docs/design.md says what each call
does.
"""
import atexit as _atexit
import contextlib as _contextlib
import sys as _sys

# mpi4py initializes MPI (with MPI_THREAD_MULTIPLE, which pcoll needs) and
# makes libmpi's symbols visible to Open MPI's plugins; import it first.
from mpi4py import MPI as _MPI

from . import _pcoll
from ._pcoll import (AVG, ERR_ARG, ERR_COUNT, ERR_DTYPE, ERR_GROUP, ERR_INTERNAL, ERR_LIMIT, ERR_MPI, ERR_NOMEM,
                     ERR_NULL, ERR_OP, ERR_STATE, ERR_THREAD_LEVEL, ERR_TIMEOUT, ERR_CONFIG, FLOAT32, FLOAT64,
                     INT32, INT64, SUCCESS, SUM, CostModel, Error, Fusion, FusionPlan, Partial, PartialInfo, Plan,
                     PReduce, PReduceInfo, Request, dtype_size, get_log_level, last_error, set_log_level, strerror)

__version__ = "%d.%d.%d" % (_pcoll.VERSION_MAJOR, _pcoll.VERSION_MINOR, _pcoll.VERSION_PATCH)

__all__ = ["Context", "init", "Error", "Request", "Plan", "Partial", "PartialInfo", "PReduce", "PReduceInfo",
           "CostModel", "FusionPlan", "Fusion", "strerror", "last_error", "set_log_level", "get_log_level",
           "dtype_size", "SUM", "AVG", "FLOAT32", "FLOAT64", "INT32", "INT64"]

# Contexts that are not finalized yet: kept alive here, because finalize is
# collective and must not happen whenever the garbage collector runs.
_live = []
# Contexts pcoll_shrink replaced: kept with their objects and requests, whose
# buffers MPI may still hold.
_replaced = []


class Context(_pcoll.Context):
    """A pcoll context over an mpi4py communicator (default COMM_WORLD).

    Collective: every rank of comm creates it.  finalize() (collective) ends
    it; contexts still open at the end of the program are finalized then.
    """

    def __init__(self, comm=None):
        if comm is None:
            comm = _MPI.COMM_WORLD
        if not hasattr(comm, "py2f"):
            raise TypeError("comm must be an mpi4py communicator, not %s" % type(comm).__name__)
        super().__init__(comm.py2f(), comm)
        _live.append(self)

    def finalize(self):
        """Collective: completes what is in flight, closes open objects, finalizes."""
        try:
            super().finalize()
        finally:
            if self in _live:
                _live.remove(self)

    def shrink(self):
        """After ranks died: collective over the live ranks, each calling it
        after its own timeout (set_timeouts) named the dead.  Returns
        (comm, ctx): an mpi4py communicator of the survivors (the old ranks in
        increasing order) and a Context on it.  This context is replaced: its
        calls and its objects' calls fail (pcoll.Error, ERR_STATE), and it is
        kept until the end of the program.  Raises pcoll.Error (ERR_STATE)
        where the survivors are not more than half of the ranks: that rank
        must not go on.  pcoll_shrink in include/pcoll.h has the details; a
        job that lost ranks should end with os._exit once its output is
        written (MPI_Finalize can wait for the dead)."""
        handle, ctx = super().shrink()
        comm = _MPI.Comm.f2py(handle)
        if self in _live:
            _live.remove(self)
        _replaced.append(self)
        _live.append(ctx)
        return comm, ctx

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finalize()

    @_contextlib.contextmanager
    def phase(self, name):
        """with ctx.phase("forward"): ... marks an application phase in the
        timeline (docs/timeline.md); costs next to nothing unless one records
        (timeline_start, or PCOLL_TIMELINE)."""
        self.mark(name, True)
        try:
            yield
        finally:
            self.mark(name, False)


def init(comm=None):
    """A new Context over comm (default: mpi4py's COMM_WORLD)."""
    return Context(comm)


# ---- the end of the program ----

_uncaught = []


def _note_uncaught(etype, value, tb, _previous=_sys.excepthook):
    _uncaught.append(etype)
    _previous(etype, value, tb)


_sys.excepthook = _note_uncaught


@_atexit.register
def _finalize_all():
    """Contexts still open are finalized before mpi4py finalizes MPI (a
    progress thread left running after MPI_Finalize crashes the process).
    After an uncaught exception the other ranks may be waiting for this one
    in a collective call that it will never make: the job is aborted, as
    `python -m mpi4py` does, rather than left to hang."""
    if not _live:
        return
    if _uncaught and _MPI.COMM_WORLD.Get_size() > 1:
        _sys.stderr.write("pcoll: rank %d ends with an uncaught exception; aborting the MPI job so that the "
                          "other ranks do not wait for it\n" % _MPI.COMM_WORLD.Get_rank())
        _sys.stderr.flush()
        _MPI.COMM_WORLD.Abort(1)
    while _live:
        ctx = _live[-1]
        try:
            ctx.finalize()
        except Error as e:
            _sys.stderr.write("pcoll: finalizing a context at exit: %s\n" % e)
            if ctx in _live:
                _live.remove(ctx)
