#!/usr/bin/env python3
"""Build seam's golden fixtures with Hugging Face transformers.

Makes two tiny random models (Qwen3 dense and Qwen3-MoE) in float32 on the CPU,
saves each with save_pretrained (config.json + model.safetensors), and records
reference logits for a few prompts:

  prompt_<i>          int32   [len]          prompt token ids
  prefill_logits_<i>  float32 [len, vocab]   logits of one forward pass over the prompt
  decode_tokens_<i>   int32   [4]            greedy tokens generated after the prompt
  decode_logits_<i>   float32 [4, vocab]     logits that chose each greedy token

decode_logits_<i>[0] is the last prefill row (it picks the first new token);
decode_logits_<i>[k] for k >= 1 are the logits after feeding decode_tokens_<i>[k-1]
through the KV cache, so row k picks decode_tokens_<i>[k].

The reference run is a manual prefill + cached decode loop (eager attention).
It is cross-checked against a full recomputation without cache, against
model.generate, and against a fresh from_pretrained load of the saved files;
the results of these checks go into golden.json.

Usage: python3 tools/make_golden.py --out DIR
writes DIR/qwen3/ and DIR/qwen3_moe/.
"""

import argparse
import dataclasses
import inspect
import json
import os
import re
import sys
import time

import torch

SEED = 1234
PROMPT_LENGTHS = (5, 9, 13, 3)
NEW_TOKENS = 4
WEIGHT_STD = 0.05
NORM_STD = 0.1

COMMON = dict(
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
    max_position_embeddings=512,
    attention_bias=False,
    use_sliding_window=False,
    hidden_act="silu",
)
ROPE_THETA = 10000.0

MOE_EXTRA = dict(
    num_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    decoder_sparse_step=1,
    norm_topk_prob=True,
    mlp_only_layers=[],
)


def log(*args):
    print(*args, flush=True)


def accepted_names(cls):
    names = set()
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    try:
        names |= set(inspect.signature(cls.__init__).parameters)
    except (TypeError, ValueError):
        pass
    return names


def make_config(cls, fields, notes):
    """Builds a config across transformers versions (v4 kwargs, v5 strict dataclasses)."""
    import transformers

    fields = dict(fields)
    names = accepted_names(cls)
    if "rope_parameters" in names:
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": ROPE_THETA}
    else:
        fields["rope_theta"] = ROPE_THETA
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        fields["dtype"] = "float32"
    else:
        fields["torch_dtype"] = "float32"

    late = {}
    try:
        config = cls(**fields)
    except Exception as err:
        notes.append(f"{cls.__name__}(**fields) raised {err!r}; retrying with declared fields only")
        known = {k: v for k, v in fields.items() if k in names}
        late = {k: v for k, v in fields.items() if k not in names}
        config = cls(**known)
    for key, value in late.items():
        try:
            setattr(config, key, value)
        except Exception as err:  # strict configs may refuse unknown attributes
            notes.append(f"could not set {key}={value!r} on config: {err!r}")

    for attr, value in (("_attn_implementation", "eager"), ("_experts_implementation", "eager")):
        try:
            setattr(config, attr, value)
        except Exception as err:
            notes.append(f"could not set config.{attr}: {err!r}")
    return config


def effective_rope_theta(config):
    rp = getattr(config, "rope_parameters", None)
    if isinstance(rp, dict) and "rope_theta" in rp:
        return float(rp["rope_theta"])
    theta = getattr(config, "rope_theta", None)
    return None if theta is None else float(theta)


@torch.no_grad()
def reinit(model):
    gen = torch.Generator().manual_seed(SEED + 1)
    for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
        if p.dim() >= 2:
            p.copy_(noise * WEIGHT_STD)
        elif "norm" in name:
            p.copy_(1.0 + NORM_STD * noise)
        else:
            p.copy_(noise * WEIGHT_STD)


def make_prompts(vocab):
    gen = torch.Generator().manual_seed(SEED + 2)
    return [torch.randint(0, vocab, (n,), generator=gen, dtype=torch.long) for n in PROMPT_LENGTHS]


def top2_margin(row):
    top = torch.topk(row, 2).values
    return float(top[0] - top[1])


@torch.no_grad()
def reference_run(model, prompt):
    """Prefill, then greedy decode with the KV cache."""
    out = model(input_ids=prompt[None, :], use_cache=True)
    prefill = out.logits[0].float().clone()
    past = out.past_key_values
    nxt = prefill[-1]
    tokens, steps = [], []
    for step in range(NEW_TOKENS):
        steps.append(nxt.clone())
        tok = int(torch.argmax(nxt))
        tokens.append(tok)
        if step == NEW_TOKENS - 1:
            break
        out = model(input_ids=torch.tensor([[tok]], dtype=torch.long), past_key_values=past, use_cache=True)
        past = out.past_key_values
        nxt = out.logits[0, -1].float()
    return prefill, tokens, torch.stack(steps)


