#!/usr/bin/env python3
"""Every log line about a request names the server's request id; long steps log progress.

Writes a random checkpoint with `seam model init` (its output to a file, not
a terminal), starts two seam-stage processes and a seam-coordinator on
loopback with --log-format json --log-level debug (and --http-listen), and
sends:
- two gRPC calls through `seam generate --json` (which prints the
  server_request_id the coordinator returned);
- an HTTP completion with an X-Request-Id header, one with a 300-byte
  X-Request-Id, and a streamed one;
- an HTTP completion refused by validation (a token outside the vocabulary).
Then it reads the JSON logs and checks:
- each answer named a server id (req-<16 hex>): gRPC in its JSON output,
  HTTP in the X-Server-Request-Id header and the OpenAI id; the client's
  X-Request-Id came back cut to 128 bytes;
- grep: every line of any log that contains a server id carries it in its
  request_id (coordinator) or request_ids (stage) field, and every
  coordinator line with a request_id names the request's client id as
  client_request_id (cut to 128 bytes);
- each request has its "request received" and its end line ("request
  finished", or "request failed" for the refused one) on the coordinator,
  "first token" when it produced one, and each served request is named by
  lines of both stages (the microbatches that ran it);
- no stage line names a client's id (the stages only ever see the server's);
- progress, as plain lines because no output is a terminal: `seam model
  init` drew and wrote its weights ("... started", "... done"), each stage
  logged "loading weights of layers" and "allocating the KV cache" from
  start to done.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

PROMPT_IDS = [3, 14, 15, 92, 65]
NEW_TOKENS = 4
ID_RE = re.compile(r"req-[0-9a-f]{16}")
MAX_CLIENT_ID = 128

failures = []


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + str(detail) if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port_file(path, proc, what, timeout=120):
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


def json_lines(path):
    out = []
    with open(path) as f:
        for raw in f:
            raw = raw.strip()
            if raw.startswith("{"):
                out.append(json.loads(raw))
    return out


def http_completion(port, body, client_id=None):
    """(status, headers, parsed body or the text of a stream)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    if client_id is not None:
        req.add_header("X-Request-Id", client_id)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
            return r.status, r.headers, (text if body.get("stream") else json.loads(text))
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.loads(e.read().decode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    args = ap.parse_args()
    b = args.bin_dir
    work = tempfile.mkdtemp(prefix="seam-request-log-test-")
    env = dict(os.environ)
    env.pop("SEAM_PROGRESS", None)
    env.pop("SEAM_LOG_FORMAT", None)
    env.pop("SEAM_LOG_LEVEL", None)
    procs = []
    try:
        # Progress of `seam model init` with its output in a file.
        model = os.path.join(work, "model")
        init_log = os.path.join(work, "model_init.log")
        with open(init_log, "w") as f:
            subprocess.run([f"{b}/seam", "model", "init", "--layers", "4", "--hidden", "64", "--heads", "4",
                            "--kv-heads", "2", "--intermediate", "128", "--vocab", "256", "--out", model],
                           check=True, stdout=f, stderr=subprocess.STDOUT, env=env)
        init_text = open(init_log).read()
        check("model init: no terminal redraw in a file", "\r" not in init_text, repr(init_text[:200]))
        for step in ["drawing random weights (", f"writing {model}/model.safetensors"]:
            check(f"model init: '{step}' started", re.search(re.escape(step) + r".*: started, ", init_text) is not None,
                  init_text)
            check(f"model init: '{step}' done", re.search(re.escape(step) + r".*: done, ", init_text) is not None,
                  init_text)

        stage_logs, stage_ports = [], []
        for k in range(2):
            port_file = os.path.join(work, f"stage{k}.port")
            log_path = os.path.join(work, f"stage{k}.log")
            stage_logs.append(log_path)
            log = open(log_path, "w")
            p = subprocess.Popen([f"{b}/seam-stage", "--listen", "127.0.0.1:0", "--port-file", port_file,
                                  "--log-format", "json", "--log-level", "debug", "--kv-cache-bytes", str(64 << 20)],
                                 stdout=log, stderr=subprocess.STDOUT, env=env)
            procs.append(p)
            stage_ports.append(wait_port_file(port_file, p, f"seam-stage {k}"))
        http_port = free_port()
        coord_log = os.path.join(work, "coordinator.log")
        port_file = os.path.join(work, "coordinator.port")
        p = subprocess.Popen([f"{b}/seam-coordinator", "--listen", "127.0.0.1:0", "--port-file", port_file,
                              "--stages", ",".join(f"127.0.0.1:{q}" for q in stage_ports), "--model", model,
                              "--http-listen", f"127.0.0.1:{http_port}", "--log-format", "json",
                              "--log-level", "debug"],
                             stdout=open(coord_log, "w"), stderr=subprocess.STDOUT, env=env)
        procs.append(p)
        addr = f"127.0.0.1:{wait_port_file(port_file, p, 'seam-coordinator')}"

        # request: client id -> {server, ok, ...}
        requests = []
        for _ in range(2):
            out = subprocess.run([f"{b}/seam", "generate", "--addr", addr, "--prompt",
                                  " ".join(map(str, PROMPT_IDS)), "--max-new-tokens", str(NEW_TOKENS), "--json"],
                                 check=True, capture_output=True, text=True, env=env).stdout
            doc = json.loads(out)
            requests.append({"api": "grpc", "client": doc["request_id"], "server": doc.get("server_request_id", ""),
                             "ok": True})
        for name, client_id, stream in [("http", "client-http-1", False), ("http long id", "x" * 300, False),
                                        ("http stream", "client-http-stream", True)]:
            status, headers, body = http_completion(
                http_port, {"prompt": PROMPT_IDS, "max_tokens": NEW_TOKENS, "stream": stream}, client_id)
            server = headers.get("X-Server-Request-Id", "")
            check(f"{name}: HTTP 200", status == 200, status)
            check(f"{name}: client id echoed, cut to {MAX_CLIENT_ID} bytes",
                  headers.get("X-Request-Id") == client_id[:MAX_CLIENT_ID], headers.get("X-Request-Id"))
            answer_id = body["id"] if not stream else json.loads(body.split("data: ", 2)[1].split("\n")[0])["id"]
            check(f"{name}: the OpenAI id holds the server id", answer_id == f"cmpl-{server}", answer_id)
            requests.append({"api": "http", "client": client_id[:MAX_CLIENT_ID], "server": server, "ok": True})
        status, headers, body = http_completion(http_port, {"prompt": [3, 999], "max_tokens": 2}, "client-refused")
        check("refused: HTTP 400", status == 400, status)
        requests.append({"api": "http", "client": "client-refused", "server": headers.get("X-Server-Request-Id", ""),
                         "ok": False})
        for r in requests:
            check(f"{r['client'][:20]}: the answer names a server id", ID_RE.fullmatch(r["server"]) is not None,
                  r["server"])
        check("server ids distinct", len({r["server"] for r in requests}) == len(requests))
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()

    coord = json_lines(coord_log)
    stages = [json_lines(path) for path in stage_logs]
    by_server = {r["server"]: r for r in requests}
    # The grep: every line holding a server id carries it in its own field.
    for where, lines, field in [("coordinator", coord, "request_id")] + \
            [(f"stage {k}", s, "request_ids") for k, s in enumerate(stages)]:
        for line in lines:
            text = json.dumps(line)
            for sid in set(ID_RE.findall(text)):
                if sid not in by_server:
                    continue
                named = line.get(field, "").split(",")
                check(f"{where}: line naming {sid} carries it as {field}", sid in named, text)
    for line in coord:
        sid = line.get("request_id")
        if sid in by_server:
            check(f"coordinator: {sid} lines name its client id", line.get("client_request_id") ==
                  by_server[sid]["client"], json.dumps(line))
    for r in requests:
        mine = [l for l in coord if l.get("request_id") == r["server"]]
        msgs = [l.get("msg") for l in mine]
        check(f"{r['client'][:20]} ({r['api']}): 'request received' logged", "request received" in msgs, msgs)
        end = "request finished" if r["ok"] else "request failed"
        check(f"{r['client'][:20]} ({r['api']}): one '{end}' line", msgs.count(end) == 1, msgs)
        if r["ok"]:
            check(f"{r['client'][:20]} ({r['api']}): 'first token' logged", "first token" in msgs, msgs)
            for k, s in enumerate(stages):
                named = [l for l in s if r["server"] in l.get("request_ids", "").split(",")]
                check(f"{r['client'][:20]}: stage {k} lines name it", len(named) > 0)
        for k, s in enumerate(stages):
            if r["client"] != r["server"]:
                leaked = [l for l in s if r["client"] in json.dumps(l)]
                check(f"{r['client'][:20]}: stage {k} never names the client's id", not leaked, leaked[:1])
    # Progress of loading, as plain lines of the JSON log.
    for k, s in enumerate(stages):
        msgs = [l.get("msg", "") for l in s]
        for step in ["loading weights of layers", "allocating the KV cache"]:
            check(f"stage {k}: '{step}' started", any(m.startswith(step) and ": started, " in m for m in msgs), msgs)
            check(f"stage {k}: '{step}' done", any(m.startswith(step) and ": done, " in m for m in msgs), msgs)

    if failures:
        for name in sorted(os.listdir(work)):
            if name.endswith(".log"):
                print(f"--- {name} (tail)")
                with open(os.path.join(work, name)) as f:
                    print("".join(f.readlines()[-20:]))
        print(f"{len(failures)} checks failed: {failures}")
        return 1
    shutil.rmtree(work, ignore_errors=True)  # kept above, when a check failed
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
