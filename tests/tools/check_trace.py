#!/usr/bin/env python3
"""Checks that a file is a well-formed merged pcoll trace (pcoll-trace merge,
docs/timeline.md): the Chrome Trace Event Format in object form with the
keys pcoll-trace promises.  Standard library only.

    check_trace.py FILE [--ranks N] [--nesting]

--nesting also checks what Perfetto needs to draw every slice: on each
thread, X spans and B/E marks nest (a span inside a span or a mark ends
before it; a mark inside a span ends before the span does).

Prints every problem (the first 20 of each kind) and exits 1 if there is
one; prints a one-line summary and exits 0 if not; exits 2 on a usage
error.  Other tests run it on traces of real runs: keep this interface.
"""
import json
import math
import sys
from collections import defaultdict

PHASES = {"X", "B", "E", "i", "I", "M", "s", "t", "f", "C"}
SHOWN = 20
EPS = 0.002  # us: ts and dur are written with 3 decimals each


class Problems:
    def __init__(self):
        self.count = defaultdict(int)
        self.lines = []

    def add(self, kind, message):
        self.count[kind] += 1
        if self.count[kind] <= SHOWN:
            self.lines.append(message)

    def report(self):
        for line in self.lines:
            print("check_trace: " + line)
        for kind, n in sorted(self.count.items()):
            if n > SHOWN:
                print("check_trace: ... %d problems of the kind '%s' in all" % (n, kind))
        return bool(self.count)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v))


def check_event(i, ev, problems):
    """The fields of one event; returns (ok for ordering checks)."""
    where = "traceEvents[%d]" % i
    if not isinstance(ev, dict):
        problems.add("not an object", "%s is not an object" % where)
        return False
    name, ph = ev.get("name"), ev.get("ph")
    if not isinstance(name, str):
        problems.add("name", "%s: name is missing or not a string" % where)
    if ph not in PHASES:
        problems.add("ph", "%s: ph %r is not one of %s" % (where, ph, sorted(PHASES)))
        return False
    for key in ("pid", "tid"):
        if not is_int(ev.get(key)):
            problems.add(key, "%s (%s): %s is missing or not an integer" % (where, name, key))
            return False
    if ph != "M" and not is_number(ev.get("ts")):
        problems.add("ts", "%s (%s): ts is missing or not a number" % (where, name))
        return False
    if ph == "X" and not (is_number(ev.get("dur")) and ev["dur"] >= 0):
        problems.add("dur", "%s (%s): an X event without dur >= 0" % (where, name))
    if ph in ("s", "t", "f") and "id" not in ev:
        problems.add("flow id", "%s (%s): a flow event without id" % (where, name))
    if ph in ("i", "I") and ev.get("s") not in ("g", "p", "t"):
        problems.add("instant scope", "%s (%s): an instant without s (g, p or t)" % (where, name))
    if "args" in ev and not isinstance(ev["args"], dict):
        problems.add("args", "%s (%s): args is not an object" % (where, name))
    return True


def check_order(i, ev, state, problems):
    """ts non-decreasing per (pid, tid) in file order; B/E nested."""
    key = (ev["pid"], ev["tid"])
    ts = ev["ts"]
    last = state["last_ts"].get(key)
    if last is not None and ts < last:
        problems.add("order", "traceEvents[%d] (%s): ts %s before the previous event's %s on pid %d tid %d"
                     % (i, ev["name"], ts, last, key[0], key[1]))
    state["last_ts"][key] = ts
    stack = state["open"][key]
    if ev["ph"] == "B":
        stack.append((ev["name"], i))
    elif ev["ph"] == "E":
        if not stack:
            problems.add("nesting", "traceEvents[%d]: E %r on pid %d tid %d with no open B"
                         % (i, ev["name"], key[0], key[1]))
        else:
            open_name, at = stack.pop()
            if ev.get("name") and ev["name"] != open_name:
                problems.add("nesting", "traceEvents[%d]: E %r on pid %d tid %d closes B %r (traceEvents[%d])"
                             % (i, ev["name"], key[0], key[1], open_name, at))


