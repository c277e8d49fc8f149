#!/usr/bin/env bash
# Builds Ribbit's sandbox image (default ribbit-sandbox:latest).
#
# Podman hosts (and CI, where no registry can be pulled): a Debian minbase rootfs from
# debootstrap, trimmed, with a non-root user uid 1000, imported with `podman import`.
# Docker hosts without podman: `docker build` of the Dockerfile next to this script.
#
# Usage: build-image.sh [--if-missing] [--engine podman|docker] [--image NAME:TAG]
#   --if-missing  do nothing (fast) when the image already exists.
# Environment: RIBBIT_SANDBOX_IMAGE (image name), RIBBIT_DEBIAN_MIRROR (debootstrap mirror;
# default: the first Debian URI in the apt sources, else http://deb.debian.org/debian),
# RIBBIT_DEBIAN_SUITE (default bookworm).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
image=${RIBBIT_SANDBOX_IMAGE:-ribbit-sandbox:latest}
suite=${RIBBIT_DEBIAN_SUITE:-bookworm}
if_missing=0
engine=""
while [ $# -gt 0 ]; do
  case "$1" in
    --if-missing) if_missing=1 ;;
    --engine) engine=$2; shift ;;
    --image) image=$2; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "build-image: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# Packages the sandboxed repositories' tests commonly need; keep in step with the Dockerfile.
# Go and Rust: Debian's Go 1.19 with gotestsum (per-test JUnit reports for go test), and
# rustc-web/cargo-web (1.96; bookworm's plain rustc is 1.63, too old for most crates).
# npm is not among them: bookworm's nodejs has none, install-npm.sh adds it.
packages=(python3 python3-pip python3-venv python3-pytest python-is-python3 nodejs git
          ca-certificates make gcc g++ libc6-dev pkg-config procps
          golang-go gotestsum rustc-web cargo-web)

log() { echo "build-image: $*" >&2; }

if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then engine=podman
  elif command -v docker >/dev/null; then engine=docker
  else log "neither podman nor docker is installed; nothing to build the image with"; exit 1
  fi
fi

# The image carries a hash of its recipe (this script, the Dockerfile, install-npm.sh), so
# --if-missing rebuilds an image made from an older package list.
recipe=$(cat "$0" "$here/Dockerfile" "$here/install-npm.sh" | sha256sum | cut -c1-16)
label_of() {
  "$engine" image inspect --format '{{ index .Config.Labels "org.ribbit.sandbox-recipe" }}' \
    "$image" 2>/dev/null || true
}

if [ "$if_missing" = 1 ]; then
  found=$(label_of)
  if [ "$found" = "$recipe" ]; then
    log "$image already exists ($engine, recipe $recipe); nothing to do"
    exit 0
  fi
  [ -n "$found" ] && log "$image was built from another recipe ($found); rebuilding"
fi

if [ "$engine" = docker ]; then
  log "docker build -t $image $here"
  exec docker build -t "$image" --label "org.ribbit.sandbox-recipe=$recipe" \
    -f "$here/Dockerfile" "$here"
fi

# --- podman: debootstrap + import -------------------------------------------------------
if [ "$(id -u)" != 0 ]; then
  log "debootstrap needs root; run as root or build with: docker build -t $image $here"
  exit 1
fi
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
fi

find_mirror() {
  local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  local f uri
  for f in "${files[@]}"; do
    [ -r "$f" ] || continue
    # One-line format "deb URI suite ..." and deb822 "URIs: URI"; the first plain Debian
    # archive wins (not -security, not third-party repositories).
    uri=$(grep -hoE '^(deb[[:space:]]+(\[[^]]*\][[:space:]]+)?|URIs:[[:space:]]*)[^[:space:]]+' "$f" \
          | awk '{print $NF}' | grep -E '/debian/?$' | grep -v security | head -n 1 || true)
    if [ -n "$uri" ]; then echo "$uri"; return; fi
  done
  echo "http://deb.debian.org/debian"
}
mirror=${RIBBIT_DEBIAN_MIRROR:-$(find_mirror)}

work=$(mktemp -d /var/tmp/ribbit-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
include=$(IFS=,; echo "${packages[*]}")

start=$SECONDS
log "debootstrap --variant=minbase $suite from $mirror (with ${include})"
debootstrap --variant=minbase --include="$include" "$suite" "$rootfs" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
log "debootstrap done in $((SECONDS - start)) s"

log "npm from the npm registry (install-npm.sh)"
bash "$here/install-npm.sh" "$rootfs"
chroot "$rootfs" npm --version >/dev/null || { log "npm does not run in the image"; exit 1; }

log "adding user sandbox (uid 1000), /workspace, trimming caches and docs"
chroot "$rootfs" groupadd --gid 1000 sandbox
chroot "$rootfs" useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash sandbox
install -d -o 1000 -g 1000 -m 0755 "$rootfs/workspace"
# The sandbox never runs apt; what it would need is baked in above.
rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/usr/share/locale/* "$rootfs"/tmp/* "$rootfs"/var/tmp/*
# The byte-code Debian compiled at install stays (__pycache__ under /usr/lib, 30 MB of
# the image's 1.5 GB): the root file system is read-only in the sandbox, so without it
# python compiles every module it imports again on every run.
# Commands run with a read-only root file system; git must not look for a system config.
printf '[safe]\n\tdirectory = *\n' >"$rootfs/etc/gitconfig"

old_id=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
log "podman import -> $image"
tar --numeric-owner -C "$rootfs" -c . | podman import --quiet \
  --change 'USER 1000:1000' \
  --change 'WORKDIR /workspace' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL org.ribbit.sandbox-image=1" \
  --change "LABEL org.ribbit.sandbox-recipe=$recipe" \
  - "$image" >/dev/null
# The replaced image would stay behind untagged; drop it unless a container still uses it.
if [ -n "$old_id" ]; then podman rmi "$old_id" >/dev/null 2>&1 || true; fi
size=$(podman image inspect --format '{{.Size}}' "$image")
log "built $image ($((size / 1024 / 1024)) MiB) in $((SECONDS - start)) s"
