#!/bin/bash
# pcoll-sim's commands, small: each runs, prints pcoll-bench's JSON keys for
# the same command (every key the real benchmark prints, measured in the
# same test at 2 or 4 ranks) and its {"bench": "sim"} line; train sweeps
# rank counts into an SVG; calibrate recovers factors it was given (its
# "measurements" simulated with known ones); bad flags are refused with a
# message naming them.
# usage: test_commands.sh BIN_DIR PYTHON MPIEXEC [MPIEXEC_FLAGS...]
set -u
bin=$1 py=$2 mpiexec=$3
shift 3
flags=("$@")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d /tmp/pcoll_test_sim_cmds.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "test_commands: FAILED: $*" >&2
    exit 1
}
sim=$bin/pcoll-sim

# same_keys BENCH_JSON SIM_JSON NAME: every key of the benchmark's lines is in
# the simulation's lines of the same "bench", and the sim line is there
same_keys() {
    "$py" - "$1" "$2" "$3" <<'PY'
import json, sys
def keys(path, want_sim):
    ks, sim_line = {}, False
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        e = json.loads(line)
        if e.get("bench") == "sim":
            sim_line = True
            for k in ("wall_s", "peak_rss_mib", "messages", "ranks"):
                assert k in e, f"the sim line lacks {k}"
            continue
        ks.setdefault(e["bench"], set()).update(e.keys())
    if want_sim and not sim_line:
        sys.exit(f"{path}: no {{\"bench\": \"sim\"}} line")
    return ks
real, sim = keys(sys.argv[1], False), keys(sys.argv[2], True)
if not real:
    sys.exit(f"{sys.argv[3]}: the benchmark printed nothing")
for b, ks in real.items():
    missing = ks - sim.get(b, set())
    if missing:
        sys.exit(f"{sys.argv[3]}: pcoll-sim lacks pcoll-bench's keys {sorted(missing)} (bench {b})")
print(f"{sys.argv[3]}: pcoll-sim prints every key of pcoll-bench ({sum(len(k) for k in real.values())})")
PY
}

run_bench() { # NP ARGS...
    local np=$1
    shift
    "$mpiexec" -np "$np" "${flags[@]}" "$bin/pcoll-bench" "$@"
}

run_bench 2 allreduce --json --max-bytes 64 --iters 10 --link-rate 1gbit >"$dir/b.json" || fail "pcoll-bench allreduce"
"$sim" allreduce --json --ranks 2 --max-bytes 64 --iters 10 --link-rate 1gbit >"$dir/s.json" || fail "pcoll-sim allreduce"
same_keys "$dir/b.json" "$dir/s.json" allreduce || fail "allreduce keys"

run_bench 2 skew --json --max-bytes 64 --iters 3 --skew-us 200 >"$dir/b.json" || fail "pcoll-bench skew"
"$sim" skew --json --ranks 16 --platform fattree --max-bytes 64 --iters 3 --skew-us 200 >"$dir/s.json" ||
    fail "pcoll-sim skew"
same_keys "$dir/b.json" "$dir/s.json" skew || fail "skew keys"

run_bench 4 group --json --max-bytes 64 --iters 3 --skew-us 200 >"$dir/b.json" || fail "pcoll-bench group"
"$sim" group --json --ranks 16 --platform switch --max-bytes 64 --iters 3 --skew-us 200 >"$dir/s.json" ||
    fail "pcoll-sim group"
same_keys "$dir/b.json" "$dir/s.json" group || fail "group keys"

run_bench 4 preduce --json --calls 50 >"$dir/b.json" || fail "pcoll-bench preduce"
"$sim" preduce --json --ranks 16 --calls 50 >"$dir/s.json" || fail "pcoll-sim preduce"
same_keys "$dir/b.json" "$dir/s.json" preduce || fail "preduce keys"

prof=$root/data/mgwfbp/googlenet-k80-layers.csv
run_bench 2 fusion --json --profile "$prof" --model 633.64,0.0035 --measure --iters 1 >"$dir/b.json" ||
    fail "pcoll-bench fusion"
"$sim" fusion --json --ranks 8 --profile "$prof" --model 633.64,0.0035 --iters 1 >"$dir/s.json" ||
    fail "pcoll-sim fusion"
same_keys "$dir/b.json" "$dir/s.json" fusion || fail "fusion keys"

# train: a sweep over rank counts, one line each, and the plot
"$sim" train --json --ranks-list 1,2,4 --steps-per-epoch 10 --compute-us 1000 --params 100000 --svg "$dir/t.svg" \
    >"$dir/s.json" || fail "pcoll-sim train"
[ "$(grep -c '"bench": *"train"' "$dir/s.json")" = 3 ] || fail "train: not one line per rank count"
grep -q '<svg' "$dir/t.svg" || fail "train: no SVG"

