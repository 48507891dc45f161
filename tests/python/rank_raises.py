"""A rank that raises in the middle of training with pcoll.torch: the others
fail with pcoll.Error (ERR_TIMEOUT, naming it) after PCOLL_TIMEOUT_S, never
hang; then every rank ends cleanly.  Run under mpirun with PCOLL_TIMEOUT_S
set (3 s in the test); prints one line per rank and exits 1 if a rank saw
something else."""
import sys
import time

import torch
import torch.nn.functional as F
from mpi4py import MPI

import pcoll
import pcoll.torch as pt

VICTIM, FAIL_AT = 1, 4


def main():
    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    ctx = pt.init()
    warn, timeout = ctx.timeouts
    assert timeout > 0, "set PCOLL_TIMEOUT_S"
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(20, 50), torch.nn.ReLU(), torch.nn.Linear(50, 3))
    opt = pt.SyncOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), m, profile_steps=2,
                           cost_model=pcoll.CostModel(20.0, 0.001))
    outcome = "finished"
    t = None
    try:
        for step in range(10):
            opt.zero_grad()
            F.cross_entropy(m(torch.randn(4, 20)), torch.randint(0, 3, (4,))).backward()
            if me == VICTIM and step == FAIL_AT:
                raise RuntimeError("injected failure in the training loop")
            t = time.monotonic()
            opt.step()
    except RuntimeError as e:
        outcome = "raised: %s" % e
    except pcoll.Error as e:
        waited = time.monotonic() - t
        names = "rank %d" % VICTIM in str(e)
        outcome = "%s after %.1f s%s: %s" % (e.status_name, waited, " naming the victim" if names else "", e)
        ok = e.status == pcoll.ERR_TIMEOUT and names and waited < timeout + 2.5
        outcome = ("SURVIVOR-OK " if ok else "SURVIVOR-BAD ") + outcome
    print("rank %d: %s" % (me, outcome), flush=True)
    # the victim stays (in MPI) until every rank has its outcome, then
    # every rank ends: nothing in flight is waited for forever
    results = comm.allgather(outcome)
    ctx.finalize()
    if me == 0:
        bad = [r for i, r in enumerate(results) if i != VICTIM and not r.startswith("SURVIVOR-OK")]
        print("rank_raises: %s" % ("FAILED: " + "; ".join(bad) if bad else "passed: every other rank failed with "
                                   "ERR_TIMEOUT naming rank %d, and every rank finalized" % VICTIM), flush=True)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
