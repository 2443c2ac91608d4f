#!/usr/bin/env bash
# `seam serve MODEL` on one GPU as an operator types it (issue 32):
#   pp1  `seam serve MODEL` with no other flag on the 8-layer hidden-4096 bf16
#        Qwen3 checkpoint (--device auto: the GPU; --dtype auto: bf16; PP 1,
#        TP 1; TLS and a token, as by default), reached over HTTPS with
#        python3's standard library: /health, /v1/models, /v1/models/{id},
#        /version, and greedy completions of token-id prompts (32 tokens,
#        ignore_eos) with their log-probs; the greedy token ids of the same
#        prompts through `seam generate --json` (gRPC: the checkpoint has no
#        tokenizer, so HTTP answers carry no ids); then SIGTERM.
#   pp2  `seam serve MODEL --pp 2`: both stages on the one GPU (each fills
#        half the memory share), the same calls; the greedy ids must equal
#        pp1's, and the log-probs' largest difference is reported.
# Usage from the repo root with the bundle of scripts/gpu-bundle.sh:
#     bash bench/gpu/serve.sh OUT_DIR
# OUT_DIR gets serve-pp{1,2}.out (what serve printed), serve-pp{1,2}.err
# (every process's log lines, tagged), calls-pp{1,2}.json and summary.txt.
# A check on a machine without a GPU (the CPU path, a small model):
#     SEAM_GPU_RUN=/path/to/wrapper SEAM_SERVE_MODEL_FLAGS="--layers 2 ..." bash bench/gpu/serve.sh OUT
# where the wrapper execs build/bin/"$@".
set -uo pipefail
cd "$(dirname "$0")/../.."
R="${SEAM_GPU_RUN:-scripts/gpu-run.sh}"
MODEL_FLAGS="${SEAM_SERVE_MODEL_FLAGS:---layers 8 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 \
--intermediate 12288 --vocab 32000 --dtype bf16 --seed 5}"
OUT_DIR="${1:?OUT_DIR}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
WORK="${SEAM_GPU_WORK:-/tmp/seam-gpu-serve-work}"
mkdir -p "$WORK"
SUMMARY="$OUT_DIR/summary.txt"
M="$WORK/qwen3-$(echo "$MODEL_FLAGS" | tr -cd '[:alnum:]' | cut -c1-60)"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)," \
     "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" >> "$SUMMARY"
if [ ! -f "$M/config.json" ]; then
  # shellcheck disable=SC2086
  $R seam model init $MODEL_FLAGS --out "$M" > "$WORK/model_init.log" 2>&1 ||
    { echo "model init failed: $(tail -3 "$WORK/model_init.log")" >> "$SUMMARY"; exit 1; }
fi

# The HTTP calls of one serve run: reads what serve printed, writes calls-NAME.json.
cat > "$WORK/calls.py" <<'PY'
import json, re, ssl, subprocess, sys, time, urllib.error, urllib.request
printed_path, err_path, out_path, seam_run = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
deadline = time.time() + 600
while time.time() < deadline:
    text = open(printed_path).read()
    if "try: curl" in text:
        break
    failed = [l for l in open(err_path) if l.startswith(("seam serve: ", "seam: "))]
    if failed:
        sys.exit("seam serve did not start: " + failed[0].strip())
    time.sleep(1)
else:
    sys.exit("seam serve printed no HTTP address within 600 s")
ca, token_file = re.search(r"^TLS: CA certificate (\S+), bearer token in (\S+) ", text, re.M).groups()
url, model = re.search(r'^OpenAI-compatible HTTP: (\S+)/v1 model "([^"]+)"', text, re.M).groups()
grpc = re.search(r"^serving on (\S+):", text, re.M).group(1)
token = open(token_file).read().strip()
context = ssl.create_default_context(cafile=ca)

def call(path, body=None):
    req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    start = time.time()
    try:
        with urllib.request.urlopen(req, timeout=120, context=context) as r:
            status, answer = r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        status, answer = e.code, json.loads(e.read() or b"null")
    return {"path": path, "status": status, "seconds": round(time.time() - start, 4), "answer": answer}

prompts = [[3, 14, 15, 92, 65], [27, 18, 28, 18, 28, 45, 90, 45], [11, 200, 7]]
calls = [call("/health"), call("/v1/models"), call(f"/v1/models/{model}"), call("/version")]
for p in prompts:
    calls.append(call("/v1/completions", {"model": model, "prompt": p, "max_tokens": 32, "temperature": 0,
                                          "ignore_eos": True, "logprobs": 1}))
ids = []
for p in prompts:
    r = subprocess.run(seam_run + ["seam", "generate", "--addr", grpc, "--tls-ca", ca, "--auth-token-file", token_file,
                                   "--prompt", " ".join(map(str, p)), "--max-new-tokens", "32", "--temperature", "0",
                                   "--json"], capture_output=True, text=True, timeout=300)
    ids.append(json.loads(r.stdout)["completions"][0]["tokens"] if r.returncode == 0 else r.stderr.strip())
json.dump({"model": model, "url": url, "calls": calls, "greedy_ids": ids}, open(out_path, "w"), indent=1)
ok = all(c["status"] == 200 for c in calls) and all(isinstance(i, list) and len(i) == 32 for i in ids)
print("ok" if ok else "FAILED", ", ".join(f"{c['path']} {c['status']} {c['seconds']}s" for c in calls))
sys.exit(0 if ok else 1)
PY

# serve NAME [FLAGS...]: one `seam serve MODEL FLAGS`, its calls, SIGTERM.
serve() {
  local name="$1"; shift
  : > "$OUT_DIR/serve-$name.out"
  $R seam serve "$M" "$@" > "$OUT_DIR/serve-$name.out" 2> "$OUT_DIR/serve-$name.err" &
  local pid=$!
  timeout 900 python3 "$WORK/calls.py" "$OUT_DIR/serve-$name.out" "$OUT_DIR/serve-$name.err" \
    "$OUT_DIR/calls-$name.json" "$R" \
    >> "$WORK/calls-$name.log" 2>&1
  local rc=$?
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  local serve_rc=$?
  echo "serve $name (seam serve MODEL $*): calls rc=$rc, serve exit $serve_rc;" \
       "$(head -1 "$OUT_DIR/serve-$name.out"); $(tail -1 "$WORK/calls-$name.log")" >> "$SUMMARY"
  grep -m1 '^seam serve: ' "$OUT_DIR/serve-$name.err" >> "$SUMMARY"
}

serve pp1
serve pp2 --pp 2
python3 - "$OUT_DIR/calls-pp1.json" "$OUT_DIR/calls-pp2.json" >> "$SUMMARY" 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = a["greedy_ids"] == b["greedy_ids"]
diff = 0.0
for x, y in zip(a["calls"], b["calls"]):
    if x["path"] == "/v1/completions" and x["status"] == y["status"] == 200:
        lx = x["answer"]["choices"][0]["logprobs"]["token_logprobs"]
        ly = y["answer"]["choices"][0]["logprobs"]["token_logprobs"]
        diff = max([diff] + [abs(p - q) for p, q in zip(lx, ly)])
print(f"greedy ids PP 2 vs PP 1 on one GPU: {'SAME' if same else 'DIFFERENT'}; "
      f"largest |log-prob difference| over the HTTP completions {diff:.3g}")
sys.exit(0 if same else 1)
PY
cat "$SUMMARY"
