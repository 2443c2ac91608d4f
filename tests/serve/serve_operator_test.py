#!/usr/bin/env python3
"""`seam serve MODEL` as an operator who knows vLLM runs it, over real processes.

1. Start-up errors, each printing its cause first (the first line on stderr)
   with exit code 2 for a bad command line and 1 for a failed start:
   an unknown subcommand and an unknown flag (each with the nearest name),
   a hub id, a folder without config.json, --host beyond loopback with
   --insecure, a taken --port (named with "address already in use"), a
   checkpoint whose weights do not load (the coordinator's own error, then
   "logs: ..." on the next line).
2. `seam serve MODEL` positional with vLLM's spellings
   (--tensor-parallel-size 1 --pipeline-parallel-size 2 --max-model-len 100
   --max-num-seqs 3 --served-model-name tiny), --enable-metrics-on-api,
   --logs-dir, and the global --log-format json after the subcommand, on a
   tiny random Qwen3 checkpoint with Qwen3's tokenizer. Over real HTTPS:
   /version, /v1/models/tiny (max_model_len lowered to 100),
   /v1/models/other (404), /tokenize and /detokenize round trip, a field
   they do not take (400 naming it), one completion of 4 tokens, then
   /metrics on the API port (401 without the token), parsed with
   prometheus_client's text parser: every series labelled model_name="tiny"
   (the stages' /metrics too),
   vLLM's families present with their types, the histograms moved by
   exactly the one request. Its stderr holds every process's JSON lines
   tagged with their source, numbers as numbers. SIGTERM: exit 0, the logs
   stay in --logs-dir. A plaintext `seam generate` against it is told that
   the server may serve TLS and which flags to pass.

    python3 serve_operator_test.py --seam build/bin/seam --tokenizer tests/fixtures/tokenizer/qwen3

Exits 77 (skip) when prometheus_client cannot be imported.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SKIP = 77
START_TIMEOUT_S = 90

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    print(f"SKIP: {sys.executable} cannot import {e.name} (scripts/install-deps.sh)")
    sys.exit(SKIP)

failures = []


def check(what, got, want):
    ok = got == want
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got!r} (want {want!r})")
    if not ok:
        failures.append(what)


def check_error(seam, what, argv, code, first_line_pattern, second_line_pattern=None):
    """`seam argv` must exit `code` with the cause on the first line of stderr."""
    r = subprocess.run([seam] + argv, capture_output=True, text=True, timeout=120)
    lines = [l for l in r.stderr.splitlines() if not re.match(r"^\S+ \| |^\{", l)]  # relayed log lines aside
    first = lines[0] if lines else ""
    check(f"{what}: exit code", r.returncode, code)
    check(f"{what}: first line {first!r} matches {first_line_pattern!r}",
          re.search(first_line_pattern, first) is not None, True)
    if second_line_pattern is not None:
        second = lines[1] if len(lines) > 1 else ""
        check(f"{what}: second line {second!r} matches {second_line_pattern!r}",
              re.search(second_line_pattern, second) is not None, True)
        kept = re.match(r"^logs: (/tmp/seam-serve-\w+)/", second)  # kept for the operator; not for a test
        if kept:
            shutil.rmtree(kept.group(1), ignore_errors=True)


def write_model(seam, tokenizer, path):
    subprocess.run([seam, "model", "init", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
                    "--intermediate", "128", "--vocab", "151936", "--out", path],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for name in os.listdir(tokenizer):
        shutil.copy(os.path.join(tokenizer, name), path)


def error_cases(seam, work, model):
    check_error(seam, "unknown subcommand", ["serv", model], 2, r"^seam: unknown command serv \(did you mean serve\?\)")
    check_error(seam, "unknown flag", ["serve", model, "--tensor-parallel", "2"], 2,
                r"^seam: unknown flag --tensor-parallel \(did you mean --tensor-parallel-size\?\)")
    check_error(seam, "hub id", ["serve", "Qwen/Qwen3-0.6B"], 2,
                r"^seam serve: MODEL Qwen/Qwen3-0\.6B: no such directory; seam loads local checkpoints only")
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    check_error(seam, "no config.json", ["serve", empty], 2, rf"^seam serve: MODEL {re.escape(empty)}: .*config\.json")
    check_error(seam, "--host beyond loopback with --insecure", ["serve", model, "--host", "0.0.0.0", "--insecure"], 2,
                r"^seam serve: --host 0\.0\.0\.0: beyond loopback .* TLS and a token")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        check_error(seam, "taken --port", ["serve", model, "--port", str(port)], 1,
                    rf"^seam serve: .*{port}.*address already in use|^seam serve: .*address already in use.*{port}")
    broken = os.path.join(work, "broken")
    shutil.copytree(model, broken)
    with open(os.path.join(broken, "model.safetensors"), "w") as f:
        f.write("not a safetensors file")
    check_error(seam, "weights that do not load", ["serve", broken], 1,
                r"^seam serve: seam-(coordinator|stage)\S*: .*model\.safetensors", r"^logs: .*stage0\.log, .*coordinator\.log")


class Serve:
    """`seam serve` with its printed addresses, CA and token parsed; stderr kept."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.out, self.err = [], []
        self._ready = threading.Event()
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out, True), daemon=True).start()
        self._err_reader = threading.Thread(target=self._read, args=(self.proc.stderr, self.err, False), daemon=True)
        self._err_reader.start()
        if not self._ready.wait(START_TIMEOUT_S) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("seam serve did not start:\n" + "".join(self.out + self.err[-40:]))
        text = "".join(self.out)
        self.ca, self.token_file = re.search(r"^TLS: CA certificate (\S+), bearer token in (\S+) ", text, re.M).groups()
        self.url, self.model = re.search(r'^OpenAI-compatible HTTP: (\S+)/v1 model "([^"]+)"', text, re.M).groups()
        self.address = re.search(r"^serving on (\S+):", text, re.M).group(1)
        self.token = open(self.token_file).read().strip()
        self.stage_metrics = re.findall(r"stage \d+ (https://\S+/metrics)", text)
        self.context = ssl.create_default_context(cafile=self.ca)

    def _read(self, stream, lines, signal_ready):
        for line in stream:
            lines.append(line)
            if signal_ready and line.startswith("try: curl"):
                self._ready.set()
        if signal_ready:
            self._ready.set()

    def call(self, path, body=None, token=True):
        """(status, parsed JSON or text) of GET (body None) or POST `path`."""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        self._err_reader.join(timeout=10)
        return code