@torch.no_grad()
def full_recompute(model, prompt, tokens):
    seq = torch.cat([prompt, torch.tensor(tokens[:-1], dtype=torch.long)])
    logits = model(input_ids=seq[None, :], use_cache=False).logits[0].float()
    return logits[len(prompt) - 1:]


@torch.no_grad()
def generate_check(model, prompt):
    res = model.generate(
        input_ids=prompt[None, :],
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
        do_sample=False,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=0,
    )
    toks = res.sequences[0, len(prompt):].tolist()
    logits = torch.stack([l[0].float() for l in res.logits])
    return toks, logits


def safetensors_keys(path):
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}


def split_fused_experts(native, cfg, order):
    """Turns fused expert tensors (transformers v5 in-memory layout) into per-expert
    tensors, the layout of published Qwen3-MoE checkpoints:
      model.layers.L.mlp.experts.E.{gate,up}_proj.weight [moe_inter, hidden]
      model.layers.L.mlp.experts.E.down_proj.weight      [hidden, moe_inter]
    order says which half of gate_up_proj is the gate ("gate_up" or "up_gate").
    Returns the new state dict, or None when nothing is fused."""
    fused = [k for k in native if re.search(r"\.mlp\.experts\.(gate_up_proj|down_proj)$", k)]
    if not fused:
        return None
    H, I, E = cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["num_experts"]
    out = {}
    for k, v in native.items():
        m = re.match(r"(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$", k)
        if not m:
            out[k] = v.clone()
            continue
        prefix, kind = m.groups()
        if v.dim() != 3 or v.shape[0] != E:
            raise ValueError(f"unexpected {k} shape {tuple(v.shape)}")
        down = native[prefix + ".down_proj"]
        if tuple(down.shape[1:]) == (H, I):
            out_first = True
        elif tuple(down.shape[1:]) == (I, H):
            out_first = False
        else:
            raise ValueError(f"unexpected {prefix}.down_proj shape {tuple(down.shape)}")
        if kind == "down_proj":
            d = v if out_first else v.transpose(1, 2)
            for e in range(E):
                out[f"{prefix}.{e}.down_proj.weight"] = d[e].clone().contiguous()
        else:
            # Orientation follows down_proj's: [E, 2I, H] when down is [E, H, I].
            gu = v if out_first else v.transpose(1, 2)
            if tuple(gu.shape[1:]) != (2 * I, H):
                raise ValueError(f"unexpected {k} shape {tuple(v.shape)}")
            first, second = ("gate_proj", "up_proj") if order == "gate_up" else ("up_proj", "gate_proj")
            for e in range(E):
                out[f"{prefix}.{e}.{first}.weight"] = gu[e, :I].clone().contiguous()
                out[f"{prefix}.{e}.{second}.weight"] = gu[e, I:].clone().contiguous()
    return out


def build_model(name, torch_seed_offset, notes):
    import transformers

    if name == "qwen3":
        config_cls = transformers.Qwen3Config
        model_cls = transformers.Qwen3ForCausalLM
        fields = dict(COMMON)
    else:
        config_cls = transformers.Qwen3MoeConfig
        model_cls = transformers.Qwen3MoeForCausalLM
        fields = dict(COMMON)
        fields.update(MOE_EXTRA)
    config = make_config(config_cls, fields, notes)
    torch.manual_seed(SEED + torch_seed_offset)
    model = model_cls(config).to(torch.float32).eval()
    if hasattr(model, "set_experts_implementation") and name == "qwen3_moe":
        try:
            model.set_experts_implementation("eager")
        except Exception as err:
            notes.append(f"set_experts_implementation('eager') failed: {err!r}")
    reinit(model)
    return model, config_cls, model_cls, fields


def load_saved(model_cls, model_dir, name, notes):
    kwargs = dict(dtype=torch.float32, attn_implementation="eager")
    if name == "qwen3_moe":
        kwargs["experts_implementation"] = "eager"
    try:
        loaded = model_cls.from_pretrained(model_dir, **kwargs)
    except Exception as err:
        notes.append(f"from_pretrained with {sorted(kwargs)} raised {err!r}; retrying plainly")
        loaded = model_cls.from_pretrained(model_dir, torch_dtype=torch.float32)
    return loaded.to(torch.float32).eval()


