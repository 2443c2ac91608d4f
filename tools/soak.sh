#!/usr/bin/env bash
# Soak: a local CPU pipeline (`seam serve`, PP 2, TP 1, plaintext on
# loopback) under mixed load for DURATION: streaming calls, calls cancelled
# mid-stream, bad requests. Every 10 s it samples the resident memory, open
# file descriptors and threads of every process (coordinator, stages), and at
# the end says whether they are flat after warm-up: resident memory of the
# idle pipeline within +10 % (and +16 MiB) of its idle baseline taken after
# warm-up, descriptors back to that baseline, threads within 2 of it (gRPC's
# executor grows and shrinks its pool by itself).
#
#   tools/soak.sh DURATION [BUILD_BIN_DIR]     DURATION: 600, 90s, 10m
#
# Exit 0: flat; 1: something grew or a process died; 2: bad arguments.
set -euo pipefail

usage() { echo "usage: $0 DURATION [BIN_DIR]   (DURATION like 600, 90s or 10m)" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
case "$1" in
  *m) DURATION=$(( ${1%m} * 60 )) ;;
  *s) DURATION=${1%s} ;;
  *) DURATION=$1 ;;
esac
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 60 ]] || { echo "DURATION must be at least 60 s" >&2; usage; }
BIN=${2:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
SEAM=$BIN/seam
[[ -x $SEAM ]] || { echo "no seam binary at $SEAM (pass the build's bin dir)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/seam-soak-XXXXXX)
WARMUP=$(( DURATION / 5 < 60 ? 60 : DURATION / 5 ))
SAMPLE_EVERY=10
LOADERS=()
SERVE_PID=
cleanup() {
  for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -n $SERVE_PID ]] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null || true
}
trap cleanup EXIT

"$SEAM" serve --device cpu --pp 2 --tp 1 --insecure --port-file "$WORK/port" > "$WORK/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 600); do [[ -s $WORK/port ]] && break; sleep 0.2; done
[[ -s $WORK/port ]] || { echo "seam serve did not start:" >&2; tail -20 "$WORK/serve.log" >&2; exit 1; }
ADDR=127.0.0.1:$(cat "$WORK/port")

# The coordinator and the stages: the children of `seam serve`.
PIDS=()
for p in $(pgrep -P "$SERVE_PID"); do PIDS+=("$p"); done
[[ ${#PIDS[@]} -ge 3 ]] || { echo "expected 3 processes under seam serve, found ${#PIDS[@]}" >&2; exit 1; }
name_of() { tr '\0' ' ' < "/proc/$1/cmdline" | awk '{n=$1; sub(".*/", "", n); print n}'; }

sample() {  # one line per process: tag pid name rss_kib fds threads
  local tag=$1
  for p in "${PIDS[@]}"; do
    if [[ ! -d /proc/$p ]]; then echo "$tag $p dead 0 0 0"; continue; fi
    local rss threads fds
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status")
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$p/status")
    fds=$(ls "/proc/$p/fd" | wc -l)
    echo "$tag $p $(name_of "$p") $rss $fds $threads"
  done
}

gen() { timeout "${TIMEOUT:-30}" "$SEAM" generate --addr "$ADDR" "$@" > /dev/null 2>&1; }
load() {  # $1: which kind, runs until killed
  local i=0
  while true; do
    i=$((i + 1))
    case $1 in
      stream) gen --prompt "3 14 15 92 65" --prompt "27 18 28" --max-new-tokens 48 || true ;;
      long)   gen --prompt "$(seq -s ' ' 1 200)" --max-new-tokens 16 || true ;;
      cancel) TIMEOUT=0.$(( (i % 8) + 1 )) gen --prompt "11 200 7" --max-new-tokens 2000 || true ;;
      bad)    gen --prompt "99999" --max-new-tokens 4 || true                    # token outside the vocabulary
              gen --prompt "1 2 3" --max-new-tokens 100000000 || true            # past the positions
              sleep 0.5 ;;
    esac
  done
}
start_load() { for kind in stream stream long cancel bad; do load "$kind" & LOADERS+=($!); done; }
stop_load() { for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null || true; done; wait "${LOADERS[@]}" 2>/dev/null || true; LOADERS=(); }

echo "soak: $DURATION s against $ADDR (warm-up $WARMUP s), processes: $(for p in "${PIDS[@]}"; do printf '%s=%s ' "$(name_of "$p")" "$p"; done)"
echo "columns: t_s pid name rss_kib fds threads"
START=$(date +%s)
start_load
sleep "$WARMUP"
stop_load
sleep 5
sample baseline | tee "$WORK/baseline"
start_load
while (( $(date +%s) - START < DURATION )); do
  sleep "$SAMPLE_EVERY"
  sample "$(( $(date +%s) - START ))" | tee -a "$WORK/samples"
done
stop_load
sleep 5
sample final | tee "$WORK/final"

# Calls the load made, from the coordinator's point of view: it still serves.
if ! TIMEOUT=20 gen --prompt "1 2 3" --max-new-tokens 4; then echo "soak: the pipeline no longer serves" >&2; exit 1; fi

verdict=0
while read -r _ pid name rss fds threads; do
  read -r _ _ _ rss1 fds1 threads1 < <(grep " $pid " "$WORK/final")
  peak=$(awk -v p="$pid" '$2 == p && $4 > m {m = $4} END {print m + 0}' "$WORK/samples")
  slope=$(awk -v p="$pid" '$2 == p {n++; x += $1; y += $4; xx += $1*$1; xy += $1*$4}
          END {d = n*xx - x*x; if (d == 0) print 0; else printf "%.1f", (n*xy - x*y) / d * 60}' "$WORK/samples")
  grow=$(( rss1 - rss ))
  flat=yes
  if [[ $name == dead || $rss1 -eq 0 ]]; then flat=no
  elif (( grow > 16384 && grow * 10 > rss )); then flat=no
  # gRPC's executor adds and retires a thread or two on its own: +2 allowed.
  elif (( fds1 > fds || threads1 > threads + 2 )); then flat=no; fi
  [[ $flat == yes ]] || verdict=1
  printf 'soak: %-17s rss %6d -> %6d KiB (peak under load %d, slope %s KiB/min), fds %d -> %d, threads %d -> %d: %s\n' \
    "$name[$pid]" "$rss" "$rss1" "$peak" "$slope" "$fds" "$fds1" "$threads" "$threads1" \
    "$([[ $flat == yes ]] && echo flat || echo GREW)"
done < "$WORK/baseline"
echo "soak: samples in $WORK/samples; $( [[ $verdict == 0 ]] && echo 'FLAT after warm-up' || echo 'NOT FLAT')"
exit $verdict
