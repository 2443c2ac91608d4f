#!/usr/bin/env python3
"""Checkpoints in transformers' own layout, and the logits transformers computes from them.

Where tools/make_golden.py makes untied Qwen3 / Qwen3-MoE fixtures, this script
makes the cases a loader trips on, each a tiny random model built by
transformers, written by `save_pretrained` with its defaults (config.json and
model.safetensors untouched unless said), then loaded back with
`from_pretrained`, whose logits are the reference:

  qwen3_tied            Qwen3ForCausalLM, tie_word_embeddings true (no lm_head.weight in the file)
  qwen3_moe_tied        Qwen3MoeForCausalLM, tied likewise
  qwen3_tied_own_head   qwen3_tied's files plus an lm_head.weight of its own added to
                        model.safetensors: config and file disagree; the logits say which
                        head transformers computes with
  nemotron_h_hf         NemotronHForCausalLM, untied; time_step_limit (time_step_min, inf),
                        which transformers 5 writes as {"__float__": "Infinity"}
  nemotron_h_hf_tied    NemotronHForCausalLM with tie_word_embeddings true: transformers'
                        class never ties, so the file carries its own lm_head.weight

Per case folder: config.json, model.safetensors (and generation_config.json when
written), golden.safetensors and golden.json, in the format of
tests/fixtures/golden/README.md:

  prompt_<i>          int32   [len]          prompt token ids (lengths 5, 9, 13, 3)
  prefill_logits_<i>  float32 [len, vocab]   one forward pass over the prompt
  decode_tokens_<i>   int32   [4]            greedy tokens after the prompt (model.generate)
  decode_logits_<i>   float32 [4, vocab]     row k: the logits that chose decode_tokens_<i>[k]

golden.json records the versions, the loading info of from_pretrained, which
head the loaded model computes with (the stored lm_head or the embedding), the
cached decode against a recomputation without cache, and the top-2 margins.

Float32 on the CPU, one thread, eager attention and experts, Mamba's torch path.
Weights: normal(0, 0.08) for every parameter of two or more dimensions, 1 +
0.1 normal for norm weights, 0.08 normal for the rest, from one seeded
generator over the parameters in name order.

Usage: python3 tools/make_golden_layouts.py --out DIR [--tar FILE]
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tarfile
import time
import traceback

SEED = 2468
PROMPT_LENGTHS = (5, 9, 13, 3)
NEW_TOKENS = 4
WEIGHT_STD = 0.08
NORM_STD = 0.1
MIN_MARGIN = 2e-3  # greedy margins below this make token equality fragile: other prompts are drawn

QWEN3 = dict(vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             head_dim=8, intermediate_size=64, rms_norm_eps=1e-6, max_position_embeddings=256,
             attention_bias=False, use_sliding_window=False, hidden_act="silu")
QWEN3_MOE = dict(QWEN3, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, decoder_sparse_step=1,
                 norm_topk_prob=True, mlp_only_layers=[])
# Mamba2, attention, Mamba2, MLP: heads, KV heads, Mamba heads and groups divide over attention TP 4.
NEMOTRON_H = dict(vocab_size=256, hidden_size=32, layers_block_type=["mamba", "attention", "mamba", "mlp"],
                  num_attention_heads=8, num_key_value_heads=4, head_dim=4, intermediate_size=64,
                  mamba_num_heads=8, mamba_head_dim=4, n_groups=4, ssm_state_size=8, conv_kernel=4,
                  chunk_size=8, layer_norm_epsilon=1e-5, max_position_embeddings=256, use_mamba_kernels=False,
                  time_step_min=0.001, time_step_limit=(0.001, float("inf")))


def log(*args):
    print(*args, flush=True)


def torch_mod():
    import torch

    return torch


def relative(a, b):
    scale = float(b.abs().max())
    return float((a - b).abs().max()) / (scale if scale > 0 else 1.0)


def reinit(model, seed):
    torch = torch_mod()
    gen = torch.Generator().manual_seed(seed)
    seen = set()
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(remove_duplicate=False), key=lambda kv: kv[0]):
            if id(p) in seen:
                continue
            seen.add(id(p))
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if p.dim() >= 2:
                p.copy_(noise * WEIGHT_STD)
            elif "norm" in name:
                p.copy_(1.0 + NORM_STD * noise)
            else:
                p.copy_(noise * WEIGHT_STD)


def nemotron_fields(tie):
    import transformers

    fields = dict(NEMOTRON_H, tie_word_embeddings=tie)
    # transformers 5 names the layer kinds linear_attention / full_attention / mlp.
    fields["layers_block_type"] = [{"mamba": "linear_attention", "attention": "full_attention"}.get(k, k)
                                   for k in fields["layers_block_type"]]
    cls = transformers.NemotronHConfig
    try:
        return cls(**fields)
    except Exception as err:  # an older release: the pattern string
        log(f"NemotronHConfig(layers_block_type=...) raised {err!r}; using hybrid_override_pattern")
        fields.pop("layers_block_type")
        fields["hybrid_override_pattern"] = "M*M-"
        return cls(**fields)


def build(arch, tie):
    import transformers

    torch = torch_mod()
    if arch == "nemotron_h":
        config = nemotron_fields(tie)
        model_cls = transformers.NemotronHForCausalLM
    else:
        fields = dict(QWEN3_MOE if arch == "qwen3_moe" else QWEN3, tie_word_embeddings=tie)
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
        config_cls = transformers.Qwen3MoeConfig if arch == "qwen3_moe" else transformers.Qwen3Config
        try:
            config = config_cls(**fields)
        except Exception as err:  # noqa: BLE001: transformers 5 may name the expert count num_local_experts
            if "num_experts" not in fields:
                raise
            log(f"{config_cls.__name__}(num_experts=...) raised {err!r}; using num_local_experts")
            fields["num_local_experts"] = fields.pop("num_experts")
            config = config_cls(**fields)
        model_cls = transformers.Qwen3MoeForCausalLM if arch == "qwen3_moe" else transformers.Qwen3ForCausalLM
    for attr in ("_attn_implementation", "_experts_implementation"):
        try:
            setattr(config, attr, "eager")
        except Exception:  # noqa: BLE001
            pass
    torch.manual_seed(SEED)
    model = model_cls(config).to(torch.float32).eval()
    reinit(model, SEED + 1)
    return model, model_cls


def load(model_cls, folder, arch):
    torch = torch_mod()
    kwargs = dict(dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    if arch == "qwen3_moe":
        kwargs["experts_implementation"] = "eager"
    model, info = model_cls.from_pretrained(folder, **kwargs)
    return model.to(torch.float32).eval(), {k: sorted(map(str, v)) for k, v in info.items() if v}


def prompts_for(vocab, attempt):
    torch = torch_mod()
    gen = torch.Generator().manual_seed(SEED + 2 + attempt)
    return [torch.randint(0, vocab, (n,), generator=gen, dtype=torch.long) for n in PROMPT_LENGTHS]


def run_prompt(model, prompt):
    torch = torch_mod()
    with torch.no_grad():
        prefill = model(input_ids=prompt[None, :], use_cache=False).logits[0].float().clone()
        res = model.generate(input_ids=prompt[None, :], attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             output_logits=True, return_dict_in_generate=True, pad_token_id=0, use_cache=True)
        tokens = res.sequences[0, len(prompt):].tolist()
        steps = torch.stack([row[0].float() for row in res.logits])
        seq = torch.cat([prompt, torch.tensor(tokens[:-1], dtype=torch.long)])
        full = model(input_ids=seq[None, :], use_cache=False).logits[0].float()[len(prompt) - 1:]
    for k in range(NEW_TOKENS):
        if int(torch.argmax(steps[k])) != tokens[k]:
            raise RuntimeError(f"generate's token {k} is not the argmax of its logits")
    margins = [float(torch.topk(steps[k], 2).values[0] - torch.topk(steps[k], 2).values[1]) for k in range(NEW_TOKENS)]
    return prefill, tokens, steps, {"cached_vs_recompute_rel": relative(steps, full),
                                    "first_step_vs_prefill_rel": relative(steps[0], prefill[-1]),
                                    "top2_margins": margins}


def head_facts(model, folder):
    """Which head the loaded model computes with, against the file's tensors."""
    from safetensors import safe_open

    torch = torch_mod()
    head = model.get_output_embeddings().weight.detach().float()
    embed = model.get_input_embeddings().weight.detach().float()
    facts = {"head_is_embedding_object": model.get_output_embeddings().weight is model.get_input_embeddings().weight,
             "head_equals_embedding": bool(torch.equal(head, embed))}
    with safe_open(os.path.join(folder, "model.safetensors"), framework="pt") as f:
        keys = list(f.keys())
        facts["file_has_lm_head"] = "lm_head.weight" in keys
        if "lm_head.weight" in keys:
            facts["head_equals_stored_lm_head"] = bool(torch.equal(head, f.get_tensor("lm_head.weight").float()))
        facts["file_keys"] = sorted(keys)
    return facts


