#!/usr/bin/env bash
# Builds the CUDA path for sm_90 (H100/H200) and packs what a GPU machine
# without seam's Debian dependencies needs to run the tests and the CLI:
#
#   OUT_DIR/bin/  the GPU-relevant tests, the seam binaries and the
#                 benchmarks (every executable with BUNDLE_ALL=1; debug info
#                 stripped from the copies)
#   OUT_DIR/lib/  the non-system shared libraries they load (from ldd)
#   OUT_DIR/ucx/  UCX's transport modules, loaded at run time
#   OUT_DIR/gpu-run.sh
# When bin/ and lib/ together pass MAX_MIB (default 64), they are packed
# into OUT_DIR/bundle.tar.xz instead, and gpu-run.sh unpacks them there.
#
# Left out of lib/: libc, libm, libdl, librt, libpthread and the loader
# (the target's own), libcuda (the driver's), libnccl (python3's nvidia/nccl
# package there), and libcublas/libcublasLt, whose 600 MB do not fit a
# 64 MiB bundle (python3's nvidia cuBLAS package there; gpu-run.sh adds it).
# libcudart comes from this CUDA toolkit.
#
# Usage: scripts/gpu-bundle.sh [BUILD_DIR=build-gpu] [OUT_DIR=bundle]
# Then, on the GPU machine from the repo root: scripts/gpu-run.sh <command...>
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"

BUILD_DIR="${1:-build-gpu}"
OUT_DIR="${2:-bundle}"
JOBS="${JOBS:-2}"
MAX_MIB="${MAX_MIB:-64}"

cmake -S . -B "$BUILD_DIR" -G Ninja -DSEAM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90

# Every executable the configured tree defines (tests and seam binaries).
mapfile -t targets < <(ninja -C "$BUILD_DIR" -t targets all |
  sed -nE 's#^bin/([^:/]+): (CXX|CUDA)_EXECUTABLE_LINKER.*#\1#p' | sort -u)
for required in cuda_kernels_test comm_test kernels_test core_test seam; do
  if ! printf '%s\n' "${targets[@]}" | grep -qx "$required"; then
    echo "gpu-bundle: target $required is not defined in $BUILD_DIR" >&2
    exit 1
  fi
done
# By default only what a GPU run uses (BUNDLE_ALL=1 packs every executable):
# the CUDA, kernel, core, comm, model and golden tests, the seam binaries and
# the benchmarks. Every test binary links its own copy of the libraries, so
# packing all of them passes the 64 MiB a bundle may carry.
if [ "${BUNDLE_ALL:-0}" != 1 ]; then
  gpu_targets=(cuda_kernels_test comm_test ipc_allreduce_test boundary_ipc_fusion_gpu_test boundary_mhc_gpu_test kernels_test core_test runtime_test
               models_test models_two_batch_test golden_test handoff_test
               seam seam-stage seam-coordinator seam-bench-gpu seam-bench-handoff)
  # BUNDLE_TARGETS="a b c" packs only those (a bundle that must leave room
  # for the tree beside it in a 64 MiB carry).
  [ -n "${BUNDLE_TARGETS:-}" ] && read -r -a gpu_targets <<< "$BUNDLE_TARGETS"
  mapfile -t targets < <(printf '%s\n' "${targets[@]}" | grep -Fx -f <(printf '%s\n' "${gpu_targets[@]}"))
fi
echo "gpu-bundle: building ${targets[*]}"
# The required targets must build; any other executable that fails to build
# is left out of the bundle with a warning.
cmake --build "$BUILD_DIR" -j "$JOBS" --target cuda_kernels_test comm_test kernels_test core_test seam
if ! cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}" -- -k 0; then
  built=()
  for t in "${targets[@]}"; do
    if ninja -C "$BUILD_DIR" -n "bin/$t" | grep -q 'no work to do'; then
      built+=("$t")
    else
      echo "gpu-bundle: warning: $t did not build; left out" >&2
    fi
  done
  targets=("${built[@]}")
fi

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR/bin" "$OUT_DIR/lib" "$OUT_DIR/ucx"

for t in "${targets[@]}"; do
  cp "$BUILD_DIR/bin/$t" "$OUT_DIR/bin/"
  strip --strip-debug "$OUT_DIR/bin/$t"
done

# UCX's modules (uct_cma, uct_ib, ...): the .so files only.
ucx_libdir="$(pkg-config --variable=libdir ucx)"
for m in "$ucx_libdir"/ucx/*.so*; do
  cp -P "$m" "$OUT_DIR/ucx/"
done

skip_lib() {
  case "$1" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|linux-vdso*) return 0 ;;
    libnccl.so*|libcuda.so*|libcublas.so*|libcublasLt.so*) return 0 ;;
  esac
  return 1
}

# Shared libraries of every packed binary and UCX module.
declare -A seen=()
missing=0
for f in "$OUT_DIR"/bin/* "$OUT_DIR"/ucx/*.so.*.*; do
  [ -f "$f" ] || continue
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    skip_lib "$name" && continue
    if [ "$path" = "not" ]; then
      echo "gpu-bundle: $f needs $name, which ldd does not find" >&2
      missing=1
      continue
    fi
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    cp -L "$path" "$OUT_DIR/lib/$name"
    chmod u+w "$OUT_DIR/lib/$name"
    strip --strip-debug "$OUT_DIR/lib/$name" 2>/dev/null || true
  done < <(ldd "$f")
done
[ "$missing" = 0 ] || exit 1

cp scripts/gpu-run.sh "$OUT_DIR/"

size_kib=$(du -sk "$OUT_DIR" | cut -f1)
echo "gpu-bundle: ${#targets[@]} executables and $(ls "$OUT_DIR/lib" | wc -l) libraries, $((size_kib / 1024)) MiB unpacked"
# Over the limit (OpenBLAS alone is about 35 MB): bin/ and lib/ travel as
# bundle.tar.xz (xz packs these binaries ~40 % smaller than gzip, so more
# of them fit beside the tree), which gpu-run.sh unpacks on first use.
if [ "$size_kib" -gt $((MAX_MIB * 1024)) ]; then
  tar -C "$OUT_DIR" -cf - bin lib | xz -T0 -6 > "$OUT_DIR/bundle.tar.xz"
  rm -rf "$OUT_DIR/bin" "$OUT_DIR/lib"
  size_kib=$(du -sk "$OUT_DIR" | cut -f1)
  echo "gpu-bundle: bin/ and lib/ packed into $OUT_DIR/bundle.tar.xz, $((size_kib / 1024)) MiB"
fi
if [ "$size_kib" -gt $((MAX_MIB * 1024)) ]; then
  echo "gpu-bundle: $OUT_DIR is over ${MAX_MIB} MiB" >&2
  exit 1
fi
