#!/usr/bin/env python3
"""Merges the outputs of bench/gpu/run.sh into OUT_DIR/report.md (and summary.json).

Reads from OUT_DIR (any of them may be missing; the report says so):
  meta.tsv, gpu.txt, stages.tsv, tests/*.log,
  oracle-small.json, oracle-0.6b.json        tools/gpu_oracle.py
  seam-norm.json, seam-decode.json, seam-prefill.json   seam-bench-gpu
  torch-baselines.json                       bench/gpu/torch_baselines.py

Goals checked:
  fused add+RMSNorm GB/s >= 0.9 x device-to-device copy GB/s at 32768 rows
  decode step time (CUDA graph) <= 1.5 x the weight-bytes floor
  prefill matmul fraction >= 0.5

Usage: python3 bench/gpu/report.py OUT_DIR
Standard library only.
"""

import json
import os
import re
import sys

NORM_GOAL = 0.9
DECODE_GOAL = 1.5
MATMUL_GOAL = 0.5


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, "missing"
    except Exception as err:
        return None, f"unreadable: {type(err).__name__}: {err}"


def read_tsv(path):
    rows = []
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return rows
    if not lines:
        return rows
    head = lines[0].split("\t")
    for line in lines[1:]:
        if line.strip():
            rows.append(dict(zip(head, line.split("\t"))))
    return rows


def read_meta(path):
    meta = {}
    try:
        with open(path) as f:
            for line in f:
                if "\t" in line:
                    k, v = line.rstrip("\n").split("\t", 1)
                    meta[k] = v
    except FileNotFoundError:
        pass
    return meta


def fnum(x, spec=".3g"):
    if x is None:
        return "n/a"
    try:
        return format(float(x), spec)
    except (TypeError, ValueError):
        return str(x)


def ratio(a, b):
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    return a / b if b else None


def norm_ratio(s):
    """fused GB/s / copy GB/s; seam's own "ratio" field when the GB/s are absent."""
    r = ratio(s.get("fused_gbps"), s.get("copy_gbps"))
    return r if r is not None else s.get("ratio")


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return out


def gtest_summary(path):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return "no log"
    parts = []
    m = re.search(r"\[==========\] (\d+) tests? from (\d+) test suites? ran", text)
    if m:
        parts.append(f"{m.group(1)} ran")
    for label in ("PASSED", "FAILED", "SKIPPED"):
        m = re.search(r"\[  " + label + r"  \] (\d+) tests?", text)
        if m:
            parts.append(f"{m.group(1)} {label.lower()}")
    failed = sorted(set(re.findall(r"\[  FAILED  \] (\S+\.\S+)", text)))
    if failed:
        parts.append("failed: " + ", ".join(failed[:20]) + (" ..." if len(failed) > 20 else ""))
    return "; ".join(parts) if parts else "no gtest summary in the log"


def stage_status(stages, name):
    for s in stages:
        if s.get("stage") == name:
            return f"{s.get('status')} (rc {s.get('rc')}, {s.get('seconds')}s)"
    return "not run"


