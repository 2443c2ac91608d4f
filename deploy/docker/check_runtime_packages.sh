#!/usr/bin/env bash
# Checks that the runtime stage of a Dockerfile installs every shared library
# the given binaries load: each library ldd finds belongs (dpkg -S) to a
# package the stage names in `apt-get install`, to a dependency of one
# (Depends/Pre-Depends, followed through the packages installed here), or to
# a package of Priority required, which debian:12-slim already holds.
# Libraries of the CUDA toolkit (/usr/local/cuda, not packaged) are left to
# the CUDA image and only listed.
#
# Run it where the binaries were built (the Dockerfile's build stage runs it
# on what it installs, and ctest `docker_runtime_packages` on this tree's).
# Usage: check_runtime_packages.sh DOCKERFILE BINARY...
# Exit status: 0 when every library is covered, 1 when some are not, 2 on misuse.
set -euo pipefail
[ "$#" -ge 2 ] || { echo "usage: $0 DOCKERFILE BINARY..." >&2; exit 2; }
dockerfile="$1"
shift
for tool in ldd dpkg dpkg-query awk; do
  command -v "$tool" >/dev/null || { echo "check_runtime_packages: $tool is missing" >&2; exit 2; }
done

# Packages named by apt-get install in the stage "AS runtime" (versions cut).
named="$(awk '
  tolower($0) ~ /^from .* as runtime/ { in_stage = 1; next }
  /^FROM / { in_stage = 0 }
  in_stage { line = line " " $0 }
  END { print line }' "$dockerfile" | tr -d '\\' |
  sed -nE 's/.*apt-get install([^&]*).*/\1/p' | tr ' ' '\n' |
  grep -E '^[a-z0-9][a-z0-9+.-]+' | grep -v '^-' | sed 's/=.*//' | sort -u)"
[ -n "$named" ] || { echo "check_runtime_packages: no apt-get install in the runtime stage of $dockerfile" >&2; exit 2; }

# The closure of the named packages over Depends and Pre-Depends (installed ones).
declare -A reached=()
declare -A via=()
queue=()
for p in $named; do reached[$p]=1; via[$p]="named"; queue+=("$p"); done
while [ "${#queue[@]}" -gt 0 ]; do
  p="${queue[0]}"
  queue=("${queue[@]:1}")
  deps="$(dpkg-query -W -f='${Depends}, ${Pre-Depends}' "$p" 2>/dev/null || true)"
  # "a (>= 1) | b, c:any" -> a b c
  for d in $(tr ',|' '\n\n' <<<"$deps" | sed -E 's/\(.*\)//; s/:any//; s/^ +//; s/ +$//' | grep -v '^$'); do
    [ -n "${reached[$d]:-}" ] && continue
    dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q 'install ok installed' || continue
    reached[$d]=1
    via[$d]="dependency of $p"
    queue+=("$d")
  done
done

missing=0
declare -A shown=()
while read -r lib; do
  case "$lib" in
    /usr/local/cuda*) echo "  CUDA toolkit  $lib (from the CUDA image)"; continue ;;
  esac
  owner="$(dpkg -S "$lib" 2>/dev/null || dpkg -S "${lib#/usr}" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null || true)"
  pkg="${owner%%:*}"
  if [ -z "$pkg" ]; then
    echo "  UNOWNED       $lib (no package holds it)"
    missing=1
    continue
  fi
  [ -n "${shown[$pkg]:-}" ] && continue
  shown[$pkg]=1
  if [ -n "${reached[$pkg]:-}" ]; then
    echo "  ok            $pkg ($lib): ${via[$pkg]}"
  elif [ "$(dpkg-query -W -f='${Priority}' "$pkg" 2>/dev/null)" = required ] ||
       [ "$(dpkg-query -W -f='${Essential}' "$pkg" 2>/dev/null)" = yes ]; then
    echo "  ok            $pkg ($lib): Priority required, in the base image"
  else
    echo "  MISSING       $pkg ($lib): not installed by the runtime stage of $dockerfile"
    missing=1
  fi
done < <(ldd "$@" | awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u)

if [ "$missing" = 0 ]; then
  echo "check_runtime_packages: every library of $* is installed by $dockerfile"
else
  echo "check_runtime_packages: FAIL: add the MISSING packages to the runtime stage of $dockerfile" >&2
fi
exit "$missing"
