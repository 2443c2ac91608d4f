"""The comparisons of tools/gpu_oracle.py: seam's logits and greedy tokens
against transformers' (common prefixes, top-1 margins, self-consistency of
a run, the per-prompt record and the pass/fail judgement of a checkpoint)."""
import torch

F32_REL_TOL = 1e-4
BF16_TOP1_MIN = 0.99
BF16_NEAR_TIE_FLOOR = 0.95


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def margin_stats(rows):
    top = torch.topk(rows, 2, dim=-1).values
    margins = (top[:, 0] - top[:, 1]).float()
    std = float(rows.float().std())
    q = torch.quantile(margins, torch.tensor([0.0, 0.1, 0.5], device=margins.device)).tolist()
    return {"rows": int(rows.shape[0]), "logit_std": std, "margin_min": q[0], "margin_p10": q[1],
            "margin_median": q[2], "exact_ties": int((margins == 0).sum()),
            "distinct_top1": int(torch.unique(rows.argmax(-1)).numel())}


def self_consistent(rows, tokens):
    """seam's greedy token must be an argmax of the logits it wrote (ties allowed)."""
    bad = []
    for k, tok in enumerate(tokens):
        row = rows[k]
        if not (0 <= tok < row.numel()) or float(row[tok]) < float(row.max()):
            bad.append(k)
    return bad


def compare_prompt(dtype, seam, ref, ref32):
    """Statistics for one prompt; ref is transformers in the same dtype, ref32 the float32 reference."""
    L = ref["prefill"].shape[0]
    n = len(ref["tokens"])
    same = common_prefix(seam["tokens"], ref["tokens"])
    # Decode row k was computed after feeding tokens[:k]: comparable while both prefixes agree.
    k_max = min(same + 1, n)
    a = torch.cat([seam["prefill"], seam["steps"][:k_max]])
    b = torch.cat([ref["prefill"], ref["steps"][:k_max]])
    diff = (a - b).abs()
    rec = {
        "prompt_len": L,
        "finite": bool(torch.isfinite(a).all()),
        "max_abs_err": float(diff.max()),
        "mean_abs_err": float(diff.mean()),
        "max_abs_ref": float(b.abs().max()),
        "decode_rows_compared": k_max,
        "seam_tokens": seam["tokens"],
        "ref_tokens": ref["tokens"],
        "common_prefix": same,
        "row0_vs_last_prefill_max_abs": float((seam["steps"][0] - seam["prefill"][-1]).abs().max()),
        "seam_bf16_exact_logits": bool((a == a.to(torch.bfloat16).float()).all()),
        "self_inconsistent_steps": self_consistent(seam["steps"], seam["tokens"]),
    }
    rec["rel_max_err"] = rec["max_abs_err"] / max(rec["max_abs_ref"], 1e-30)
    rec["rel_mean_err"] = rec["mean_abs_err"] / max(rec["max_abs_ref"], 1e-30)
    # Top-1 positions: every prefill row, decode rows 1.. (row 0 repeats the last prefill row).
    sa = torch.cat([seam["prefill"], seam["steps"][1:k_max]])
    sb = torch.cat([ref["prefill"], ref["steps"][1:k_max]])
    ta, tb = sa.argmax(-1), sb.argmax(-1)
    agree = ta == tb
    rec["top1_positions"] = int(agree.numel())
    rec["top1_agree"] = int(agree.sum())
    near, hard = 0, []
    if dtype == "bf16" and ref32 is not None:
        same32 = common_prefix(ref32["tokens"], ref["tokens"])
        rows32 = torch.cat([ref32["prefill"], ref32["steps"][1:min(same32 + 1, n, k_max)]])
        for i in torch.nonzero(~agree).flatten().tolist():
            if i >= rows32.shape[0]:
                hard.append(i)
                continue
            noise = float((sb[i] - rows32[i]).abs().max())
            gap = abs(float(rows32[i][ta[i]] - rows32[i][tb[i]]))
            if gap <= noise:
                near += 1
            else:
                hard.append(i)
        p32 = ref32["prefill"].argmax(-1)
        rec["hf_bf16_vs_f32_prefill_top1_agree"] = int((ref["prefill"].argmax(-1) == p32).sum())
        rec["seam_bf16_vs_f32_prefill_top1_agree"] = int((seam["prefill"].argmax(-1) == p32).sum())
        rec["prefill_positions"] = int(p32.numel())
    else:
        hard = torch.nonzero(~agree).flatten().tolist()
    rec["top1_disagree_near_tie"] = near
    rec["top1_disagree_positions"] = [int(i) for i in torch.nonzero(~agree).flatten().tolist()][:50]
    rec["top1_disagree_not_tie"] = len(hard)
    return rec


