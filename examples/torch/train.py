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

--checkpoint DIR writes DIR/checkpoint.pt (replaced atomically) at every
epoch's end, or every --checkpoint-every steps, and after training (the
final models averaged: the accuracy reported is rank 0's): the exchange is
flushed (optimizer.flush()), the models and momenta averaged (every rank the
same), and rank 0 saves the model, the optimizer state and the position.
--resume DIR continues from it with any number of ranks (with another
count, the epoch's steps are scaled to the share done); the other flags
(--lr, --momentum, ...) are this run's.  A run whose
rank dies (--inject kill:R:STEP for experiments) is restarted with --resume.
"""
import argparse
import contextlib
import copy
import json
import math
import os
import signal
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
    ap.add_argument("--checkpoint", metavar="DIR", help="write DIR/checkpoint.pt (see above)")
    ap.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                    help="with --checkpoint: every N steps (default 0: at every epoch's end)")
    ap.add_argument("--resume", metavar="DIR", help="start from DIR/checkpoint.pt")
    ap.add_argument("--inject", metavar="kill:R:STEP", help="rank R kills itself (SIGKILL) before its step STEP")
    args = ap.parse_args(argv)
    if args.checkpoint_every < 0 or (args.checkpoint_every and not args.checkpoint):
        ap.error("--checkpoint-every: N >= 0, with --checkpoint DIR")
    if args.checkpoint is not None and not args.checkpoint or args.resume is not None and not args.resume:
        ap.error("--checkpoint and --resume need a directory")
    if (args.checkpoint or args.resume) and args.algo.startswith("preduce"):
        ap.error("--checkpoint and --resume apply to every algorithm but preduce:SPEC (its ranks skip steps)")
    args.kill = None
    if args.inject is not None:
        parts = args.inject.split(":")
        if len(parts) != 3 or parts[0] != "kill" or not parts[1].isdigit() or not parts[2].isdigit():
            ap.error("--inject %r: kill:RANK:STEP" % args.inject)
        args.kill = (int(parts[1]), int(parts[2]))
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


CHECKPOINT_FORMAT = "pcoll examples/torch/train.py checkpoint 1"


def _float_tensors(model, sgd):
    """The tensors a checkpoint averages: the model's floating-point state
    (parameters, batch-norm statistics) and the momentum buffers."""
    out = [t for t in model.state_dict().values() if t.is_floating_point()]
    for st in sgd.state.values():
        if st.get("momentum_buffer") is not None:
            out.append(st["momentum_buffer"])
    return out


def _fail_everywhere(comm, msg):
    """SystemExit at every rank; rank 0 prints the message."""
    raise SystemExit(("train.py: " + msg) if comm.Get_rank() == 0 else 1)


def save_checkpoint(args, comm, ex, opt, sgd, model, pos):
    """Collective, at a step every rank reaches: the exchange flushed (unless
    closed), the models and momenta averaged where the ranks' differ, rank 0
    writes.  A failed write raises at every rank."""
    from mpi4py import MPI
    if ex.kind != "ddp" and not opt.closed:
        opt.flush()
    if ex.kind not in ("ddp", "sync"):  # these apply the same mean gradient everywhere
        P = comm.Get_size()
        for t in _float_tensors(model, sgd):
            a = t.detach().numpy()
            comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)
            a /= P
    err = None
    if comm.Get_rank() == 0:
        try:
            os.makedirs(args.checkpoint, exist_ok=True)
            path = os.path.join(args.checkpoint, "checkpoint.pt")
            with open(path + ".tmp", "wb") as f:
                torch.save(dict(pos, format=CHECKPOINT_FORMAT, model_name=args.model, algo=args.algo,
                                seed=args.seed, ranks=comm.Get_size(), model=model.state_dict(),
                                optimizer=sgd.state_dict()), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(path + ".tmp", path)
        except Exception as e:  # OSError, or torch's RuntimeError on a failed write: every rank must hear
            err = "--checkpoint %s: %s" % (args.checkpoint, e)
    err = comm.bcast(err, root=0)
    if err:
        _fail_everywhere(comm, err)


def load_checkpoint(args, comm, sgd, model, steps_per_epoch, total):
    """Collective: rank 0 reads --resume's checkpoint, every rank takes its
    model and optimizer state; returns it (its position) and the step this
    run starts at, or raises SystemExit at every rank (rank 0 names the fault)."""
    ck, err = None, None
    if comm.Get_rank() == 0:
        path = os.path.join(args.resume, "checkpoint.pt")
        try:
            ck = torch.load(path, map_location="cpu")
            if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
                err = "--resume %s: %s is not a checkpoint of this program" % (args.resume, path)
            elif ck["model_name"] != args.model:
                err = "--resume %s: the checkpoint is of model %s, this run trains %s" % (
                    args.resume, ck["model_name"], args.model)
        except Exception as e:  # a missing, truncated or foreign file: named, at every rank
            err = "--resume %s: cannot read %s: %s" % (args.resume, path, e)
        if err:
            ck = None
    err = comm.bcast(err, root=0)
    if err:
        _fail_everywhere(comm, err)
    ck = comm.bcast(ck, root=0)
    model.load_state_dict(ck["model"])
    sgd.load_state_dict(ck["optimizer"])
    for g in sgd.param_groups:  # the momentum buffers are the checkpoint's, the settings this run's
        g["lr"], g["momentum"] = args.lr, args.momentum
    if ck["steps_per_epoch"] == steps_per_epoch:
        at = ck["step"]
    else:  # another rank count: the same epoch, the same share of it
        at = ck["epoch"] * steps_per_epoch + ck["epoch_step"] * steps_per_epoch // ck["steps_per_epoch"]
    if at >= total:
        _fail_everywhere(comm, "--resume %s: the checkpoint stands at step %d; this run's %d steps end there "
                         "(raise --epochs or --max-steps)" % (args.resume, ck["step"], total))
    return ck, at


def position(step, steps_per_epoch, total):
    epoch, k = divmod(step, steps_per_epoch)
    return dict(step=step, epoch=epoch, epoch_step=k, steps_per_epoch=steps_per_epoch, total=total)


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
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    start, resumed = 0, None
    if args.resume:
        resumed, start = load_checkpoint(args, comm, sgd, model, steps_per_epoch, total)
        if me == 0:
            print("train.py: resuming from %s (step %d of %d ranks) at step %d of %d" % (
                args.resume, resumed["step"], resumed["ranks"], start, total), file=sys.stderr)
    ex = Exchange(args, model, comm)
    opt = ex.wrap(sgd, model)
    net = ex.model
    nparams = sum(p.numel() for p in model.parameters())

    copies = []  # rank 0: (elapsed_s, step, state)
    compute_s = sleep_s = exchange_s = 0.0
    executed, losses = 0, []
    comm.Barrier()
    t0 = time.perf_counter()
    step, perm_epoch, perm = start, -1, None
    checkpoints, checkpoint_s = 0, 0.0
    while step < total:
        if args.kill is not None and args.kill == (me, step):
            print("train.py: rank %d: --inject: killing this process at step %d" % (me, step), file=sys.stderr,
                  flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
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
        every = args.checkpoint_every or steps_per_epoch
        if args.checkpoint and step < total and step % every == 0:
            tc = time.perf_counter()
            save_checkpoint(args, comm, ex, opt, sgd, model, position(step, steps_per_epoch, total))
            checkpoints, checkpoint_s = checkpoints + 1, checkpoint_s + time.perf_counter() - tc
    if ex.kind != "ddp":
        opt.close()
    wall = time.perf_counter() - t0
    if me == 0:
        copies.append((wall, step, copy.deepcopy(model.state_dict())))
    if args.checkpoint:  # the final model (after the final exchange)
        tc = time.perf_counter()
        save_checkpoint(args, comm, ex, opt, sgd, model, position(step, steps_per_epoch, total))
        checkpoints, checkpoint_s = checkpoints + 1, checkpoint_s + time.perf_counter() - tc

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
        "wall_s": wall, "steps_per_s": (step - start) / wall, "final_loss": mean_loss, "test_accuracy": curve[-1][2],
        "test_loss": curve[-1][3], "target": args.target, "time_to_target_s": ttt, "epochs": args.epochs,
        "batch": args.batch, "lr": args.lr, "momentum": args.momentum, "seed": args.seed,
        "sync_every": args.sync_every, "model": args.model, "parameters": nparams,
        "compute_ms": 1e3 * sum(r[0] for r in per_rank) / n_exec, "sleep_ms": 1e3 * sum(r[1] for r in per_rank) / n_exec,
        "exchange_ms": 1e3 * sum(r[2] for r in per_rank) / n_exec, "steps_executed": per_rank[0][3],
        "step_ms": 1e3 * wall / (step - start), "fusion": args.fusion if ex.kind == "sync" else "",
        "curve": [[round(c[0], 4), c[1], c[2]] for c in curve],
    }
    if args.checkpoint:
        res.update(checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every, checkpoints=checkpoints,
                   checkpoint_s=checkpoint_s)
    if resumed is not None:
        res.update(resume=args.resume, resumed_from_step=resumed["step"], resumed_from_ranks=resumed["ranks"],
                   resumed_at_step=start)
    if ex.kind == "sync":
        res["fusion_buckets"] = opt.plan.nbuckets if opt.plan is not None else 1
    print("train.py: %s, %d ranks, %s, imbalance %s: %d steps in %.2f s (%.2f steps/s), test accuracy %.4f, "
          "time to %.3g: %s" % (args.algo, P, args.model, args.imbalance, step - start, wall, (step - start) / wall, curve[-1][2],
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
