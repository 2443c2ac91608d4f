#!/usr/bin/env bash
# validate.sh must reject broken manifests: an overlay whose stage runs with
# runAsNonRoot false, and a rendered Deployment whose container has no image
# (both caught by check_manifests.py); and two that only the OpenAPI schema
# validator (deploy/schema/validate.mjs) catches, where check_manifests.py
# finds no problem: an overlay whose coordinator Deployment has
# `replicas: "two"`, and the LeaderWorkerSet overlay with a worker container's
# imagePullPolicy `Sometimes` (checked as a core/v1 PodTemplateSpec). Also
# that the Dockerfile lint rejects the CPU image without its USER line.
# Exit 0 when all are caught, 1 when one passes, 77 (skip) without tools.
set -uo pipefail
deploy="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/root-stage"
cat > "$work/root-stage/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$work/root-stage" "$deploy/overlays/cpu-dev")
patches:
  - target:
      kind: StatefulSet
      name: seam-stage
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/securityContext/runAsNonRoot
        value: false
YAML

patched() {  # dir, base overlay, kind, name, path, JSON value
  mkdir -p "$work/$1"
  cat > "$work/$1/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$work/$1" "$deploy/overlays/$2")
patches:
  - target:
      kind: $3
      name: $4
    patch: |-
      - op: replace
        path: $5
        value: $6
YAML
}
patched replicas-string cpu-dev Deployment seam-coordinator /spec/replicas '"two"'
patched lws-pull-policy gpu-lws LeaderWorkerSet seam \
  /spec/leaderWorkerTemplate/workerTemplate/spec/containers/0/imagePullPolicy Sometimes

kubectl kustomize "$deploy/overlays/cpu-dev" 2>/dev/null \
  | python3 -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
for d in docs:
    if d["kind"] == "Deployment":
        del d["spec"]["template"]["spec"]["containers"][0]["image"]
yaml.safe_dump_all(docs, sys.stdout, default_flow_style=False)' > "$work/no-image.yaml" 2>/dev/null

fail=0
check() {  # name, expected message, target[, schema-only]
  local out rc
  out="$(bash "$deploy/validate.sh" "$3" 2>&1)"; rc=$?
  if [ "$rc" -eq 77 ]; then echo "$out"; exit 77; fi
  if [ -n "${4:-}" ] && ! grep -q "^check_manifests: .* 0 problems" <<<"$out"; then
    echo "broken: FAIL: $1: expected check_manifests.py to pass it (schema-only case)"; echo "$out"; fail=1
  elif [ "$rc" -ne 0 ] && grep -q -F -- "$2" <<<"$out"; then
    echo "broken: ok: $1 caught ($2)"
  else
    echo "broken: FAIL: $1 not caught (rc $rc)"; echo "$out"; fail=1
  fi
}
check "stage with runAsNonRoot false" "runAsNonRoot must be true" "$work/root-stage"
check "coordinator without image" "image missing" "$work/no-image.yaml"
check "coordinator replicas \"two\"" \
  'Deployment seam-dev/seam-coordinator (apps/v1): spec.replicas: must be integer (got "two")' \
  "$work/replicas-string" schema-only
check "LWS worker imagePullPolicy Sometimes" \
  'LeaderWorkerSet seam/seam (leaderworkerset.x-k8s.io/v1): spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].imagePullPolicy: must be equal to one of the allowed values ("Always", "IfNotPresent", "Never") (got "Sometimes")' \
  "$work/lws-pull-policy" schema-only

# Dockerfile lint: the CPU image with its USER line removed runs as root.
if [ -f "$deploy/schema/node_modules/dockerfile-utils/package.json" ]; then
  grep -v '^USER ' "$deploy/docker/cpu.Dockerfile" > "$work/root.Dockerfile"
  out="$(node "$deploy/schema/dockerfile-lint.mjs" "$work/root.Dockerfile" 2>&1)"; rc=$?
  if [ "$rc" -ne 0 ] && grep -q -F "the final stage has no USER: it runs as root [root-user]" <<<"$out"; then
    echo "broken: ok: Dockerfile without USER caught"
  else
    echo "broken: FAIL: Dockerfile without USER not caught (rc $rc)"; echo "$out"; fail=1
  fi
else
  echo "broken: FAIL: deploy/schema node modules missing; run: bash scripts/install-deps.sh"; fail=1
fi
exit "$fail"
