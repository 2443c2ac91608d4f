#!/usr/bin/env python3
"""Scrapes /metrics of a local pipeline before and after a known workload.

Starts two seam-stage processes and a seam-coordinator on loopback
(plaintext: loopback is allowed without TLS), each with --metrics-listen and
--log-format json, and a random checkpoint from `seam model init`. Every
scrape is parsed with prometheus_client's text parser (the reference
implementation of the exposition format). Then 3 requests x 8 new tokens go
through `seam generate`, one after another, and the test checks:
- coordinator: seam:generation_tokens_total +24, seam:prompt_tokens_total
  +3 x prompt length, seam:request_success_total{finished_reason="length"} +3,
  TTFT and e2e histogram counts +3, inter-token count +21, running and
  waiting back to 0, KV usage 0 again (the coordinator frees at the end);
- each stage (pp_rank label): step count +24 (one prefill and 7 decode steps
  per request, run alone: kind="prefill" +3, kind="decode" +21, kind="mixed"
  +0), eager steps +24 (CPU: no graphs), collective wait
  count +24 on its one TP rank, in flight 0, KV usage under 1% (the last
  sequence's block goes with the next descriptor), no handoff drops; stage 0 sent
  24 handoffs and stage 1 received 24, with equal byte counts;
- the coordinator's log: one JSON line per request, "request finished", with a
  server request id (req-<16 hex>), the client's id, 8 generated tokens and
  finish reason "length".
Exits 77 (skip) when prometheus_client is missing.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("SKIP: python3-prometheus-client is not installed (scripts/install-deps.sh)")
    sys.exit(77)

PROMPT = "3 14 15 92 65"
REQUESTS = 3
NEW_TOKENS = 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_file(path, proc, what, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{what}: no port file after {timeout} s")


def scrape(port):
    """{(sample name, sorted labels): value} and the family types, parsed by prometheus_client."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples, types = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            # The coordinator labels every series with its model_name; keyed without it.
            labels = {k: v for k, v in s.labels.items() if k != "model_name"}
            samples[(s.name, tuple(sorted(labels.items())))] = s.value
    return samples, types


def value(samples, name, **labels):
    key = (name, tuple(sorted((k, str(v)) for k, v in labels.items())))
    if key not in samples:
        raise AssertionError(f"no sample {name}{labels}; have {sorted(k for k in samples if k[0] == name)}")
    return samples[key]


failures = []


