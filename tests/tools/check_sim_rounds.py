#!/usr/bin/env python3
"""Compares pcoll-sim's partial rounds with a real run's.

  check_sim_rounds.py --real PREFIX --ranks P --sim TRACE [--active-tolerance F]

PREFIX: a real run's timeline (PREFIX.R.jsonl, PCOLL_TIMELINE=PREFIX) of
`pcoll-bench skew|group`; TRACE: `pcoll-sim skew|group --trace TRACE` with the
same flags.  Partial objects are matched in creation order.  Every round the
simulation completed at a rank must be one the real rank completed, with the
same synchronous and stand-in flags, for GROUP rounds the same members, and
for MAJORITY and QUORUM rounds the same root (the initiator the rules name,
or the leader); the real run's only other rounds are its final flush
(synchronous).  What depends on timing may differ in at most
--timing-tolerance of the rounds (default 0.1): the active counts, and the
root of SOLO and GROUP rounds (any arriving rank starts one, and on an
oversubscribed machine a rank may arrive before an activation on its way
reaches it).  Exit 0 when they match, 1 with the differences listed.
"""
import argparse
import json
import sys


def load_real(prefix, ranks):
    rounds = {}  # (obj, rank, round) -> event
    for r in range(ranks):
        with open(f"{prefix}.{r}.jsonl") as f:
            for line in f:
                e = json.loads(line)
                if e.get("ev") == "round":
                    rounds[(e["obj"], r, e["round"])] = e
    objs = sorted({k[0] for k in rounds})
    order = {o: i for i, o in enumerate(objs)}
    return {(order[o], r, n): e for (o, r, n), e in rounds.items()}


def load_sim(path):
    out = {}
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            out[(e["obj"], e["rank"], e["round"])] = e
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--timing-tolerance", type=float, default=0.1)
    a = ap.parse_args()
    real, sim = load_real(a.real, a.ranks), load_sim(a.sim)
    if not sim:
        print("FAILED: the simulation traced no rounds")
        return 1
    bad, active_diff, root_diff = [], 0, 0
    for key, s in sorted(sim.items()):
        e = real.get(key)
        if e is None:
            bad.append(f"obj {key[0]} rank {key[1]} round {key[2]}: simulated, not in the real run")
            continue
        if e["root"] != s["root"]:
            if s["kind"] in ("solo", "group"):
                root_diff += 1
            else:
                bad.append(f"obj {key[0]} rank {key[1]} round {key[2]}: root real {e['root']} sim {s['root']}")
        for field in ("sync", "standin"):
            if e[field] != s[field]:
                bad.append(f"obj {key[0]} rank {key[1]} round {key[2]}: {field} real {e[field]} sim {s[field]}")
        if s["kind"] == "group" and not s["sync"] and e.get("group") != s["group"]:
            bad.append(f"obj {key[0]} rank {key[1]} round {key[2]}: group real {e.get('group')} sim {s['group']}")
        if e["active"] != s["active"]:
            active_diff += 1
    for key, e in sorted(real.items()):
        if key not in sim and not e["sync"]:
            bad.append(f"obj {key[0]} rank {key[1]} round {key[2]}: real, not simulated (and not the final flush)")
    kinds = sorted({s["kind"] for s in sim.values()})
    print(f"{len(sim)} simulated rounds at {a.ranks} ranks ({', '.join(kinds)}); real: {len(real)}; "
          f"active counts differ in {active_diff}, solo/group roots in {root_diff}")
    for what, n in (("active counts", active_diff), ("solo/group roots", root_diff)):
        if n > a.timing_tolerance * len(sim):
            bad.append(f"{what} differ in {n} of {len(sim)} rounds (more than {a.timing_tolerance:.0%})")
    for b in bad[:30]:
        print("FAILED:", b)
    if len(bad) > 30:
        print(f"... {len(bad) - 30} more")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
