#!/usr/bin/env python3
"""What the Python binding adds to a call: a 64-byte allreduce from Python
(a numpy array, and a torch tensor) against the same allreduce called from C
in a loop inside the same process (the peer, measured in the same run, in
alternating blocks).

    mpirun -np 2 python3 examples/bench_binding.py [--bytes 64] [--iters 20000] [--blocks 7] [--json FILE]

Per variant: the median over blocks of the time per call; the table gives
the difference to C per call.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

import pcoll


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=64, help="message size (float32 elements x 4; default 64)")
    ap.add_argument("--iters", type=int, default=20000, help="calls per block (default 20000)")
    ap.add_argument("--blocks", type=int, default=7, help="blocks per variant, alternating (default 7)")
    ap.add_argument("--json", help="write the medians here (rank 0)")
    args = ap.parse_args(argv)
    if args.bytes < 4 or args.bytes % 4 or args.iters < 1 or args.blocks < 1:
        ap.error("--bytes: a multiple of 4; --iters and --blocks >= 1")
    ctx = pcoll.Context()
    a = np.ones(args.bytes // 4, np.float32)
    variants = {"c": lambda: ctx._c_allreduce_loop(a, args.iters)}

    def py_loop(buf):
        allreduce = ctx.allreduce
        t = time.perf_counter()
        for _ in range(args.iters):
            allreduce(buf)
        return time.perf_counter() - t
    variants["python_numpy"] = lambda: py_loop(a)
    try:
        import torch
        t = torch.ones(args.bytes // 4)
        variants["python_tensor"] = lambda: py_loop(t)
    except ImportError:
        pass
    per_call = {k: [] for k in variants}
    for name in variants:  # warm-up
        variants[name]()
    for _ in range(args.blocks):
        for name, run in variants.items():
            a[:] = 1  # keep the values small
            per_call[name].append(run() / args.iters * 1e6)
    from mpi4py import MPI
    med = {k: MPI.COMM_WORLD.allreduce(statistics.median(v), op=MPI.MAX) for k, v in per_call.items()}
    if ctx.rank == 0:
        print("# bench_binding: %d ranks, %d B allreduce, %d calls x %d blocks (median per call, slowest rank)" % (
            ctx.size, args.bytes, args.iters, args.blocks))
        print("%-15s %10s %12s" % ("variant", "us/call", "minus_c_us"))
        for k, v in med.items():
            print("%-15s %10.3f %12.3f" % (k, v, v - med["c"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": ctx.size, "bytes": args.bytes, "us_per_call": med,
                           "overhead_us": {k: v - med["c"] for k, v in med.items()}}, f)
    ctx.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
