#!/usr/bin/env python3
"""Data-parallel training of a CNN (or ResNet-18) on Fashion-MNIST through
pcoll, or through PyTorch DDP (gloo) as the baseline, under injected load
imbalance; the same data order and imbalance whatever the algorithm.

    mpirun -np 4 python3 examples/torch/train.py --algo majority --imbalance random:1:40 --json run.json

--algo:  ddp                 torch.nn.parallel.DistributedDataParallel over gloo
         sync                pcoll.torch.SyncOptimizer (MG-WFBP buckets, --fusion)
         solo | majority | quorum:Q
                             pcoll.torch.EagerOptimizer (eager-SGD)
         wagma[:S]           pcoll.torch.WagmaOptimizer (WAGMA-SGD, groups of S)
         preduce:SPEC        pcoll.torch.PReduceOptimizer (SPEC: fifo:3:dyn, ripples:smart:3, ...)

Rank r trains on its share [r N/P, (r+1) N/P) of the training images,
reshuffled every epoch (seed, epoch, rank).  Nothing is evaluated during
training: rank 0 keeps a copy of its model --evals-per-epoch times per epoch
(and after the final exchange) with its clock, and evaluates them after, so
the time to --target accuracy costs no training time.  The JSON has
pcoll-train's keys (steps_per_s, test_accuracy, time_to_target_s, ...) and
`curve`: [elapsed_s, steps, test_accuracy] per copy.
"""
import argparse
import contextlib
import copy
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import common


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--algo", default="sync", help="ddp, sync, solo, majority, quorum:Q, wagma[:S], preduce:SPEC "
                    "(default sync)")
    ap.add_argument("--model", default="cnn", choices=["cnn", "resnet18"], help="default cnn")
    ap.add_argument("--fusion", default="optimal",
                    help="sync: optimal, mgwfbp, wfbp, single, fixed:BYTES (default optimal)")
    ap.add_argument("--imbalance", default="none",
                    help="none, random:K:MS, skew:MIN:MAX, slow:R[,R...]:FACTOR[:MS], dist:MEAN:SD (ms; the "
                    "delay is slept after the gradient, before the exchange; default none)")
    ap.add_argument("--epochs", type=int, default=3, help="default 3")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: the epochs' steps)")
    ap.add_argument("--batch", type=int, default=32, help="per rank (default 32)")
    ap.add_argument("--lr", type=float, default=0.05, help="default 0.05")
    ap.add_argument("--momentum", type=float, default=0.9, help="default 0.9")
    ap.add_argument("--sync-every", type=int, default=-1,
                    help="partial kinds: every tau-th round synchronous (default: 0 for eager, 10 for wagma)")
    ap.add_argument("--target", type=float, default=float("nan"), help="report the time to this test accuracy")
    ap.add_argument("--seed", type=int, default=1, help="model, data order and imbalance (default 1)")
    ap.add_argument("--train-limit", type=int, default=0, help="use only the first N training images (0: all)")
    ap.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test images (0: all 10,000)")
    ap.add_argument("--evals-per-epoch", type=int, default=4, help="model copies evaluated per epoch (default 4)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    ap.add_argument("--data", default=common.DATA_DIR, help="the Fashion-MNIST IDX files (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=0, help="pcoll: PCOLL_TIMEOUT_S for every blocking call")
    ap.add_argument("--json", help="write the results here (rank 0)")
    ap.add_argument("--timeline", metavar="PREFIX",
                    help="pcoll: record a timeline (rank R writes PREFIX.R.jsonl; pcoll-trace merges them)")
    args = ap.parse_args(argv)
    if args.epochs < 1 or args.batch < 1 or args.evals_per_epoch < 1 or args.max_steps < 0:
        ap.error("--epochs, --batch and --evals-per-epoch must be >= 1, --max-steps >= 0")
    kind = args.algo.split(":")[0]
    if kind not in ("ddp", "sync", "solo", "majority", "quorum", "wagma", "preduce"):
        ap.error("--algo %r: ddp, sync, solo, majority, quorum:Q, wagma[:S] or preduce:SPEC" % args.algo)
    if args.sync_every < 0:
        args.sync_every = 10 if kind == "wagma" else 0
    if args.timeline is not None and (kind == "ddp" or not args.timeline):
        ap.error("--timeline: a non-empty prefix, with a pcoll algorithm (not ddp)")
    return args


class Exchange:
    """The algorithm behind one interface: wrap(optimizer) -> something with
    zero_grad / step / close, and `skip_to`: the step a rank continues from
    (preduce: a group with ranks ahead moves it on)."""

    def __init__(self, args, model, comm):
        self.args, self.kind = args, args.algo.split(":")[0]
        self.ddp = None
        self.ctx = None
        if self.kind == "ddp":
            common.init_ddp(comm)
            self.ddp = torch.nn.parallel.DistributedDataParallel(model)
            self.model = self.ddp
        else:
            import pcoll.torch as pt
            ctx = self.ctx = pt.init()
            if args.timeout > 0:
                ctx.set_timeouts(min(60.0, args.timeout), args.timeout)
            if args.timeline:
                ctx.timeline_start(args.timeline)
            pt.broadcast_parameters(model)
            self.model = model

    def phase(self, name):
        """The timeline's mark of a phase of the step (nothing for ddp)."""
        return self.ctx.phase(name) if self.ctx is not None else contextlib.nullcontext()

    def wrap(self, opt, model):
        import pcoll.torch as pt
        a, spec = self.args, self.args.algo.partition(":")[2]
        if self.kind == "ddp":
            return opt
        if self.kind == "sync":
            return pt.SyncOptimizer(opt, model, fusion=a.fusion)
        if self.kind in ("solo", "majority", "quorum"):
            return pt.EagerOptimizer(opt, model, a.algo, sync_every=a.sync_every, seed=a.seed)
        if self.kind == "wagma":
            return pt.WagmaOptimizer(opt, model, group=int(spec) if spec else 0, sync_every=a.sync_every)
        return pt.PReduceOptimizer(opt, model, spec or "fifo")


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            out = model(x[i:i + batch])
            loss += F.cross_entropy(out, y[i:i + batch], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / len(x), loss / len(x)


def main(argv=None):
    args = parse_args(argv)
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(args.threads)
    try:
        imb = common.Imbalance(args.imbalance, args.seed, P)
    except ValueError as e:
        if me == 0:
            print("train.py: %s" % e, file=sys.stderr)
        return 2
    train_x, train_y, test_x, test_y = common.load_fmnist(args.data)
    if args.train_limit:
        train_x, train_y = train_x[:args.train_limit], train_y[:args.train_limit]
    if args.test_limit:
        test_x, test_y = test_x[:args.test_limit], test_y[:args.test_limit]
    lo, hi = me * len(train_x) // P, (me + 1) * len(train_x) // P
    shard_x, shard_y = train_x[lo:hi], train_y[lo:hi]
    # the same at every rank (shards differ by an image at most)
    steps_per_epoch = len(train_x) // P // args.batch
    if steps_per_epoch < 1:
        if me == 0:
            print("train.py: %d images for %d ranks: fewer than a batch each" % (len(train_x), P), file=sys.stderr)
        return 2
    total = steps_per_epoch * args.epochs
    if args.max_steps:
        total = min(total, args.max_steps)
    eval_every = max(1, steps_per_epoch // args.evals_per_epoch)

    model = common.make_model(args.model, args.seed)
    ex = Exchange(args, model, comm)
    opt = ex.wrap(torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum), model)
    net = ex.model
    nparams = sum(p.numel() for p in model.parameters())

    copies = []  # rank 0: (elapsed_s, step, state)
    compute_s = sleep_s = exchange_s = 0.0
    executed, losses = 0, []
    comm.Barrier()
    t0 = time.perf_counter()
    step, perm_epoch, perm = 0, -1, None
    while step < total:
        epoch, k = divmod(step, steps_per_epoch)
        if epoch != perm_epoch:  # this epoch's order of the shard: (seed, epoch, rank)
            g = torch.Generator().manual_seed(common.rng_key(args.seed, 0x44415441, epoch, me) & 0x7fffffffffffffff)
            perm_epoch, perm = epoch, torch.randperm(len(shard_x), generator=g)
        idx = perm[k * args.batch:(k + 1) * args.batch]
        x, y = shard_x[idx], shard_y[idx]
        t = time.perf_counter()
        opt.zero_grad()
        with ex.phase("step"):
            with ex.phase("forward"):
                loss = F.cross_entropy(net(x), y)
            with ex.phase("backward"):
                loss.backward()
            t1 = time.perf_counter()
            delay = imb.delay_ms(me, step, (t1 - t) * 1e3)
            if delay > 0:
                with ex.phase("delay"):
                    common.sleep_ms(delay)
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
        compute_s += t1 - t
        sleep_s += t2 - t1
        exchange_s += t3 - t2
        losses.append(loss.item())
        executed += 1
        step += 1
        if ex.kind == "preduce":  # a group with ranks ahead moves this rank on
            step = max(step, min(opt.iteration, total))
        if me == 0 and (step % eval_every == 0) and step < total:
            copies.append((time.perf_counter() - t0, step, copy.deepcopy(model.state_dict())))
    if ex.kind != "ddp":
        opt.close()
    wall = time.perf_counter() - t0
    if me == 0:
        copies.append((wall, step, copy.deepcopy(model.state_dict())))

    # after training: rank 0 evaluates its copies
    mean_loss = comm.allreduce(float(np.mean(losses[-steps_per_epoch:])), op=MPI.SUM) / P
    per_rank = comm.gather((compute_s, sleep_s, exchange_s, executed), root=0)
    if ex.ddp is not None:
        import torch.distributed as dist
        dist.destroy_process_group()
    if me != 0:
        return 0
    curve = []
    torch.set_num_threads(os.cpu_count() or 1)  # training is over: evaluate on every core
    evaluator = common.make_model(args.model, args.seed)
    for elapsed, s, state in copies:
        evaluator.load_state_dict(state)
        acc, tloss = evaluate(evaluator, test_x, test_y)
        curve.append((elapsed, s, acc, tloss))
    reached = [c for c in curve if c[2] >= args.target]
    ttt = reached[0][0] if reached else float("nan")
    n_exec = sum(r[3] for r in per_rank)
    res = {
        "task": "fmnist", "algo": args.algo, "ranks": P, "imbalance": args.imbalance, "steps": step,
        "wall_s": wall, "steps_per_s": step / wall, "final_loss": mean_loss, "test_accuracy": curve[-1][2],
        "test_loss": curve[-1][3], "target": args.target, "time_to_target_s": ttt, "epochs": args.epochs,
        "batch": args.batch, "lr": args.lr, "momentum": args.momentum, "seed": args.seed,
        "sync_every": args.sync_every, "model": args.model, "parameters": nparams,
        "compute_ms": 1e3 * sum(r[0] for r in per_rank) / n_exec, "sleep_ms": 1e3 * sum(r[1] for r in per_rank) / n_exec,
        "exchange_ms": 1e3 * sum(r[2] for r in per_rank) / n_exec, "steps_executed": per_rank[0][3],
        "step_ms": 1e3 * wall / step, "fusion": args.fusion if ex.kind == "sync" else "",
        "curve": [[round(c[0], 4), c[1], c[2]] for c in curve],
    }
    if ex.kind == "sync":
        res["fusion_buckets"] = opt.plan.nbuckets if opt.plan is not None else 1
    print("train.py: %s, %d ranks, %s, imbalance %s: %d steps in %.2f s (%.2f steps/s), test accuracy %.4f, "
          "time to %.3g: %s" % (args.algo, P, args.model, args.imbalance, step, wall, step / wall, curve[-1][2],
                                args.target, "%.2f s" % ttt if reached else "not reached"))
    print("per step (mean over ranks): compute %.2f ms, injected delay %.2f ms, exchange %.2f ms" % (
        res["compute_ms"], res["sleep_ms"], res["exchange_ms"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in res.items()}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
