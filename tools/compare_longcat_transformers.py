#!/usr/bin/env python3
"""seam's LongCat-Flash against transformers' LongcatFlashForCausalLM, prompts of 1 to 4,096 tokens.

Builds the tiny random LongCat-Flash of tools/make_golden_longcat_flash.py
(same shape, weights and seed) with max_position_embeddings 4608, saves it
with save_pretrained (float32 safetensors) into WORK/checkpoint, and for
seeded random prompts of --lengths tokens (default 1, 7, 512, 2048, 4096)
computes

  transformers f32 (CPU, --threads)  every prefill row and --new-tokens greedy
                                     steps (model.generate, cached decode);
  transformers bf16 (--torch-device) the folder loaded in bf16: every row of
                                     prompt + the f32 greedy tokens in one
                                     forward (teacher-forced);
  seam (`seam logits`, once per device of --seam-devices, cpu and cuda):
     f32 greedy   free-running greedy decode: its tokens against transformers';
     f32 forced   decode steps fed transformers' f32 tokens: every row against
                  transformers' f32 rows;
     bf16 forced  the same in bf16: top-1 agreement with seam's own f32 rows.

Goals (issue 34):
  f32    per prompt max|seam - ref| / max|ref| <= 1e-4 over the prefill rows
         and over the decode rows, and seam's greedy tokens equal
         transformers' (a step whose transformers top-2 margin is below
         2e-4 * max|logit| is reported as a near tie, not a failure);
  bf16   seam's bf16-vs-f32 top-1 agreement (every compared row of every
         prompt) at most 1 point below transformers' bf16-vs-f32 agreement.

Writes OUT/summary.txt (the table and the verdicts), OUT/results.json and
the seam logs under WORK/seam. Exit 0: every goal met; 1: an f32 goal
failed (or a run failed); 3: only the bf16 goal missed.

Usage, on the GPU machine from the repo root (torch, transformers >= 5, numpy):
  python3 tools/compare_longcat_transformers.py --work /tmp/longcat-cmp --out OUT \\
      --seam "scripts/gpu-run.sh seam"
(--seam-devices cpu runs without a GPU; the command words are split on
spaces and a relative first word is made absolute.)
"""

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

F32_TOLERANCE = 1e-4   # relative: seam and torch sum in different orders
BF16_POINTS = 1.0      # seam's bf16 top-1 agreement may trail transformers' by this many points
NEAR_TIE = 2e-4        # a greedy step whose top-2 margin is below this x max|logit| is a near tie
MAX_POSITIONS = 4608   # >= the longest prompt plus its new tokens
PROMPT_SEED = 4321


def log(*args):
    print(*args, flush=True)


def fail(message):
    print(f"compare_longcat_transformers: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True, help="folder for the checkpoint, prompts and seam's outputs")
    p.add_argument("--out", required=True, help="folder for summary.txt and results.json")
    p.add_argument("--seam", default="build/bin/seam", help="command that runs seam (e.g. 'scripts/gpu-run.sh seam')")
    p.add_argument("--seam-devices", default="cpu,cuda", help="seam's devices, comma-separated: cpu, cuda")
    p.add_argument("--lengths", default="1,7,512,2048,4096", help="prompt lengths, comma-separated")
    p.add_argument("--new-tokens", type=int, default=8, help="greedy tokens after each prompt")
    p.add_argument("--torch-device", default="auto", help="transformers' bf16 device: auto (cuda if any), cuda, cpu")
    p.add_argument("--threads", type=int, default=8, help="torch CPU threads")
    p.add_argument("--timeout", type=int, default=1800, help="seconds one seam run may take")
    return p.parse_args()


def seam_command(text):
    words = shlex.split(text)
    if words and os.sep in words[0] and not os.path.isabs(words[0]):
        words[0] = os.path.abspath(words[0])
    return words


# --- transformers ------------------------------------------------------------

def build_checkpoint(folder, notes):
    """The golden script's model and weights, max_position_embeddings raised; saved and reloaded."""
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_golden_longcat_flash as golden

    golden.CONFIG = dict(golden.CONFIG, max_position_embeddings=MAX_POSITIONS)
    model, model_cls = golden.build_model(notes)
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    loaded, info = model_cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                             output_loading_info=True)
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if problems:
        fail(f"reloading {folder} did not use the checkpoint exactly: {problems}")
    loaded = loaded.to(torch.float32).eval()
    if hasattr(loaded, "set_experts_implementation"):
        try:
            loaded.set_experts_implementation("eager")
        except Exception as err:  # noqa: BLE001
            notes.append(f"set_experts_implementation('eager') failed: {err!r}")
    return loaded, golden.CONFIG


