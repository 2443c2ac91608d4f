#!/usr/bin/env python3
"""`seam serve` driven by both clients, with /metrics scraped before and after.

Writes a tiny random Qwen3 checkpoint (2 layers, hidden 64, Qwen3's vocabulary
of 151,936) with Qwen3's tokenizer files beside it, starts
`seam serve --metrics-port 0` (TLS and a bearer token, as by default; /metrics
over HTTPS with the same certificate), and scrapes the coordinator's and
every stage's /metrics (parsed with prometheus_client's text parser). Then:
- the official OpenAI client (npm `openai`, tests/openai/openai_metrics_workload.mjs):
  one completion, one chat and one streaming chat, max_tokens 8 each, with
  ignore_eos so that each runs to its length;
- the Python client (clients/python, pip-installed into a temporary folder):
  one generate of 8 tokens from 3 token ids (gRPC stops only at the stop
  tokens it is given: none).
The second scrape must show the coordinator's request metrics moved by
exactly that: generation tokens +32, prompt tokens + the prompt lengths the
clients were told (usage.prompt_tokens) + 3, request success {length} +4,
TTFT and e2e histogram counts +4, inter-token count +28, no failures; and
each stage's step histogram moved (it is served over HTTPS too).

    python3 serve_clients_metrics_test.py --seam build/bin/seam --tokenizer tests/fixtures/tokenizer/qwen3

Exits 77 (skip) when prometheus_client or grpc cannot be imported, or node
or its `openai` module is missing (scripts/install-deps.sh).
"""
import argparse
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
CLIENT_DIR = os.path.join(REPO, "clients", "python")
OPENAI_DIR = os.path.join(REPO, "tests", "openai")
WORKLOAD = os.path.join(OPENAI_DIR, "openai_metrics_workload.mjs")
MAX_TOKENS = 8
PY_PROMPT = [3, 14, 15]
START_TIMEOUT_S = 120

try:
    from prometheus_client.parser import text_string_to_metric_families
    import grpc  # noqa: F401
    import google.protobuf  # noqa: F401
except ImportError as e:
    print(f"SKIP: {sys.executable} cannot import {e.name} (scripts/install-deps.sh)")
    sys.exit(SKIP)

failures = []


def check(what, got, want):
    ok = got == want
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got} (want {want})")
    if not ok:
        failures.append(what)