def judge(dtype, recs, margins, strict_bf16):
    """Acceptance for one checkpoint and dtype; returns (passed, reasons, summary)."""
    reasons = []
    pos = sum(r["top1_positions"] for r in recs)
    agree = sum(r["top1_agree"] for r in recs)
    frac = agree / max(pos, 1)
    summary = {
        "top1_positions": pos,
        "top1_agree": agree,
        "top1_fraction": frac,
        "rel_max_err": max(r["max_abs_err"] for r in recs) / max(max(r["max_abs_ref"] for r in recs), 1e-30),
        "rel_mean_err": sum(r["mean_abs_err"] for r in recs) / len(recs) / max(
            max(r["max_abs_ref"] for r in recs), 1e-30),
        "common_prefix": [r["common_prefix"] for r in recs],
        "greedy_identical": all(r["seam_tokens"] == r["ref_tokens"] for r in recs),
        "seam_bf16_exact_logits": all(r["seam_bf16_exact_logits"] for r in recs),
    }
    for i, r in enumerate(recs):
        if not r["finite"]:
            reasons.append(f"prompt {i}: non-finite seam logits")
        if r["self_inconsistent_steps"]:
            reasons.append(f"prompt {i}: seam's tokens at steps {r['self_inconsistent_steps']} are not the "
                           "argmax of its own logits")
    if margins["exact_ties"] > 0.05 * margins["rows"] or margins["logit_std"] <= 0:
        reasons.append(f"degenerate reference: {margins['exact_ties']} of {margins['rows']} rows tie at top-1")
    if dtype == "f32":
        for i, r in enumerate(recs):
            if not r["rel_max_err"] <= F32_REL_TOL:
                reasons.append(f"prompt {i}: max|a-b| = {r['max_abs_err']:.3g} > {F32_REL_TOL:g} * max|b| "
                               f"= {F32_REL_TOL * r['max_abs_ref']:.3g}")
            if r["seam_tokens"] != r["ref_tokens"]:
                reasons.append(f"prompt {i}: greedy tokens differ from step {r['common_prefix']}")
        summary["rule"] = f"max|a-b| <= {F32_REL_TOL:g}*max|b| per prompt, identical greedy tokens"
    else:
        hard = sum(r["top1_disagree_not_tie"] for r in recs)
        near = sum(r["top1_disagree_near_tie"] for r in recs)
        summary["top1_disagree_near_tie"] = near
        summary["top1_disagree_not_tie"] = hard
        hf_pos = sum(r["prompt_len"] for r in recs)
        if all("hf_bf16_vs_f32_prefill_top1_agree" in r for r in recs):
            summary["hf_bf16_vs_f32_prefill_top1_fraction"] = sum(
                r["hf_bf16_vs_f32_prefill_top1_agree"] for r in recs) / max(hf_pos, 1)
        if frac >= BF16_TOP1_MIN:
            summary["rule"] = f"top-1 agreement >= {BF16_TOP1_MIN:.0%}"
        elif not strict_bf16 and frac >= BF16_NEAR_TIE_FLOOR and hard == 0:
            summary["rule"] = (f"near-tie rule: top-1 agreement {frac:.2%} < {BF16_TOP1_MIN:.0%}, but all {near} "
                               "disagreements are within transformers' own bf16 error under the f32 reference")
        else:
            reasons.append(f"top-1 agreement {frac:.2%} < {BF16_TOP1_MIN:.0%} ({hard} disagreements are not "
                           f"near ties, {near} are)")
            summary["rule"] = f"top-1 agreement >= {BF16_TOP1_MIN:.0%} (failed)"
        if not summary["greedy_identical"]:
            summary["note"] = "bf16 greedy tokens are not all identical (reported, not required)"
    return not reasons, reasons, summary