def scrape(serve):
    """{(sample name, sorted labels without model_name): value}, the family types, the model_name labels seen."""
    status, text = serve.call("/metrics")
    check("GET /metrics on the API port", status, 200)
    samples, types, names = {}, {}, set()
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            names.add(s.labels.get("model_name"))
            labels = {k: v for k, v in s.labels.items() if k != "model_name"}
            samples[(s.name, tuple(sorted(labels.items())))] = s.value
    return samples, types, names


def check_routes(serve):
    status, version = serve.call("/version")
    check("GET /version", (status, sorted(version)), (200, ["version"]))
    status, model = serve.call("/v1/models/tiny")
    check("GET /v1/models/tiny", (status, model.get("id"), model.get("max_model_len")), (200, "tiny", 100))
    status, missing = serve.call("/v1/models/other")
    check("GET /v1/models/other", (status, "'other' does not exist" in missing["error"]["message"]), (404, True))
    status, tokens = serve.call("/tokenize", {"model": "tiny", "prompt": "Hello world"})
    check("POST /tokenize", (status, tokens["count"], len(tokens["tokens"]), tokens["max_model_len"]), (200, 2, 2, 100))
    status, text = serve.call("/detokenize", {"model": "tiny", "tokens": tokens["tokens"]})
    check("POST /detokenize round trip", (status, text), (200, {"prompt": "Hello world"}))
    status, refused = serve.call("/tokenize", {"prompt": "x", "messages": []})
    check("POST /tokenize with a field it does not take",
          (status, refused["error"]["message"]), (400, "'messages' is not supported by /tokenize"))
    status, _ = serve.call("/metrics", token=False)
    check("GET /metrics without the token", status, 401)


def check_plaintext_client(seam, serve):
    r = subprocess.run([seam, "generate", "--addr", serve.address, "--prompt", "3 14 15", "--timeout", "10"],
                       capture_output=True, text=True, timeout=60)
    check("plaintext seam generate against the TLS server: exit code", r.returncode, 1)
    check(f"plaintext seam generate names TLS: {r.stderr.strip()!r}",
          "pass --tls-ca and --auth-token-file" in r.stderr, True)