# calibrate: measurements simulated with two factors changed (message cost 7
# us, link latency 35 us), those two fitted from the defaults; the others
# stay the defaults that made the measurements, so the fit must find 7 and 35
mkdir "$dir/m"
for n in 2 4; do
    "$sim" allreduce --json --ranks $n --link-rate 100mbit --max-bytes 16K --msg-cost 7us \
        --latency 35us >"$dir/m/allreduce-${n}x1-100mbit.json" || fail "pcoll-sim allreduce for calibrate"
done
"$sim" calibrate --measured "$dir/m" --out "$dir/cal.json" --fit msg-cost,latency --evals 24 --quiet >"$dir/cal.txt" ||
    fail "pcoll-sim calibrate"
"$py" - "$dir/cal.json" <<'PY' || fail "calibrate did not recover the factors"
import json, sys
c = json.load(open(sys.argv[1]))
print(f"calibrate: fit error {c['fit_max_error']:.3f}, validation {c['validation_max_error']:.3f}; "
      f"msg_cost {c['msg_cost_us']:.2f} us (7), latency {c['link_latency_us']:.1f} us (35)")
ok = c["fit_max_error"] < 0.05 and c["validation_max_error"] < 0.05
ok = ok and abs(c["msg_cost_us"] / 7 - 1) < 0.1 and abs(c["link_latency_us"] / 35 - 1) < 0.1
sys.exit(0 if ok else 1)
PY

# a backbone all flows share: 8 nodes' ring of 1 MiB at 1 Gbit/s moves
# 14 MiB through it; at 2 Gbit/s that takes 4 times the links' limit
for bb in "" "--backbone-rate 2gbit"; do
    "$sim" allreduce --json --ranks 8 --platform switch --min-bytes 1M --max-bytes 1M $bb |
        grep '"bench": *"allreduce"' >>"$dir/bb.json" || fail "pcoll-sim allreduce $bb"
done
"$py" - "$dir/bb.json" <<'PY' || fail "--backbone-rate did not limit the traffic"
import json, sys
free, shared = (json.loads(l)["pcoll_us"] for l in open(sys.argv[1]))
print(f"backbone: 1 MiB over 8 nodes {free:.0f} us without, {shared:.0f} us with a 2 Gbit/s backbone")
sys.exit(0 if 3.5 < shared / free < 4.5 else 1)
PY

# fusion --algo ring: every bucket a ring, whose start-up grows with the
# ranks, so WFBP's 64 small buckets take longer at 16 ranks than with the
# library's recursive doubling
for a in auto ring; do
    "$sim" fusion --json --ranks 16 --profile "$prof" --model 633.64,0.0035 --strategies wfbp --iters 1 --algo $a |
        grep '"bench": *"fusion"' >>"$dir/algo.json" || fail "pcoll-sim fusion --algo $a"
done
"$py" - "$dir/algo.json" <<'PY' || fail "fusion --algo ring did not run ring buckets"
import json, sys
auto, ring = (json.loads(l) for l in open(sys.argv[1]))
print(f"fusion wfbp at 16 ranks: {auto['measured_iter_us']:.0f} us ({auto['bucket_algo']}), "
      f"{ring['measured_iter_us']:.0f} us ({ring['bucket_algo']})")
sys.exit(0 if auto["bucket_algo"] == "auto" and ring["bucket_algo"] == "ring"
         and ring["measured_iter_us"] > 1.02 * auto["measured_iter_us"] else 1)
PY

# --poll-load on a switch: the node's cores lose the polling threads' share,
# so a 64-byte allreduce's CPU-bound steps take longer
for pl in 0 0.4; do
    "$sim" allreduce --json --ranks 8 --ranks-per-node 2 --platform switch --min-bytes 64 --max-bytes 64 \
        --poll-load $pl | grep '"bench": *"allreduce"' >>"$dir/poll.json" || fail "pcoll-sim allreduce --poll-load $pl"
done
"$py" - "$dir/poll.json" <<'PY' || fail "--poll-load did not slow the switch's nodes"
import json, sys
idle, polled = (json.loads(l)["pcoll_us"] for l in open(sys.argv[1]))
print(f"poll load: 64 B over 4 nodes x 2 ranks {idle:.1f} us without, {polled:.1f} us with 0.4")
sys.exit(0 if polled > 1.05 * idle else 1)
PY

# bad input: refused, naming the flag
for bad in "allreduce --ranks 0" "allreduce --link-rate fast" "skew --modes nonsense" "allreduce --latency 5" \
    "skew --ranks 8 --ranks-per-node 3" "nosuchcommand" "calibrate --measured /nonexistent" \
    "calibrate --fit nonsense" "calibrate --variant nonsense" "allreduce --backbone-rate 0gbit" \
    "allreduce --platform fattree --backbone-rate 10gbit" "allreduce --poll-load 2" "fusion --algo nonsense"; do
    set -- $bad
    out=$("$sim" "$@" 2>&1) && fail "pcoll-sim $bad was accepted"
    flag=${2:-$1}
    case $out in *"$flag"* | *"$1"*) ;; *) fail "pcoll-sim $bad: the message does not name it: $out" ;; esac
done
echo "test_commands: passed"