def make_prompts(lengths, vocab):
    import torch

    gen = torch.Generator().manual_seed(PROMPT_SEED)
    return [torch.randint(3, vocab, (n,), generator=gen, dtype=torch.long) for n in lengths]


def reference_f32(model, prompt, n_new):
    """Every prefill row, and generate's cached greedy decode: tokens and the rows that chose them."""
    import torch

    with torch.no_grad():
        prefill = model(input_ids=prompt[None, :], use_cache=False).logits[0].float().clone()
        res = model.generate(input_ids=prompt[None, :], attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             do_sample=False, max_new_tokens=n_new, min_new_tokens=n_new, output_logits=True,
                             return_dict_in_generate=True, pad_token_id=0, use_cache=True)
    tokens = res.sequences[0, len(prompt):].tolist()
    steps = torch.stack([l[0].float().cpu() for l in res.logits])
    return prefill, tokens, steps


def forced_rows(model, prompt, tokens, device):
    """Rows of one forward over prompt + tokens[:-1]: the prefill rows then decode rows 1.. (forced)."""
    import torch

    seq = torch.cat([prompt, torch.tensor(tokens[:-1], dtype=torch.long)]).to(device)
    with torch.no_grad():
        return model(input_ids=seq[None, :], use_cache=False).logits[0].float().cpu()


# --- seam --------------------------------------------------------------------

