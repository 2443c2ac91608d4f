#!/usr/bin/env bash
# validate.sh must reject broken manifests: an overlay whose stage runs with
# runAsNonRoot false, and a rendered Deployment whose container has no image.
# Exit 0 when both are caught, 1 when one passes, 77 (skip) without tools.
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

kubectl kustomize "$deploy/overlays/cpu-dev" 2>/dev/null \
  | python3 -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
for d in docs:
    if d["kind"] == "Deployment":
        del d["spec"]["template"]["spec"]["containers"][0]["image"]
yaml.safe_dump_all(docs, sys.stdout, default_flow_style=False)' > "$work/no-image.yaml" 2>/dev/null

fail=0
check() {  # name, expected message, target
  local out rc
  out="$(bash "$deploy/validate.sh" "$3" 2>&1)"; rc=$?
  if [ "$rc" -eq 77 ]; then echo "$out"; exit 77; fi
  if [ "$rc" -ne 0 ] && grep -q -- "$2" <<<"$out"; then
    echo "broken: ok: $1 caught ($2)"
  else
    echo "broken: FAIL: $1 not caught (rc $rc)"; echo "$out"; fail=1
  fi
}
check "stage with runAsNonRoot false" "runAsNonRoot must be true" "$work/root-stage"
check "coordinator without image" "image missing" "$work/no-image.yaml"
exit "$fail"
