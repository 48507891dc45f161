#!/bin/sh
# pcoll-train --on-failure shrink: rank 2 of 4 kills itself (--inject) in
# the middle of training; the other three must go on with the three of them
# (pcoll_shrink), finish every step and reach the target accuracy, and the
# JSON must say so (exclude_train.sh runs --inject stop).  `timeout` turns a
# hang into a failure.  Bad failure flags are refused, naming the flag.
#   shrink_train.sh <pcoll-train> <python3> <mpiexec and its flags...>
set -u
train=$1 py=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "shrink_train: FAILED: $*"; exit 1; }

timeout 300 "$@" --mca orte_abort_on_non_zero_status 0 -np 4 "$train" --algo solo --epochs 2 --train-limit 20000 \
    --on-failure shrink --failure-timeout 2 --inject kill:2:200 --target 0.75 --quiet --json "$dir/r.json" \
    >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ $rc -eq 124 ] && fail "the job hung"
[ -s "$dir/r.json" ] || fail "no JSON written"
"$py" - "$dir/r.json" <<'PY' || fail "the run did not go on as it should"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"shrink_train: {r['ranks']} ranks, {r['ranks_at_end']} at the end after {r['shrinks']} shrink at step "
      f"{r.get('shrink_step')} ({r.get('recovery_s', 0):.2f} s); {r['steps']} steps, test accuracy {r['test_accuracy']:.4f}")
# a survivor notices the loss at its own step, which in a solo run may be
# well before or after the victim's step 200, or only at the final flush:
# partial rounds in node-shared memory go on without a silent rank
# (PCOLL_EXCLUDE_MS), and the first synchronous step is the flush
steps = 2 * (20000 // 4 // 32)
checks = {"4 ranks at the start": r["ranks"] == 4, "3 at the end": r["ranks_at_end"] == 3,
          "one shrink": r["shrinks"] == 1, "shrink during the run": 0 < r["shrink_step"] <= steps,
          f"{steps} steps": r["steps"] == steps, "accuracy >= 0.75": r["test_accuracy"] >= 0.75}
bad = [k for k, ok in checks.items() if not ok]
if bad: print("shrink_train: not met:", ", ".join(bad), "; JSON:", json.dumps(r))
sys.exit(1 if bad else 0)
PY

for bad in "--on-failure nonsense" "--inject kill:x:3" "--inject stop:1:3" "--inject stop:1:3:0" "--inject freeze:1:3" "--failure-timeout 0" \
    "--algo mpi --on-failure shrink"; do
    set -- $bad
    out=$("$train" $bad 2>&1) && fail "pcoll-train $bad was accepted"
    flag=$1
    [ "$1" = "--algo" ] && flag=--on-failure
    case $out in *"$flag"*) ;; *) fail "pcoll-train $bad: the message does not name $flag: $out" ;; esac
done
echo "shrink_train: passed"
