#!/usr/bin/env bash
# Builds every libFuzzer target with clang (SEAM_FUZZ=ON, docs/FUZZING.md)
# and packs what a Linux host without seam's dependencies needs to run them
# with scripts/fuzz-long.sh:
#
#   OUT_DIR/bin/<target>          the fuzz targets (debug line tables kept,
#                                 so a crash names files and lines when the
#                                 host has llvm-symbolizer)
#   OUT_DIR/lib/                  the shared libraries they load (from ldd),
#                                 less libc, libm, libdl, librt, libpthread,
#                                 libresolv and the loader, which are the
#                                 host's own; libstdc++ and libgcc_s go to
#                                 lib/cxx/, which fuzz-long.sh adds only when
#                                 the host's own do not load the targets (the
#                                 bundled libstdc++ needs glibc 2.36, the
#                                 targets themselves less)
#   OUT_DIR/corpus/<target>/      each target's committed seed corpus
#   OUT_DIR/fuzz-long.sh          the long-run driver
#   OUT_DIR/MANIFEST              targets, commit, compiler, glibc needed
# and the same as OUT_DIR.tar.gz beside it (one file to copy).
#
# Usage: scripts/fuzz-bundle.sh [BUILD_DIR=build-fuzz] [OUT_DIR=fuzz-bundle]
# JOBS (default 2) bounds the build; MAX_MIB (default 30) the tarball.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${1:-build-fuzz}"
OUT_DIR="${2:-fuzz-bundle}"
JOBS="${JOBS:-2}"
MAX_MIB="${MAX_MIB:-30}"

# target -> seed corpus (the table of docs/FUZZING.md).
declare -A CORPUS=(
  [handoff_header_fuzz]=stage_server/handoff/fuzz/corpus
  [tensor_desc_fuzz]=stage_server/handoff/fuzz/tensor_desc_corpus
  [request_fuzz]=coordinator/fuzz/request_corpus
  [model_config_fuzz]=weights/fuzz/config_corpus
  [safetensors_fuzz]=weights/fuzz/safetensors_corpus
  [tokenizer_fuzz]=tokenizer/fuzz/corpus
  [chat_template_fuzz]=chat_template/fuzz/corpus
  [openai_request_fuzz]=coordinator/fuzz/openai_request_corpus
)
mapfile -t TARGETS < <(printf '%s\n' "${!CORPUS[@]}" | sort)

for tool in clang clang++ cmake ninja ldd strip; do
  command -v "$tool" >/dev/null || { echo "fuzz-bundle: $tool is not on PATH" >&2; exit 1; }
done
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
  -DSEAM_CUDA=OFF -DSEAM_BUILD_TESTS=OFF -DSEAM_FUZZ=ON >/dev/null
echo "fuzz-bundle: building ${TARGETS[*]} in $BUILD_DIR"
ninja -C "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}"

rm -rf "$OUT_DIR" "$OUT_DIR.tar.gz"
mkdir -p "$OUT_DIR/bin" "$OUT_DIR/lib/cxx" "$OUT_DIR/corpus"

for t in "${TARGETS[@]}"; do
  bin="$BUILD_DIR/bin/$t"
  [ -x "$bin" ] || { echo "fuzz-bundle: $bin was not built" >&2; exit 1; }
  cp "$bin" "$OUT_DIR/bin/$t"
  # Keep file and line tables for crash reports, drop the rest of the DWARF.
  strip --strip-debug --keep-section=.debug_line --keep-section=.debug_line_str \
    --keep-section=.debug_str --keep-section=.debug_info --keep-section=.debug_abbrev \
    --keep-section=.debug_rnglists --keep-section=.debug_ranges --keep-section=.debug_addr \
    --keep-section=.debug_str_offsets "$OUT_DIR/bin/$t" 2>/dev/null || strip --strip-debug "$OUT_DIR/bin/$t"
  src="${CORPUS[$t]}"
  [ -d "$src" ] || { echo "fuzz-bundle: no seed corpus $src for $t" >&2; exit 1; }
  mkdir -p "$OUT_DIR/corpus/$t"
  cp "$src"/* "$OUT_DIR/corpus/$t/"
done
# openai_request_fuzz reads Qwen3's tokenizer and chat template
# ($SEAM_TOKENIZER_FIXTURES, which fuzz-long.sh points here).
mkdir -p "$OUT_DIR/fixtures/tokenizer"
cp -r tests/fixtures/tokenizer/qwen3 "$OUT_DIR/fixtures/tokenizer/"

host_lib() {
  case "$1" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libresolv.so*|ld-linux*|linux-vdso*) return 0 ;;
  esac
  return 1
}

# Every library a target loads, found by ldd, copied under its soname.
declare -A seen=()
for f in "$OUT_DIR"/bin/*; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    host_lib "$name" && continue
    if [ "$path" = "not" ]; then
      echo "fuzz-bundle: $f needs $name, which ldd does not find" >&2
      exit 1
    fi
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    dest="$OUT_DIR/lib/$name"
    case "$name" in libstdc++.so*|libgcc_s.so*) dest="$OUT_DIR/lib/cxx/$name" ;; esac
    cp -L "$path" "$dest"
    chmod u+w "$dest"
    strip --strip-debug "$dest" 2>/dev/null || true
  done < <(ldd "$f")
done

cp scripts/fuzz-long.sh "$OUT_DIR/fuzz-long.sh"

# The newest glibc symbol version the targets and lib/ ask for (lib/cxx/
# aside): the host needs at least that glibc.
glibc_needed="$(for f in "$OUT_DIR"/bin/* "$OUT_DIR"/lib/*.so*; do
    objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' || true
  done | sort -uV | tail -1)"
{
  echo "seam fuzz bundle"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) by $(clang --version | head -1)"
  echo "host glibc needed: ${glibc_needed:-unknown} or later (x86-64 Linux)"
  echo "targets:"
  for t in "${TARGETS[@]}"; do
    echo "  $t  seeds $(find "$OUT_DIR/corpus/$t" -type f | wc -l) from ${CORPUS[$t]}"
  done
  echo "libraries: $(cd "$OUT_DIR/lib" && ls -- *.so* | tr '\n' ' ')"
  echo "lib/cxx (only when the host's do not load the targets): $(cd "$OUT_DIR/lib/cxx" && ls | tr '\n' ' ')"
} >"$OUT_DIR/MANIFEST"

tar -C "$(dirname "$OUT_DIR")" -czf "$OUT_DIR.tar.gz" "$(basename "$OUT_DIR")"
unpacked_kib=$(du -sk "$OUT_DIR" | cut -f1)
packed_kib=$(du -k "$OUT_DIR.tar.gz" | cut -f1)
echo "fuzz-bundle: ${#TARGETS[@]} targets, ${#seen[@]} libraries, $((unpacked_kib / 1024)) MiB in $OUT_DIR," \
     "$((packed_kib / 1024)) MiB as $OUT_DIR.tar.gz (glibc ${glibc_needed:-?} or later)"
if [ "$packed_kib" -gt $((MAX_MIB * 1024)) ]; then
  echo "fuzz-bundle: warning: $OUT_DIR.tar.gz is over ${MAX_MIB} MiB" >&2
fi
