#!/usr/bin/env python3
"""Compares seam's CUDA logits with Hugging Face transformers on the same GPU.

Builds random Qwen3 and Qwen3-MoE checkpoints (float32 safetensors, written with
save_pretrained), computes transformers' reference logits on cuda:0 in float32
and in bfloat16 (the bf16 model is the float32 one loaded from the same files
and cast), runs `seam-bench-gpu logits` on the same files and prompts, and
checks:

  f32   per prompt max|seam - ref| <= 1e-4 * max|ref| over the prefill rows and
        the decode rows, and identical greedy tokens;
  bf16  top-1 token identical on >= 99% of the compared positions (every prefill
        row, plus decode rows 1.. while seam's and transformers' generated
        prefixes agree); the relative logit error and the common greedy prefix
        are reported, not required.
        Near-tie rule (off with --strict-bf16): when agreement is below 99% but
        at least 95%, the check still passes if every disagreement is a near tie,
        i.e. under the float32 reference the two candidate tokens differ by no
        more than transformers' own bf16 error on that row (max|ref_bf16 -
        ref_f32| over the row). Random models have many small top-2 margins, so
        a few flips there say nothing about seam.
  both  seam's greedy token is the argmax of the logits it wrote (exact ties
        excepted); output shapes match; nothing is non-finite; the float32
        reference is not degenerate (top-1 margins not all ties).

Checkpoints (under --work):
  qwen3-small, qwen3_moe-small   the shapes of tools/make_golden.py (vocab 512,
                                 hidden 64, 2 layers, 8 experts top-2 for MoE)
  qwen3-0.6b                     Qwen3-0.6B's shape: hidden 1024, 28 layers,
                                 16 heads, 8 KV heads, head_dim 128,
                                 intermediate 3072, vocab 151936, tied embeddings
  qwen3_moe-0.6b                 the same attention shape with 4 layers (not 28:
                                 keeps the file near 1 GB), 8 experts top-2,
                                 moe_intermediate_size 768, norm_topk_prob

Weights are drawn on the GPU: normal(0, std) for matrices (std 0.05 for the small
models as in make_golden.py, 0.02 for the 0.6b shapes; HEAD_SCALE = 15 times that
for the embedding and lm_head, so logits are peaked), 1 + 0.1 * normal(0, 1)
for norm weights. rope_theta is 10000 for all (make_golden.py's value; the real
Qwen3-0.6B uses 1e6). A checkpoint already in --work with the same spec is reused.

The reference is a manual prefill + cached greedy decode loop (eager attention)
as in make_golden.py; the logits are the final hidden state (in the model's
dtype) times lm_head in float32, so bf16 references are not rounded to bf16 at
the very end (rounding the last GEMM's output would make many exact ties).

Usage: python3 tools/gpu_oracle.py [--work DIR] [--json PATH] [--only small|0.6b]
                                   [--seam-bin CMD] [--strict-bf16]
--seam-bin is split like a shell word list, so it may carry a wrapper, e.g.
  --seam-bin "scripts/gpu-run.sh seam-bench-gpu"  (paths are made absolute).
Exit status: 0 when every check passed, 1 otherwise.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as mg  # noqa: E402  (config building, MoE layout, JSON helpers)
from oracle_compare import BF16_NEAR_TIE_FLOOR, BF16_TOP1_MIN, F32_REL_TOL, compare_prompt, judge, margin_stats  # noqa: E402

SEED = 4321
PROMPT_LENGTHS = (7, 33, 100, 257)
NEW_TOKENS = 8
NORM_STD = 0.1
# The embedding (tied lm_head) and lm_head draw with HEAD_SCALE x the weight
# std. With the plain std a random model's logits are nearly flat (std ~0.6
# over 151936 tokens, median top-2 gap ~0.1), so bf16 rounding alone flips
# top-1 on several percent of positions, in transformers' own bf16 run as
# much as in seam's (measured on the H200: scale 1 gave transformers bf16 vs
# its own f32 91.9% top-1 on the MoE 0.6b shape, scale 5 gave 93.2%). A
# scale of 15 gives logits with std ~10 and top-2 gaps of a few units, as a
# trained model's are, so top-1 agreement measures the kernels, not the ties.
HEAD_SCALE = 15.0
DEVICE = "cuda:0"

SMALL_DENSE = dict(mg.COMMON)
SMALL_MOE = dict(mg.COMMON, **mg.MOE_EXTRA)
SHAPE_06B = dict(
    vocab_size=151936,
    hidden_size=1024,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=3072,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    max_position_embeddings=4096,
    attention_bias=False,
    use_sliding_window=False,
    hidden_act="silu",
)
MOE_06B = dict(SHAPE_06B, num_hidden_layers=4, num_experts=8, num_experts_per_tok=2,
               moe_intermediate_size=768, decoder_sparse_step=1, norm_topk_prob=True, mlp_only_layers=[])

CHECKPOINTS = [
    # name, group, moe, fields, weight std, seed offset
    ("qwen3-small", "small", False, SMALL_DENSE, mg.WEIGHT_STD, 0),
    ("qwen3_moe-small", "small", True, SMALL_MOE, mg.WEIGHT_STD, 1),
    ("qwen3-0.6b", "0.6b", False, SHAPE_06B, 0.02, 2),
    ("qwen3_moe-0.6b", "0.6b", True, MOE_06B, 0.02, 3),
]


def log(*args):
    print(*args, flush=True)


def classes(moe):
    import transformers

    if moe:
        return transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM
    return transformers.Qwen3Config, transformers.Qwen3ForCausalLM


def spec_of(name, moe, fields, std, seed_offset):
    return {"name": name, "moe": moe, "fields": fields, "weight_std": std, "norm_std": NORM_STD, "head_scale": HEAD_SCALE,
            "seed": SEED + seed_offset, "rope_theta": mg.ROPE_THETA, "made_by": "tools/gpu_oracle.py"}


def weights_present(model_dir):
    return (os.path.exists(os.path.join(model_dir, "model.safetensors"))
            or os.path.exists(os.path.join(model_dir, "model.safetensors.index.json")))


@torch.no_grad()
def reinit_on_gpu(model, std, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        noise = torch.randn(p.shape, generator=gen, device=p.device, dtype=torch.float32)
        if p.dim() < 2 and "norm" in name:
            p.copy_(1.0 + NORM_STD * noise)
        elif "embed_tokens" in name or "lm_head" in name:
            p.copy_(noise * std * HEAD_SCALE)
        else:
            p.copy_(noise * std)


@torch.no_grad()
def probe_logits(model, vocab):
    ids = torch.arange(5, device=DEVICE, dtype=torch.long)[None, :] * 7 % vocab
    return model(input_ids=ids, use_cache=False).logits[0].float().clone()


def load_from_files(moe, model_dir, notes):
    _, model_cls = classes(moe)
    model = mg.load_saved(model_cls, model_dir, "qwen3_moe" if moe else "qwen3", notes)
    return model.to(DEVICE).eval()


def close_enough(a, b):
    """Reloaded vs built model on a 5-token probe (a wrong expert layout is off by O(1))."""
    scale = float(b.abs().max())
    return float((a - b).abs().max()) <= 1e-4 * max(scale, 1e-30)


def build_checkpoint(name, moe, fields, std, seed_offset, model_dir, notes):
    """Builds, saves and reloads one checkpoint; returns the reloaded float32 model on the GPU."""
    from safetensors.torch import load_file, save_file

    spec = spec_of(name, moe, fields, std, seed_offset)
    spec_path = os.path.join(model_dir, "oracle_spec.json")
    if weights_present(model_dir) and os.path.exists(spec_path):
        with open(spec_path) as f:
            if json.load(f) == json.loads(json.dumps(spec)):
                log(f"[{name}] reusing {model_dir}")
                notes.append("checkpoint reused from an earlier run (same spec)")
                return load_from_files(moe, model_dir, notes), "reused"

    os.makedirs(model_dir, exist_ok=True)
    for fn in os.listdir(model_dir):
        if fn.endswith((".safetensors", ".json")):
            os.remove(os.path.join(model_dir, fn))
    config_cls, model_cls = classes(moe)
    config = mg.make_config(config_cls, fields, notes)
    theta = mg.effective_rope_theta(config)
    if theta is not None and theta != mg.ROPE_THETA:
        raise RuntimeError(f"rope theta is {theta}, wanted {mg.ROPE_THETA}")
    torch.manual_seed(SEED + seed_offset)
    t0 = time.time()
    try:
        with torch.device(DEVICE):  # default init runs on the GPU: fast for the 0.6b shapes
            model = model_cls(config)
    except Exception as err:
        notes.append(f"building under torch.device({DEVICE!r}) raised {err!r}; built on the CPU instead")
        model = model_cls(config)
    model = model.to(DEVICE, torch.float32).eval()
    if moe and hasattr(model, "set_experts_implementation"):
        try:
            model.set_experts_implementation("eager")
        except Exception as err:
            notes.append(f"set_experts_implementation('eager') failed: {err!r}")
    reinit_on_gpu(model, std, SEED + seed_offset)
    probe = probe_logits(model, fields["vocab_size"])
    nparams = sum(p.numel() for p in model.parameters())
    log(f"[{name}] built {nparams / 1e6:.1f}M parameters on the GPU in {time.time() - t0:.1f}s")
    t0 = time.time()
    try:
        model.save_pretrained(model_dir, safe_serialization=True, max_shard_size="100GB")
    except TypeError:
        model.save_pretrained(model_dir)
    del model
    torch.cuda.empty_cache()
    log(f"[{name}] saved in {time.time() - t0:.1f}s")

    layout = "native"
    loaded = None
    weights_path = os.path.join(model_dir, "model.safetensors")
    if moe and os.path.exists(weights_path):
        # seam reads the published per-expert layout; transformers 5 may save fused experts.
        native = {k: v.clone() for k, v in load_file(weights_path).items()}
        for order in ("gate_up", "up_gate"):
            split = mg.split_fused_experts(native, fields, order)
            if split is None:
                break
            save_file(split, weights_path, metadata={"format": "pt"})
            try:
                loaded = load_from_files(moe, model_dir, notes)
                ok = close_enough(probe_logits(loaded, fields["vocab_size"]), probe)
            except Exception as err:
                notes.append(f"reload of per-expert checkpoint ({order}) failed: {err!r}")
                loaded, ok = None, False
            if ok:
                layout = f"per_expert_from_fused_{order}"
                break
            loaded = None
            torch.cuda.empty_cache()
        else:
            raise RuntimeError("no per-expert rewrite of the fused experts reproduces the model")
        del native
    if loaded is None:
        loaded = load_from_files(moe, model_dir, notes)
        if not close_enough(probe_logits(loaded, fields["vocab_size"]), probe):
            raise RuntimeError("the saved checkpoint does not reproduce the built model's logits")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")
    return loaded, layout


@torch.no_grad()
def to_bf16_keeping_buffers(model):
    """Casts the parameters to bfloat16; floating buffers (RoPE inv_freq) stay float32, as
    Module.to(dtype) would round them to bf16 and change the rotary angles."""
    saved = {name: b.detach().clone() for name, b in model.named_buffers() if b.is_floating_point()}
    model.to(torch.bfloat16)
    for name, value in saved.items():
        owner, _, leaf = name.rpartition(".")
        mod = model.get_submodule(owner) if owner else model
        mod._buffers[leaf] = value


def make_prompts(vocab, seed_offset):
    gen = torch.Generator().manual_seed(SEED + 100 + seed_offset)
    return [torch.randint(0, vocab, (n,), generator=gen, dtype=torch.long).tolist() for n in PROMPT_LENGTHS]


@torch.no_grad()
def head_logits(model, hidden):
    """Final hidden states (model dtype) times lm_head, in float32."""
    w = model.get_output_embeddings().weight
    return torch.nn.functional.linear(hidden.float(), w.float())


@torch.no_grad()
def reference_run(model, prompt, n_new):
    """Prefill, then greedy decode through the KV cache (make_golden.py's loop)."""
    ids = torch.tensor([prompt], dtype=torch.long, device=DEVICE)
    out = model.model(input_ids=ids, use_cache=True)
    prefill = head_logits(model, out.last_hidden_state[0])
    past = out.past_key_values
    nxt = prefill[-1]
    tokens, steps = [], []
    for step in range(n_new):
        steps.append(nxt)
        tok = int(torch.argmax(nxt))
        tokens.append(tok)
        if step == n_new - 1:
            break
        out = model.model(input_ids=torch.tensor([[tok]], dtype=torch.long, device=DEVICE),
                          past_key_values=past, use_cache=True)
        past = out.past_key_values
        nxt = head_logits(model, out.last_hidden_state[0, -1])
    return {"prefill": prefill, "tokens": tokens, "steps": torch.stack(steps)}


def run_seam(seam_cmd, model_dir, dtype, prompts_path, n_new, prefix, timeout):
    cmd = seam_cmd + ["logits", "--checkpoint", model_dir, "--dtype", dtype, "--prompts", prompts_path,
                      "--new-tokens", str(n_new), "--out", prefix]
    log_path = prefix + ".log"
    t0 = time.time()
    with open(log_path, "w") as lf:
        lf.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        lf.flush()
        try:
            rc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        except OSError as err:
            lf.write(f"could not start: {err!r}\n")
            rc = f"could not start: {err!r}"
    secs = time.time() - t0
    if rc != 0:
        with open(log_path) as lf:
            tail = lf.read()[-3000:]
        raise RuntimeError(f"seam logits --dtype {dtype} exited {rc} after {secs:.1f}s; log {log_path}:\n{tail}")
    return secs


def load_seam(prefix, prompts, n_new, vocab):
    with open(prefix + ".json") as f:
        meta = json.load(f)
    if int(meta["vocab"]) != vocab:
        raise RuntimeError(f"seam reports vocab {meta['vocab']}, the checkpoint has {vocab}")
    if len(meta["prompts"]) != len(prompts):
        raise RuntimeError(f"seam wrote {len(meta['prompts'])} prompts, asked for {len(prompts)}")
    with open(prefix + ".bin", "rb") as f:
        raw = bytearray(f.read())
    flat = torch.frombuffer(raw, dtype=torch.float32) if raw else torch.zeros(0)
    want = sum((len(p) + n_new) * vocab for p in prompts)
    if flat.numel() != want:
        raise RuntimeError(f"{prefix}.bin holds {flat.numel()} floats, expected {want}")
    out, off = [], 0
    for p, rec in zip(prompts, meta["prompts"]):
        L = len(p)
        if int(rec["prefill_rows"]) != L or len(rec["tokens"]) != n_new:
            raise RuntimeError(f"seam prompt record {rec.get('prefill_rows')} rows / {len(rec['tokens'])} tokens, "
                               f"expected {L} / {n_new}")
        block = flat[off:off + (L + n_new) * vocab].view(L + n_new, vocab).to(DEVICE)
        off += (L + n_new) * vocab
        out.append({"prefill": block[:L], "steps": block[L:], "tokens": [int(t) for t in rec["tokens"]]})
    return out


def run_checkpoint(entry, args, seam_cmd):
    name, group, moe, fields, std, seed_offset = entry
    notes = []
    res = {"checkpoint": name, "moe": moe, "fields": fields, "weight_std": std, "notes": notes, "dtypes": {}}
    model_dir = os.path.join(args.work, name)
    res["dir"] = model_dir
    t0 = time.time()
    model, layout = build_checkpoint(name, moe, fields, std, seed_offset, model_dir, notes)
    res["layout"] = layout
    res["build_s"] = time.time() - t0
    res["checkpoint_bytes"] = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir)
                                  if f.endswith(".safetensors"))
    vocab = fields["vocab_size"]
    prompts = make_prompts(vocab, seed_offset)
    prompts_path = os.path.join(model_dir, "oracle_prompts.json")
    with open(prompts_path, "w") as f:
        json.dump(prompts, f)
    res["prompt_lengths"] = [len(p) for p in prompts]
    res["new_tokens"] = NEW_TOKENS

    refs = {}
    t0 = time.time()
    refs["f32"] = [reference_run(model, p, NEW_TOKENS) for p in prompts]
    to_bf16_keeping_buffers(model)
    refs["bf16"] = [reference_run(model, p, NEW_TOKENS) for p in prompts]
    del model
    torch.cuda.empty_cache()
    res["reference_s"] = time.time() - t0
    margins = margin_stats(torch.cat([r["prefill"] for r in refs["f32"]]))
    res["reference_margins_f32"] = margins
    log(f"[{name}] reference done in {res['reference_s']:.1f}s; f32 logit std {margins['logit_std']:.3f}, "
        f"top-2 margin min/p10/median {margins['margin_min']:.3g}/{margins['margin_p10']:.3g}/"
        f"{margins['margin_median']:.3g}, exact ties {margins['exact_ties']}/{margins['rows']}, "
        f"distinct top-1 {margins['distinct_top1']}")

    all_ok = True
    for dtype in ("f32", "bf16"):
        d = {}
        res["dtypes"][dtype] = d
        try:
            prefix = os.path.join(model_dir, f"seam-logits-{dtype}")
            d["seam_s"] = run_seam(seam_cmd, model_dir, dtype, prompts_path, NEW_TOKENS, prefix, args.seam_timeout)
            seam = load_seam(prefix, prompts, NEW_TOKENS, vocab)
            recs = [compare_prompt(dtype, s, r, r32) for s, r, r32 in zip(seam, refs[dtype], refs["f32"])]
            d["prompts"] = recs
            ok, reasons, summary = judge(dtype, recs, margins, args.strict_bf16)
            d.update(summary)
            d["pass"] = ok
            d["failures"] = reasons
        except Exception as err:
            d["pass"] = False
            d["failures"] = [f"{type(err).__name__}: {err}"]
        for reason in d["failures"]:
            log(f"[{name}] {dtype} FAIL: {reason}")
        all_ok = all_ok and d["pass"]
        log(f"[{name}] {dtype}: {'PASS' if d['pass'] else 'FAIL'}")
    res["pass"] = all_ok
    return res