def unavailable(what, stages, stage_name, err):
    return f"_{what} not available: {err}; stage {stage_name}: {stage_status(stages, stage_name)}._"


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out_dir = sys.argv[1]
    meta = read_meta(os.path.join(out_dir, "meta.tsv"))
    try:
        with open(os.path.join(out_dir, "gpu.txt")) as f:
            gpu = f.read().strip().splitlines()[0] if f else "unknown"
    except (FileNotFoundError, IndexError):
        gpu = "unknown"
    stages = read_tsv(os.path.join(out_dir, "stages.tsv"))
    goals = []  # (goal, value, status)
    L = []
    L.append(f"# seam GPU run: {gpu}, {meta.get('date', 'date unknown')}")
    L.append("")
    L.append(f"GPU `{gpu}` (nvidia-smi); commit {meta.get('commit', 'unknown')}; host {meta.get('host', '?')}; "
             f"checkpoints in `{meta.get('work', '?')}`.")

    tb, tb_err = load_json(os.path.join(out_dir, "torch-baselines.json"))
    versions = None
    for name in ("oracle-0.6b.json", "oracle-small.json"):
        o, _ = load_json(os.path.join(out_dir, name))
        if o and o.get("versions"):
            versions = o["versions"]
            break
    if versions is None and tb:
        versions = tb.get("versions")
    if versions:
        L.append("Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".")
    L.append("")

    # Stages
    L.append("## Stages")
    L.append("")
    L += table(["stage", "status", "rc", "seconds", "log"],
               [[s.get("stage"), s.get("status"), s.get("rc"), s.get("seconds"), s.get("log")] for s in stages])
    L.append("")

    # Tests
    L.append("## Tests")
    L.append("")
    test_rows = []
    for s in stages:
        if s.get("stage", "").startswith("test:"):
            log = s.get("log", "-")
            summary = gtest_summary(os.path.join(out_dir, log)) if log not in ("-", "") else "-"
            test_rows.append([s["stage"][5:], s.get("status"), summary])
    L += table(["binary", "status", "gtest"], test_rows) if test_rows else ["_no tests recorded_"]
    L.append("")

    # Oracle
    L.append("## Logits oracle: seam vs transformers on the same checkpoints")
    L.append("")
    L.append("f32: max|seam-ref| <= 1e-4 x max|ref| per prompt (prefill and decode rows) and identical greedy "
             "tokens. bf16 (both cast from the same fp32 files): top-1 identical on >= 99% of positions "
             "(prefill rows, decode rows while the generated prefixes agree), or every disagreement a near "
             "tie under the f32 reference; relative error and the common greedy prefix (of 8) are reported. "
             "qwen3_moe-0.6b has 4 layers (the 0.6B attention shape, 8 experts top-2, moe_intermediate 768).")
    L.append("")
    for name, stage_name in (("oracle-small.json", "oracle-small"), ("oracle-0.6b.json", "oracle-0.6b")):
        o, err = load_json(os.path.join(out_dir, name))
        if o is None:
            L.append(unavailable(f"`{name}`", stages, stage_name, err))
            L.append("")
            goals.append((f"{stage_name} checks", "n/a", "NOT RUN"))
            continue
        L.append(f"### {stage_name}: {'PASS' if o.get('pass') else 'FAIL'}")
        L.append("")
        L.append("```")
        L.append(o.get("table", ""))
        L.append("```")
        goals.append((f"{stage_name} checks", "pass" if o.get("pass") else "fail",
                      "met" if o.get("pass") else "NOT MET"))
        for c in o.get("checkpoints", []):
            bits = []
            if "error" in c:
                bits.append(f"error: {c['error']}")
            m = c.get("reference_margins_f32")
            if m:
                bits.append(f"f32 reference logit std {fnum(m.get('logit_std'))}, top-2 margin "
                            f"min/p10/median {fnum(m.get('margin_min'))}/{fnum(m.get('margin_p10'))}/"
                            f"{fnum(m.get('margin_median'))}, exact ties {m.get('exact_ties')}/{m.get('rows')}, "
                            f"distinct top-1 {m.get('distinct_top1')}")
            for dt, d in (c.get("dtypes") or {}).items():
                extra = []
                if d.get("failures"):
                    extra.append("failures: " + "; ".join(d["failures"][:5]))
                if dt == "bf16" and "top1_positions" in d:
                    extra.append(f"top-1 {d.get('top1_agree')}/{d.get('top1_positions')}, disagreements near-tie "
                                 f"{d.get('top1_disagree_near_tie')}, not-tie {d.get('top1_disagree_not_tie')}")
                    if d.get("hf_bf16_vs_f32_prefill_top1_fraction") is not None:
                        extra.append(f"transformers bf16 vs its own f32, prefill top-1: "
                                     f"{d['hf_bf16_vs_f32_prefill_top1_fraction']:.2%}")
                    if d.get("note"):
                        extra.append(d["note"])
                if "seam_s" in d:
                    extra.append(f"seam logits ran {d['seam_s']:.1f}s")
                if extra:
                    bits.append(f"{dt}: " + "; ".join(extra))
            if c.get("notes"):
                bits.append("notes: " + "; ".join(str(n) for n in c["notes"][:5]))
            if bits:
                L.append(f"- **{c.get('checkpoint')}**: " + " | ".join(bits))
        L.append("")

    # Norm
    L.append("## Fused add + RMSNorm (bf16)")
    L.append("")
    sn, sn_err = load_json(os.path.join(out_dir, "seam-norm.json"))
    tnorm = (tb or {}).get("norm") or []
    tmap = {(int(r["rows"]), int(r["hidden"])): r for r in tnorm}
    L.append("Bytes counted by both sides: 4 x rows x hidden x 2 + hidden x 2 (read x and residual, write "
             "residual and out, bf16, plus the bf16 weight); GB/s = bytes / time / 1e9. seam: one fused "
             "kernel; copy: a device-to-device copy of the same bytes (seam-bench-gpu); PyTorch: unfused eager "
             "ops as Qwen3RMSNorm (fp32 compute). fused/copy goal >= 0.9 at 32768 rows.")
    L.append("")
    if sn is None and not tnorm:
        L.append(unavailable("norm results", stages, "seam-norm", sn_err))
    else:
        rows = []
        keys = []
        for r in sn or []:
            keys.append((int(r["rows"]), int(r["hidden"])))
        for k in sorted(tmap):
            if k not in keys:
                keys.append(k)
        smap = {(int(r["rows"]), int(r["hidden"])): r for r in sn or []}
        for k in sorted(keys, key=lambda k: (k[1], k[0])):
            s, t = smap.get(k, {}), tmap.get(k, {})
            fr = norm_ratio(s)
            rows.append([k[0], k[1], fnum(s.get("fused_us"), ".2f"), fnum(s.get("fused_gbps"), ".1f"),
                         fnum(s.get("copy_gbps"), ".1f"), fnum(fr, ".3f"), fnum(t.get("unfused_us"), ".2f"),
                         fnum(t.get("unfused_gbps"), ".1f"), fnum(ratio(t.get("unfused_us"), s.get("fused_us")), ".2f")])
        L += table(["rows", "hidden", "seam fused µs", "seam GB/s", "copy GB/s", "fused/copy",
                    "PyTorch unfused µs", "PyTorch GB/s", "speed-up vs PyTorch"], rows)
        if sn is None:
            L.append("")
            L.append(unavailable("seam's norm results", stages, "seam-norm", sn_err))
        for hidden in (4096, 8192):
            s = smap.get((32768, hidden))
            if s:
                fr = norm_ratio(s)
                ok = fr is not None and float(fr) >= NORM_GOAL
                goals.append((f"add+RMSNorm fused/copy at 32768 x {hidden} >= {NORM_GOAL}", fnum(fr, ".3f"),
                              "met" if ok else "NOT MET"))
            else:
                goals.append((f"add+RMSNorm fused/copy at 32768 x {hidden} >= {NORM_GOAL}", "n/a", "NOT RUN"))
    if tb is not None and tb.get("errors", {}).get("norm"):
        L.append("")
        L.append(f"_PyTorch norm baseline error: {tb['errors']['norm']}_")
    L.append("")

    # Decode
    L.append("## Decode, 0.6b-shaped dense checkpoint, bf16")
    L.append("")
    sd, sd_err = load_json(os.path.join(out_dir, "seam-decode.json"))
    tdec = {int(r["batch"]): r for r in ((tb or {}).get("decode") or [])}
    if sd is not None:
        L.append(f"Floor = (weight bytes + each sequence's KV bytes over its context) / copy bandwidth; weights "
                 f"alone: {fnum(sd.get('weight_bytes'), '.4g')} B / "
                 f"{fnum(sd.get('copy_gbps'), '.1f')} GB/s = {fnum(sd.get('floor_ms'), '.3f')} ms per step, plus "
                 f"{fnum(sd.get('kv_bytes_per_token'), '.4g')} B of KV per token of context. "
                 f"Goal: CUDA-graph step <= {DECODE_GOAL} x floor. "
                 "128-token prompt, 64 steps. transformers: eager forward calls with past_key_values, sdpa.")
    else:
        L.append(unavailable("seam's decode results", stages, "seam-decode", sd_err))
    L.append("")
    batches = sorted(set([int(r["batch"]) for r in (sd or {}).get("results", [])]) | set(tdec))
    if batches:
        smap = {int(r["batch"]): r for r in (sd or {}).get("results", [])}
        rows = []
        for b in batches:
            s, t = smap.get(b, {}), tdec.get(b, {})
            fr = s.get("floor_ratio")
            if fr is None and sd is not None:
                fr = ratio(s.get("graph_ms_per_step"), sd.get("floor_ms"))
            rows.append([b, fnum(s.get("graph_ms_per_step"), ".3f"), fnum(s.get("eager_ms_per_step"), ".3f"),
                         fnum(s.get("floor_ms", (sd or {}).get("floor_ms")), ".3f"), fnum(fr, ".2f"),
                         fnum(s.get("graph_tokens_per_s"), ".0f"), fnum(s.get("eager_tokens_per_s"), ".0f"),
                         fnum(t.get("ms_per_step"), ".3f"), fnum(t.get("tokens_per_s"), ".0f"),
                         fnum(ratio(s.get("graph_tokens_per_s"), t.get("tokens_per_s")), ".2f")])
            if s:
                ok = fr is not None and float(fr) <= DECODE_GOAL
                goals.append((f"decode batch {b}: graph step / floor <= {DECODE_GOAL}", fnum(fr, ".2f"),
                              "met" if ok else "NOT MET"))
        L += table(["batch", "seam graph ms/step", "seam eager ms/step", "floor ms", "graph/floor",
                    "seam graph tok/s", "seam eager tok/s", "transformers ms/step", "transformers tok/s",
                    "seam graph / transformers"], rows)
    else:
        goals.append(("decode graph step / floor", "n/a", "NOT RUN"))
    gen = (tb or {}).get("generate")
    if gen:
        L.append("")
        L.append(f"transformers `model.generate` (batch 1, no compile, prefill included): "
                 f"{fnum(gen.get('tokens_per_s'), '.1f')} tokens/s ({fnum(gen.get('ms_per_token'), '.2f')} ms/token).")
    if tb is not None:
        for k in ("model", "decode", "generate"):
            if tb.get("errors", {}).get(k):
                L.append("")
                L.append(f"_transformers {k} baseline error: {tb['errors'][k]}_")
    elif tb_err:
        L.append("")
        L.append(unavailable("torch-baselines.json", stages, "torch-baselines", tb_err))
    L.append("")

    # Prefill
    L.append("## Prefill, 8 x 1024 tokens, bf16")
    L.append("")
    sp, sp_err = load_json(os.path.join(out_dir, "seam-prefill.json"))
    tp = (tb or {}).get("prefill")
    rows = []
    if sp is not None:
        rows.append(["seam", fnum(sp.get("tokens"), ".0f"), fnum(sp.get("ms"), ".2f"),
                     fnum(sp.get("tokens_per_s"), ".0f"), fnum(ratio(sp.get("tokens_per_s"),
                                                                      (tp or {}).get("tokens_per_s")), ".2f")])
    if tp:
        rows.append(["transformers (sdpa, last-position logits)", fnum(tp.get("tokens"), ".0f"),
                     fnum(tp.get("ms"), ".2f"), fnum(tp.get("tokens_per_s"), ".0f"), "1"])
    if rows:
        L += table(["", "tokens", "ms", "tokens/s", "vs transformers"], rows)
    if sp is not None:
        frac = sp.get("matmul_fraction")
        L.append("")
        L.append(f"Matmul: peak {fnum(sp.get('matmul_tflops_peak'), '.1f')} TFLOP/s (seam's own GEMM at its best "
                 f"shape), {fnum(sp.get('matmul_tflops_in_prefill'), '.1f')} TFLOP/s achieved inside prefill; "
                 f"fraction {fnum(frac, '.3f')} (goal >= {MATMUL_GOAL}).")
        ok = frac is not None and float(frac) >= MATMUL_GOAL
        goals.append((f"prefill matmul fraction >= {MATMUL_GOAL}", fnum(frac, ".3f"), "met" if ok else "NOT MET"))
    else:
        L.append("")
        L.append(unavailable("seam's prefill results", stages, "seam-prefill", sp_err))
        goals.append((f"prefill matmul fraction >= {MATMUL_GOAL}", "n/a", "NOT RUN"))
    if tb is not None and tb.get("errors", {}).get("prefill"):
        L.append("")
        L.append(f"_transformers prefill baseline error: {tb['errors']['prefill']}_")
    L.append("")

    # Goals
    L.append("## Goals")
    L.append("")
    L += table(["goal", "value", "status"], goals)
    L.append("")
    bad = [s for s in stages if s.get("status") not in ("ok", "absent")]
    if bad:
        L.append("Stages that did not succeed: " + ", ".join(f"{s['stage']} ({s['status']})" for s in bad) + ".")
        L.append("")

    text = "\n".join(L)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump({"gpu": gpu, "meta": meta, "stages": stages,
                   "goals": [{"goal": g, "value": v, "status": s} for g, v, s in goals]}, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.join(out_dir, 'report.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
