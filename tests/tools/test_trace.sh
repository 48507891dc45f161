#!/bin/sh
# pcoll-trace on synthetic timelines whose answers are known: 4 ranks whose
# clocks are off (rank 1 by -1 ms drifting to -1.5 ms, rank 2 by +5 ms,
# rank 3 by +0.3 ms), rank 3 4 ms late to each of 10 world allreduces, rank
# 1 not taken by 2 of 6 partial rounds, two dynamic groups, a fusion plan
# of 2 buckets over 3 steps.  Checks the merge (schema, offsets removed,
# flows, nested preduce parts), the report (straggler, lateness, missed
# rounds, waiting, fusion exposure, the clock check passing, and failing on
# files whose offsets are wrong), the picture, bad inputs (file and line
# named, exit 1), usage errors (exit 2), a checker that does fail, and a
# large input in bounded time.  A second run (--dynamic): dynamic groups
# where the slow rank is never the last of its group but is at every
# iteration step (its iteration jumps 1, 4, 7, ...), and calls of one kind
# that overlap (their union counts, no share above 1); also large.
#   test_trace.sh <pcoll-trace> <python3>
set -u
tool=$1
py=$2
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
checks=0

fail() {
    echo "test_trace: FAIL: $*"
    exit 1
}
pass() {
    checks=$((checks + 1))
}
check_trace() {
    "$py" "$here/check_trace.py" "$@" >"$dir/check.out" 2>&1 || { cat "$dir/check.out"; return 1; }
}
# expect_exit CODE TEXT -- command...: the exit status, and TEXT (if not
# empty) in its standard error
expect_exit() {
    want=$1 text=$2
    shift 3
    "$@" >"$dir/out" 2>"$dir/err"
    got=$?
    [ "$got" = "$want" ] || { cat "$dir/err"; fail "exit $got, not $want: $*"; }
    if [ -n "$text" ] && ! grep -qF -- "$text" "$dir/err"; then
        cat "$dir/err"
        fail "no '$text' in the message of: $*"
    fi
    pass
}

# ---- the synthetic run ----
cat >"$dir/gen.py" <<'EOF'
import json
import sys

out = sys.argv[1]
wrong = "--wrong-offsets" in sys.argv     # rank 2's files claim its clock is rank 0's
big = int(sys.argv[sys.argv.index("--big") + 1]) if "--big" in sys.argv else 0
# --dynamic N: only a preduce run of N steps (a multiple of 3) and overlapping calls (dynamic_run)
dyn = int(sys.argv[sys.argv.index("--dynamic") + 1]) if "--dynamic" in sys.argv else 0
MS = 1000000
T0 = 9100000000123457                     # above 2**53: exact integers needed
TSTOP = T0 + (big * 6 * MS + 10 * MS if big else (10 * dyn + 150) * MS if dyn else 400 * MS)
P = 4
ERR = {0: (0, 0), 1: (900, 800), 2: (1200, 1500), 3: (500, 500)}


