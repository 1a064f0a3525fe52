#!/usr/bin/python3
"""Checks a dtrain trace.json against the contract (docs/architecture.md §3) and the run's timing.csv.

  check_trace.py RUN_DIR RANKS [--overlap] [--comm-sums] [--epochs A B] [--iterations N]

Always: the file parses as JSON (Trace Event Format), every rank is a process with a name, every
thread is named, the compute, loader and (RANKS > 1) comm threads exist, spans nest per thread,
and each epoch span's compute-thread phases add up to that epoch's row of timing.csv.
Epochs that an iteration window traces only in part are left out of the sums.
--overlap: some communication span runs while the compute thread does forward or backward of a
later iteration (pipelining). --comm-sums: the comm thread's spans (compress excluded) add up
to comm_s. --epochs A B: only epochs A..B are in the trace. --iterations N: exactly N forward
spans per rank.
"""
import csv, json, sys
from collections import defaultdict

COMPUTE_PHASES = ["data", "forward", "backward", "update", "wait"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def load(run_dir):
    with open(f"{run_dir}/trace.json") as f:
        doc = json.load(f)  # raises on invalid JSON
    if not isinstance(doc.get("traceEvents"), list):
        fail("no traceEvents list")
    return doc["traceEvents"]


def threads_and_spans(events):
    names, procs, spans = {}, {}, defaultdict(list)
    for e in events:
        for key in ("name", "ph", "pid"):
            if key not in e:
                fail(f"event without {key}: {e}")
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["ph"] == "M" and e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e["ph"] == "X":
            if not (e["dur"] >= 0 and isinstance(e["ts"], (int, float))):
                fail(f"bad span {e}")
            spans[(e["pid"], e["tid"])].append(e)
    for key in spans:
        if key not in names:
            fail(f"thread {key} has spans but no name")
    return names, procs, spans


def check_nesting(spans):
    """Spans of one thread are disjoint or contained (what the viewers need)."""
    for key, items in spans.items():
        stack = []
        for e in sorted(items, key=lambda e: (e["ts"], -e["dur"])):
            end = e["ts"] + e["dur"]
            while stack and stack[-1] <= e["ts"] + 1e-3:
                stack.pop()
            if stack and end > stack[-1] + 1e-3:
                fail(f"thread {key}: {e['name']} at {e['ts']} overlaps its parent ending {stack[-1]}")
            stack.append(end)


def thread_order(names, pid):
    return [n for (p, t), n in sorted(names.items()) if p == pid]


def compute_tid(names, pid):
    return next(t for (p, t), n in names.items() if p == pid and n == "compute")


def check_epoch_sums(run_dir, names, spans, ranks):
    rows = list(csv.DictReader(open(f"{run_dir}/timing.csv")))
    for pid in range(ranks):
        mine = spans[(pid, compute_tid(names, pid))]
        for epoch_span in (e for e in mine if e["name"] == "epoch"):
            epoch = epoch_span["args"]["epoch"]
            row = next((r for r in rows if int(r["rank"]) == pid and int(r["epoch"]) == epoch), None)
            if row is None:
                fail(f"rank {pid} epoch {epoch} is in the trace but not in timing.csv")
            lo, hi = epoch_span["ts"], epoch_span["ts"] + epoch_span["dur"]
            inside = [e for e in mine if lo <= e["ts"] and e["ts"] + e["dur"] <= hi]
            if sum(e["name"] == "forward" for e in inside) < int(row["iterations"]):
                continue  # an iteration window began inside this epoch: it is partly traced
            for phase in COMPUTE_PHASES:
                traced = sum(e["dur"] for e in inside if e["name"] == phase) / 1e6
                logged = float(row[phase + "_s"])
                if abs(traced - logged) > 1e-4 + 1e-3 * logged:
                    fail(f"rank {pid} epoch {epoch} {phase}: trace {traced:.6f} s, timing.csv {logged:.6f} s")


def comm_spans(names, spans, pid):
    return [e for (p, t), items in spans.items() if p == pid and names[(p, t)] == "comm" for e in items]


def check_comm_sums(run_dir, names, spans, ranks):
    rows = list(csv.DictReader(open(f"{run_dir}/timing.csv")))
    for pid in range(ranks):
        mine = comm_spans(names, spans, pid)
        comm = sum(e["dur"] for e in mine if e["name"] == "comm") / 1e6
        compress = sum(e["dur"] for e in mine if e["name"] == "compress") / 1e6
        logged = sum(float(r["comm_s"]) for r in rows if int(r["rank"]) == pid)
        logged_compress = sum(float(r["compress_s"]) for r in rows if int(r["rank"]) == pid)
        if abs(comm - compress - logged) > 1e-3 + 1e-2 * logged:
            fail(f"rank {pid}: comm spans {comm - compress:.6f} s (compress excluded), timing.csv comm_s {logged:.6f} s")
        if abs(compress - logged_compress) > 1e-3 + 1e-2 * logged_compress:
            fail(f"rank {pid}: compress spans {compress:.6f} s, timing.csv compress_s {logged_compress:.6f} s")


def check_overlap(names, spans, ranks):
    for pid in range(ranks):
        compute = [e for e in spans[(pid, compute_tid(names, pid))] if e["name"] in ("forward", "backward")]
        comm = [e for e in comm_spans(names, spans, pid) if e["name"] == "comm"]
        overlapping = sum(1 for c in comm for f in compute
                          if c["ts"] < f["ts"] and f["ts"] + f["dur"] < c["ts"] + c["dur"])
        if overlapping == 0:
            fail(f"rank {pid}: no forward/backward runs inside a communication span")
        print(f"rank {pid}: {overlapping} forward/backward spans ran while communication was in flight")


def main():
    args = sys.argv[1:]
    run_dir, ranks = args[0], int(args[1])
    events = load(run_dir)
    names, procs, spans = threads_and_spans(events)
    if sorted(procs) != list(range(ranks)):
        fail(f"processes {sorted(procs)}, expected ranks 0..{ranks - 1}")
    for pid in range(ranks):
        thread_names = {n for (p, _), n in names.items() if p == pid}
        wanted = {"compute", "loader"} | ({"comm"} if ranks > 1 else set())
    # Every rank names its threads in the same order (tids match across ranks).
    if pid > 0 and thread_order(names, pid) != thread_order(names, 0):
        fail(f"rank {pid} threads {thread_order(names, pid)} differ from rank 0's {thread_order(names, 0)}")
        if not wanted <= thread_names:
            fail(f"rank {pid} threads {sorted(thread_names)} lack {sorted(wanted - thread_names)}")
    check_nesting(spans)
    check_epoch_sums(run_dir, names, spans, ranks)
    if "--overlap" in args:
        check_overlap(names, spans, ranks)
    if "--comm-sums" in args:
        check_comm_sums(run_dir, names, spans, ranks)
    if "--epochs" in args:
        i = args.index("--epochs")
        want = set(range(int(args[i + 1]), int(args[i + 2]) + 1))
        for pid in range(ranks):
            got = {e["args"]["epoch"] for e in spans[(pid, compute_tid(names, pid))] if e["name"] == "epoch"}
            if got != want:
                fail(f"rank {pid}: epochs {sorted(got)} in the trace, expected {sorted(want)}")
    if "--iterations" in args:
        n = int(args[args.index("--iterations") + 1])
        for pid in range(ranks):
            got = sum(1 for e in spans[(pid, compute_tid(names, pid))] if e["name"] == "forward")
            if got != n:
                fail(f"rank {pid}: {got} forward spans, expected {n}")
    print(f"trace ok: {len(events)} events, {len(names)} threads, {ranks} rank(s)")


if __name__ == "__main__":
    main()