def fmt_table(results):
    head = (f"{'checkpoint':<16} {'dtype':<5} {'pos':>5} {'max|d|/max|ref|':>15} {'mean|d|/max|ref|':>16} "
            f"{'top-1':>8} {'greedy common prefix':<22} result")
    lines = [head, "-" * len(head)]
    for res in results:
        if "error" in res:
            lines.append(f"{res['checkpoint']:<16} {'-':<5} {'':>5} {'':>15} {'':>16} {'':>8} {'':<22} "
                         f"ERROR {res['error'][:80]}")
            continue
        for dtype, d in res["dtypes"].items():
            if "top1_positions" not in d:
                lines.append(f"{res['checkpoint']:<16} {dtype:<5} {'':>5} {'':>15} {'':>16} {'':>8} {'':<22} "
                             f"FAIL {d['failures'][0][:80] if d['failures'] else ''}")
                continue
            greedy = ",".join(str(x) for x in d["common_prefix"]) + f" of {NEW_TOKENS}"
            if d["greedy_identical"]:
                greedy += " (same)"
            lines.append(f"{res['checkpoint']:<16} {dtype:<5} {d['top1_positions']:>5} {d['rel_max_err']:>15.3g} "
                         f"{d['rel_mean_err']:>16.3g} {d['top1_fraction']:>8.2%} {greedy:<22} "
                         f"{'PASS' if d['pass'] else 'FAIL'}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/seam-gpu-work", help="where checkpoints and seam outputs go")
    ap.add_argument("--json", default=None, help="write the summary here")
    ap.add_argument("--only", choices=["small", "0.6b"], default=None)
    ap.add_argument("--seam-bin", default="seam-bench-gpu", help="command for seam-bench-gpu (shell words)")
    ap.add_argument("--seam-timeout", type=float, default=240.0, help="seconds per seam logits run")
    ap.add_argument("--strict-bf16", action="store_true", help="bf16: require 99%% top-1, no near-tie rule")
    ap.add_argument("--prompt-lengths", default=None,
                    help="comma-separated prompt lengths (default 7,33,100,257)")
    args = ap.parse_args()
    if args.prompt_lengths:
        globals()["PROMPT_LENGTHS"] = tuple(int(x) for x in args.prompt_lengths.split(","))
    args.work = os.path.abspath(args.work)
    seam_cmd = shlex.split(args.seam_bin)
    if seam_cmd and os.sep in seam_cmd[0]:
        seam_cmd[0] = os.path.abspath(seam_cmd[0])

    import transformers

    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("highest")
    if not torch.cuda.is_available():
        log("no CUDA device")
        return 1
    os.makedirs(args.work, exist_ok=True)
    gpu = torch.cuda.get_device_name(0)
    log(f"gpu {gpu}; torch {torch.__version__} transformers {transformers.__version__}; seam {seam_cmd}")
    t_start = time.time()
    results = []
    for entry in CHECKPOINTS:
        if args.only and entry[1] != args.only:
            continue
        t0 = time.time()
        try:
            res = run_checkpoint(entry, args, seam_cmd)
        except Exception as err:
            import traceback

            traceback.print_exc()
            res = {"checkpoint": entry[0], "pass": False, "error": f"{type(err).__name__}: {err}"}
        res["seconds"] = time.time() - t0
        results.append(res)
        torch.cuda.empty_cache()
        log(f"[{entry[0]}] {'PASS' if res['pass'] else 'FAIL'} in {res['seconds']:.1f}s")

    ok = bool(results) and all(r["pass"] for r in results)
    table = fmt_table(results)
    log("")
    log(table)
    log(f"\noracle {'PASS' if ok else 'FAIL'} in {time.time() - t_start:.1f}s "
        f"(f32: max|a-b| <= {F32_REL_TOL:g}*max|b| and identical greedy tokens; bf16: top-1 >= "
        f"{BF16_TOP1_MIN:.0%}{'' if args.strict_bf16 else ' or near-tie rule'}, greedy prefix reported)")
    if args.json:
        summary = {
            "made_by": "tools/gpu_oracle.py",
            "gpu": gpu,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": sys.version.split()[0]},
            "only": args.only,
            "seam_cmd": seam_cmd,
            "strict_bf16": args.strict_bf16,
            "rules": {"f32_rel_tol": F32_REL_TOL, "bf16_top1_min": BF16_TOP1_MIN,
                      "bf16_near_tie_floor": None if args.strict_bf16 else BF16_NEAR_TIE_FLOOR},
            "pass": ok,
            "table": table,
            "checkpoints": results,
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(mg.json_safe(summary), f, indent=1)
            f.write("\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
