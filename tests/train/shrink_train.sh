#!/bin/sh
# pcoll-train --on-failure shrink: rank 2 of 4 kills itself (--inject) in
# the middle of training; the other three must go on with the three of them
# (pcoll_shrink), finish every step and reach the target accuracy, and the
# JSON must say so.  `timeout` turns a hang into a failure.  Bad failure
# flags are refused, naming the flag.
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
ok = r["ranks"] == 4 and r["ranks_at_end"] == 3 and r["shrinks"] == 1 and 100 <= r["shrink_step"] <= 203
ok = ok and r["steps"] == 2 * (20000 // 4 // 32) and r["test_accuracy"] >= 0.75
sys.exit(0 if ok else 1)
PY

for bad in "--on-failure nonsense" "--inject kill:x:3" "--inject stop:1:3" "--failure-timeout 0" \
    "--algo mpi --on-failure shrink"; do
    set -- $bad
    out=$("$train" $bad 2>&1) && fail "pcoll-train $bad was accepted"
    flag=$1
    [ "$1" = "--algo" ] && flag=--on-failure
    case $out in *"$flag"*) ;; *) fail "pcoll-train $bad: the message does not name $flag: $out" ;; esac
done
echo "shrink_train: passed"
