#!/usr/bin/env bash
# Installs npm into a root file system: Debian bookworm's nodejs (18.20) comes without
# npm, and Debian's own npm package (9.2) pulls in about 300 node-* packages, where the
# npm registry's tarball is one self-contained 3 MB download with its dependencies
# bundled. Pinned by version and by the registry's sha512 integrity.
#
# Usage: install-npm.sh ROOT   (ROOT: the file system to install into, / in a Dockerfile)
# Needs python3 (downloads and checks the tarball) and tar on the running system.
# RIBBIT_NPM_REGISTRY: a mirror of the npm registry to download from (the same bytes:
# the integrity below is checked whatever the source).
set -euo pipefail

root=${1:?usage: install-npm.sh ROOT}
version=10.9.9  # npm 10.9 supports node ^18.17.0 || >=20.5.0
integrity=sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==
url=${RIBBIT_NPM_REGISTRY:-https://registry.npmjs.org}/npm/-/npm-$version.tgz

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$url" "$integrity" "$work/npm.tgz" <<'PY'
import base64, hashlib, sys, urllib.request

url, integrity, out = sys.argv[1:]
with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 (a pinned https URL)
    data = response.read()
got = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
if got != integrity:
    sys.exit(f"install-npm: {url}: integrity {got}, expected {integrity}")
with open(out, "wb") as f:
    f.write(data)
PY

dest=$root/usr/local/lib/node_modules/npm
rm -rf "$dest"
mkdir -p "$dest" "$root/usr/local/bin"
tar -xzf "$work/npm.tgz" -C "$dest" --strip-components=1 --no-same-owner
chmod -R u=rwX,go=rX "$dest"
chmod 0755 "$dest/bin/npm-cli.js" "$dest/bin/npx-cli.js"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
