#!/usr/bin/env python3
"""One decode step's kernels from an Nsight Compute CSV log.

Reads the CSV that `ncu --csv --metrics gpu__time_duration.sum` wrote for a
run whose last kernels are identical decode steps (seam-bench-gpu decode: the
fed graph's steps come last), finds the step as the shortest tail that repeats
the kernels just before it, and prints each kernel of that step with its time
(each kernel measured alone, serialized by the profiler), grouped by name, and
their sum: against a step's measured time, the difference is what the step
spends between kernels.

Usage: ncu_step_kernels.py LOG.csv [--step-ms MS] [--json OUT]
"""
import argparse
import csv
import json
import sys

UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}


def kernels(path):
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own log lines start otherwise
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        rows.append((r["Kernel Name"], r.get("Grid Size", ""), r.get("Block Size", ""),
                     value * UNITS.get(r.get("Metric Unit", "nsecond"), 1e-3)))
    return rows


def step_period(names, longest=4000):
    n = len(names)
    for p in range(1, min(longest, n // 2) + 1):
        if names[n - p:] == names[n - 2 * p:n - p]:
            return p
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--step-ms", type=float, default=0.0, help="the step's measured time (graph replay)")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        rows = kernels(a.log)
    except OSError as e:
        print(f"no Nsight Compute log: {e}", file=sys.stderr)
        return 1
    p = step_period([r[0] for r in rows])
    if p == 0:
        print(f"{len(rows)} kernels; no repeated step at the end", file=sys.stderr)
        return 1
    step = rows[-p:]
    total = sum(r[3] for r in step)
    groups = {}
    for name, _, _, us in step:
        g = groups.setdefault(name, [0, 0.0])
        g[0] += 1
        g[1] += us
    print(f"{len(rows)} kernels profiled; one step: {p} kernels, {total:.1f} us of kernel time"
          + (f", step measured {a.step_ms * 1e3:.1f} us: {a.step_ms * 1e3 - total:.1f} us between kernels"
             if a.step_ms else ""))
    print(f"{'us':>9} {'calls':>5} {'share':>6}  kernel")
    for name, (calls, us) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"{us:9.1f} {calls:5d} {us / total:6.1%}  {name[:110]}")
    print("\nin order:")
    for i, (name, grid, block, us) in enumerate(step):
        print(f"{i:4d} {us:8.1f}  {name[:80]}  grid {grid} block {block}")
    if a.json:
        json.dump({"kernels": p, "kernel_us": total, "step_ms": a.step_ms,
                   "step": [{"name": n, "grid": g, "block": b, "us": u} for n, g, b, u in step]},
                  open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
