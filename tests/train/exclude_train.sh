#!/bin/sh
# A stopped rank (--inject stop: SIGSTOP for 2 s, then SIGCONT) in partial
# training, 4 ranks, PCOLL_EXCLUDE_MS=200.  In node-shared memory the others
# must go on without it (solo, majority, quorum:2, and wagma with no
# synchronous rounds), and with messages (PCOLL_PARTIAL_SHM_BYTES=0: views)
# too; the stopped rank must catch up when it goes on (wagma by messages:
# the rounds it missed are skipped, delivered as its own model), every step
# must run, and every gradient must be delivered once at every rank.
# Then ranks 1 and 2 stopped at the same step (solo, both data phases),
# and rank 0 alone (majority and quorum:2 in both data phases;
# test_exclude coordinator stops it in every kind by messages), rank 3 on
# the second of two emulated nodes (majority, hierarchical), a node
# leader (rank 2 solo and quorum:2, rank 0 majority and quorum:2,
# hierarchical with PCOLL_NODE_DEPUTY=1), and two
# ranks stopped from outside at a random moment (--inject freeze).
# `timeout` turns a hang into a failure.  The solo run's timeline must show the rounds that left
# rank 1 out at the others and its catch-up at rank 1, pcoll-trace must
# merge it, and its report must name rank 1 (and only it) as left out and
# caught up.
#   exclude_train.sh <pcoll-train> <python3> <mpiexec and its flags...>
set -u
train=$1 py=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "exclude_train: FAILED: $*"; exit 1; }

# run PHASE ALGO [FLAGS...]: one stopped run (FLAGS last: they may override
# the defaults), its JSON checked (INJECT:
# the ranks stopped, default rank 1; STEPS: default 200; BACK=1: the node
# sums must go back from node to node to the leaders' allreduce at both
# nodes, as logged)
run() {
    phase=$1 algo=$2
    shift 2
    env=""
    [ "$phase" = messages ] && env="-x PCOLL_PARTIAL_SHM_BYTES=0"
    [ "$phase" = hierarchical ] && env="-x PCOLL_RANKS_PER_NODE=2"
    [ "$phase" = deputy ] && env="-x PCOLL_RANKS_PER_NODE=2 -x PCOLL_NODE_DEPUTY=1"
    [ "$phase" = direct ] && env="-x PCOLL_RANKS_PER_NODE=2 -x PCOLL_NODE_DEPUTY=2"
    [ "${BACK:-0}" = 1 ] && env="$env -x PCOLL_LOG_LEVEL=info"
    # shellcheck disable=SC2086
    timeout 300 $mpi -x PCOLL_EXCLUDE_MS=200 $env -np 4 "$train" --algo "$algo" --epochs 2 --max-steps "${STEPS:-200}" \
        --train-limit 20000 --inject "${INJECT:-stop:1:60:2}" --quiet --json "$dir/s.json" "$@" >"$dir/out" 2>&1 ||
        { cat "$dir/out"; fail "the $phase $algo run failed"; }
    if [ "${BACK:-0}" = 1 ]; then
        away=$(grep -c "the node sums go node to node from round" "$dir/out")
        back=$(grep -c "the node sums go back to the leaders' allreduce from round" "$dir/out")
        echo "exclude_train: $phase $algo: node to node logged $away times, back to the allreduce $back times"
        [ "$away" -ge 2 ] && [ "$back" -ge 2 ] || { cat "$dir/out"; fail "the node sums did not go back to the allreduce"; }
    fi
    "$py" - "$dir/s.json" "$phase" "$algo" "${INJECT:-stop:1:60:2}" "${STEPS:-200}" <<'PY' || fail "the $phase $algo run did not go on as it should"
import json, sys
r = json.load(open(sys.argv[1]))
phase, algo, inject, steps = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
during, before = r["others_steps_per_s_during_stop"], r["others_steps_per_s_before_stop"]
left, caught = r.get("left_out_rounds", 0), r.get("caught_up_rounds", 0)
print(f"exclude_train: {phase} {algo} ({inject}): others {during:.1f} steps/s during the 2 s stop, {before:.1f} before; "
      f"{left} rounds left it out, {caught} kept for it; next step {r['resume_step_s']:.3f} s after SIGCONT")
checks = {f"{steps} steps": r["steps"] == steps, "stopped about 2 s": 1.9 < r["stop_s"] < 4,
          "its next step after SIGCONT measured": isinstance(r.get("resume_step_s"), (int, float))}
if "contributions_made" in r:  # gradients: each delivered once at every rank
    checks["every gradient delivered once"] = \
        r["contributions_made"] == r["contributions_delivered_min"] == r["contributions_delivered_max"] == 4 * steps
# they went on: a stalled run makes well under a tenth of its rate
checks["the others went on"] = during >= 0.25 * before
checks["rounds left it out"] = left > 0 and caught > 0
bad = [k for k, ok in checks.items() if not ok]
if bad: print("exclude_train: not met:", ", ".join(bad), "; JSON:", json.dumps(r))
sys.exit(1 if bad else 0)
PY
}

