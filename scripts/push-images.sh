#!/usr/bin/env bash
# Builds Ribbit's three images, pushes them to a registry, and prints the Helm values that
# name them (deploy/README.md, "Kubernetes (Helm)"):
#
#   REGISTRY/ribbit:TAG          web, beat, the db-upgrade and model-pull Jobs (CPU torch)
#   REGISTRY/ribbit:TAG-gpu      workers and the trainer (CUDA torch, the gpu extra)
#   REGISTRY/ribbit-sandbox:TAG  what each job's commands run in
#
# Usage: scripts/push-images.sh [--engine podman|docker] [--print] REGISTRY [TAG]
#   REGISTRY  where to push, e.g. registry.example.com/team (log in first)
#   TAG       default: the chart's appVersion
#   --print   only print the values (no build, no push), e.g. inside `helm install ... $(...)`
# Environment: RIBBIT_TORCH_VARIANT (the GPU image's torch wheels, default cu126).
#
# Only the values go to stdout (the engine's output goes to stderr), so
#   helm install rb deploy/helm/ribbit $(scripts/push-images.sh registry.example.com/team)
# builds, pushes and installs what it pushed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
engine=""
print_only=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) engine=$2; shift ;;
    --print) print_only=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "push-images: unknown option $1" >&2; exit 2 ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [ ${#args[@]} -lt 1 ] || [ ${#args[@]} -gt 2 ]; then
  echo "usage: scripts/push-images.sh [--engine podman|docker] [--print] REGISTRY [TAG]" >&2
  exit 2
fi
registry=${args[0]%/}
# The chart's own default tag: an install without --set image.tag asks for this one.
tag=${args[1]:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/deploy/helm/ribbit/Chart.yaml")}
torch_variant=${RIBBIT_TORCH_VARIANT:-cu126}
# ribbit_build_info's commit label (deploy/Dockerfile): the image has no checkout to ask.
commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)

app="$registry/ribbit:$tag"
gpu="$registry/ribbit:$tag-gpu"
sandbox="$registry/ribbit-sandbox:$tag"

if [ "$print_only" = 0 ]; then
  if [ -z "$engine" ]; then
    if command -v podman >/dev/null; then engine=podman
    elif command -v docker >/dev/null; then engine=docker
    else echo "push-images: neither podman nor docker is installed" >&2; exit 1
    fi
  fi
  run() { echo "push-images: $*" >&2; "$@" >&2; }
  # The same builds as deploy/README.md's ("The image") and Compose's GPU services; the
  # sandbox from its Dockerfile (build-image.sh's Podman route needs root and debootstrap,
  # and a registry you push to can serve the base image anyway).
  run "$engine" build -f "$root/deploy/Dockerfile" --build-arg "RIBBIT_COMMIT=$commit" \
    -t "$app" "$root"
  run "$engine" build -f "$root/deploy/Dockerfile" --build-arg "RIBBIT_COMMIT=$commit" \
    --build-arg "TORCH_VARIANT=$torch_variant" --build-arg RIBBIT_EXTRAS=postgres,gpu \
    -t "$gpu" "$root"
  run "$engine" build -f "$root/deploy/sandbox/Dockerfile" -t "$sandbox" "$root/deploy/sandbox"
  for image in "$app" "$gpu" "$sandbox"; do
    run "$engine" push "$image"
  done
fi

# The chart's image keys (values.yaml: image, gpuImage, sandbox.image).
echo "--set image.repository=$registry/ribbit --set image.tag=$tag" \
  "--set gpuImage.repository=$registry/ribbit --set gpuImage.tag=$tag-gpu" \
  "--set sandbox.image=$sandbox"