def run_seam(cmd, model_dir, device, dtype, prompts_path, forced_path, n_new, prefix, timeout):
    args = cmd + ["logits", "--model", model_dir, "--device", device, "--dtype", dtype, "--prompts", prompts_path,
                  "--new-tokens", str(n_new), "--out", prefix]
    if forced_path:
        args += ["--forced", forced_path]
    t0 = time.time()
    with open(prefix + ".log", "w") as lf:
        lf.write("$ " + " ".join(shlex.quote(a) for a in args) + "\n")
        lf.flush()
        try:
            rc = subprocess.run(args, stdout=lf, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        except OSError as err:
            rc = f"could not start: {err!r}"
    if rc != 0:
        with open(prefix + ".log") as lf:
            tail = lf.read()[-3000:]
        raise RuntimeError(f"seam logits {device} {dtype} exited {rc}; log {prefix}.log:\n{tail}")
    return time.time() - t0


def load_seam(prefix, lengths, n_new, vocab):
    """Per prompt: prefill rows [len, vocab], decode rows [n_new, vocab] (row 0 the last prefill row), tokens."""
    import numpy as np

    with open(prefix + ".json") as f:
        meta = json.load(f)
    if int(meta["vocab"]) != vocab or len(meta["prompts"]) != len(lengths):
        raise RuntimeError(f"{prefix}.json: vocab {meta['vocab']}, {len(meta['prompts'])} prompts; "
                           f"expected {vocab}, {len(lengths)}")
    flat = np.fromfile(prefix + ".bin", dtype="<f4")
    want = sum((n + n_new) * vocab for n in lengths)
    if flat.size != want:
        raise RuntimeError(f"{prefix}.bin holds {flat.size} floats, expected {want}")
    out, off = [], 0
    for n, rec in zip(lengths, meta["prompts"]):
        block = flat[off:off + (n + n_new) * vocab].reshape(n + n_new, vocab)
        off += (n + n_new) * vocab
        out.append({"prefill": block[:n], "steps": block[n:], "tokens": [int(t) for t in rec["tokens"]]})
    return out


# --- comparison --------------------------------------------------------------

def errors(got, want):
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.isfinite(got).all():
        return {"abs": float("inf"), "rel": float("inf")}
    diff = float(np.abs(got - want).max())
    scale = float(np.abs(want).max())
    return {"abs": diff, "rel": diff / scale if scale > 0 else diff}


def near_tie(row, a, b):
    import numpy as np

    row = np.asarray(row, dtype=np.float64)
    return abs(row[a] - row[b]) <= NEAR_TIE * float(np.abs(row).max())


def agreement(rows, reference):
    """Count of rows whose argmax equals the reference's, and the rows compared."""
    import numpy as np

    a, b = np.asarray(rows).argmax(axis=-1), np.asarray(reference).argmax(axis=-1)
    return int((a == b).sum()), int(a.size)


def compared_rows(prefill, steps):
    """Prefill rows, then decode rows 1.. (row 0 repeats the last prefill row)."""
    import numpy as np

    return np.concatenate([np.asarray(prefill), np.asarray(steps)[1:]], axis=0)


def compare_device(device, ref, seam_runs, lengths):
    """One seam device's rows against transformers: the f32 table and the bf16 agreement."""
    rows, f32_ok, bf16_hits, bf16_total = [], True, 0, 0
    for i, n in enumerate(lengths):
        r = ref[i]
        forced, greedy, bf16 = seam_runs["f32_forced"][i], seam_runs["f32_greedy"][i], seam_runs["bf16_forced"][i]
        pre, dec = errors(forced["prefill"], r["prefill"]), errors(forced["steps"], r["steps"])
        ties, mismatches = 0, 0
        for k, (got, want) in enumerate(zip(greedy["tokens"], r["tokens"])):
            if got != want:
                if near_tie(r["steps"][k], got, want):
                    ties += 1
                else:
                    mismatches += 1
                break  # free-running: later steps follow a different sequence
        hits, total = agreement(compared_rows(bf16["prefill"], bf16["steps"]),
                                compared_rows(forced["prefill"], forced["steps"]))
        bf16_hits, bf16_total = bf16_hits + hits, bf16_total + total
        ok = pre["rel"] <= F32_TOLERANCE and dec["rel"] <= F32_TOLERANCE and mismatches == 0
        f32_ok = f32_ok and ok
        rows.append({"len": n, "prefill": pre, "decode": dec, "greedy_equal": greedy["tokens"] == r["tokens"],
                     "greedy_near_tie": ties > 0, "seam_tokens": greedy["tokens"], "ref_tokens": r["tokens"],
                     "bf16_top1": [hits, total], "f32_ok": ok})
    return {"rows": rows, "f32_ok": f32_ok, "bf16_agreement": 100.0 * bf16_hits / max(1, bf16_total),
            "bf16_rows": bf16_total}


def summary_text(versions, results, tf_agreement, lengths, n_new):
    lines = [f"LongCat-Flash: seam vs transformers {versions['transformers']} (torch {versions['torch']})",
             f"prompts of {', '.join(map(str, lengths))} tokens, {n_new} greedy tokens each; "
             f"f32 goal rel <= {F32_TOLERANCE:g}, bf16 goal: seam's top-1 agreement >= transformers' - "
             f"{BF16_POINTS:g} point", ""]
    for device, res in results.items():
        lines.append(f"seam on {device}:")
        lines.append(f"  {'len':>5} {'prefill abs':>12} {'prefill rel':>12} {'decode abs':>12} {'decode rel':>12} "
                     f"{'greedy':>9} {'bf16 top-1':>12}  f32")
        for r in res["rows"]:
            greedy = "equal" if r["greedy_equal"] else ("near-tie" if r["greedy_near_tie"] else "DIFFER")
            top1 = f"{r['bf16_top1'][0]}/{r['bf16_top1'][1]}"
            lines.append(f"  {r['len']:>5} {r['prefill']['abs']:>12.3e} {r['prefill']['rel']:>12.3e} "
                         f"{r['decode']['abs']:>12.3e} {r['decode']['rel']:>12.3e} {greedy:>9} {top1:>12}  "
                         f"{'OK' if r['f32_ok'] else 'FAIL'}")
        bf16_ok = res["bf16_agreement"] >= tf_agreement - BF16_POINTS
        lines.append(f"  f32 goal: {'met' if res['f32_ok'] else 'NOT MET'}")
        lines.append(f"  bf16 top-1 agreement with f32: seam {res['bf16_agreement']:.2f}% vs transformers "
                     f"{tf_agreement:.2f}% over {res['bf16_rows']} rows: {'met' if bf16_ok else 'NOT MET'}")
        lines.append(f"  seam seconds: {json.dumps(res['seconds'])}")
        lines.append("")
    return "\n".join(lines) + "\n"


def main():
    args = parse_args()
    try:
        import numpy as np  # noqa: F401
        import torch
        import transformers
    except ImportError as err:
        fail(f"needs torch, transformers and numpy: {err}")
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    lengths = [int(x) for x in args.lengths.split(",") if x]
    devices = [d for d in args.seam_devices.split(",") if d]
    if any(d not in ("cpu", "cuda") for d in devices) or not devices:
        fail(f"--seam-devices {args.seam_devices}: cpu and/or cuda")
    if max(lengths) + args.new_tokens > MAX_POSITIONS:
        fail(f"the longest prompt plus --new-tokens exceeds max_position_embeddings {MAX_POSITIONS}")
    torch_device = args.torch_device
    if torch_device == "auto":
        torch_device = "cuda" if torch.cuda.is_available() else "cpu"
    work, out = os.path.abspath(args.work), os.path.abspath(args.out)
    os.makedirs(os.path.join(work, "seam"), exist_ok=True)
    os.makedirs(out, exist_ok=True)
    versions = {"transformers": transformers.__version__, "torch": torch.__version__,
                "python": platform.python_version()}
    log(f"transformers {versions['transformers']}, torch {versions['torch']}; bf16 reference on {torch_device}")

    notes = []
    ckpt = os.path.join(work, "checkpoint")
    model, config = build_checkpoint(ckpt, notes)
    vocab = model.config.vocab_size
    prompts = make_prompts(lengths, vocab)
    ref = []
    for p in prompts:
        t0 = time.time()
        prefill, tokens, steps = reference_f32(model, p, args.new_tokens)
        ref.append({"prefill": prefill.numpy(), "tokens": tokens, "steps": steps.numpy()})
        log(f"transformers f32, {len(p)} tokens: greedy {tokens} ({time.time() - t0:.1f} s)")

    # transformers' bf16 against its own f32, both teacher-forced with the f32 greedy tokens.
    # As a user gets it: the saved folder loaded in bf16 (transformers decides what stays fp32).
    bf16_model = type(model).from_pretrained(ckpt, dtype=torch.bfloat16, attn_implementation="eager")
    bf16_model = bf16_model.to(torch_device).eval()
    if hasattr(bf16_model, "set_experts_implementation"):
        try:
            bf16_model.set_experts_implementation("eager")
        except Exception as err:  # noqa: BLE001
            notes.append(f"set_experts_implementation('eager') on the bf16 model failed: {err!r}")
    tf_hits = tf_total = 0
    for i, p in enumerate(prompts):
        rows = forced_rows(bf16_model, p, ref[i]["tokens"], torch_device).numpy()
        want = compared_rows(ref[i]["prefill"], ref[i]["steps"])
        hits, total = agreement(rows, want)
        tf_hits, tf_total = tf_hits + hits, tf_total + total
    tf_agreement = 100.0 * tf_hits / max(1, tf_total)
    del bf16_model, model
    log(f"transformers bf16 top-1 agreement with f32: {tf_agreement:.2f}% of {tf_total} rows")

    prompts_path = os.path.join(work, "prompts.json")
    forced_path = os.path.join(work, "forced.json")
    with open(prompts_path, "w") as f:
        json.dump([p.tolist() for p in prompts], f)
    with open(forced_path, "w") as f:
        json.dump([r["tokens"][:-1] for r in ref], f)

    cmd = seam_command(args.seam)
    results, failed_runs = {}, []
    for device in devices:
        runs, seconds = {}, {}
        try:
            for name, dtype, forced in (("f32_greedy", "f32", None), ("f32_forced", "f32", forced_path),
                                        ("bf16_forced", "bf16", forced_path)):
                prefix = os.path.join(work, "seam", f"{device}_{name}")
                seconds[name] = round(run_seam(cmd, ckpt, device, dtype, prompts_path, forced,
                                               args.new_tokens, prefix, args.timeout), 1)
                runs[name] = load_seam(prefix, lengths, args.new_tokens, vocab)
                log(f"seam {device} {name}: {seconds[name]} s")
        except RuntimeError as err:
            failed_runs.append(f"{device}: {err}")
            log(f"seam on {device} failed: {err}")
            continue
        results[device] = compare_device(device, ref, runs, lengths)
        results[device]["seconds"] = seconds

    text = summary_text(versions, results, tf_agreement, lengths, args.new_tokens)
    for f in failed_runs:
        text += f"RUN FAILED: {f}\n"
    f32_ok = not failed_runs and all(r["f32_ok"] for r in results.values())
    bf16_ok = all(r["bf16_agreement"] >= tf_agreement - BF16_POINTS for r in results.values())
    text += f"verdict: f32 {'met' if f32_ok else 'NOT MET'}, bf16 {'met' if bf16_ok else 'NOT MET'}\n"
    if notes:
        text += "notes: " + "; ".join(notes) + "\n"
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"versions": versions, "config": config, "lengths": lengths, "new_tokens": args.new_tokens,
                   "torch_bf16_device": torch_device, "transformers_bf16_agreement": tf_agreement,
                   "transformers_bf16_rows": tf_total, "seam": results, "failed_runs": failed_runs,
                   "notes": notes, "f32_ok": f32_ok, "bf16_ok": bf16_ok}, f, indent=1, default=float)
        f.write("\n")
    log(text)
    sys.exit(0 if f32_ok and bf16_ok else (1 if not f32_ok else 3))


if __name__ == "__main__":
    main()
