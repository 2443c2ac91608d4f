#!/usr/bin/env python3
"""PyTorch / transformers baselines for seam-bench-gpu, on the same GPU (cuda:0).

1. norm: unfused add + RMSNorm in PyTorch eager, bf16, for rows in
   {1, 16, 256, 4096, 32768} x hidden in {4096, 8192}:
       s = x + residual; residual = s
       out = weight * (s.float() * rsqrt(mean(s.float()^2) + eps)).to(bf16)
   (Qwen3RMSNorm's arithmetic: fp32 compute, cast back to bf16, times the bf16
   weight). Timed with CUDA events after warm-up. GB/s counts the same logical
   bytes as seam-bench-gpu norm:
       bytes = 4 * rows * hidden * 2 + hidden * 2
   (read x and residual, write residual and out, all bf16, plus the bf16 weight
   read once); GB/s = bytes / seconds / 1e9. The temporaries PyTorch writes and
   reads between its kernels are not counted.
2. decode: transformers on --checkpoint (the 0.6b-shaped dense model of
   tools/gpu_oracle.py, float32 files loaded as bf16, sdpa attention): for each
   batch a 128-token prefill (random ids), then 64 decode steps, each a forward
   call of one token per sequence with past_key_values (greedy argmax on the
   GPU), timed with torch.cuda.synchronize around the 64 steps. tokens/s =
   batch * steps / seconds. Plus model.generate (no compile) at batch 1,
   64 new tokens, whose time includes its prefill.
3. prefill: one forward of 8 x 1024 tokens (use_cache=True, logits of the last
   position only), tokens/s = 8192 / seconds (median of the timed runs).

Usage: python3 bench/gpu/torch_baselines.py --checkpoint DIR --json PATH
       [--skip-norm] [--skip-model] [--batches 1,8,64] [--prompt-len 128]
       [--steps 64] [--seqs 8] [--len 1024]
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

DEVICE = "cuda:0"
ROWS = (1, 16, 256, 4096, 32768)
HIDDENS = (4096, 8192)
EPS = 1e-6
BYTES_FORMULA = "4 * rows * hidden * 2 + hidden * 2 (x, residual read; residual, out written; bf16 weight once)"


def log(*args):
    print(*args, flush=True)


def add_rmsnorm(x, residual, weight, eps=EPS):
    s = x + residual
    residual = s
    h = s.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return weight * h.to(torch.bfloat16), residual


def time_cuda(fn, min_ms=30.0, max_iters=2000):
    """Mean µs per call: warm-up, then enough back-to-back calls to fill min_ms, 3 repetitions, median."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end), 1e-3)
    iters = int(min(max_iters, max(10, min_ms / one)))
    samples = []
    for _ in range(3):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / iters)
    return statistics.median(samples), iters


@torch.no_grad()
def bench_norm():
    out = []
    gen = torch.Generator(device=DEVICE).manual_seed(7)
    for hidden in HIDDENS:
        weight = (1 + 0.1 * torch.randn(hidden, generator=gen, device=DEVICE)).to(torch.bfloat16)
        for rows in ROWS:
            x = torch.randn(rows, hidden, generator=gen, device=DEVICE).to(torch.bfloat16)
            res = torch.randn(rows, hidden, generator=gen, device=DEVICE).to(torch.bfloat16)
            us, iters = time_cuda(lambda: add_rmsnorm(x, res, weight))
            nbytes = 4 * rows * hidden * 2 + hidden * 2
            rec = {"rows": rows, "hidden": hidden, "dtype": "bf16", "unfused_us": us,
                   "unfused_gbps": nbytes / (us * 1e-6) / 1e9, "bytes": nbytes, "iters": iters}
            out.append(rec)
            log(f"norm rows={rows:>6} hidden={hidden}: {us:9.2f} us {rec['unfused_gbps']:8.1f} GB/s")
            del x, res
    torch.cuda.empty_cache()
    return out


def load_model(checkpoint):
    import transformers

    kwargs = dict(dtype=torch.bfloat16, attn_implementation="sdpa")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, **kwargs)
    except TypeError:
        model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.bfloat16)
    return model.to(DEVICE).eval()


def forward(model, ids, past=None, keep_last=True):
    kwargs = dict(input_ids=ids, use_cache=True)
    if past is not None:
        kwargs["past_key_values"] = past
    if keep_last:
        try:
            return model(logits_to_keep=1, **kwargs)
        except TypeError:
            pass
    return model(**kwargs)


@torch.no_grad()
def decode_run(model, batch, prompt_len, steps, vocab, gen):
    ids = torch.randint(0, vocab, (batch, prompt_len), generator=gen, device=DEVICE)
    out = forward(model, ids)
    past = out.past_key_values
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        out = forward(model, nxt, past)
        past = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