mpi="$*"
run shm solo --timeline "$dir/tl"
"$py" - "$dir/tl" <<'PY' || fail "the timeline does not show rank 1 left out and caught up"
import json, sys
ev = {r: [json.loads(l) for l in open(f"{sys.argv[1]}.{r}.jsonl") if '"left_out"' in l] for r in range(4)}
others = [e for r in (0, 2, 3) for e in ev[r] if e.get("ranks") == [1] and not e["catch_up"]]
mine = [e for e in ev[1] if e["catch_up"] and e["first"] <= e["round"]]
print(f"exclude_train: timeline: {len(others)} left_out events naming rank 1 at ranks 0, 2, 3; rank 1 caught up "
      + ", ".join(f"rounds {e['first']}..{e['round']}" for e in mine))
sys.exit(0 if others and mine else 1)
PY
"$(dirname "$train")/pcoll-trace" merge "$dir/tl" -o "$dir/merged.json" >"$dir/out" 2>&1 || { cat "$dir/out"; fail "pcoll-trace merge failed"; }
grep -q "unknown event" "$dir/out" && { cat "$dir/out"; fail "pcoll-trace does not know an event"; }
"$(dirname "$train")/pcoll-trace" report --json "$dir/merged.json" >"$dir/report.json" 2>"$dir/out" ||
    { cat "$dir/out"; fail "pcoll-trace report failed"; }
"$py" - "$dir/report.json" <<'PY' || fail "pcoll-trace report does not name rank 1 as the silent rank"
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
got = [(r["left_out_rounds"], r["caught_up"], r["caught_up_rounds"]) for r in ranks]
print("exclude_train: pcoll-trace report: (left_out_rounds, caught_up, caught_up_rounds) per rank:", got)
# a round names a rank left out when it did not wait for it, which can
# happen once more just after it came back (docs/design.md, section 9): the
# rounds kept for it and the rounds naming it differ by a round or two
ok = got[1][0] > 0 and got[1][1] >= 1 and abs(got[1][2] - got[1][0]) <= 2 and \
    all(g == (0, 0, 0) for i, g in enumerate(got) if i != 1)
sys.exit(0 if ok else 1)
PY
run shm majority
run shm quorum:2
run shm wagma --sync-every 0
run messages solo
run messages majority
run messages quorum:2
run messages wagma --sync-every 0
# ranks 1 and 2 stopped at the same step: the view that leaves one out
# must not wait for the other (by messages), nor a node-shared round
INJECT=stop:1,2:60:2 run messages solo
INJECT=stop:1,2:60:2 run shm solo
# rank 0 stopped: the views' coordinator (by messages its deputy takes
# over) and the leader (the ranks waiting for a MAJORITY round it
# initiates start it; QUORUM's waiting ranks share their arrivals and
# count the quorum themselves)
INJECT=stop:0:60:2 run messages majority
INJECT=stop:0:60:2 run shm majority
INJECT=stop:0:60:2 run messages quorum:2
INJECT=stop:0:60:2 run shm quorum:2
# two nodes of two ranks (the hierarchical data phase): rank 3 stopped,
# whose silence the leader (rank 0, on the other node) cannot see, so its
# node-mate starts the MAJORITY rounds rank 3 initiates
INJECT=stop:3:60:2 run hierarchical majority
# a node leader stopped (PCOLL_NODE_DEPUTY=1): its deputy (the node's
# second rank) finishes the node's rounds, and the node sums go node to
# node (nodesums.h; the leaders' allreduce is given up) until every node's
# comes from its leader again; rank 2 leads the second node, rank 0 the
# first (and is MAJORITY's leader).  The first run is long enough to go
# back to the allreduce, and must.
STEPS=600 BACK=1 INJECT=stop:2:60:2 run deputy majority --train-limit 60000
INJECT=stop:2:60:2 run deputy solo
INJECT=stop:2:60:2 run deputy quorum:2
INJECT=freeze:0:60:2 run deputy majority
# ... and rank 0 as QUORUM's leader: the waiting ranks of the other node
# learn that it is silent from PING messages it leaves unanswered
INJECT=stop:0:60:2 run deputy quorum:2
# the node sums node to node from the first round (PCOLL_NODE_DEPUTY=2):
# a node's deputy takes over from there
INJECT=stop:2:60:2 run direct majority
# stopped from outside, wherever its threads are (adding, taking a part,
# summing, copying: the node-shared steps go on without it)
INJECT=freeze:0:60:2 run shm quorum:2
INJECT=freeze:1:60:2 run shm wagma --sync-every 0