def json_safe(x):
    """Non-finite floats become strings so golden.json stays strict JSON."""
    if isinstance(x, float) and not (x == x and abs(x) != float("inf")):
        return str(x)
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def max_abs(a, b):
    return float((a - b).abs().max())


def run_one(name, out_root, torch_seed_offset):
    import transformers
    from safetensors.torch import load_file, save_file

    notes = []
    model_dir = os.path.join(out_root, name)
    os.makedirs(model_dir, exist_ok=True)
    model, config_cls, model_cls, fields = build_model(name, torch_seed_offset, notes)
    cfg = model.config
    log(f"[{name}] params={sum(p.numel() for p in model.parameters())} "
        f"attn={getattr(cfg, '_attn_implementation', None)} "
        f"experts={getattr(cfg, '_experts_implementation', None)} "
        f"rope_theta={effective_rope_theta(cfg)} head_dim={getattr(cfg, 'head_dim', None)}")
    theta = effective_rope_theta(cfg)
    if theta is None:
        notes.append("could not read rope theta back from the config")
    elif theta != ROPE_THETA:
        raise SystemExit(f"[{name}] rope theta is {theta}, wanted {ROPE_THETA}")

    prompts = make_prompts(fields["vocab_size"])
    tensors, records = {}, []
    checks = {"cache_vs_full_max_abs": 0.0, "generate_tokens_match": True,
              "generate_logits_max_abs": 0.0, "min_greedy_margin": float("inf")}
    refs = []
    for i, prompt in enumerate(prompts):
        prefill, tokens, steps = reference_run(model, prompt)
        refs.append((prefill, tokens, steps))
        assert prefill.shape == (len(prompt), fields["vocab_size"])
        assert torch.equal(steps[0], prefill[-1])
        full = full_recompute(model, prompt, tokens)
        checks["cache_vs_full_max_abs"] = max(checks["cache_vs_full_max_abs"], max_abs(full, steps))
        margins = [top2_margin(r) for r in steps]
        checks["min_greedy_margin"] = min(checks["min_greedy_margin"], min(margins))
        try:
            gtoks, glogits = generate_check(model, prompt)
            if gtoks != tokens:
                checks["generate_tokens_match"] = False
            if glogits.shape == steps.shape:
                checks["generate_logits_max_abs"] = max(checks["generate_logits_max_abs"], max_abs(glogits, steps))
            else:
                notes.append(f"generate logits shape {tuple(glogits.shape)} for prompt {i}")
        except Exception as err:
            checks["generate_tokens_match"] = None
            notes.append(f"generate failed on prompt {i}: {err!r}")
        tensors[f"prompt_{i}"] = prompt.to(torch.int32).contiguous()
        tensors[f"prefill_logits_{i}"] = prefill.contiguous()
        tensors[f"decode_tokens_{i}"] = torch.tensor(tokens, dtype=torch.int32)
        tensors[f"decode_logits_{i}"] = steps.contiguous()
        records.append({
            "index": i,
            "prompt": prompt.tolist(),
            "decode_tokens": tokens,
            "decode_top2_margins": margins,
            "prefill_logits_std": float(prefill.std()),
            "prefill_logits_absmax": float(prefill.abs().max()),
        })
        log(f"[{name}] prompt {i} len={len(prompt)} ids={prompt.tolist()} -> greedy {tokens} "
            f"logit std={float(prefill.std()):.4f} min margin={min(margins):.4g}")

    model.save_pretrained(model_dir, safe_serialization=True)
    weights_path = os.path.join(model_dir, "model.safetensors")
    saved_keys_native = safetensors_keys(weights_path)

    def reload_diffs():
        loaded = load_saved(model_cls, model_dir, name, notes)
        dp = dd = 0.0
        same_tokens = True
        for i, prompt in enumerate(prompts):
            prefill, tokens, steps = reference_run(loaded, prompt)
            dp = max(dp, max_abs(prefill, refs[i][0]))
            dd = max(dd, max_abs(steps, refs[i][2]))
            same_tokens = same_tokens and tokens == refs[i][1]
        return dp, dd, same_tokens

    # The saved checkpoint must reproduce the reference logits when loaded back.
    # For MoE, store experts per expert (the published layout) when the native save fuses them.
    layout = "native"
    if name == "qwen3_moe":
        native = {k: v.clone() for k, v in load_file(weights_path).items()}
        attempted = False
        for order in ("gate_up", "up_gate"):
            try:
                split = split_fused_experts(native, fields, order)
            except Exception as err:
                notes.append(f"splitting fused experts ({order}) failed: {err!r}")
                split = None
            if split is None:
                break
            attempted = True
            save_file(split, weights_path, metadata={"format": "pt"})
            try:
                dp, dd, same = reload_diffs()
            except Exception as err:
                notes.append(f"reload of per-expert checkpoint ({order}) failed: {err!r}")
                dp = dd = float("inf")
                same = False
            if dp <= 1e-5 and dd <= 1e-5 and same:
                layout = f"per_expert_from_fused_{order}"
                break
            notes.append(f"per-expert rewrite ({order}) reloads with prefill diff {dp:.3g}, decode diff {dd:.3g}")
        if layout == "native" and attempted:
            save_file(native, weights_path, metadata={"format": "pt"})
    saved_keys = safetensors_keys(weights_path)
    ok = True
    try:
        dp, dd, same = reload_diffs()
    except Exception as err:
        import traceback

        traceback.print_exc()
        notes.append(f"reload failed: {err!r}")
        dp = dd = float("inf")
        same = False
    checks["reload_prefill_max_abs"] = dp
    checks["reload_decode_max_abs"] = dd
    checks["reload_tokens_match"] = same
    log(f"[{name}] layout {layout} checks {json.dumps(checks)}")
    if not (dp <= 1e-5 and dd <= 1e-5 and same):
        notes.append("saved checkpoint does NOT reproduce the reference logits")
        ok = False
    if checks["cache_vs_full_max_abs"] > 1e-4:
        notes.append("cached decode and full recomputation differ by more than 1e-4")
    if checks["min_greedy_margin"] < 1e-3:
        notes.append("a greedy step has a top-2 margin below 1e-3; token comparisons there are fragile")

    save_file(tensors, os.path.join(model_dir, "golden.safetensors"), metadata={"format": "pt"})
    meta = {
        "model": name,
        "architecture": model_cls.__name__,
        "made_by": "tools/make_golden.py",
        "command": "python3 tools/make_golden.py --out <dir>",
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "transformers": transformers.__version__},
        "seed": SEED,
        "init": {"2d_and_up_weights": f"normal(0, {WEIGHT_STD})",
                 "norm_weights": f"1 + {NORM_STD} * normal(0, 1)",
                 "generator": f"torch.Generator().manual_seed({SEED + 1}), parameters in sorted name order"},
        "prompts_generator": f"torch.Generator().manual_seed({SEED + 2}), randint(0, vocab)",
        "dtype": "float32",
        "device": "cpu",
        "attn_implementation": getattr(cfg, "_attn_implementation", None),
        "experts_implementation": getattr(cfg, "_experts_implementation", None),
        "method": ("prefill: one forward over the prompt, logits for every position; decode: greedy argmax, "
                   "each new token fed through the KV cache; decode_logits[k] picks decode_tokens[k], "
                   "decode_logits[0] equals the last prefill row"),
        "new_tokens": NEW_TOKENS,
        "prompts": records,
        "checks": checks,
        "checkpoint": {"layout": layout,
                       "native_save_keys": {k: list(v) for k, v in sorted(saved_keys_native.items())}
                       if layout != "native" else "same as saved_keys",
                       "saved_keys": {k: list(v) for k, v in sorted(saved_keys.items())}},
        "notes": notes,
    }
    with open(os.path.join(model_dir, "golden.json"), "w") as f:
        json.dump(json_safe(meta), f, indent=1, sort_keys=False)
        f.write("\n")
    for fn in sorted(os.listdir(model_dir)):
        log(f"[{name}] wrote {fn} {os.path.getsize(os.path.join(model_dir, fn))} bytes")
    for n in notes:
        log(f"[{name}] note: {n}")
    if not ok:
        raise SystemExit(f"[{name}] saved checkpoint does not reproduce the reference logits")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", choices=["qwen3", "qwen3_moe"], default=None)
    args = ap.parse_args()

    import transformers

    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    log(f"torch {torch.__version__} transformers {transformers.__version__} python {sys.version.split()[0]}")
    missing = [c for c in ("Qwen3Config", "Qwen3ForCausalLM", "Qwen3MoeConfig", "Qwen3MoeForCausalLM")
               if not hasattr(transformers, c)]
    if missing:
        log(f"transformers {transformers.__version__} lacks: {', '.join(missing)}")
    t0 = time.time()
    failed = []
    for offset, name in enumerate(("qwen3", "qwen3_moe")):
        if args.only and name != args.only:
            continue
        try:
            run_one(name, args.out, offset)
        except SystemExit as err:
            log(str(err))
            failed.append(name)
        except Exception:
            import traceback

            traceback.print_exc()
            failed.append(name)
    log(f"done in {time.time() - t0:.1f}s; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