def add_own_head(folder):
    """Adds an lm_head.weight unlike the embedding to a tied checkpoint's file."""
    from safetensors.torch import load_file, save_file

    torch = torch_mod()
    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    embed_key = next(k for k in tensors if k.endswith("embed_tokens.weight"))
    gen = torch.Generator().manual_seed(SEED + 7)
    tensors["lm_head.weight"] = (torch.randn(tensors[embed_key].shape, generator=gen) * WEIGHT_STD).contiguous()
    save_file(tensors, path, metadata={"format": "pt"})


def make_case(name, arch, tie, out_root, own_head_from=None):
    import transformers
    from safetensors.torch import save_file

    torch = torch_mod()
    folder = os.path.join(out_root, name)
    shutil.rmtree(folder, ignore_errors=True)
    if own_head_from is None:
        model, model_cls = build(arch, tie)
        model.save_pretrained(folder)
    else:
        shutil.copytree(os.path.join(out_root, own_head_from), folder)
        for f in ("golden.safetensors", "golden.json"):
            if os.path.exists(os.path.join(folder, f)):
                os.remove(os.path.join(folder, f))
        add_own_head(folder)
        model_cls = transformers.Qwen3ForCausalLM
    loaded, info = load(model_cls, folder, arch)
    facts = head_facts(loaded, folder)
    vocab = loaded.config.vocab_size
    record = {"case": name, "architecture": model_cls.__name__, "loading_info": info, "head": facts,
              "made_by": "tools/make_golden_layouts.py", "prompts": [], "tokens": [], "checks": []}
    for attempt in range(6):
        tensors, record["prompts"], record["tokens"], record["checks"] = {}, [], [], []
        for i, prompt in enumerate(prompts_for(vocab, attempt)):
            prefill, tokens, steps, checks = run_prompt(loaded, prompt)
            tensors[f"prompt_{i}"] = prompt.to(torch.int32).contiguous()
            tensors[f"prefill_logits_{i}"] = prefill.contiguous()
            tensors[f"decode_tokens_{i}"] = torch.tensor(tokens, dtype=torch.int32)
            tensors[f"decode_logits_{i}"] = steps.contiguous()
            record["prompts"].append(prompt.tolist())
            record["tokens"].append(tokens)
            record["checks"].append(checks)
        smallest = min(m for c in record["checks"] for m in c["top2_margins"])
        record["prompt_attempt"] = attempt
        record["smallest_top2_margin"] = smallest
        if smallest >= MIN_MARGIN:
            break
    worst = max(max(c["cached_vs_recompute_rel"], c["first_step_vs_prefill_rel"]) for c in record["checks"])
    record["worst_cache_check_rel"] = worst
    record["versions"] = {"transformers": transformers.__version__, "torch": torch.__version__,
                          "python": platform.python_version()}
    record["seed"] = SEED
    with open(os.path.join(folder, "config.json")) as f:
        record["config_json_text"] = f.read()
    save_file(tensors, os.path.join(folder, "golden.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    log(f"[{name}] head {json.dumps({k: v for k, v in facts.items() if k != 'file_keys'})} loading {info}")
    log(f"[{name}] tokens {record['tokens']} smallest margin {smallest:.3g} (attempt {attempt}) cache check {worst:.2e}")
    log(f"[{name}] files: " + ", ".join(f"{fn} {os.path.getsize(os.path.join(folder, fn))}"
                                       for fn in sorted(os.listdir(folder))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tar", default=None, help="also write every case folder into this tar file")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch = torch_mod()
    import transformers

    torch.set_num_threads(args.threads)
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, python {platform.python_version()}")
    os.makedirs(args.out, exist_ok=True)
    cases = [("qwen3_tied", "qwen3", True, None), ("qwen3_moe_tied", "qwen3_moe", True, None),
             ("qwen3_tied_own_head", "qwen3", True, "qwen3_tied"), ("nemotron_h_hf", "nemotron_h", False, None),
             ("nemotron_h_hf_tied", "nemotron_h", True, None)]
    failed, t0 = [], time.time()
    for name, arch, tie, base in cases:
        try:
            make_case(name, arch, tie, args.out, base)
        except Exception:  # noqa: BLE001: the other cases still run
            traceback.print_exc()
            failed.append(name)
    if args.tar:
        with tarfile.open(args.tar, "w") as tar:
            for name, *_ in cases:
                if os.path.isdir(os.path.join(args.out, name)):
                    tar.add(os.path.join(args.out, name), arcname=name)
    log(f"done in {time.time() - t0:.1f}s; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
