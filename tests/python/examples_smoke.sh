#!/bin/sh
# The PyTorch examples run end to end at 2 ranks, every algorithm of
# train.py (DDP included) and bench_step.py, each writing the JSON it
# promises (a few hundred images, a few steps: a smoke test, not a
# measurement).
#   examples_smoke.sh <python> <repository> <mpiexec and its flags...>
set -eu
py=$1 src=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for algo in ddp sync solo majority quorum:2 wagma:2 preduce:fifo:2:dyn preduce:ripples:smart:2; do
    "$@" -np 2 "$py" "$src/examples/torch/train.py" --algo "$algo" --train-limit 1024 --test-limit 500 --epochs 2 \
        --evals-per-epoch 1 --imbalance random:1:5 --target 0.3 --timeout 60 --json "$out/run.json" >"$out/log" 2>&1 \
        || { cat "$out/log"; echo "examples_smoke: train.py --algo $algo failed"; exit 1; }
    "$py" - "$out/run.json" "$algo" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
need = ["algo", "ranks", "steps", "wall_s", "steps_per_s", "test_accuracy", "time_to_target_s", "compute_ms",
        "exchange_ms", "steps_executed", "curve"]
missing = [k for k in need if k not in r]
assert not missing, "missing keys %s" % missing
assert r["algo"] == sys.argv[2] and r["ranks"] == 2 and r["steps"] == 32 and 0.1 < r["test_accuracy"] <= 1, \
    "algo %s, ranks %s, steps %s, test accuracy %s" % (r["algo"], r["ranks"], r["steps"], r["test_accuracy"])
assert len(r["curve"]) >= 2 and r["steps_per_s"] > 0
print("examples_smoke: train.py --algo %-24s %3d steps, %.1f steps/s, accuracy %.3f" % (
    r["algo"], r["steps"], r["steps_per_s"], r["test_accuracy"]))
PY
done
"$@" -np 2 "$py" "$src/examples/torch/train.py" --imbalance random:3:5 >"$out/log" 2>&1 \
    && { echo "examples_smoke: a bad --imbalance was accepted"; exit 1; }
grep -q "K = 3 is more than the 2 ranks" "$out/log" || { cat "$out/log"; exit 1; }
"$@" -np 2 "$py" "$src/examples/torch/bench_step.py" --models cnn --variants ddp,optimal,single --steps 2 \
    --repeats 1 --json "$out/steps.json" >"$out/log" 2>&1 || { cat "$out/log"; echo "examples_smoke: bench_step.py failed"; exit 1; }
"$py" - "$out/steps.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["variant"] for r in rows] == ["ddp", "optimal", "single"], rows
assert all(r["step_ms"] > 0 and r["ratio_to_ddp"] > 0 for r in rows)
assert rows[2]["buckets"] == 1 and rows[1]["buckets"] >= 1
print("examples_smoke: bench_step.py: " + ", ".join("%s %.1f ms" % (r["variant"], r["step_ms"]) for r in rows))
PY
# the README's complete training script is examples/torch/minimal.py, word for word, and it runs
"$py" - "$src/README.md" "$src/examples/torch/minimal.py" <<'PY'
import sys
readme, script = open(sys.argv[1]).read(), open(sys.argv[2]).read()
assert "```python\n" + script + "```" in readme, "README.md does not show examples/torch/minimal.py as it is"
PY
"$@" -np 2 "$py" "$src/examples/torch/minimal.py" 20 >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
grep "minimal.py: 2 ranks, 20 steps" "$out/log"
echo "examples_smoke: passed"
