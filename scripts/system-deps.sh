#!/usr/bin/env bash
# Installs the Debian packages Ribbit's tests and local sandboxes need, when missing.
# Safe to run repeatedly; does nothing on hosts that are not root Debian/Ubuntu.
set -euo pipefail
# python3-pytest, python3-pip, python3-venv, nodejs, Go (with gotestsum) and Rust: the
# bubblewrap sandbox runs repositories' setup and tests with the host's /usr (the set-up venv borrows its pip).
# prometheus: its promtool checks and unit-tests the alert rules in deploy/prometheus.
packages=(redis-server podman runc bubblewrap debootstrap postgresql git uidmap iproute2 python3-pytest
          python3-pip python3-venv nodejs chromium chromium-driver prometheus
          golang-go gotestsum rustc-web cargo-web)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "system-deps: missing ${missing[*]}; install them with your package manager" >&2
  exit 0
fi
echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
