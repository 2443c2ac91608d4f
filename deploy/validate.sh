#!/usr/bin/env bash
# Offline validation of seam's Kubernetes manifests (no cluster needed):
#   1. yamllint on every YAML source under deploy/ (deploy/.yamllint) and
#      deploy/schema/dockerfile-lint.mjs on deploy/docker/*.Dockerfile (only
#      without arguments),
#   2. `kubectl kustomize` renders each target,
#   3. yamllint on the rendered output,
#   4. deploy/check_manifests.py: structural check of every rendered object
#      (per-kind required fields, restricted Pod Security Standard, PP vs
#      stage pod count) and project rules,
#   5. deploy/schema/validate.mjs: every rendered object against the
#      Kubernetes OpenAPI schema (npm kubernetes-models, pinned in
#      deploy/schema/package-lock.json; LeaderWorkerSet: its pod templates
#      against the schema, the rest of its spec field by field).
# Usage: validate.sh [TARGET...]; a target is a kustomization directory or a
# plain YAML file. Default: every overlay under deploy/overlays/ and deploy/base.
# Exit: 0 valid, 1 a problem found (also when the schema validator's node
# modules are not installed: scripts/install-deps.sh installs them), 77
# kubectl, yamllint or python3-yaml is missing (ctest SKIP).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

missing=()
command -v kubectl >/dev/null 2>&1 || missing+=("kubectl")
command -v yamllint >/dev/null 2>&1 || missing+=("yamllint (Debian package yamllint; scripts/install-deps.sh)")
python3 -c 'import yaml' >/dev/null 2>&1 || missing+=("python3 yaml module (Debian package python3-yaml)")
if [ "${#missing[@]}" -gt 0 ]; then
  printf 'validate: SKIP: missing %s\n' "${missing[@]}"
  exit 77
fi

# The schema validator is part of the check, not optional: without it fail.
if ! command -v node >/dev/null 2>&1 || [ ! -f "$here/schema/node_modules/kubernetes-models/package.json" ]; then
  echo "validate: FAIL: schema validator not installed (node and deploy/schema/node_modules);" \
       "run: bash scripts/install-deps.sh   (or: npm ci --prefix deploy/schema)"
  exit 1
fi

lint() { yamllint -s -c "$here/.yamllint" "$@"; }

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=("$here/base")
  for d in "$here"/overlays/*/; do targets+=("${d%/}"); done
  echo "validate: yamllint deploy/ sources"
  mapfile -t sources < <(find "$here" -name '*.yaml' -not -path '*/.git/*' -not -path '*/node_modules/*' | sort)
  lint "${sources[@]}" || { echo "validate: FAIL: yamllint on sources"; exit 1; }
  echo "validate: Dockerfile lint deploy/docker/*.Dockerfile"
  node "$here/schema/dockerfile-lint.mjs" "$here"/docker/*.Dockerfile \
    || { echo "validate: FAIL: Dockerfile lint"; exit 1; }
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for t in "${targets[@]}"; do
  name="$(basename "$t")"
  out="$work/$name.yaml"
  if [ -d "$t" ]; then
    if ! kubectl kustomize "$t" > "$out" 2> "$work/err"; then
      echo "validate: FAIL: $t: kubectl kustomize: $(cat "$work/err")"
      status=1
      continue
    fi
  else
    cp "$t" "$out"
  fi
  if ! lint "$out"; then
    echo "validate: FAIL: $t: yamllint on rendered output"
    status=1
    continue
  fi
  ok=1
  if ! python3 "$here/check_manifests.py" "$out"; then
    echo "validate: FAIL: $t: manifest check"
    ok=0
  fi
  if ! node "$here/schema/validate.mjs" "$out"; then
    echo "validate: FAIL: $t: schema validation"
    ok=0
  fi
  if [ "$ok" -eq 1 ]; then echo "validate: ok: $t"; else status=1; fi
done
exit "$status"