def check_metrics(serve):
    before, types, _ = scrape(serve)
    for name, kind in [("seam:request_queue_time_seconds", "histogram"), ("seam:request_prefill_time_seconds", "histogram"),
                       ("seam:request_decode_time_seconds", "histogram"),
                       ("seam:request_inference_time_seconds", "histogram"),
                       ("seam:request_prompt_tokens", "histogram"), ("seam:request_generation_tokens", "histogram"),
                       ("seam:iteration_tokens_total", "histogram"), ("seam:num_preemptions", "counter"),
                       ("seam:cache_config_info", "gauge"), ("seam:time_to_first_token_seconds", "histogram")]:
        check(f"family {name} type", types.get(name), kind)
    status, done = serve.call("/v1/completions", {"model": "tiny", "prompt": [3, 14, 15], "max_tokens": 4,
                                                   "ignore_eos": True})
    check("completion", (status, done.get("usage", {}).get("completion_tokens")), (200, 4))
    after, _, names = scrape(serve)
    check("every series labelled model_name", names, {"tiny"})
    for url in serve.stage_metrics:
        text = urllib.request.urlopen(url, timeout=10, context=serve.context).read().decode()
        stage_names = {s.labels.get("model_name") for f in text_string_to_metric_families(text) for s in f.samples}
        check(f"every series of {url} labelled model_name", stage_names, {"tiny"})
    check("both stages' /metrics scraped", len(serve.stage_metrics), 2)
    d = lambda name: after[(name, ())] - before.get((name, ()), 0)
    for name in ["seam:request_queue_time_seconds_count", "seam:request_prefill_time_seconds_count",
                 "seam:request_decode_time_seconds_count", "seam:request_inference_time_seconds_count",
                 "seam:request_prompt_tokens_count", "seam:request_generation_tokens_count"]:
        check(f"{name} delta", d(name), 1)
    check("seam:request_prompt_tokens_sum delta", d("seam:request_prompt_tokens_sum"), 3)
    check("seam:request_generation_tokens_sum delta", d("seam:request_generation_tokens_sum"), 4)
    check("seam:iteration_tokens_total_count moved", d("seam:iteration_tokens_total_count") >= 1, True)
    check("seam:num_preemptions_total", after[("seam:num_preemptions_total", ())], 0)
    cache = [k for k in after if k[0] == "seam:cache_config_info"]
    check("cache_config_info max_model_len", [dict(k[1]).get("max_model_len") for k in cache], ["100"])


def check_logs(serve, logs_dir):
    sources, finished = set(), []
    for line in serve.err:
        if line.startswith("{"):
            doc = json.loads(line)
            sources.add(doc.get("source"))
            if doc.get("msg") == "request finished":
                finished.append(doc)
    check("stderr holds every process's JSON lines", sources >= {"stage0", "stage1", "coordinator"}, True)
    check("a request's line carries its counts as numbers",
          [(d["generated_tokens"], type(d["total_s"]).__name__) for d in finished], [(4, "float")])
    limits = [l for l in serve.err if "pipeline limits:" in l]
    check("--max-num-seqs and --max-model-len lower the coordinator's limits",
          [("3 sequences per DP group" in l, "contexts up to 100 tokens" in l) for l in limits], [(True, True)])
    check("--logs-dir keeps the logs", sorted(os.listdir(logs_dir)), ["coordinator.log", "stage0.log", "stage1.log"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seam", required=True)
    parser.add_argument("--tokenizer", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="seam-serve-operator-")
    try:
        model = os.path.join(work, "qwen3-tiny")
        write_model(args.seam, args.tokenizer, model)
        error_cases(args.seam, work, model)
        logs_dir = os.path.join(work, "logs")
        serve = Serve([args.seam, "serve", model, "--tensor-parallel-size", "1", "--pipeline-parallel-size", "2",
                       "--max-model-len", "100", "--max-num-seqs", "3", "--served-model-name", "tiny",
                       "--enable-metrics-on-api", "--metrics-port", "0", "--logs-dir", logs_dir,
                       "--log-format", "json"])
        try:
            check_routes(serve)
            check_plaintext_client(args.seam, serve)
            check_metrics(serve)
        finally:
            code = serve.stop()
        check("seam serve exit code after SIGTERM", code, 0)
        check_logs(serve, logs_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed: {failures}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