def check(what, got, want):
    ok = got == want
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got} (want {want})")
    if not ok:
        failures.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    args = ap.parse_args()
    b = args.bin_dir
    procs = []
    work = tempfile.mkdtemp(prefix="seam-metrics-test-")
    try:
        model = os.path.join(work, "model")
        subprocess.run([f"{b}/seam", "model", "init", "--layers", "4", "--hidden", "64", "--heads", "4",
                        "--kv-heads", "2", "--intermediate", "128", "--vocab", "256", "--out", model],
                       check=True, stdout=subprocess.DEVNULL)
        stage_metrics, stage_ports = [], []
        for k in range(2):
            mport = free_port()
            port_file = os.path.join(work, f"stage{k}.port")
            log = open(os.path.join(work, f"stage{k}.log"), "w")
            p = subprocess.Popen([f"{b}/seam-stage", "--listen", "127.0.0.1:0", "--port-file", port_file,
                                  "--metrics-listen", f"127.0.0.1:{mport}", "--log-format", "json",
                                  "--kv-cache-bytes", str(64 << 20)], stdout=log, stderr=log)
            procs.append(p)
            stage_ports.append(wait_file(port_file, p, f"seam-stage {k}"))
            stage_metrics.append(mport)
        cport = free_port()
        coord_log = os.path.join(work, "coordinator.log")
        port_file = os.path.join(work, "coordinator.port")
        p = subprocess.Popen([f"{b}/seam-coordinator", "--listen", "127.0.0.1:0", "--port-file", port_file,
                              "--stages", ",".join(f"127.0.0.1:{q}" for q in stage_ports), "--model", model,
                              "--metrics-listen", f"127.0.0.1:{cport}", "--log-format", "json",
                              "--itl-target-ms", "1000"],
                             stdout=open(coord_log, "w"), stderr=subprocess.STDOUT)
        procs.append(p)
        addr = f"127.0.0.1:{wait_file(port_file, p, 'seam-coordinator')}"

        c0, ctypes = scrape(cport)
        s0 = [scrape(m)[0] for m in stage_metrics]
        for name, kind in [("seam:time_to_first_token_seconds", "histogram"),
                           ("seam:inter_token_latency_seconds", "histogram"),
                           ("seam:e2e_request_latency_seconds", "histogram"),
                           ("seam:num_requests_running", "gauge"), ("seam:num_requests_waiting", "gauge"),
                           ("seam:prompt_tokens", "counter"), ("seam:generation_tokens", "counter"),
                           ("seam:kv_cache_usage_perc", "gauge")]:
            check(f"coordinator family {name} type", ctypes.get(name), kind)

        client_ids = []
        for _ in range(REQUESTS):
            out = subprocess.run([f"{b}/seam", "generate", "--addr", addr, "--prompt", PROMPT,
                                  "--max-new-tokens", str(NEW_TOKENS), "--json"],
                                 check=True, capture_output=True, text=True).stdout
            doc = json.loads(out)
            client_ids.append(doc["request_id"])
            check("tokens in a completion", len(doc["completions"][0]["tokens"]), NEW_TOKENS)

        c1, _ = scrape(cport)
        s1, stypes = zip(*[scrape(m) for m in stage_metrics])
        prompt_len = len(PROMPT.split())
        d = lambda name, **l: value(c1, name, **l) - (value(c0, name, **l) if (name, tuple(sorted(l.items()))) in c0 else 0)
        check("seam:generation_tokens_total delta", d("seam:generation_tokens_total"), REQUESTS * NEW_TOKENS)
        check("seam:prompt_tokens_total delta", d("seam:prompt_tokens_total"), REQUESTS * prompt_len)
        check("seam:request_success_total{length} delta",
              d("seam:request_success_total", finished_reason="length"), REQUESTS)
        check("seam:time_to_first_token_seconds_count delta", d("seam:time_to_first_token_seconds_count"), REQUESTS)
        check("seam:e2e_request_latency_seconds_count delta", d("seam:e2e_request_latency_seconds_count"), REQUESTS)
        check("seam:inter_token_latency_seconds_count delta", d("seam:inter_token_latency_seconds_count"),
              REQUESTS * (NEW_TOKENS - 1))
        check("seam:num_requests_running", value(c1, "seam:num_requests_running"), 0)
        check("seam:num_requests_waiting", value(c1, "seam:num_requests_waiting"), 0)
        check("seam:kv_cache_usage_perc", value(c1, "seam:kv_cache_usage_perc"), 0)
        # --itl-target-ms: every step timed, but prompts all of one length give no fit.
        check("seam:step_time_model_samples > 0", value(c1, "seam:step_time_model_samples") > 0, True)
        for term in ["intercept", "prefill_step", "prefill_token", "decode_row", "context_token"]:
            check(f"seam:step_time_model_coefficient_seconds{{{term}}} without a fit",
                  value(c1, "seam:step_time_model_coefficient_seconds", term=term), 0)
        check("seam:mixed_prefill_budget_tokens", value(c1, "seam:mixed_prefill_budget_tokens"), 0)

        steps = REQUESTS * NEW_TOKENS  # each request alone: one prefill, then NEW_TOKENS - 1 decode steps
        for k in range(2):
            before, after = s0[k], s1[k]
            ds = lambda name, **l: value(after, name, **l) - before.get((name, tuple(sorted((a, str(v)) for a, v in l.items()))), 0)
            check(f"stage {k} family seam:stage_step_seconds type", stypes[k].get("seam:stage_step_seconds"), "histogram")
            # By what each step held: a request alone is one prefill step, then decode steps; none mixed.
            for kind, want in [("prefill", REQUESTS), ("decode", steps - REQUESTS), ("mixed", 0)]:
                check(f"stage {k} seam:stage_step_seconds_count{{{kind}}} delta",
                      ds("seam:stage_step_seconds_count", pp_rank=k, kind=kind), want)
            check(f"stage {k} seam:stage_steps_total{{eager}} delta",
                  ds("seam:stage_steps_total", pp_rank=k, mode="eager"), steps)
            check(f"stage {k} seam:stage_steps_total{{graph}} delta",
                  ds("seam:stage_steps_total", pp_rank=k, mode="graph"), 0)
            check(f"stage {k} seam:stage_collective_wait_seconds_count delta",
                  ds("seam:stage_collective_wait_seconds_count", pp_rank=k, tp_rank=0), steps)
            check(f"stage {k} seam:stage_microbatches_in_flight",
                  value(after, "seam:stage_microbatches_in_flight", pp_rank=k), 0)
            # The last request's block is freed with the next descriptor, so at most that one is held.
            check(f"stage {k} seam:stage_kv_cache_usage_perc below 1%",
                  value(after, "seam:stage_kv_cache_usage_perc", pp_rank=k, dp_group=0) < 0.01, True)
            for reason in ["bad_mac", "oversized", "malformed", "unexpected_microbatch"]:
                check(f"stage {k} seam:stage_handoff_drops_total{{{reason}}}",
                      value(after, "seam:stage_handoff_drops_total", pp_rank=k, reason=reason), 0)
        sent = value(s1[0], "seam:stage_handoff_bytes_total", pp_rank=0, direction="send") - \
            s0[0].get(("seam:stage_handoff_bytes_total", (("direction", "send"), ("pp_rank", "0"))), 0)
        received = value(s1[1], "seam:stage_handoff_bytes_total", pp_rank=1, direction="receive") - \
            s0[1].get(("seam:stage_handoff_bytes_total", (("direction", "receive"), ("pp_rank", "1"))), 0)
        check("handoff bytes sent by stage 0 == received by stage 1", sent, received)
        check("handoff bytes sent > 0", sent > 0, True)
        check("stage 0 handoff sends", value(s1[0], "seam:stage_handoff_seconds_count", pp_rank=0, direction="send")
              - s0[0].get(("seam:stage_handoff_seconds_count", (("direction", "send"), ("pp_rank", "0"))), 0), steps)
        check("stage 1 handoff receives",
              value(s1[1], "seam:stage_handoff_seconds_count", pp_rank=1, direction="receive")
              - s0[1].get(("seam:stage_handoff_seconds_count", (("direction", "receive"), ("pp_rank", "1"))), 0),
              steps)

        # The coordinator's completion lines (JSON, one per request).
        time.sleep(0.2)
        lines = []
        with open(coord_log) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    lines.append(json.loads(line))  # every JSON line parses
        done = [l for l in lines if l.get("msg") == "request finished"]
        check("completion lines", len(done), REQUESTS)
        check("completion lines' client ids", [l.get("client_request_id") for l in done], client_ids)
        check("server request ids", all(re.fullmatch(r"req-[0-9a-f]{16}", l.get("request_id", "")) for l in done),
              True)
        check("server request ids distinct", len({l.get("request_id") for l in done}), REQUESTS)
        check("generated tokens logged", [l.get("generated_tokens") for l in done], [NEW_TOKENS] * REQUESTS)
        check("finish reasons logged", [l.get("finish_reason") for l in done], ["length"] * REQUESTS)
        check("ttft logged", all(float(l.get("ttft_s", "nan")) >= 0 for l in done), True)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if failures:
            for name in sorted(os.listdir(work)):
                if name.endswith(".log"):
                    print(f"--- {name} (tail)")
                    with open(os.path.join(work, name)) as f:
                        print("".join(f.readlines()[-15:]))
    if failures:
        print(f"{len(failures)} checks failed: {failures}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
