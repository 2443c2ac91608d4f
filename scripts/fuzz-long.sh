#!/usr/bin/env bash
# Runs every libFuzzer target of a bundle made by scripts/fuzz-bundle.sh for
# a budget of CPU-seconds each, spread over WORKERS libFuzzer workers
# (-fork=WORKERS), on any x86-64 Linux host: it needs bash, coreutils, find
# and tar, nothing of seam's dependencies (the bundle's lib/ holds them).
#
# Usage: fuzz-long.sh [-b BUNDLE_DIR] [-o OUT_DIR] [-t "target ..."] [-x "libFuzzer flags"]
#                     CPU_SECONDS WORKERS
#   BUNDLE_DIR  the unpacked bundle (default: the folder this script is in
#               when it holds bin/, else ./fuzz-bundle)
#   OUT_DIR     results (default: ./fuzz-out); an existing OUT_DIR/corpus/<target>
#               is reused, so a second run continues from the first one's corpus
#   -t          only these targets (default: every bin/*_fuzz)
#   -x          extra libFuzzer flags for every run (e.g. "-max_len=65536")
#
# The targets run one after another; each gets wall time CPU_SECONDS/WORKERS,
# and again for what is left when the CPU time measured (user + sys of the
# whole process tree, from the shell's `times` after it waited for them)
# falls more than 5% short of the budget, as on a busy host (at most 4
# rounds). Crashes, timeouts (-timeout=25 s) and out-of-memory inputs
# (-rss_limit_mb=2048) are kept and the run goes on (-ignore_crashes=1).
#
# Writes:
#   OUT_DIR/summary.txt         per target: workers, wall s, CPU s, executions,
#                               crashes/timeouts/ooms, corpus before and after
#   OUT_DIR/crashes.tar.gz      every crash, timeout, oom and leak input, with
#                               the log of each target that had one (only
#                               when there is one)
#   OUT_DIR/logs/<target>.log   libFuzzer's output, all rounds
#   OUT_DIR/corpus/<target>/    the corpus at the end (seeds + new inputs)
# Exit status: 0 when no target found anything, 1 when some did or a run
# failed (listed in the summary), 2 on misuse.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

here="$(cd "$(dirname "$0")" && pwd)"
bundle=""
out="fuzz-out"
only=""
extra=""
while getopts "b:o:t:x:h" opt; do
  case "$opt" in
    b) bundle="$OPTARG" ;;
    o) out="$OPTARG" ;;
    t) only="$OPTARG" ;;
    x) extra="$OPTARG" ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
budget="$1"
workers="$2"
[[ "$budget" =~ ^[0-9]+$ && "$budget" -gt 0 ]] || { echo "fuzz-long: CPU_SECONDS must be a positive integer" >&2; exit 2; }
[[ "$workers" =~ ^[0-9]+$ && "$workers" -gt 0 ]] || { echo "fuzz-long: WORKERS must be a positive integer" >&2; exit 2; }
if [ -z "$bundle" ]; then
  if [ -d "$here/bin" ]; then bundle="$here"; else bundle="fuzz-bundle"; fi
fi
[ -d "$bundle/bin" ] && [ -d "$bundle/corpus" ] || { echo "fuzz-long: $bundle is not a fuzz bundle (no bin/ and corpus/)" >&2; exit 2; }
bundle="$(cd "$bundle" && pwd)"
# The tokenizer fixture openai_request_fuzz reads.
[ -d "$bundle/fixtures/tokenizer" ] && export SEAM_TOKENIZER_FIXTURES="$bundle/fixtures/tokenizer"
mkdir -p "$out/logs" "$out/corpus" "$out/artifacts"
out="$(cd "$out" && pwd)"

if [ -n "$only" ]; then
  read -r -a targets <<<"$only"
else
  mapfile -t targets < <(cd "$bundle/bin" && ls -- *_fuzz | sort)
fi
cores="$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')"
if [ "$cores" != "?" ] && [ "$workers" -gt "$cores" ]; then
  echo "fuzz-long: warning: $workers workers on $cores cores; the CPU budget will take longer than planned" >&2
fi
# The host's libstdc++ when it loads the targets (the bundled one needs glibc
# 2.36), else the bundle's (lib/cxx).
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! "$bundle/bin/${targets[0]}" -help=1 >/dev/null 2>&1; then
  export LD_LIBRARY_PATH="$bundle/lib:$bundle/lib/cxx${LD_LIBRARY_PATH#"$bundle/lib"}"
  "$bundle/bin/${targets[0]}" -help=1 >/dev/null 2>&1 || {
    echo "fuzz-long: ${targets[0]} does not start here:" >&2
    "$bundle/bin/${targets[0]}" -help=1 2>&1 | head -5 >&2
    exit 2
  }
fi
# Reports name the crashing frames only where the host has llvm-symbolizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}"