@torch.no_grad()
def bench_decode(model, batches, prompt_len, steps):
    vocab = model.config.vocab_size
    gen = torch.Generator(device=DEVICE).manual_seed(11)
    decode_run(model, 1, 16, 4, vocab, gen)  # warm-up
    results = []
    for b in batches:
        decode_run(model, b, prompt_len, 4, vocab, gen)  # warm-up at this shape
        secs = decode_run(model, b, prompt_len, steps, vocab, gen)
        rec = {"batch": b, "ms_per_step": secs * 1e3 / steps, "tokens_per_s": b * steps / secs}
        results.append(rec)
        log(f"decode batch={b:>3}: {rec['ms_per_step']:8.3f} ms/step {rec['tokens_per_s']:10.1f} tokens/s")
        torch.cuda.empty_cache()
    return results


@torch.no_grad()
def bench_generate(model, prompt_len, steps):
    vocab = model.config.vocab_size
    gen = torch.Generator(device=DEVICE).manual_seed(13)
    ids = torch.randint(0, vocab, (1, prompt_len), generator=gen, device=DEVICE)
    kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=steps,
                  min_new_tokens=steps, pad_token_id=0)
    model.generate(**dict(kwargs, max_new_tokens=4, min_new_tokens=4))  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    res = model.generate(**kwargs)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    new = int(res.shape[1] - prompt_len)
    rec = {"batch": 1, "prompt_len": prompt_len, "new_tokens": new, "seconds": secs,
           "tokens_per_s": new / secs, "ms_per_token": secs * 1e3 / max(new, 1),
           "note": "model.generate, greedy, no compile; the time includes the prefill"}
    log(f"generate batch=1: {new} tokens in {secs:.3f}s = {rec['tokens_per_s']:.1f} tokens/s")
    return rec


@torch.no_grad()
def bench_prefill(model, seqs, length, reps=5):
    vocab = model.config.vocab_size
    gen = torch.Generator(device=DEVICE).manual_seed(17)
    ids = torch.randint(0, vocab, (seqs, length), generator=gen, device=DEVICE)
    forward(model, ids)  # warm-up
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        forward(model, ids)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    rec = {"seqs": seqs, "len": length, "tokens": seqs * length, "ms": ms, "ms_min": min(times) * 1e3,
           "tokens_per_s": seqs * length / (ms * 1e-3),
           "note": "one forward with use_cache=True, logits of the last position only; median of timed runs"}
    log(f"prefill {seqs}x{length}: {ms:.2f} ms = {rec['tokens_per_s']:.0f} tokens/s")
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default=None, help="dense 0.6b-shaped checkpoint (tools/gpu_oracle.py)")
    ap.add_argument("--json", required=True)
    ap.add_argument("--skip-norm", action="store_true")
    ap.add_argument("--skip-model", action="store_true")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--len", type=int, default=1024)
    args = ap.parse_args()

    import transformers

    torch.set_grad_enabled(False)
    out = {"made_by": "bench/gpu/torch_baselines.py", "gpu": torch.cuda.get_device_name(0),
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
           "errors": {}}

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")

    def stage(name, fn):
        t0 = time.time()
        try:
            out[name] = fn()
        except Exception as err:
            import traceback

            traceback.print_exc()
            out["errors"][name] = f"{type(err).__name__}: {err}"
            torch.cuda.empty_cache()
        log(f"[{name}] {time.time() - t0:.1f}s")
        save()  # keep what is done even if a later stage is killed

    if not args.skip_norm:
        out["norm_bytes_formula"] = BYTES_FORMULA
        out["norm_eps"] = EPS
        stage("norm", bench_norm)
    if not args.skip_model:
        if not args.checkpoint or not os.path.isdir(args.checkpoint):
            out["errors"]["model"] = f"checkpoint {args.checkpoint!r} not found"
        else:
            t0 = time.time()
            try:
                model = load_model(args.checkpoint)
            except Exception as err:
                import traceback

                traceback.print_exc()
                out["errors"]["model"] = f"loading {args.checkpoint}: {type(err).__name__}: {err}"
                model = None
            if model is not None:
                out["checkpoint"] = args.checkpoint
                out["model"] = {"dtype": "bf16", "attn_implementation": "sdpa", "load_s": time.time() - t0,
                                "params": sum(p.numel() for p in model.parameters())}
                batches = [int(b) for b in args.batches.split(",") if b]
                out["decode_setup"] = {"prompt_len": args.prompt_len, "steps": args.steps}
                stage("decode", lambda: bench_decode(model, batches, args.prompt_len, args.steps))
                stage("generate", lambda: bench_generate(model, args.prompt_len, args.steps))
                stage("prefill", lambda: bench_prefill(model, args.seqs, args.len))
    save()
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
