#!/bin/sh
# pcoll-train --checkpoint / --resume, the restart path after a rank dies:
#  1. sync, 2 ranks, a checkpoint every 25 steps: a run whose rank 1 is
#     killed at step 80 (the job ends), resumed from its checkpoint (step
#     75), ends with the same model, bit for bit, as the run never killed
#     (their final checkpoints are compared);
#  2. solo, 3 ranks, rank 0 killed: resumed with 2 ranks, it runs every
#     step of the schedule and reaches the target accuracy (0.65);
#  3. bad flags and checkpoints are refused, naming the flag.
# `timeout` turns a hang into a failure.
#   checkpoint_train.sh <pcoll-train> <python3> <mpiexec and its flags...>
set -u
train=$1 py=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "checkpoint_train: FAILED: $*"; exit 1; }
common="--epochs 2 --train-limit 4000 --quiet"

# 1. exact resume
timeout 300 "$@" -np 2 "$train" --algo sync $common --checkpoint "$dir/a" --checkpoint-every 25 \
    --json "$dir/a.json" >"$dir/a.out" 2>&1 || { cat "$dir/a.out"; fail "the uninterrupted run failed"; }
timeout 300 "$@" -np 2 "$train" --algo sync $common --checkpoint "$dir/b" --checkpoint-every 25 --inject kill:1:80 \
    >"$dir/b.out" 2>&1
rc=$?
[ $rc -eq 124 ] && fail "the killed run hung"
[ $rc -eq 0 ] && fail "the run whose rank was killed ended with status 0"
grep -q "^step 75$" "$dir/b/checkpoint" || fail "the killed run's checkpoint is not at step 75"
timeout 300 "$@" -np 2 "$train" --algo sync $common --checkpoint "$dir/b" --checkpoint-every 25 --resume "$dir/b" \
    --json "$dir/b.json" >"$dir/b2.out" 2>&1 || { cat "$dir/b2.out"; fail "the resumed run failed"; }
cmp -s "$dir/a/checkpoint" "$dir/b/checkpoint" || fail "the resumed run's final model differs from the uninterrupted run's"
"$py" - "$dir/a.json" "$dir/b.json" <<'PY' || fail "the JSON does not describe the resume"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print(f"checkpoint_train: killed at step 80, resumed at step {b['resumed_at_step']}: test accuracy "
      f"{b['test_accuracy']:.4f}, uninterrupted {a['test_accuracy']:.4f}; {a['checkpoints']} checkpoints in "
      f"{a['checkpoint_s']:.3f} s")
checks = {"a wrote 5": a["checkpoints"] == 5, "b resumed at 75": b["resumed_from_step"] == 75 and
          b["resumed_at_step"] == 75 and b["resumed_from_ranks"] == 2, "b wrote 2": b["checkpoints"] == 2,
          "same accuracy": a["test_accuracy"] == b["test_accuracy"], "all steps": b["steps"] == a["steps"] == 124}
bad = [k for k, ok in checks.items() if not ok]
if bad: print("checkpoint_train: not met:", ", ".join(bad))
sys.exit(1 if bad else 0)
PY

# 2. rank 0 dies; the restart has one rank less
timeout 300 "$@" -np 3 "$train" --algo solo $common --checkpoint "$dir/c" --inject kill:0:60 >"$dir/c.out" 2>&1
[ $? -eq 124 ] && fail "the solo run whose rank 0 was killed hung"
grep -q "^step 41$" "$dir/c/checkpoint" || fail "the solo run's checkpoint is not at the end of epoch 1 (step 41)"
timeout 300 "$@" -np 2 "$train" --algo solo $common --resume "$dir/c" --target 0.65 --json "$dir/c.json" \
    >"$dir/c2.out" 2>&1 || { cat "$dir/c2.out"; fail "the solo run resumed with 2 ranks failed"; }
"$py" - "$dir/c.json" <<'PY' || fail "the run resumed with fewer ranks did not finish as it should"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"checkpoint_train: solo, 3 ranks, rank 0 killed; resumed with {r['ranks']} at step {r['resumed_at_step']} "
      f"of {r['steps']}: test accuracy {r['test_accuracy']:.4f}")
checks = {"2 ranks": r["ranks"] == 2, "scaled start": r["resumed_from_step"] == 41 and r["resumed_at_step"] == 62,
          "all steps": r["steps"] == 124, "target": r["test_accuracy"] >= 0.65}
bad = [k for k, ok in checks.items() if not ok]
if bad: print("checkpoint_train: not met:", ", ".join(bad), json.dumps(r))
sys.exit(1 if bad else 0)
PY

# 3. refused, naming the flag
refused() { # refused FLAG-NAMED CMD...
    want=$1
    shift
    out=$(timeout 120 "$@" 2>&1) && fail "accepted: $*"
    case $out in *"$want"*) ;; *) fail "$*: the message does not name $want: $out" ;; esac
}
refused --checkpoint-every "$train" --checkpoint-every 5
refused --checkpoint "$train" --algo preduce:fifo:2 --checkpoint "$dir/p"
refused --resume "$train" --algo preduce:fifo:2 --resume "$dir/a"
refused --resume "$@" -np 1 "$train" $common --resume "$dir/none"
refused --resume "$@" -np 1 "$train" $common --layers 784,64,10 --resume "$dir/a"
refused --resume "$@" -np 2 "$train" --algo sync $common --resume "$dir/a" # at its end already
mkdir "$dir/t" && head -c 2000 "$dir/a/checkpoint" >"$dir/t/checkpoint"
refused --resume "$@" -np 1 "$train" $common --resume "$dir/t"
printf 'hello\n' >"$dir/t/checkpoint"
refused --resume "$@" -np 1 "$train" $common --resume "$dir/t"
: >"$dir/file"
refused --checkpoint "$@" -np 1 "$train" $common --checkpoint "$dir/file"
echo "checkpoint_train: passed"