# "1m2.500s" -> milliseconds
to_ms() {
  local m="${1%%m*}" s="${1#*m}"
  s="${s%s}"
  local whole="${s%%.*}" frac="${s#*.}"
  [ "$whole" = "$s" ] && frac=0
  frac="$(printf '%-3.3s' "$frac" | tr ' ' 0)"
  echo $(( (10#$m * 60 + 10#$whole) * 1000 + 10#$frac ))
}

# The figures of libFuzzer's last fork-mode status line in LOG:
# "executions crashes timeouts ooms", or "0 0 0 0".
last_status() {
  local line
  line="$(grep -E '^#[0-9]+: cov:' "$1" | tail -1 || true)"
  if [ -z "$line" ]; then echo "0 0 0 0"; return; fi
  local execs="${line%%:*}"
  execs="${execs#\#}"
  local counts
  counts="$(sed -nE 's#.*oom/timeout/crash: ([0-9]+)/([0-9]+)/([0-9]+).*#\3 \2 \1#p' <<<"$line")"
  echo "$execs ${counts:-0 0 0}"
}

summary="$out/summary.txt"
{
  echo "seam fuzz-long: $budget CPU-seconds per target over $workers workers (-fork=$workers)"
  echo "host: $(uname -srm), $cores cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  case ":$LD_LIBRARY_PATH:" in *"/lib/cxx:"*) echo "libstdc++: the bundle's" ;; *) echo "libstdc++: the host's" ;; esac
  sed -n 's/^commit: /bundle commit: /p' "$bundle/MANIFEST" 2>/dev/null || true
  echo "flags: -timeout=25 -rss_limit_mb=2048 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 $extra"
  echo
  printf '%-20s %7s %9s %9s %14s %8s %8s %6s %8s %8s %6s\n' target workers wall_s cpu_s executions \
    crashes timeouts ooms corpus0 corpus1 rounds
} >"$summary"

found_any=0
crashed_targets=()
short=""
failed=""
for t in "${targets[@]}"; do
  bin="$bundle/bin/$t"
  [ -x "$bin" ] || { echo "fuzz-long: no target $bin" >&2; exit 2; }
  corpus="$out/corpus/$t"
  if [ ! -d "$corpus" ]; then
    mkdir -p "$corpus"
    cp "$bundle/corpus/$t"/* "$corpus/" 2>/dev/null || true
  fi
  artifacts="$out/artifacts/$t"
  mkdir -p "$artifacts"
  log="$out/logs/$t.log"
  : >"$log"
  corpus0="$(find "$corpus" -type f | wc -l)"
  cpu_ms=0 wall_s=0 execs=0 crashes=0 timeouts=0 ooms=0 rounds=0
  budget_ms=$((budget * 1000))
  while [ "$rounds" -lt 4 ] && [ $((cpu_ms * 100)) -lt $((budget_ms * 95)) ]; do
    rounds=$((rounds + 1))
    left_ms=$((budget_ms - cpu_ms))
    seconds=$(( (left_ms + workers * 1000 - 1) / (workers * 1000) ))
    [ "$seconds" -ge 1 ] || seconds=1
    echo "fuzz-long: $t round $rounds: $workers workers for ${seconds}s wall" | tee -a "$log" >&2
    round_log="$out/logs/$t.round$rounds.log"
    start=$(date +%s)
    # A subshell, so that `times` counts this target's process tree only.
    # shellcheck disable=SC2086
    round_times="$(
      "$bin" -fork="$workers" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_pcs=0 -print_funcs=0 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" $extra "$corpus" >"$round_log" 2>&1
      echo "exit $?"
      times  # not in a pipeline: a pipeline's subshell would count its own children
    )"
    rc="$(sed -n 's/^exit //p' <<<"$round_times")"
    round_times="$(tail -1 <<<"$round_times")"
    wall_s=$((wall_s + $(date +%s) - start))
    read -r user sys <<<"$round_times"
    cpu_ms=$((cpu_ms + $(to_ms "$user") + $(to_ms "$sys")))
    read -r e c to o <<<"$(last_status "$round_log")"
    execs=$((execs + e)) crashes=$((crashes + c)) timeouts=$((timeouts + to)) ooms=$((ooms + o))
    cat "$round_log" >>"$log"
    rm -f "$round_log"
    # A fork-mode run with -ignore_* ends 0, or with libFuzzer's error code
    # (77) when it kept a crash; any other end, or 77 with nothing kept,
    # stopped the run itself (bad flags, the parent out of memory, ...).
    if [ "$rc" != 0 ] && { [ "$rc" != 77 ] || [ $((c + to + o)) = 0 ]; }; then
      failed="$failed $t(round $rounds: exit $rc)"
      break
    fi
  done
  [ $((cpu_ms * 100)) -ge $((budget_ms * 95)) ] || short="$short $t"
  corpus1="$(find "$corpus" -type f | wc -l)"
  artifacts_n="$(find "$artifacts" -type f | wc -l)"
  if [ "$artifacts_n" -gt 0 ] || [ $((crashes + timeouts + ooms)) -gt 0 ]; then
    found_any=1
    crashed_targets+=("$t")
  fi
  printf '%-20s %7d %9d %9s %14d %8d %8d %6d %8d %8d %6d\n' "$t" "$workers" "$wall_s" \
    "$((cpu_ms / 1000)).$(( (cpu_ms % 1000) / 100 ))" "$execs" "$crashes" "$timeouts" "$ooms" \
    "$corpus0" "$corpus1" "$rounds" >>"$summary"
done

{
  echo
  echo "crashes/timeouts/ooms: counts from libFuzzer's last status line of each round;"
  echo "corpus0/corpus1: files in the corpus before and after; executions: libFuzzer's total of all workers."
  if [ -n "$failed" ]; then
    echo "RUNS THAT FAILED (see logs/):$failed"
  fi
  if [ -n "$short" ]; then
    echo "short of the CPU budget after 4 rounds (a busy host):$short"
  fi
  if [ "$found_any" = 1 ]; then
    echo "artifacts: $(find "$out/artifacts" -type f | wc -l) inputs in crashes.tar.gz (targets: ${crashed_targets[*]})"
  else
    echo "artifacts: none"
  fi
} >>"$summary"

[ -z "$failed" ] || found_any=1
if [ -n "$(find "$out/artifacts" -type f)" ]; then
  files=(artifacts)
  for t in "${crashed_targets[@]}"; do files+=("logs/$t.log"); done
  tar -C "$out" -czf "$out/crashes.tar.gz" "${files[@]}"
fi
cat "$summary"
exit "$found_any"