def offset(r, T):
    if r == 1:                            # drifts: -1 ms at the start, -1.5 ms at the stop
        return -MS - (MS // 2) * (T - T0) // (TSTOP - T0)
    return {0: 0, 2: 5 * MS, 3: 300000}[r]


def claimed(r, T):
    return 0 if wrong and r == 2 else offset(r, T)


def local(r, T):
    return T + offset(r, T)


events = {r: [] for r in range(P)}      # (when recorded, line)


def ev(r, rec, **kw):
    kw["t"] = local(r, kw["t"])
    events[r].append((rec, kw))


def span(r, name, start, end, tid=0, **kw):
    ev(r, end, ev=name, t=start, tid=tid, dur=local(r, end) - local(r, start), **kw)


def threads():
    for r in range(P):
        ev(r, T0, ev="thread", t=T0 + r * 1000 + 10, tid=0, name="application")
        ev(r, T0, ev="thread", t=T0 + r * 1000 + 20, tid=1, name="progress")


def world_allreduces(count, first, every):
    """rank 3 arrives 4 ms late; all complete 0.5 ms after it"""
    for k in range(count):
        base = T0 + first + k * every
        for r in range(P):
            ev(r, base - MS, ev="mark", t=base - MS, tid=0, name="step", ph="B")
            ev(r, base - MS, ev="mark", t=base - 900000, tid=0, name="forward", ph="B")
            ev(r, base, ev="mark", t=base - 100000, tid=0, name="forward", ph="E")
            arrive = base + (4 * MS if r == 3 else r * 100000)
            span(r, "allreduce", arrive, base + 4 * MS + 500000, call="allreduce", algo="ring", bytes=4096,
                 dtype="float32", n=4, status=0)
            ev(r, base + 5 * MS, ev="mark", t=base + 5 * MS, tid=0, name="step", ph="E")


def group_allreduces():
    """two on the member list [0, 2]: rank 2 1 ms after rank 0"""
    for k in range(2):
        base = T0 + 212 * MS + k * 5 * MS
        for r in (0, 2):
            span(r, "allreduce", base + (MS if r == 2 else 0), base + 1200000, call="allreduce", algo="recdbl",
                 bytes=64, dtype="float32", n=2, group=[0, 2], status=0)


def partial_rounds():
    """object 7: rank 1 is not taken by rounds 1 and 3; round 5 is synchronous"""
    for rnd in range(6):
        base = T0 + 230 * MS + rnd * 10 * MS
        root = (rnd * 2) % 4
        sync = 1 if rnd == 5 else 0
        taken = [x for x in range(P) if not (x == 1 and rnd in (1, 3))]
        for x in taken:
            entry = base + x * 200000
            end = base + 1200000 if sync else entry + MS
            span(x, "partial_call", entry, end, obj=7, kind="solo", fn="allreduce", round=rnd, waited=sync,
                 rounds=1, status=0)
        ev(root, base, ev="round_start", t=base + root * 200000 + 50000, tid=0, obj=7, round=rnd, root=root,
           sync=sync)
        for x in range(P):
            done = base + (1100000 if sync else 900000)
            if x not in taken:
                done = base + 10 * MS + 210000      # it sees the round at its next call
            ev(x, done, ev="round", t=done, tid=1, obj=7, kind="solo", round=rnd, root=root, active=len(taken),
               contributions=len(taken), stale=0, sync=sync, standin=0)


def dynamic_groups():
    """object 9: {0, 2} (rank 2 1 ms after rank 0), {1, 3} (rank 3 4 ms after rank 1), all at iteration 1:
    one iteration step, rank 3 last (4, 4 and 3 ms after the others: 11 ms avoided)"""
    Q = T0 + 300 * MS
    for gid, (a, b, late) in enumerate([(0, 2, MS), (1, 3, 4 * MS)], start=1):
        for r, ready in ((a, Q), (b, Q + late)):
            span(r, "preduce", ready, Q + late + 500000, obj=9, policy="fifo", group_id=gid, members=[a, b],
                 weight=0.5, iteration=1, group_iteration=1, wait_ns=local(r, Q + late) - local(r, ready),
                 reduce_ns=local(r, Q + late + 500000) - local(r, Q + late), status=0)


def dynamic_run(steps):
    """Object 13 (times in ms from D): ranks 0, 1, 3 become ready for step i = 1..steps at 10 i + 0.1 r with
    iteration i and form a group {0, 1, 3} (it starts at 10 i + 0.3, when rank 3 is ready, and takes 0.5 ms).
    Rank 2 is slow: ready at 30 j + 22 (j = 0, 1, ...) with iteration 1 + 3 j, it joins the group of step
    3 j + 3 (group iteration 3 j + 3, so its next is 3 j + 4: 1, 4, 7, ...).  In every group rank 3 is the last
    to be ready, rank 2 never.  Plus a failed call of rank 2 at 10 x steps + 30 (iteration 10 x steps + 38: were
    it counted, every rank would reach two more steps), and on the member list [0, 1] eight plan starts that
    overlap: rank 0's at A + 2 b, rank 1's at A + 10 + 2 b (b = 0..7), all until A + 50, A = 10 x steps + 70."""
    D = T0 + 10 * MS
    at = lambda ms: D + int(round(ms * MS))
    for i in range(1, steps + 1):
        slow = i % 3 == 0
        members = [0, 1, 2, 3] if slow else [0, 1, 3]
        begin = 10 * i + 0.3
        for r in members:
            ready = 10 * i + 0.1 * r if r != 2 else 10 * i - 8
            it = i if r != 2 else i - 2
            span(r, "preduce", at(ready), at(begin + 0.5), obj=13, policy="fifo", group_id=i, members=members,
                 weight=1.0 / len(members), iteration=it, group_iteration=i,
                 wait_ns=local(r, at(begin)) - local(r, at(ready)),
                 reduce_ns=local(r, at(begin + 0.5)) - local(r, at(begin)), status=0)
    F = 10 * steps + 30
    span(2, "preduce", at(F), at(F + 1), obj=13, policy="fifo", group_id=0, members=[], weight=0.0,
         iteration=10 * steps + 38, group_iteration=0, wait_ns=0, reduce_ns=0, status=-3)
    A = 10 * steps + 70
    for b in range(8):
        for r in (0, 1):
            span(r, "allreduce", at(A + 2 * b + (10 if r else 0)), at(A + 50), call="start", algo="shm",
                 bytes=1 << 20, dtype="float32", n=2, group=[0, 1], status=0)


def fusion():
    """object 11: bucket 0 (layers 2-3) ends before backprop does, bucket 1
    (layers 0-1) 2.5 ms after the last layer is ready; planned: 0 and 1 ms"""
    for r in range(P):
        for b, (first, last, ps, pe) in enumerate([(2, 3, 10, 12), (0, 1, 13, 16)]):
            ev(r, T0 + 320 * MS, ev="fusion_plan", t=T0 + 320 * MS, tid=0, obj=11, bucket=b, first=first,
               last=last, bytes=1024, pred_start_ns=ps * MS, pred_end_ns=pe * MS, compute_ns=15 * MS,
               iter_ns=16 * MS)
        for step in range(3):
            S = T0 + 325 * MS + step * 20 * MS
            for layer, at in ((3, 9), (2, 10), (1, 14), (0, 15)):
                ev(r, S + at * MS, ev="fusion_ready", t=S + at * MS, tid=0, obj=11, step=step, layer=layer)
            span(r, "fusion_bucket", S + 10 * MS, S + 12 * MS, tid=1, obj=11, step=step, bucket=0, bytes=512)
            span(r, "fusion_bucket", S + 15 * MS, S + 17500000, tid=1, obj=11, step=step, bucket=1, bytes=512)
            span(r, "fusion_wait", S + 15100000, S + 17500000, obj=11, step=step)


threads()
if big:
    world_allreduces(big, 5 * MS, 6 * MS)
elif dyn:
    dynamic_run(dyn)
else:
    world_allreduces(10, 10 * MS, 20 * MS)
    ev(0, T0 + 13 * MS, ev="stall", t=T0 + 13 * MS, tid=1, fn="allreduce", what="waiting", ranks=[3], timeout=0)
    group_allreduces()
    partial_rounds()
    dynamic_groups()
    fusion()
for r in range(P):
    evs = [e for _, e in sorted(events[r], key=lambda p: p[0])]   # spans are recorded when they end
    start = T0 + r * 1000
    head = {"ev": "header", "pcoll_timeline": 1, "rank": r, "size": P, "host": "n%d" % (r // 2), "pid": 100 + r,
            "clock": "monotonic", "t": local(r, start), "offset_ns": claimed(r, start), "offset_err_ns": ERR[r][0]}
    stop = {"ev": "stop", "t": local(r, TSTOP), "offset_ns": claimed(r, TSTOP), "offset_err_ns": ERR[r][1],
            "events": len(evs)}
    with open("%s.%d.jsonl" % (out, r), "w") as f:
        for e in [head] + evs + [stop]:
            f.write(json.dumps(e, separators=(",", ":")) + "\n")
EOF

# ---- what the merged trace and the report must say ----
cat >"$dir/expect.py" <<'EOF'
import json
import sys

case, path = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
problems = []


def near(what, got, want, tol):
    if got is None or abs(got - want) > tol:
        problems.append("%s: %r, expected %r +- %r" % (what, got, want, tol))


def same(what, got, want):
    if got != want:
        problems.append("%s: %r, expected %r" % (what, got, want))


def merged(doc):
    evs = doc["traceEvents"]

    def find(pid, name, ph="X", **args):
        for e in evs:
            if e.get("pid") == pid and e.get("name") == name and e.get("ph") == ph and \
                    all(e.get("args", {}).get(k) == v for k, v in args.items()):
                return e
        problems.append("no %s %s at rank %d with %r" % (ph, name, pid, args))
        return {}
    # offsets removed: rank 2 (+5 ms) and rank 1 (drifting) land on rank 0's time
    near("rank 2's first allreduce ts", find(2, "allreduce").get("ts"), 10200.0, 1.0)
    near("rank 1's first allreduce ts", find(1, "allreduce").get("ts"), 10100.0, 1.0)
    late = find(1, "fusion_bucket", step=2, bucket=1)
    near("rank 1's last bucket ts (drift interpolated)", late.get("ts"), 380000.0, 1.0)
    near("rank 1's last bucket dur", late.get("dur"), 2500.0, 1.0)
    near("rank 3's round 4 completion", find(3, "round", "i", round=4).get("ts"), 270900.0, 1.0)
    # args keep the line's fields, and the rank
    a = find(2, "allreduce")
    same("args.algo", a.get("args", {}).get("algo"), "ring")
    same("args.rank", a.get("args", {}).get("rank"), 2)
    same("args.dur is the rank's own", a.get("args", {}).get("dur"), 4300000)
    # preduce: its wait and reduce nested
    near("rank 1's preduce wait", find(1, "wait").get("dur"), 4000.0, 1.0)
    near("rank 1's preduce reduce", find(1, "reduce").get("dur"), 500.0, 1.0)
    # flows: one per round from its root, to each other rank
    s = [e for e in evs if e.get("ph") == "s"]
    f = [e for e in evs if e.get("ph") == "f"]
    same("flow starts", len(s), 6)
    same("flow ends", len(f), 18)
    same("flow ids unique per round", len({e["id"] for e in s}), 6)
    same("flow ends bind to their starts", {e["id"] for e in f}, {e["id"] for e in s})
    same("flow ends bp", {e.get("bp") for e in f}, {"e"})
    for e in s:
        same("a flow starts at its root", e["pid"], e["args"]["root"])
    other = doc["otherData"]
    near("clock_error_bound_us", other["clock_error_bound_us"], 1.5, 1e-9)
    near("rank 1's drift_ppm", other["clocks"][1]["drift_ppm"], -1250.0, 2.0)
    same("marks begun and ended", sum(e["ph"] == "B" for e in evs), sum(e["ph"] == "E" for e in evs))


def report(doc):
    r = doc["ranks"]
    same("straggler", doc["straggler"], 3)
    near("straggler_lateness_ms", doc["straggler_lateness_ms"], 4.0, 0.01)
    same("missed rounds", [x["missed_rounds"] for x in r], [0, 2, 0, 0])
    same("rank 3 exchanges and last", (r[3]["exchanges"], r[3]["last"]), (17, 15))
    near("rank 3 lateness p90", r[3]["lateness_ms"]["p90"], 4.0, 0.01)
    near("rank 3 lateness mean", r[3]["lateness_ms"]["mean"], (6 * 0.6 + 11 * 4.0) / 17, 0.01)
    near("rank 3 caused", r[3]["wait_caused_s"], 0.1182, 1e-4)
    near("rank 3 avoided", r[3]["wait_avoided_s"], 0.0036 + 0.011, 1e-4)   # rounds, the iteration step
    near("rank 1 avoided", r[1]["wait_avoided_s"], 0.0592, 1e-4)
    near("rank 1 preduce wait median", (r[1]["preduce_wait_ms"] or {}).get("median"), 4.0, 0.01)
    same("exchanges", doc["exchanges"], {"allreduces": 12, "allreduces_incomplete": 0, "partial_rounds": 6,
                                          "sync_rounds": 1, "dynamic_groups": 2, "iteration_steps": 1})
    kinds = {k["kind"]: k for k in doc["kinds"]}
    ring = kinds.get("allreduce:ring", {"ranks": [{}] * 4})["ranks"]
    same("rank 3 waits in no allreduce", ring[3].get("waiting_share"), 0)
    if not ring[0].get("waiting_share", 0) > 0.09:
        problems.append("rank 0's waiting share in allreduce:ring: %r" % ring[0].get("waiting_share"))
    if "compute" not in kinds or not 0 < kinds["compute"]["compute_share"] < 1:
        problems.append("no compute share")
    fusion = {b["bucket"]: b for b in doc["fusion"]}
    same("fusion buckets", sorted(fusion), [0, 1])
    b1 = fusion.get(1, {})
    near("bucket 1 measured exposed", b1.get("measured_exposed_ms"), 2.5, 0.01)
    near("bucket 1 predicted exposed", b1.get("predicted_exposed_ms"), 1.0, 1e-9)
    near("bucket 1 measured duration", b1.get("measured_duration_ms"), 2.5, 0.01)
    near("bucket 1 predicted duration", b1.get("predicted_duration_ms"), 3.0, 1e-9)
    near("bucket 0 measured exposed", fusion.get(0, {}).get("measured_exposed_ms"), 0.0, 1e-9)
    same("bucket steps", b1.get("steps"), 3)
    c = doc["clock_check"]
    same("clock check ok", c["ok"], True)
    if not c["pairs"] > 40:
        problems.append("clock check: only %r pairs" % c["pairs"])


def dynamic(doc, steps=12):
    """dynamic_run: iteration steps k = 1 .. 3 (steps / 3) - 2 (the largest every rank reached: rank 2's).
    The fast ranks arrive at step k at 10 k (+ 0.1 r) ms; rank 2 with its first call whose iteration is
    >= k: at 22 ms for k = 1, at 52 ms for k = 2, 3, 4 (iteration 4), 82 for 5, 6, 7...  So it is last at
    every step, late by 12, then 32, 22, 12, 32, 22, 12...: for 12 steps 12 x 4, 22 x 3, 32 x 3, median 22,
    p90 32, mean 21; the others would have waited 3 x its lateness - 0.4 ms per step: 3 x 210 - 4 = 626 ms."""
    r = doc["ranks"]
    nsteps = 3 * (steps // 3) - 2
    same("straggler", doc["straggler"], 2)
    near("straggler_lateness_ms", doc["straggler_lateness_ms"], 22.0, 1e-3)
    same("rank 2 exchanges and last", (r[2]["exchanges"], r[2]["last"]), (nsteps, nsteps))
    same("exchanges", doc["exchanges"], {"allreduces": 8, "allreduces_incomplete": 0, "partial_rounds": 0,
                                          "sync_rounds": 0, "dynamic_groups": steps, "iteration_steps": nsteps})
    same("the others are never last at a step", [x["last"] for x in r], [0, 8, nsteps, 0])
    if steps != 12:
        return
    near("rank 2 lateness p90", r[2]["lateness_ms"]["p90"], 32.0, 1e-3)
    near("rank 2 lateness mean", r[2]["lateness_ms"]["mean"], 21.0, 1e-3)
    near("rank 2 avoided", r[2]["wait_avoided_s"], 0.626, 1e-5)
    near("rank 3 lateness", r[3]["lateness_ms"]["max"], 0.3, 1e-3)
    near("rank 2 preduce wait median", (r[2]["preduce_wait_ms"] or {}).get("median"), 8.3, 1e-3)
    near("rank 1 caused (the plan starts)", r[1]["wait_caused_s"], 0.080, 1e-5)
    # time shares: rank 0's eight plan starts overlap, their union is 50 ms (sum: 344 ms), its waiting in
    # them [A, A + 10 + 2 b) 24 ms (sum: 80 ms); rank 1's 40 ms (sum 264 ms), no waiting
    traced = [x["traced_s"] for x in r]
    kinds = {k["kind"]: k for k in doc["kinds"]}
    shm = kinds.get("allreduce:shm", {"ranks": [{}] * 4, "exchange_share": None})
    near("rank 0's allreduce:shm share", shm["ranks"][0].get("exchange_share"), 0.050 / traced[0], 1e-6)
    near("rank 0's allreduce:shm waiting", shm["ranks"][0].get("waiting_share"), 0.024 / traced[0], 1e-6)
    near("rank 1's allreduce:shm share", shm["ranks"][1].get("exchange_share"), 0.040 / traced[1], 1e-6)
    near("allreduce:shm share", shm["exchange_share"], 0.090 / sum(traced), 1e-6)
    # rank 0: 12 preduce calls of 0.8 ms outside them
    near("rank 0's compute", r[0]["compute_share"], 1 - (0.050 + 12 * 0.0008) / traced[0], 1e-6)
    for k in doc["kinds"]:
        for x in [k] + k["ranks"]:
            for key in ("exchange_share", "waiting_share", "compute_share"):
                if x.get(key) is not None and not 0 <= x[key] <= 1:
                    problems.append("%s %s of %s: %r" % (k["kind"], key, x.get("rank", "all ranks"), x[key]))


def wrong_clocks(doc):
    c = doc["clock_check"]
    same("clock check ok (wrong offsets)", c["ok"], False)
    if not c["violations"] > 0 or not c["worst_violation_us"] > 500:
        problems.append("clock check: %r" % c)


{"merged": merged, "report": report, "wrong": wrong_clocks, "dynamic": dynamic,
 "dynamic-big": lambda doc: dynamic(doc, int(sys.argv[3]))}[case](doc)
for p in problems:
    print("test_trace: " + p)
sys.exit(1 if problems else 0)
EOF

mkdir "$dir/good" "$dir/wrong"
"$py" "$dir/gen.py" "$dir/good/t" || fail "the generator"
"$py" "$dir/gen.py" "$dir/wrong/t" --wrong-offsets || fail "the generator"

# ---- merge ----
"$tool" merge "$dir/good/t" -o "$dir/good.json" 2>"$dir/err" || { cat "$dir/err"; fail "merge"; }
[ -s "$dir/err" ] && { cat "$dir/err"; fail "merge warned about good input"; }
check_trace "$dir/good.json" --ranks 4 --nesting || fail "the merged trace does not pass check_trace.py"
pass
"$py" "$dir/expect.py" merged "$dir/good.json" || fail "the merged trace"
pass
"$tool" merge "$dir/good/t" -o - >"$dir/stdout.json" 2>/dev/null || fail "merge -o -"
cmp -s "$dir/good.json" "$dir/stdout.json" || fail "merge -o - differs from merge -o FILE"
pass

# ---- report ----
"$tool" report "$dir/good.json" --json >"$dir/report.json" || fail "report --json"
"$py" "$dir/expect.py" report "$dir/report.json" || fail "the report"
pass
"$tool" report "$dir/good.json" >"$dir/report.txt" || fail "report"
grep -q '^straggler: rank 3 (lateness median 4.000 ms, last in 15 of 17 exchanges)$' "$dir/report.txt" ||
    { cat "$dir/report.txt"; fail "the text report's straggler line"; }
grep -q '^clock check: .*: ok$' "$dir/report.txt" || fail "the text report's clock check"
pass
"$tool" merge "$dir/wrong/t" -o "$dir/wrong.json" 2>/dev/null || fail "merge (wrong offsets)"
"$tool" report "$dir/wrong.json" --json >"$dir/wrong-report.json" || fail "report (wrong offsets)"
"$py" "$dir/expect.py" wrong "$dir/wrong-report.json" || fail "the clock check passes clocks that are 5 ms off"
"$tool" report "$dir/wrong.json" | grep -q '^clock check: .*NOT OK' || fail "the text report's failed clock check"
pass

# ---- dynamic groups: lateness by iteration steps; overlapping calls of one kind count once ----
mkdir "$dir/dyn"
"$py" "$dir/gen.py" "$dir/dyn/t" --dynamic 12 || fail "the generator (dynamic)"
"$tool" merge "$dir/dyn/t" -o "$dir/dyn.json" 2>"$dir/err" || { cat "$dir/err"; fail "merge (dynamic)"; }
check_trace "$dir/dyn.json" --ranks 4 --nesting || fail "the merged dynamic run does not pass check_trace.py"
"$tool" report "$dir/dyn.json" --json >"$dir/dyn-report.json" || fail "report (dynamic)"
"$py" "$dir/expect.py" dynamic "$dir/dyn-report.json" || fail "the report of the dynamic run"
pass
"$tool" report "$dir/dyn.json" >"$dir/dyn-report.txt" || fail "report (dynamic)"
grep -q '^straggler: rank 2 (lateness median 22.000 ms, last in 10 of 10 exchanges)$' "$dir/dyn-report.txt" &&
    grep -q ', 10 iteration steps (of 12 dynamic groups)$' "$dir/dyn-report.txt" &&
    grep -q '^time shares (.*overlap count once.*kinds may overlap each other' "$dir/dyn-report.txt" ||
    { cat "$dir/dyn-report.txt"; fail "the text report of the dynamic run"; }
pass

# ---- svg ----
"$tool" svg "$dir/good.json" -o "$dir/all.svg" || fail "svg"
"$tool" svg "$dir/good.json" -o "$dir/window.svg" --from 225 --to 300 --width 700 --title 'rounds <&>' ||
    fail "svg of a window"
"$py" - "$dir/all.svg" "$dir/window.svg" <<'EOF' || fail "the pictures"
import sys
import xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
for path in sys.argv[1:]:
    root = ET.parse(path).getroot()
    assert root.tag == NS + "svg", (path, root.tag)
    texts = [t.text or "" for t in root.iter(NS + "text")]
    elements = sum(1 for _ in root.iter())
    assert all("rank %d" % r in texts for r in range(4)), (path, "rank labels")
    assert elements < 3000, (path, elements)
    assert any(True for _ in root.iter(NS + "rect")), path
window = ET.parse(sys.argv[2]).getroot()
assert window.get("width") == "700"
assert any(l.get("class") == "fl" for l in window.iter(NS + "line")), "no flow lines in the window of the rounds"
assert any(t.text == "rounds <&>" for t in window.iter(NS + "text")), "the title"
EOF
pass

# ---- inputs that are odd but usable ----
mkdir "$dir/odd"
cp "$dir/good/t".*.jsonl "$dir/odd/"
sed -i '$d' "$dir/odd/t.3.jsonl"   # no stop line
sed -i '2i {"ev":"mark","t":9100000000223457,"tid":0,"name":"lost","ph":"E"}' "$dir/odd/t.0.jsonl"
sed -i '2i {"ev":"mark","t":9100000005223457,"tid":0,"name":"open","ph":"B"}' "$dir/odd/t.2.jsonl"
sed -i '2i {"ev":"future_event","t":9100000005223457,"tid":0}' "$dir/odd/t.2.jsonl"
# a mark of no length (its begin and end at the same t)
sed -i '2i {"ev":"mark","t":9100000000423457,"tid":0,"name":"blink","ph":"E"}' "$dir/odd/t.3.jsonl"
sed -i '2i {"ev":"mark","t":9100000000423457,"tid":0,"name":"blink","ph":"B"}' "$dir/odd/t.3.jsonl"
# an iallreduce in flight across the end of rank 1's first step
sed -i '2i {"ev":"allreduce","t":9100000013923272,"tid":0,"dur":1200000,"call":"iallreduce","algo":"ring","n":4}' \
    "$dir/odd/t.1.jsonl"
"$tool" merge "$dir/odd/t" -o "$dir/odd.json" 2>"$dir/err" || { cat "$dir/err"; fail "merge of odd input"; }
for text in "odd/t.3.jsonl: no stop line" "t.0.jsonl:2: mark \"lost\" ends without a begin" \
    "mark \"open\" on thread 0 is still open" "unknown event \"future_event\""; do
    grep -qF -- "$text" "$dir/err" || { cat "$dir/err"; fail "no warning '$text'"; }
done
check_trace "$dir/odd.json" --ranks 4 --nesting || fail "the merge of odd input does not pass check_trace.py"
grep -q '"pid":1,"tid":1048576,"args":{"name":"application (overlapping calls)"}' "$dir/odd.json" &&
    grep -q '"call":"iallreduce"' "$dir/odd.json" && grep -q "note: 1 spans overlap" "$dir/err" ||
    fail "a call across a mark's end is not on an overlap track"
grep -q blink "$dir/err" && fail "a mark of no length is taken for unbalanced"
[ "$(grep -c '"name":"blink","cat":"mark","ph":"[BE]"' "$dir/odd.json")" = 2 ] || fail "a mark of no length is lost"
grep -q '"name":"lost","cat":"mark","ph":"i"' "$dir/odd.json" || fail "an unmatched mark end is not kept"
grep -q '"name":"future_event","cat":"pcoll","ph":"i"' "$dir/odd.json" || fail "an unknown event is not kept"
pass

# ---- bad inputs: exit 1, the file and line named ----
bad() { # bad NAME: a copy of the good files in $dir/NAME
    rm -rf "${dir:?}/$1"
    mkdir "$dir/$1"
    cp "$dir/good/t".*.jsonl "$dir/$1/"
}
bad missing
rm "$dir/missing/t.2.jsonl"
expect_exit 1 "missing/t.2.jsonl" -- "$tool" merge "$dir/missing/t" -o "$dir/x.json"
[ -e "$dir/x.json" ] && fail "a failed merge left its output"
bad malformed
sed -i '5s/.*/{"ev":"allreduce","t":12,/' "$dir/malformed/t.1.jsonl"
expect_exit 1 "malformed/t.1.jsonl:5: malformed JSON" -- "$tool" merge "$dir/malformed/t" -o "$dir/x.json"
bad mismatch
sed -i '1s/"rank":2/"rank":3/' "$dir/mismatch/t.2.jsonl"
expect_exit 1 "mismatch/t.2.jsonl:1: header says rank 3" -- "$tool" merge "$dir/mismatch/t" -o "$dir/x.json"
bad size
sed -i '1s/"size":4/"size":5/' "$dir/size/t.1.jsonl"
expect_exit 1 "size/t.1.jsonl:1: size 5" -- "$tool" merge "$dir/size/t" -o "$dir/x.json"
bad nodur
line=$(grep -n '"ev":"allreduce"' "$dir/nodur/t.3.jsonl" | head -1 | cut -d: -f1)
sed -i "${line}s/,\"dur\":[0-9]*//" "$dir/nodur/t.3.jsonl"
expect_exit 1 "nodur/t.3.jsonl:$line: \"allreduce\" line without \"dur\"" -- "$tool" merge "$dir/nodur/t" -o "$dir/x.json"
# an offset that moved faster than the clock ran (it would map a later event
# before an earlier one), and times out of range
mkdir -p "$dir/drift"
printf '%s\n' '{"ev":"header","pcoll_timeline":1,"rank":0,"size":1,"t":0,"offset_ns":0,"offset_err_ns":10}' \
    '{"ev":"stop","t":1000,"offset_ns":5000,"offset_err_ns":10}' >"$dir/drift/t.0.jsonl"
expect_exit 1 "drift/t.0.jsonl:2: stop: offset_ns moved by 5000 ns in 1000 ns" -- \
    "$tool" merge "$dir/drift/t" -o "$dir/x.json"
printf '%s\n' '{"ev":"header","pcoll_timeline":1,"rank":0,"size":1,"t":0,"offset_ns":0,"offset_err_ns":10}' \
    '{"ev":"allreduce","t":9000000000000000000,"tid":0,"dur":5,"call":"allreduce","algo":"ring","bytes":8,"n":1,"status":0}' \
    >"$dir/drift/t.0.jsonl"
expect_exit 1 "drift/t.0.jsonl:2: \"allreduce\": t 9000000000000000000 out of range" -- \
    "$tool" merge "$dir/drift/t" -o "$dir/x.json"
pass
# two members arriving at once: the last is the smaller rank, whatever the list's order
mkdir -p "$dir/tie"
for r in 0 1; do
    printf '%s\n' "{\"ev\":\"header\",\"pcoll_timeline\":1,\"rank\":$r,\"size\":2,\"t\":0,\"offset_ns\":0,\"offset_err_ns\":0}" \
        '{"ev":"allreduce","t":100,"tid":0,"dur":50,"call":"allreduce","algo":"ring","bytes":8,"n":2,"group":[1,0],"status":0}' \
        '{"ev":"stop","t":1000,"offset_ns":0,"offset_err_ns":0}' >"$dir/tie/t.$r.jsonl"
done
"$tool" merge "$dir/tie/t" -o "$dir/tie.json" 2>/dev/null || fail "tie: merge"
"$tool" report "$dir/tie.json" --json >"$dir/tie.report" || fail "tie: report"
"$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if [x["last"] for x in r["ranks"]] == [1, 0] else 1)' \
    "$dir/tie.report" || fail "tie: the last is not the smaller rank: $(cat "$dir/tie.report")"
pass
bad noheader
sed -i '1d' "$dir/noheader/t.0.jsonl"
expect_exit 1 "noheader/t.0.jsonl:1: the first line is \"thread\", not the header" -- \
    "$tool" merge "$dir/noheader/t" -o "$dir/x.json"
printf '{"traceEvents":[]}\n' >"$dir/foreign.json"
expect_exit 1 "not a merged pcoll trace" -- "$tool" report "$dir/foreign.json"
head -c 3000 "$dir/good.json" >"$dir/cut.json"
expect_exit 1 "cut.json:" -- "$tool" report "$dir/cut.json"
expect_exit 1 "cut.json:" -- "$tool" svg "$dir/cut.json" -o "$dir/x.svg"
expect_exit 1 "nothing-here.json: cannot open" -- "$tool" report "$dir/nothing-here.json"
line=$(grep -n '"iteration":' "$dir/dyn.json" | head -1 | cut -d: -f1)
sed "${line}s/\"iteration\":[0-9]*,//" "$dir/dyn.json" >"$dir/noiter.json"
expect_exit 1 "noiter.json:$line: \"preduce\" event: args.iteration missing" -- "$tool" report "$dir/noiter.json"

# ---- usage errors: exit 2 ----
expect_exit 2 "no command" -- "$tool"
expect_exit 2 "unknown command" -- "$tool" bogus
expect_exit 2 "-o FILE" -- "$tool" merge "$dir/good/t"
expect_exit 2 "one PREFIX only" -- "$tool" merge a b -o "$dir/x.json"
expect_exit 2 "unknown option --bogus" -- "$tool" merge "$dir/good/t" -o "$dir/x.json" --bogus
expect_exit 2 "no FILE" -- "$tool" report
expect_exit 2 "unknown option --csv" -- "$tool" report "$dir/good.json" --csv
expect_exit 2 "-o OUT.svg" -- "$tool" svg "$dir/good.json"
expect_exit 2 "--width" -- "$tool" svg "$dir/good.json" -o "$dir/x.svg" --width wide
expect_exit 2 "--from" -- "$tool" svg "$dir/good.json" -o "$dir/x.svg" --from -3
expect_exit 2 "--to must be after --from" -- "$tool" svg "$dir/good.json" -o "$dir/x.svg" --from 5 --to 3
expect_exit 2 "--from 1000" -- "$tool" svg "$dir/good.json" -o "$dir/x.svg" --from 1000
expect_exit 0 "" -- "$tool" --help
grep -q '^usage: pcoll-trace merge PREFIX -o FILE' "$dir/out" || fail "--help prints no usage"

# ---- the checker fails on what is wrong ----
"$py" - "$dir/good.json" "$dir/broken.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
evs = doc["traceEvents"]
evs.append({"name": "step", "ph": "E", "pid": 0, "tid": 0, "ts": 1e9})      # an end without a begin
evs.append({"name": "allreduce", "ph": "X", "pid": 1, "tid": 0, "ts": 0})   # before its thread's last, no dur
json.dump(doc, open(sys.argv[2], "w"))
EOF
check_trace "$dir/broken.json" >/dev/null 2>&1 && fail "check_trace.py passes a broken trace"
grep -q "no open B" "$dir/check.out" && grep -q "without dur" "$dir/check.out" && grep -q "before the previous" \
    "$dir/check.out" || { cat "$dir/check.out"; fail "check_trace.py does not say what is wrong"; }
check_trace "$dir/good.json" --ranks 5 >/dev/null 2>&1 && fail "check_trace.py passes a trace without rank 4"
"$py" - "$dir/good.json" "$dir/crossing.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
first_step = next(e for e in doc["traceEvents"] if e.get("name") == "step" and e.get("ph") == "B" and e["pid"] == 0)
doc["traceEvents"].append({"name": "late", "ph": "X", "pid": 0, "tid": 0, "ts": first_step["ts"] + 5999.0,
                           "dur": 10.0, "cat": "pcoll"})   # runs past the step's end
doc["traceEvents"].sort(key=lambda e: (e.get("ph") != "M", e.get("ts", 0)))
json.dump(doc, open(sys.argv[2], "w"))
EOF
check_trace "$dir/crossing.json" >/dev/null 2>&1 || fail "check_trace.py without --nesting fails a crossing span"
check_trace "$dir/crossing.json" --nesting >/dev/null 2>&1 && fail "check_trace.py --nesting passes a crossing span"
pass

# ---- a large input: nothing quadratic ----
mkdir "$dir/big"
"$py" "$dir/gen.py" "$dir/big/t" --big 25000 || fail "the generator (big)"
start=$(date +%s)
"$tool" merge "$dir/big/t" -o "$dir/big.json" || fail "merge (big)"
"$tool" report "$dir/big.json" --json >"$dir/big-report.json" || fail "report (big)"
"$tool" svg "$dir/big.json" -o "$dir/big.svg" 2>/dev/null || fail "svg (big)"
took=$(($(date +%s) - start))
events=$(grep -c '"ph"' "$dir/big.json")
[ "$took" -le 60 ] || fail "merge, report and svg of $events events took $took s"
grep -q '"straggler":3,' "$dir/big-report.json" || fail "the big run's straggler"
pass
mkdir "$dir/bigdyn"   # 30000 preduce calls per fast rank, 29998 iteration steps
"$py" "$dir/gen.py" "$dir/bigdyn/t" --dynamic 30000 || fail "the generator (big dynamic)"
start=$(date +%s)
"$tool" merge "$dir/bigdyn/t" -o "$dir/bigdyn.json" || fail "merge (big dynamic)"
"$tool" report "$dir/bigdyn.json" --json >"$dir/bigdyn-report.json" || fail "report (big dynamic)"
took=$(($(date +%s) - start))
[ "$took" -le 30 ] || fail "merge and report of the big dynamic run took $took s"
"$py" "$dir/expect.py" dynamic-big "$dir/bigdyn-report.json" 30000 || fail "the report of the big dynamic run"
pass

echo "test_trace: passed ($checks checks)"