class Serve:
    """`seam serve` with its printed addresses, CA and token file parsed."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.lines = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(START_TIMEOUT_S) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("seam serve did not start:\n" + self.text())
        text = self.text()
        self.address = re.search(r"^serving on (\S+):", text, re.M).group(1)
        self.ca, self.token_file = re.search(r"^TLS: CA certificate (\S+), bearer token in (\S+) ", text, re.M).groups()
        self.url, self.model = re.search(r'^OpenAI-compatible HTTP: (\S+) model "([^"]+)"', text, re.M).groups()
        metrics = re.search(r"^metrics: (.*)$", text, re.M).group(1)
        self.coordinator_metrics = re.search(r"coordinator (https://\S+/metrics)", metrics).group(1)
        self.stage_metrics = re.findall(r"stage \d+ (https://\S+/metrics)", metrics)

    def text(self):
        return "".join(self.lines)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            # The last line of the banner (after the metrics and the HTTP API lines).
            if line.startswith("try: curl"):
                self._ready.set()
        self._ready.set()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(5)
        return self.proc.returncode


def scrape(url, ca):
    """{(sample name, sorted labels): value}, parsed by prometheus_client."""
    context = ssl.create_default_context(cafile=ca)
    text = urllib.request.urlopen(url, timeout=10, context=context).read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            # The coordinator labels every series with its model_name; keyed without it.
            labels = {k: v for k, v in s.labels.items() if k != "model_name"}
            samples[(s.name, tuple(sorted(labels.items())))] = s.value
    return samples


def delta(before, after, name, **labels):
    key = (name, tuple(sorted((k, str(v)) for k, v in labels.items())))
    if key not in after:
        raise AssertionError(f"no sample {name}{labels}; have {sorted(k for k in after if k[0] == name)}")
    return after[key] - before.get(key, 0)


def install_python_client(tmp):
    """clients/python as pip installs it from a copy of the checkout; the folder for PYTHONPATH."""
    checkout = os.path.join(tmp, "checkout")
    shutil.copytree(CLIENT_DIR, os.path.join(checkout, "clients", "python"),
                    ignore=shutil.ignore_patterns("v1", "build", "*.egg-info", "__pycache__"))
    shutil.copytree(os.path.join(REPO, "proto"), os.path.join(checkout, "proto"))
    site = os.path.join(tmp, "site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                    "--quiet", "--target", site, os.path.join(checkout, "clients", "python")],
                   check=True, capture_output=True, text=True)
    return site


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seam", required=True)
    ap.add_argument("--tokenizer", required=True)
    args = ap.parse_args()
    node = shutil.which("node")
    if node is None or not os.path.isdir(os.path.join(OPENAI_DIR, "node_modules", "openai")):
        print("SKIP: node or tests/openai/node_modules/openai is missing (scripts/install-deps.sh)")
        return SKIP
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        print(f"SKIP: no pip for {sys.executable}")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="seam-serve-clients-")
    serve = None
    try:
        site = install_python_client(tmp)
        model = os.path.join(tmp, "qwen3-tiny")
        subprocess.run([args.seam, "model", "init", "--arch", "qwen3", "--layers", "2", "--hidden", "64", "--heads",
                        "4", "--kv-heads", "2", "--head-dim", "16", "--intermediate", "128", "--vocab", "151936",
                        "--seed", "3", "--out", model], check=True, stdout=subprocess.DEVNULL)
        for f in ["tokenizer.json.gz", "tokenizer_config.json"]:
            shutil.copyfile(os.path.join(args.tokenizer, f), os.path.join(model, f))
        serve = Serve([args.seam, "serve", "--model", model, "--pp", "2", "--tp", "1", "--metrics-port", "0"])
        print(f"seam serve: gRPC {serve.address}, HTTP {serve.url}, metrics {serve.coordinator_metrics} "
              f"and {serve.stage_metrics}")
        check("stages with metrics", len(serve.stage_metrics), 2)
        c0 = scrape(serve.coordinator_metrics, serve.ca)
        s0 = [scrape(u, serve.ca) for u in serve.stage_metrics]

        with open(serve.token_file) as f:
            token = f.read().strip()
        run = subprocess.run([node, WORKLOAD], capture_output=True, text=True, timeout=180,
                             env=dict(os.environ, NODE_EXTRA_CA_CERTS=serve.ca, SEAM_BASE_URL=serve.url,
                                      SEAM_MODEL=serve.model, SEAM_API_KEY=token))
        if run.returncode != 0:
            raise RuntimeError(f"the OpenAI client failed ({run.returncode}):\n{run.stdout}{run.stderr}")
        calls = json.loads(run.stdout.strip().splitlines()[-1])["calls"]
        for call in calls:
            print(f"openai {call['kind']}: prompt_tokens {call['prompt_tokens']}, "
                  f"completion_tokens {call['completion_tokens']}")
            check(f"openai {call['kind']} completion_tokens", call["completion_tokens"], MAX_TOKENS)

        program = ("import json, seam; c = seam.SeamClient(%r, tls_ca=%r, token_file=%r, timeout=60); "
                   "r = c.generate(%r, %d); print(json.dumps([seam.__file__, r.token_ids, r.finish_reason]))"
                   % (serve.address, serve.ca, serve.token_file, PY_PROMPT, MAX_TOKENS))
        py = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp, timeout=120,
                            env=dict(os.environ, PYTHONPATH=site))
        if py.returncode != 0:
            raise RuntimeError(f"the Python client failed ({py.returncode}):\n{py.stdout}{py.stderr}")
        installed, py_tokens, py_finish = json.loads(py.stdout.strip().splitlines()[-1])
        check("python client imported from the pip install", installed.startswith(site), True)
        check("python client tokens", len(py_tokens), MAX_TOKENS)
        check("python client finish reason", py_finish, "max_new_tokens")

        c1 = scrape(serve.coordinator_metrics, serve.ca)
        s1 = [scrape(u, serve.ca) for u in serve.stage_metrics]
        requests = len(calls) + 1
        generated = sum(c["completion_tokens"] for c in calls) + len(py_tokens)
        prompt = sum(c["prompt_tokens"] for c in calls) + len(PY_PROMPT)
        d = lambda name, **labels: delta(c0, c1, name, **labels)
        check("requests", requests, 4)
        check("seam:generation_tokens_total delta", d("seam:generation_tokens_total"), generated)
        check("seam:generation_tokens_total delta is 4 x 8", d("seam:generation_tokens_total"), 4 * MAX_TOKENS)
        check("seam:prompt_tokens_total delta (the clients' prompt_tokens)", d("seam:prompt_tokens_total"), prompt)
        check("seam:request_success_total{length} delta", d("seam:request_success_total", finished_reason="length"),
              requests)
        check("seam:time_to_first_token_seconds_count delta", d("seam:time_to_first_token_seconds_count"), requests)
        check("seam:e2e_request_latency_seconds_count delta", d("seam:e2e_request_latency_seconds_count"), requests)
        check("seam:inter_token_latency_seconds_count delta", d("seam:inter_token_latency_seconds_count"),
              generated - requests)
        check("seam:request_failure_total unchanged",
              sum(v for k, v in c1.items() if k[0] == "seam:request_failure_total")
              - sum(v for k, v in c0.items() if k[0] == "seam:request_failure_total"), 0)
        check("seam:num_requests_running", c1[("seam:num_requests_running", ())], 0)
        for k, (before, after) in enumerate(zip(s0, s1)):
            steps = sum(delta(before, after, "seam:stage_step_seconds_count", pp_rank=k, kind=kind)
                        for kind in ["decode", "prefill", "mixed"])
            check(f"stage {k} seam:stage_step_seconds_count moved (at least one step per token)",
                  steps >= generated, True)
        check("seam serve exit status", serve.stop(), 0)
    except Exception as e:  # noqa: BLE001
        failures.append(repr(e))
        print(f"FAIL {e!r}")
    finally:
        if serve is not None:
            serve.stop()
            if failures:
                print("--- seam serve's output\n" + serve.text())
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} checks failed: {failures}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
