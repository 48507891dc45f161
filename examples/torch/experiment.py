#!/usr/bin/env python3
"""The PyTorch measurements of the README: pcoll.torch against PyTorch DDP.

    python3 examples/torch/experiment.py steps [--ranks 2,4] [--cluster 4x1 --rate 1gbit] [--repeats 3]
        bench_step.py at each rank count (or on an emulated cluster of NODESxRANKS, root):
        the step time of ResNet-18 and the CNN, DDP against SyncOptimizer's plans
    python3 examples/torch/experiment.py train [--ranks 4] [--imbalance random:1:114] [--repeats 3]
        train.py with every algorithm in turn, REPEATS turns: steps/s, final accuracy and the
        time to --target, and DDP's time over each algorithm's, per turn

Each prints a table of medians and writes what it ran to --out (default results/torch).  Run
with an interpreter that imports torch (scripts/find-python.sh prints one); the build's
package comes from --build (default build/python).
"""
import argparse
import contextlib
import json
import math
import os
import shlex
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def mpirun(np_, cluster):
    if cluster:
        return [os.path.join(TOP, "scripts", "cluster.sh"), "--prefix", "pt", "run", "-x", "PYTHONPATH",
                "-x", "OMP_NUM_THREADS", "-np", str(np_), "--"]
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["mpirun", "--oversubscribe", "--bind-to", "none"] + root + ["-np", str(np_)]


def run(cmd, log):
    print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    with open(log, "a") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        sys.exit("experiment: the command failed (status %d); its output is in %s" % (rc, log))


class Cluster:
    """scripts/cluster.sh up ... down around the runs (root)."""

    def __init__(self, shape, rate):
        self.nodes, self.per_node = (int(x) for x in shape.split("x"))
        self.rate = rate

    def __enter__(self):
        subprocess.check_call([os.path.join(TOP, "scripts", "cluster.sh"), "--prefix", "pt", "up", str(self.nodes),
                               "--ranks-per-node", str(self.per_node), "--rate", self.rate])
        return self

    def __exit__(self, *exc):
        subprocess.call([os.path.join(TOP, "scripts", "cluster.sh"), "--prefix", "pt", "down"])


def steps(args):
    where = ("cluster-%s-%s" % (args.cluster, args.rate)) if args.cluster else "node"
    out = os.path.join(args.out, "steps-%s.jsonl" % where)
    log = os.path.join(args.out, "steps-%s.log" % where)
    rows = []
    cluster = Cluster(args.cluster, args.rate) if args.cluster else None
    ranks = [cluster.nodes * cluster.per_node] if cluster else [int(r) for r in args.ranks.split(",")]
    with cluster or contextlib.nullcontext():
        for p in ranks:
            tmp = out + ".%d" % p
            run(mpirun(p, args.cluster) + [sys.executable, os.path.join(HERE, "bench_step.py"), "--models",
                                           args.models, "--variants", args.variants, "--repeats",
                                           str(args.repeats), "--steps", str(args.steps), "--json", tmp], log)
            rows += [dict(json.loads(line), where=where) for line in open(tmp)]
            os.remove(tmp)
    with open(out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("# step time, %s: median of %d repeats (each the median of %d steps of the slowest rank)" % (
        where, args.repeats, args.steps))
    print("%-6s %-9s %-12s %10s %8s  %s" % ("ranks", "model", "variant", "step_ms", "vs_ddp", "runs_ms"))
    for r in rows:
        print("%-6d %-9s %-12s %10.1f %8s  %s" % (r["ranks"], r["model"], r["variant"], r["step_ms"],
                                                  "%.3f" % r["ratio_to_ddp"] if r["ratio_to_ddp"] else "-",
                                                  " ".join("%.1f" % x for x in r["step_ms_runs"])))
    print("(written to %s)" % out)


def train(args):
    algos = args.algos.split(",")
    log = os.path.join(args.out, "train.log")
    runs = {a: [] for a in algos}
    for turn in range(args.repeats):
        for a in algos:
            tmp = os.path.join(args.out, "train-%s-%d.json" % (a.replace(":", "_"), turn))
            run(mpirun(args.ranks, None) + [sys.executable, os.path.join(HERE, "train.py"), "--algo", a,
                                            "--epochs", str(args.epochs), "--imbalance", args.imbalance,
                                            "--target", str(args.target), "--seed", str(args.seed + turn),
                                            "--json", tmp] + args.extra, log)
            runs[a].append(json.load(open(tmp)))
    summary = []
    base = runs.get("ddp")

    def med(xs):
        xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
        return statistics.median(xs) if xs else float("nan")
    print("# train.py: %d ranks, cnn, imbalance %s, %d epochs, target %g, %d turns (medians)" % (
        args.ranks, args.imbalance, args.epochs, args.target, args.repeats))
    print("%-22s %8s %9s %10s %10s %9s" % ("algo", "steps/s", "accuracy", "ttt_s", "ddp/algo", "reached"))
    for a in algos:
        rs = runs[a]
        ttt = [r["time_to_target_s"] for r in rs]
        ratio = [b["time_to_target_s"] / r["time_to_target_s"] if base and b["time_to_target_s"] and
                 r["time_to_target_s"] else None for b, r in zip(base or [], rs)]
        row = {"algo": a, "ranks": args.ranks, "imbalance": args.imbalance, "epochs": args.epochs,
               "target": args.target, "steps_per_s": med([r["steps_per_s"] for r in rs]),
               "test_accuracy": med([r["test_accuracy"] for r in rs]), "time_to_target_s": med(ttt),
               "ddp_time_over_algo": med(ratio), "reached": sum(t is not None for t in ttt), "turns": len(rs),
               "runs": rs}
        summary.append(row)
        print("%-22s %8.2f %9.4f %10.1f %10.2f %6d/%d" % (a, row["steps_per_s"], row["test_accuracy"],
                                                           row["time_to_target_s"], row["ddp_time_over_algo"],
                                                           row["reached"], row["turns"]))
    out = os.path.join(args.out, "train-%dranks.json" % args.ranks)
    with open(out, "w") as f:
        json.dump(summary, f, indent=1)
    print("(written to %s)" % out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(TOP, "results", "torch"))
    ap.add_argument("--build", default=os.path.join(TOP, "build", "python"))
    ap.add_argument("--repeats", type=int, default=3)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("steps")
    s.add_argument("--ranks", default="2,4")
    s.add_argument("--cluster", help="NODESxRANKS: on an emulated cluster (root)")
    s.add_argument("--rate", default="1gbit")
    s.add_argument("--models", default="cnn,resnet18")
    s.add_argument("--variants", default="ddp,optimal,mgwfbp,wfbp,single,fixed:25M")
    s.add_argument("--steps", type=int, default=20)
    t = sub.add_parser("train")
    t.add_argument("--ranks", type=int, default=4)
    t.add_argument("--algos", default="ddp,sync,solo,majority,wagma,preduce:fifo:3:dyn")
    t.add_argument("--imbalance", default="random:1:114")
    t.add_argument("--epochs", type=int, default=3)
    t.add_argument("--target", type=float, default=0.88)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("extra", nargs="*", help="more train.py flags (after --)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.environ["PYTHONPATH"] = args.build + os.pathsep + os.environ.get("PYTHONPATH", "")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    (steps if args.cmd == "steps" else train)(args)


if __name__ == "__main__":
    main()
