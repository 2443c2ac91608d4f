#!/usr/bin/env bash
# Prints the Debian/Ubuntu packages that own the shared libraries the given
# binaries load, one per line, leaving out packages the CUDA runtime base
# image already provides (cuda-*, libcublas*, libnccl*, libcudnn*) and libc.
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
ldd "$@" | awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  dpkg -S "$lib" 2>/dev/null || dpkg -S "${lib#/usr}" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null \
    || echo "runtime-packages: no package owns $lib" >&2
done | cut -d: -f1 | sort -u \
  | grep -Ev '^(libc6|libgcc-s1|libstdc\+\+6|cuda-.*|libcublas.*|libnccl.*|libcudnn.*|libcusparse.*|libcufft.*|libcurand.*|libnvjitlink.*)$' || true
