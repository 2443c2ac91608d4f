#!/usr/bin/env python3
"""Golden logits of Hugging Face transformers for seam's Nemotron-H fixture.

The checkpoint itself is seam's: `seam model init --arch nemotron_h` wrote
config.json and model.safetensors into the fixture folder (see
tests/fixtures/golden/README.md for the command). This script loads that
folder with transformers' NemotronHForCausalLM in float32 on the CPU (eager
attention, the torch Mamba path) and records, for a few prompts,

  prompt_<i>          int32   [len]          prompt token ids
  prefill_logits_<i>  float32 [len, vocab]   one forward pass over the prompt, every position
  decode_tokens_<i>   int32   [4]            greedy tokens generated after the prompt
  decode_logits_<i>   float32 [4, vocab]     row k: the logits that chose decode_tokens_<i>[k]

decode_logits_<i>[0] is the last prefill row; rows k >= 1 come from
model.generate's cached decode (KV cache for attention layers, conv and SSM
states for Mamba layers). Cross-checks, recorded in golden.json with the
versions: the cached decode against recomputing the whole sequence without a
cache, generate's first step against the prefill, and that every tensor of
the folder was loaded (nothing missing, nothing unexpected).

Usage:
  python3 tools/make_golden_nemotron_h.py --dir tests/fixtures/golden/nemotron_h
writes DIR/golden.safetensors and DIR/golden.json next to the checkpoint.
"""

import argparse
import json
import math
import os
import platform
import sys

SEED = 1234
PROMPT_LENGTHS = (5, 9, 13, 3)  # 13 crosses the fixture's chunk_size of 8
NEW_TOKENS = 4
RECOMPUTE_TOLERANCE = 1e-4  # relative, cached decode vs. recomputation (both transformers)


def log(*args):
    print(*args, flush=True)


