#!/usr/bin/env python3
"""Time per training step (forward, backward, exchange, SGD step) of
ResNet-18 and the CNN on synthetic batches: PyTorch DDP over gloo (its
default 25 MB buckets) against pcoll.torch.SyncOptimizer with each fusion
strategy, measured in the same run.

    mpirun -np 4 python3 examples/torch/bench_step.py --models cnn,resnet18 --repeats 3 --json steps.json

Each repeat runs every variant in turn (so that a slow moment of the machine
hits them alike); a variant's figure in a repeat is the median over its
timed steps of the slowest rank's step; the table gives the median over the
repeats and the ratio to DDP's.  SyncOptimizer's first steps profile the
backward pass and calibrate its cost model (not timed: --warmup covers them).
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import common


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="cnn,resnet18", help="comma-separated: cnn, resnet18 (default both)")
    ap.add_argument("--variants", default="ddp,optimal,mgwfbp,wfbp,single,fixed:25M",
                    help="ddp and SyncOptimizer fusion strategies (default %(default)s)")
    ap.add_argument("--batch", type=int, default=32, help="per rank (default 32)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per variant and repeat (default 20)")
    ap.add_argument("--warmup", type=int, default=8, help="untimed steps first (default 8; >= 7 for the profile)")
    ap.add_argument("--repeats", type=int, default=3, help="default 3")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    ap.add_argument("--json", help="write one object per (model, variant) here (rank 0)")
    args = ap.parse_args(argv)
    args.models = args.models.split(",")
    args.variants = args.variants.split(",")
    for m in args.models:
        if m not in ("cnn", "resnet18"):
            ap.error("--models: %r is not cnn or resnet18" % m)
    if args.steps < 1 or args.repeats < 1 or args.warmup < 7:
        ap.error("--steps and --repeats must be >= 1, --warmup >= 7 (SyncOptimizer profiles 5 steps)")
    return args


def run(args, comm, model_name, variant):
    """Median over the timed steps of the slowest rank's step (seconds), and
    what the variant reports."""
    import pcoll.torch as pt
    me = comm.Get_rank()
    model = common.make_model(model_name, seed=1)
    g = torch.Generator().manual_seed(1000 + me)
    x = torch.randn(args.batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)
    sgd = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    info = {}
    if variant == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model)
        opt = sgd
    else:
        net = model
        pt.broadcast_parameters(model)
        opt = pt.SyncOptimizer(sgd, model, fusion=variant)
    times = []
    for k in range(args.warmup + args.steps):
        comm.Barrier()
        t = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t)
    if variant != "ddp":
        info = {"buckets": opt.plan.nbuckets, "predicted_step_ms": opt.plan.iter_us / 1e3,
                "model_a_us": opt.cost_model.a_us, "model_b_us": opt.cost_model.b_us}
        opt.close()
    slowest = [max(ts) for ts in zip(*comm.allgather(times[args.warmup:]))]
    return statistics.median(slowest), info


def main(argv=None):
    args = parse_args(argv)
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(args.threads)
    import pcoll.torch as pt
    pt.init()
    if "ddp" in args.variants:
        common.init_ddp(comm)
    results = {}
    for r in range(args.repeats):
        for m in args.models:
            for v in args.variants:
                s, info = run(args, comm, m, v)
                results.setdefault((m, v), ([], info))[0].append(s)
    if me == 0:
        rows = []
        print("# bench_step: %d ranks, batch %d per rank, %d timed steps x %d repeats (median of the medians of "
              "the slowest rank's step)" % (P, args.batch, args.steps, args.repeats))
        print("%-9s %-12s %10s %9s %8s %12s" % ("model", "variant", "step_ms", "vs_ddp", "buckets", "planned_ms"))
        for m in args.models:
            ddp = results.get((m, "ddp"))
            ddp_ms = 1e3 * statistics.median(ddp[0]) if ddp else float("nan")
            for v in args.variants:
                runs, info = results[(m, v)]
                ms = 1e3 * statistics.median(runs)
                row = {"model": m, "variant": v, "ranks": P, "batch": args.batch, "step_ms": ms,
                       "step_ms_runs": [1e3 * s for s in runs], "ddp_step_ms": ddp_ms,
                       "ratio_to_ddp": ms / ddp_ms if ddp else None, **info}
                rows.append(row)
                print("%-9s %-12s %10.2f %9s %8s %12s" % (
                    m, v, ms, "%.3f" % (ms / ddp_ms) if ddp else "-", info.get("buckets", "-"),
                    "%.2f" % info["predicted_step_ms"] if info else "-"))
        if args.json:
            with open(args.json, "w") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
    if "ddp" in args.variants:
        import torch.distributed as dist
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
