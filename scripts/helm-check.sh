#!/usr/bin/env bash
# Lint and render the Helm chart with real Helm, then validate what it renders.
# Run before publishing the chart or changing a cluster (Helm is not installable on this
# project's build machines; the tests render a checked subset of the templates instead).
#
#   scripts/helm-check.sh                       # default values, then each overlay
#   scripts/helm-check.sh -f my-values.yaml     # plus your own values
#
# Needs: helm (v3). Uses kubeconform when installed to validate against Kubernetes
# schemas (kubectl apply --dry-run=server against a cluster is the other authority).
set -euo pipefail
command -v helm >/dev/null || { echo "helm is not installed (https://helm.sh/docs/intro/install/)" >&2; exit 2; }
chart="$(cd "$(dirname "$0")/.." && pwd)/deploy/helm/ribbit"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The one value the chart has no default for (an install fails without it).
db=(--set-string "secrets.stringData.ribbit_database_url=postgresql+psycopg://ribbit:check@db/ribbit")

render() {  # name, then helm args
  local name=$1; shift
  helm lint --strict "$chart" "${db[@]}" "$@"
  helm template rb "$chart" "${db[@]}" "$@" --set keda.enabled=true --set trainer.enabled=true >"$out/$name.yaml"
  echo "rendered $name: $(grep -c '^kind:' "$out/$name.yaml") manifests"
  if command -v kubeconform >/dev/null; then
    kubeconform -strict -summary -ignore-missing-schemas "$out/$name.yaml"
  fi
}

render default "$@"
render vllm -f "$chart/values-vllm.yaml" "$@"
render sglang -f "$chart/values-sglang.yaml" "$@"
render one-gpu-node -f "$chart/values-one-gpu-node.yaml" "$@"
echo "ok: helm lint and helm template pass for the default, vLLM, SGLang and one-GPU-node values"