def fail(message):
    print(f"make_golden_nemotron_h: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def relative(a, b):
    scale = float(b.abs().max())
    return float((a - b).abs().max()) / (scale if scale > 0 else 1.0)


def load_model(folder, notes):
    import torch
    import transformers

    log(f"transformers {transformers.__version__}, torch {torch.__version__}, python {platform.python_version()}")
    model_cls = getattr(transformers, "NemotronHForCausalLM", None)
    if model_cls is None:
        fail(f"transformers {transformers.__version__} has no NemotronHForCausalLM; "
             "Nemotron-H needs a transformers release that ships models/nemotron_h")
    kwargs = dict(attn_implementation="eager", output_loading_info=True)
    try:
        model, info = model_cls.from_pretrained(folder, dtype=torch.float32, **kwargs)
    except TypeError:  # transformers 4.x spells it torch_dtype
        model, info = model_cls.from_pretrained(folder, torch_dtype=torch.float32, **kwargs)
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if problems:
        fail(f"loading {folder} did not use the checkpoint exactly: {problems}")
    model.eval()
    cfg = model.config
    with open(os.path.join(folder, "config.json")) as f:
        written = json.load(f)
    # The fields that change arithmetic must read back as seam wrote them.
    loaded_pattern = getattr(cfg, "hybrid_override_pattern", None)
    if loaded_pattern is not None and loaded_pattern != written["hybrid_override_pattern"]:
        fail(f"pattern read back as {loaded_pattern!r}, written {written['hybrid_override_pattern']!r}")
    head_dim = getattr(cfg, "head_dim", None) or getattr(cfg, "attention_head_dim", None)
    checks = {
        "head_dim": (head_dim, written["head_dim"]),
        "n_groups": (cfg.n_groups, written["n_groups"]),
        "mamba_num_heads": (cfg.mamba_num_heads, written["mamba_num_heads"]),
        "mamba_head_dim": (cfg.mamba_head_dim, written["mamba_head_dim"]),
        "ssm_state_size": (cfg.ssm_state_size, written["ssm_state_size"]),
        "conv_kernel": (cfg.conv_kernel, written["conv_kernel"]),
        "chunk_size": (cfg.chunk_size, written["chunk_size"]),
        "layer_norm_epsilon": (cfg.layer_norm_epsilon, written["layer_norm_epsilon"]),
        "time_step_min": (cfg.time_step_min, written["time_step_min"]),
    }
    for key, (got, want) in checks.items():
        if got != want:
            fail(f"config field {key} read back as {got!r}, written {want!r}")
    limit = list(cfg.time_step_limit)
    if limit[0] != written["time_step_min"]:
        notes.append(f"time_step_limit[0]={limit[0]} differs from time_step_min; CPU and CUDA paths may differ")
    for attr in ("_attn_implementation",):
        try:
            setattr(cfg, attr, "eager")
        except Exception as err:  # noqa: BLE001
            notes.append(f"could not set config.{attr}: {err!r}")
    return model


def make_prompts(vocab):
    import torch

    gen = torch.Generator().manual_seed(SEED + 2)
    return [torch.randint(0, vocab, (n,), generator=gen, dtype=torch.long) for n in PROMPT_LENGTHS]


def run_prompt(model, prompt):
    import torch

    with torch.no_grad():
        prefill = model(input_ids=prompt[None, :], use_cache=False).logits[0].float().clone()
        res = model.generate(
            input_ids=prompt[None, :],
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            do_sample=False,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=0,
            use_cache=True,
        )
        tokens = res.sequences[0, len(prompt):].tolist()
        steps = torch.stack([l[0].float() for l in res.logits])
        # The same sequence recomputed from scratch without any cache.
        seq = torch.cat([prompt, torch.tensor(tokens[:-1], dtype=torch.long)])
        full = model(input_ids=seq[None, :], use_cache=False).logits[0].float()[len(prompt) - 1:]
    for k in range(NEW_TOKENS):
        if int(torch.argmax(steps[k])) != tokens[k]:
            fail(f"generate's token {k} is not the argmax of its logits")
    margins = [float(torch.topk(steps[k], 2).values[0] - torch.topk(steps[k], 2).values[1]) for k in range(NEW_TOKENS)]
    return prefill, tokens, steps, {
        "cached_vs_recompute_rel": relative(steps, full),
        "first_step_vs_prefill_rel": relative(steps[0], prefill[-1]),
        "top2_margins": margins,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="fixture folder holding seam's config.json and model.safetensors")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: reproducible sums)")
    args = parser.parse_args()
    for name in ("config.json", "model.safetensors"):
        if not os.path.exists(os.path.join(args.dir, name)):
            fail(f"{args.dir}/{name} is missing: write the checkpoint with seam model init first")
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError as err:
        fail(f"needs torch and safetensors: {err}")
    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)

    notes = []
    model = load_model(args.dir, notes)
    vocab = model.config.vocab_size
    tensors, record = {}, {"prompts": [], "tokens": [], "checks": []}
    for i, prompt in enumerate(make_prompts(vocab)):
        prefill, tokens, steps, checks = run_prompt(model, prompt)
        if checks["cached_vs_recompute_rel"] > RECOMPUTE_TOLERANCE:
            fail(f"prompt {i}: cached decode differs from recomputation by {checks['cached_vs_recompute_rel']:.3g}")
        if checks["first_step_vs_prefill_rel"] > RECOMPUTE_TOLERANCE:
            fail(f"prompt {i}: generate's first step differs from the prefill by "
                 f"{checks['first_step_vs_prefill_rel']:.3g}")
        tensors[f"prompt_{i}"] = prompt.to(torch.int32).contiguous()
        tensors[f"prefill_logits_{i}"] = prefill.contiguous()
        tensors[f"decode_tokens_{i}"] = torch.tensor(tokens, dtype=torch.int32)
        tensors[f"decode_logits_{i}"] = steps.contiguous()
        record["prompts"].append(prompt.tolist())
        record["tokens"].append(tokens)
        record["checks"].append(checks)
        log(f"prompt {i} (len {len(prompt)}): tokens {tokens}, cached vs recompute {checks['cached_vs_recompute_rel']:.2e}, "
            f"smallest top-2 margin {min(checks['top2_margins']):.3g}")
    import transformers

    record.update({
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "python": platform.python_version()},
        "seed": SEED,
        "threads": args.threads,
        "notes": notes,
        "smallest_top2_margin": min(m for c in record["checks"] for m in c["top2_margins"]),
    })
    if not math.isfinite(record["smallest_top2_margin"]) or record["smallest_top2_margin"] < 1e-3:
        notes.append("a greedy step has a top-2 margin below 1e-3: token equality is fragile")
    save_file(tensors, os.path.join(args.dir, "golden.safetensors"))
    with open(os.path.join(args.dir, "golden.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    log(f"wrote {args.dir}/golden.safetensors and {args.dir}/golden.json")


if __name__ == "__main__":
    main()
