#!/usr/bin/env python3
"""One decode step's kernels as they ran in the stream, from Nsight Systems.

Reads the CSV of `nsys stats --report cuda_gpu_trace --format csv` for a run
whose last kernels are identical decode steps (seam-bench-gpu decode, traced
with --cuda-graph-trace node so a graph's kernels appear one by one), finds
the last step as ncu_step_kernels.py does (the shortest tail that repeats the
kernels before it), and prints the step's span (first start to last end),
the kernels' own time in the stream, the idle time between them, and the
largest gaps by the pair of kernels around them. Against ncu_step_kernels.py's
figures (each kernel timed alone), it tells idle gaps from kernels that run
slower in the stream than alone.

Usage: nsys_step_gaps.py TRACE.csv [--json OUT]
"""
import argparse
import csv
import json
import sys

from ncu_step_kernels import step_period


def kernels(path):
    with open(path, newline="") as f:
        lines = f.readlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("Start")), None)
    if start is None:
        raise ValueError("no 'Start (ns)' header")
    rows = []
    for r in csv.DictReader(lines[start:]):
        name = r.get("Name", "")
        if not r.get("GrdX") and not r.get("Grid X"):  # memcpy / memset rows carry no grid
            continue
        rows.append((name, float(r["Start (ns)"]) / 1e3, float(r["Duration (ns)"]) / 1e3))
    return rows


def short(name, width=48):
    return name if len(name) <= width else name[:width - 3] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        rows = kernels(a.trace)
    except (OSError, ValueError) as e:
        print(f"no Nsight Systems trace: {e}", file=sys.stderr)
        return 1
    p = step_period([r[0] for r in rows])
    if p == 0:
        print(f"{len(rows)} kernels; no repeated step at the end", file=sys.stderr)
        return 1
    step = rows[-p:]
    span = step[-1][1] + step[-1][2] - step[0][1]
    busy = sum(r[2] for r in step)
    gaps = {}
    for prev, cur in zip(step, step[1:]):
        key = (short(prev[0]), short(cur[0]))
        g = gaps.setdefault(key, [0, 0.0])
        g[0] += 1
        g[1] += cur[1] - (prev[1] + prev[2])
    print(f"one step: {p} kernels, span {span:.1f} us, kernels {busy:.1f} us in the stream, "
          f"{span - busy:.1f} us between them ({(span - busy) / max(p - 1, 1):.2f} us per boundary)")
    print("   gap us  count  kernel before -> kernel after")
    for (before, after), (count, total) in sorted(gaps.items(), key=lambda kv: -kv[1][1])[:15]:
        print(f"{total:9.1f} {count:6d}  {before} -> {after}")
    by_name = {}
    for name, _, dur in step:
        by_name.setdefault(name, [0, 0.0])
        by_name[name][0] += 1
        by_name[name][1] += dur
    print("\n       us  calls  kernel (in the stream)")
    for name, (count, total) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"{total:9.1f} {count:6d}  {short(name, 100)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"kernels": p, "span_us": span, "kernel_us": busy, "between_us": span - busy,
                       "step": [{"name": n, "start_us": s, "us": d} for n, s, d in step]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
