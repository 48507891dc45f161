#!/bin/sh
# pcoll-train --model-sync-epochs: the models averaged by MPI_Allreduce
# after every epoch, with partial exchanges whose rounds wait for other
# ranks' calls (majority: the initiator's; wagma: the synchronous ones),
# the ranks made uneven by --imbalance.  The exchange is flushed before
# the MPI collective: without that, a rank's last call of the epoch could
# wait for a round that needs a rank already in MPI_Allreduce (a hang:
# `timeout` turns it into a failure).  Every gradient made is delivered
# once at every rank, and every step runs.
#   model_sync_train.sh <pcoll-train> <python3> <mpiexec and its flags...>
set -u
train=$1 py=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "model_sync_train: FAILED: $*"; exit 1; }
for algo in majority wagma; do
    timeout 200 "$@" -np 4 "$train" --algo $algo --epochs 8 --train-limit 1200 --model-sync-epochs 1 \
        --imbalance skew:0:4 --quiet --json "$dir/$algo.json" >"$dir/$algo.out" 2>&1
    rc=$?
    [ $rc -eq 124 ] && { cat "$dir/$algo.out"; fail "$algo: the run hung"; }
    [ $rc -eq 0 ] || { cat "$dir/$algo.out"; fail "$algo: the run failed ($rc)"; }
    "$py" - "$dir/$algo.json" <<'PY' || fail "$algo: the run did not end as it should"
import json, sys
r = json.load(open(sys.argv[1]))
counted = "contributions_made" in r  # gradients (majority); wagma exchanges models
print(f"model_sync_train: {r['algo']}, {r['ranks']} ranks, models averaged every {r['model_sync_epochs']} epoch: "
      f"{r['steps']} steps, test accuracy {r['test_accuracy']:.4f}" +
      (f", gradients made {r['contributions_made']}, delivered {r['contributions_delivered_min']}.."
       f"{r['contributions_delivered_max']} per rank" if counted else ""))
checks = {"model sync on": r["model_sync_epochs"] == 1, "all steps": r["steps"] == r["steps_executed"],
          "conservation": not counted or
          r["contributions_made"] == r["contributions_delivered_min"] == r["contributions_delivered_max"],
          "gradients counted": counted == (r["algo"] == "majority")}
bad = [k for k, ok in checks.items() if not ok]
if bad: print("model_sync_train: not met:", ", ".join(bad), json.dumps(r))
sys.exit(1 if bad else 0)
PY
done
