#!/usr/bin/env python3
"""Golden logits of Hugging Face transformers for a tiny random LongCat-Flash.

Builds a LongcatFlashForCausalLM (transformers 5.x) from a small config,
draws its weights from a fixed seed, writes it with
save_pretrained(safe_serialization=True) in float32 (transformers' own
layout and config encoding, not seam's), reloads the saved folder to check
that it reproduces the logits, and records for a few prompts

  prompt_<i>          int32   [len]          prompt token ids
  prefill_logits_<i>  float32 [len, vocab]   one forward pass over the prompt, every position
  decode_tokens_<i>   int32   [4]            greedy tokens generated after the prompt
  decode_logits_<i>   float32 [4, vocab]     row k: the logits that chose decode_tokens_<i>[k]

decode_logits_<i>[0] is the last prefill row; rows k >= 1 come from
model.generate's cached decode (the latent cache of both attentions of every
layer). Cross-checks, recorded in golden.json with the versions: cached
decode against recomputing the whole sequence without a cache, generate's
first step against the prefill, and that the saved folder loads exactly
(nothing missing, nothing unexpected) and reproduces the logits.

The shape exercises what seam implements: MLA with q and kv low-rank factors
(q_lora_rank 48, kv_lora_rank 32, nope 16, rope 8, v 16), 4 heads, hidden 64,
2 logical layers (4 attentions), dense MLPs of 96, 8 routed experts of 32
plus 2 zero-computation experts, top-2, routed_scaling_factor 2.5, and a
random score-correction bias so that it changes the experts chosen.

Usage (on a machine with torch and transformers >= 5):
  python3 tools/make_golden_longcat_flash.py --dir tests/fixtures/golden/longcat_flash
writes DIR/config.json, DIR/model.safetensors (and whatever else
save_pretrained writes), DIR/golden.safetensors and DIR/golden.json.
"""

import argparse
import json
import math
import os
import platform
import sys

SEED = 1234
PROMPT_LENGTHS = (5, 9, 13, 3)
NEW_TOKENS = 4
RECOMPUTE_TOLERANCE = 1e-4  # relative, cached decode vs. recomputation (both transformers)

CONFIG = dict(
    vocab_size=256,
    hidden_size=64,
    num_layers=2,
    num_hidden_layers=4,  # one per attention (the model sets it to 2 · num_layers anyway)
    num_attention_heads=4,
    num_key_value_heads=4,
    ffn_hidden_size=96,
    q_lora_rank=48,
    kv_lora_rank=32,
    qk_nope_head_dim=16,
    qk_rope_head_dim=8,
    head_dim=8,  # the rotary dimension: transformers' rotary embedding reads head_dim
    v_head_dim=16,
    moe_topk=2,
    n_routed_experts=8,
    zero_expert_num=2,
    expert_ffn_hidden_size=32,
    routed_scaling_factor=2.5,
    rms_norm_eps=1e-5,
    max_position_embeddings=512,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    tie_word_embeddings=False,
    attention_bias=False,
    hidden_act="silu",
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)


def log(*args):
    print(*args, flush=True)


def fail(message):
    print(f"make_golden_longcat_flash: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def relative(a, b):
    scale = float(b.abs().max())
    return float((a - b).abs().max()) / (scale if scale > 0 else 1.0)


def build_model(notes):
    import torch
    import transformers

    model_cls = getattr(transformers, "LongcatFlashForCausalLM", None)
    config_cls = getattr(transformers, "LongcatFlashConfig", None)
    if model_cls is None or config_cls is None:
        fail(f"transformers {transformers.__version__} has no LongcatFlashForCausalLM (needs 5.x)")
    config = config_cls(**CONFIG)
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = model_cls(config).to(torch.float32).eval()
    if hasattr(model, "set_experts_implementation"):
        try:
            model.set_experts_implementation("eager")
        except Exception as err:  # noqa: BLE001
            notes.append(f"set_experts_implementation('eager') failed: {err!r}")
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # every RMSNorm weight (layer norms, q_a / kv_a norms, the final norm)
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif "router.classifier" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))  # decisive routing
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.05 * torch.randn(b.shape, generator=gen))  # changes the choice, not the weights
    return model, model_cls


