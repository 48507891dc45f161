#!/bin/bash
# Timelines of real training runs (docs/timeline.md): 4 ranks of pcoll-train
# with one rank slowed (--imbalance slow:R:3), recorded with --timeline,
# merged by pcoll-trace, checked by check_trace.py (schema, per-track
# order, nesting), and reported:
#   sync, majority     the report names rank R, and its median lateness is
#                      about the delay the run injected at R (its "delay"
#                      marks), within a factor of two
#   sync, shifted      the same with rank R's clock R x 5 ms ahead
#                      (PCOLL_TIMELINE_SHIFT_NS): the measured offsets are
#                      the shifts, the merged trace is aligned
#   preduce:fifo:3     names rank R; every rank has its wait for groups
#   sync + fusion      one entry per bucket of the plan, measured and
#                      predicted
#   mpi                marks only: valid, and no straggler (no library
#                      exchange)
# usage: test_trace_runs.sh BIN_DIR PYTHON MPIEXEC [MPIEXEC_FLAGS...]
set -u
bin=$1 py=$2 mpiexec=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/pcoll_test_trace_runs.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "test_trace_runs: FAILED: $*" >&2
    exit 1
}

flags=("$@")

# run NAME SLOW_RANK TRAIN_ARGS...: train, merge, check; the report as JSON in $dir/NAME.report
run() {
    local name=$1 slow=$2
    shift 2
    "$mpiexec" "${flags[@]}" -np 4 "$bin/pcoll-train" "$@" --epochs 2 --max-steps 120 --train-limit 8000 \
        --imbalance "slow:$slow:3" --quiet --timeline "$dir/$name" >"$dir/$name.out" 2>&1 || {
        cat "$dir/$name.out" >&2
        fail "$name: pcoll-train failed"
    }
    "$bin/pcoll-trace" merge "$dir/$name" -o "$dir/$name.json" 2>"$dir/$name.merge" || {
        cat "$dir/$name.merge" >&2
        fail "$name: merge failed"
    }
    "$py" "$here/check_trace.py" "$dir/$name.json" --ranks 4 --nesting || fail "$name: the merged trace is not valid"
    "$bin/pcoll-trace" report "$dir/$name.json" --json >"$dir/$name.report" || fail "$name: report failed"
}

# check NAME PYTHON-EXPRESSION MESSAGE: r is the report, delay(rank) the
# median of that rank's delay marks (ms) from its timeline file
check() {
    "$py" - "$dir" "$1" "$2" "$3" <<'EOF' || exit 1
import json, statistics, sys
d, name, expr, msg = sys.argv[1:]
r = json.load(open("%s/%s.report" % (d, name)))
def delay(rank):
    begin, spans = None, []
    for line in open("%s/%s.%d.jsonl" % (d, name, rank)):
        e = json.loads(line)
        if e.get("ev") == "mark" and e.get("name") == "delay":
            if e["ph"] == "B":
                begin = e["t"]
            elif begin is not None:
                spans.append((e["t"] - begin) / 1e6)
    return statistics.median(spans) if spans else 0.0
if not eval(expr):
    print("test_trace_runs: FAILED: %s: %s (report: straggler %s, lateness %s ms; delay of each rank: %s)"
          % (name, msg, r.get("straggler"), r.get("straggler_lateness_ms"),
             [round(delay(k), 3) for k in range(4)]), file=sys.stderr)
    sys.exit(1)
print("test_trace_runs: %s: %s" % (name, msg))
EOF
}

run sync 2 --algo sync
check sync 'r["straggler"] == 2' "names rank 2"
check sync '0.5 * delay(2) <= r["straggler_lateness_ms"] <= 2 * delay(2) + 1' "its lateness is about its injected delay"
check sync 'r["ranks"][2]["wait_caused_s"] > 0 and r["clock_check"]["ok"]' "others waited for it; the clocks check"

# every rank's clock made R x 5 ms ahead (PCOLL_TIMELINE_SHIFT_NS): the offsets
# measured at start and stop must find it, and the merge remove it
PCOLL_TIMELINE_SHIFT_NS=5000000 run shifted 2 --algo sync
check shifted 'all(abs(json.loads(open("%s/shifted.%d.jsonl" % (d, k)).readline())["offset_ns"] - k * 5000000) <=
    json.loads(open("%s/shifted.%d.jsonl" % (d, k)).readline())["offset_err_ns"] + 1000 for k in range(4))' \
    "the offsets measured are the shifts"
check shifted 'r["straggler"] == 2 and 0.5 * delay(2) <= r["straggler_lateness_ms"] <= 2 * delay(2) + 1' \
    "clocks 5-15 ms apart: still rank 2, late by about its delay"
check shifted 'r["clock_check"]["ok"] and r["clock_check"]["pairs"] > 0' "the clocks check"

run majority 1 --algo majority
check majority 'r["straggler"] == 1' "names rank 1"
check majority 'r["ranks"][1]["missed_rounds"] > 0 and r["ranks"][1]["wait_avoided_s"] > 0' \
    "it missed rounds, and the others did not wait for it"
check majority 'r["clock_check"]["ok"]' "the clocks check"

run preduce 3 --algo preduce:fifo:3
check preduce 'r["straggler"] == 3' "names rank 3"
check preduce 'all(x["preduce_wait_ms"] is not None for x in r["ranks"])' "every rank's wait for groups"

run fusion 0 --algo sync --fusion mgwfbp
check fusion 'len(r["fusion"]) >= 1 and all(b["steps"] > 0 and b["predicted_exposed_ms"] is not None and
    b["measured_exposed_ms"] is not None for b in r["fusion"])' "every bucket measured against the plan"

run mpi 2 --algo mpi
check mpi 'r["straggler"] is None' "the mpi baseline has marks only: no library exchange, no straggler"
echo "test_trace_runs: passed"