def check_slices(i, ev, stacks, problems):
    """--nesting: X and B/E of one thread nest (file order is ts order)."""
    key = (ev["pid"], ev["tid"])
    ph, ts = ev["ph"], ev["ts"]
    if ph not in ("X", "B", "E"):
        return
    stack = stacks[key]   # entries [kind, name, end (X) or deadline (B), index]
    while stack and stack[-1][0] == "X" and stack[-1][2] <= ts + EPS:
        stack.pop()
    where = "traceEvents[%d] (%s %r, pid %d tid %d)" % (i, ph, ev["name"], key[0], key[1])
    if ph == "X":
        end = ts + ev.get("dur", 0)
        if stack and stack[-1][2] is not None and end > stack[-1][2] + EPS:
            problems.add("slices", "%s ends at %.3f, after traceEvents[%d] (%r) around it ends at %.3f"
                         % (where, end, stack[-1][3], stack[-1][1], stack[-1][2]))
        stack.append(["X", ev["name"], end, i])
    elif ph == "B":
        deadline = stack[-1][2] if stack else None
        stack.append(["B", ev["name"], deadline, i])
    else:
        if stack and stack[-1][0] == "X":
            problems.add("slices", "%s ends a mark while traceEvents[%d] (%r) inside it runs until %.3f"
                         % (where, stack[-1][3], stack[-1][1], stack[-1][2]))
            while stack and stack[-1][0] == "X":
                stack.pop()
        if stack:
            _, name, deadline, at = stack.pop()
            if deadline is not None and ts > deadline + EPS:
                problems.add("slices", "%s ends mark traceEvents[%d] after the span around it ends at %.3f"
                             % (where, at, deadline))


def check_other_data(doc, ranks, problems):
    other = doc.get("otherData")
    if not isinstance(other, dict):
        problems.add("otherData", "no otherData object")
        return None
    if other.get("pcoll_trace") != 1:
        problems.add("otherData", "otherData.pcoll_trace is %r, not 1" % (other.get("pcoll_trace"),))
    if not is_number(other.get("clock_error_bound_us")):
        problems.add("otherData", "otherData.clock_error_bound_us is missing or not a number")
    n = other.get("ranks")
    if not is_int(n) or n < 1:
        problems.add("otherData", "otherData.ranks is missing or not a positive integer")
        n = None
    if ranks is not None and n is not None and n != ranks:
        problems.add("otherData", "otherData.ranks is %d, expected %d" % (n, ranks))
    clocks = other.get("clocks")
    if not isinstance(clocks, list) or (n is not None and len(clocks) != n):
        problems.add("otherData", "otherData.clocks is not a list of one entry per rank")
    return ranks if ranks is not None else n


def check_ranks(events, ranks, problems):
    named = set()
    for ev in events:
        if isinstance(ev, dict) and ev.get("ph") == "M" and ev.get("name") == "process_name":
            named.add(ev.get("pid"))
            if not isinstance(ev.get("args"), dict) or not isinstance(ev["args"].get("name"), str):
                problems.add("process_name", "process_name of pid %r without args.name" % (ev.get("pid"),))
    for r in range(ranks):
        if r not in named:
            problems.add("ranks", "rank %d has no process_name metadata" % r)
    pids = {ev.get("pid") for ev in events if isinstance(ev, dict) and is_int(ev.get("pid"))}
    for pid in sorted(pids):
        if not 0 <= pid < ranks:
            problems.add("ranks", "pid %d is not a rank of %d" % (pid, ranks))


def check(doc, ranks, nesting, problems):
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        problems.add("top", "the top level is not an object with a traceEvents list")
        return 0
    events = doc["traceEvents"]
    state = {"last_ts": {}, "open": defaultdict(list)}
    slices = defaultdict(list)
    for i, ev in enumerate(events):
        if check_event(i, ev, problems) and ev["ph"] != "M":
            check_order(i, ev, state, problems)
            if nesting:
                check_slices(i, ev, slices, problems)
    for (pid, tid), stack in sorted(state["open"].items()):
        for name, at in stack:
            problems.add("nesting", "B %r (traceEvents[%d]) on pid %d tid %d is never closed" % (name, at, pid, tid))
    ranks = check_other_data(doc, ranks, problems)
    if ranks is not None:
        check_ranks(events, ranks, problems)
    return len(events)


def main(argv):
    args = argv[1:]
    ranks = None
    nesting = "--nesting" in args
    args = [a for a in args if a != "--nesting"]
    if "--ranks" in args:
        at = args.index("--ranks")
        try:
            ranks = int(args[at + 1])
            if ranks < 1:
                raise ValueError
        except (IndexError, ValueError):
            print("check_trace: --ranks needs a positive integer", file=sys.stderr)
            return 2
        del args[at:at + 2]
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: check_trace.py FILE [--ranks N] [--nesting]", file=sys.stderr)
        return 2
    path = args[0]
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("check_trace: %s: %s" % (path, e))
        return 1
    problems = Problems()
    n = check(doc, ranks, nesting, problems)
    if problems.report():
        print("check_trace: %s: not a valid merged trace" % path)
        return 1
    print("check_trace: %s: %d events, valid" % (path, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