def make_prompts(vocab):
    import torch

    gen = torch.Generator().manual_seed(SEED + 2)
    return [torch.randint(3, vocab, (n,), generator=gen, dtype=torch.long) for n in PROMPT_LENGTHS]


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
        seq = torch.cat([prompt, torch.tensor(tokens[:-1], dtype=torch.long)])
        full = model(input_ids=seq[None, :], use_cache=False).logits[0].float()[len(prompt) - 1:]
    for k in range(NEW_TOKENS):
        if int(torch.argmax(steps[k])) != tokens[k]:
            fail(f"generate's token {k} is not the argmax of its logits")
    top2 = [torch.topk(steps[k], 2).values for k in range(NEW_TOKENS)]
    margins = [float(v[0] - v[1]) for v in top2]
    return prefill, tokens, steps, {
        "cached_vs_recompute_rel": relative(steps, full),
        "first_step_vs_prefill_rel": relative(steps[0], prefill[-1]),
        "top2_margins": margins,
    }


def saved_keys(folder):
    from safetensors import safe_open

    keys = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".safetensors") and not name.startswith("golden"):
            with safe_open(os.path.join(folder, name), framework="pt") as f:
                keys.update({k: list(f.get_slice(k).get_shape()) for k in f.keys()})
    return keys


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="fixture folder to write (created if needed)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: reproducible sums)")
    args = parser.parse_args()
    try:
        import torch
        import transformers
        from safetensors.torch import save_file
    except ImportError as err:
        fail(f"needs torch, transformers and safetensors: {err}")
    torch.set_num_threads(args.threads)
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, python {platform.python_version()}")

    notes = []
    model, model_cls = build_model(notes)
    os.makedirs(args.dir, exist_ok=True)
    model.save_pretrained(args.dir, safe_serialization=True)
    kwargs = dict(dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    loaded, info = model_cls.from_pretrained(args.dir, **kwargs)
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if problems:
        fail(f"reloading {args.dir} did not use the checkpoint exactly: {problems}")
    loaded = loaded.to(torch.float32).eval()
    if hasattr(loaded, "set_experts_implementation"):
        try:
            loaded.set_experts_implementation("eager")
        except Exception as err:  # noqa: BLE001
            notes.append(f"set_experts_implementation('eager') on the reloaded model failed: {err!r}")

    vocab = model.config.vocab_size
    tensors, record = {}, {"prompts": [], "tokens": [], "checks": []}
    for i, prompt in enumerate(make_prompts(vocab)):
        prefill, tokens, steps, checks = run_prompt(model, prompt)
        with torch.no_grad():
            again = loaded(input_ids=prompt[None, :], use_cache=False).logits[0].float()
        checks["reloaded_vs_built_rel"] = relative(again, prefill)
        for key in ("cached_vs_recompute_rel", "first_step_vs_prefill_rel", "reloaded_vs_built_rel"):
            if checks[key] > RECOMPUTE_TOLERANCE:
                fail(f"prompt {i}: {key} is {checks[key]:.3g}")
        tensors[f"prompt_{i}"] = prompt.to(torch.int32).contiguous()
        tensors[f"prefill_logits_{i}"] = prefill.contiguous()
        tensors[f"decode_tokens_{i}"] = torch.tensor(tokens, dtype=torch.int32)
        tensors[f"decode_logits_{i}"] = steps.contiguous()
        record["prompts"].append(prompt.tolist())
        record["tokens"].append(tokens)
        record["checks"].append(checks)
        log(f"prompt {i} (len {len(prompt)}): tokens {tokens}, cached vs recompute "
            f"{checks['cached_vs_recompute_rel']:.2e}, smallest top-2 margin {min(checks['top2_margins']):.3g}")

    record.update({
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "python": platform.python_version()},
        "seed": SEED,
        "threads": args.threads,
        "config": CONFIG,
        "saved_tensors": saved_keys(args.dir),
        "notes": notes,
        "smallest_top2_margin": min(m for c in record["checks"] for m in c["top2_margins"]),
    })
    if not math.isfinite(record["smallest_top2_margin"]) or record["smallest_top2_margin"] < 1e-3:
        notes.append("a greedy step has a top-2 margin below 1e-3: token equality is fragile")
    save_file(tensors, os.path.join(args.dir, "golden.safetensors"))
    with open(os.path.join(args.dir, "golden.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    log(f"wrote {args.dir}: the checkpoint, golden.safetensors and golden.json")


if __name__ == "__main__":
    main()
