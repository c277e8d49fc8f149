"""The install a Node.js repository gets with no ``setup`` in ``.ribbit.yml``: npm's,
pnpm's or yarn's, each with its lock file honoured.

Which manager, in this order: the one ``package.json``'s ``packageManager`` names
(``pnpm@9.1.0``); else the first lock file found of ``package-lock.json``,
``npm-shrinkwrap.json`` (``npm ci``), ``pnpm-lock.yaml`` (``pnpm install
--frozen-lockfile``), ``yarn.lock`` (``yarn install --frozen-lockfile``, or
``--immutable`` for yarn 2+, whose lock file starts with ``__metadata``); else ``npm
install``. Nothing is installed when ``package.json`` declares no dependency.

Ribbit's sandbox image has npm only (Debian's nodejs ships no corepack). pnpm and yarn
run from ``PATH`` when the sandbox has them (bubblewrap shows the host's), else through
corepack when that is there (it fetches the manager from the npm registry, through the
registry proxy); with neither, the step fails saying so rather than installing with npm,
which would ignore the lock file the repository's tests were run with.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable

Reader = Callable[[str], "str | None"]
# A failing shell step that prints its reason (worker/sandbox/setupcmd.py's).
Failure = Callable[[str], str]

# npm's own checks that need a network and change nothing on disk.
NPM_FLAGS = "--no-audit --no-fund"
_LOCKS = (
    ("package-lock.json", "npm"),
    ("npm-shrinkwrap.json", "npm"),
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
)
# Every file this module reads.
NODE_FILES = ("package.json", *(lock for lock, _ in _LOCKS))


def node_install(files: Reader, fail: Failure) -> tuple[str, str] | None:
    """The install command and the file that called for it, or None for no install."""
    manifest = _manifest(files)
    if manifest is None:
        return None
    named = manifest.get("packageManager")
    manager, _, version = named.partition("@") if isinstance(named, str) else ("", "", "")
    if manager not in ("npm", "pnpm", "yarn"):
        manager, version = "", ""  # bun, a typo: the lock files decide
    lock = next(
        (name for name, owner in _LOCKS if (owner == manager or not manager) and files(name)),
        None,
    )
    manager = manager or dict(_LOCKS).get(lock or "", "npm")
    source = lock or "package.json"
    if manager == "npm":
        return (f"npm ci {NPM_FLAGS}" if lock else f"npm install {NPM_FLAGS}", source)
    if manager == "pnpm":
        args = "install --frozen-lockfile" if lock else "install"
        return _via_path_or_corepack("pnpm", args, source, fail), source
    berry = (version and not version.startswith("1.")) or (
        lock is not None and "__metadata:" in (files(lock) or "")
    )
    args = "install --immutable" if berry else "install --frozen-lockfile"
    return _via_path_or_corepack("yarn", args if lock else "install", source, fail), source


def _manifest(files: Reader) -> dict[str, object] | None:
    """``package.json`` when it declares a dependency to install."""
    text = files("package.json")
    if text is None:
        return None
    try:
        manifest = json.loads(text)
    except ValueError:
        return None
    if not isinstance(manifest, dict):
        return None
    declared = any(
        isinstance(manifest.get(key), dict) and manifest[key]
        for key in ("dependencies", "devDependencies", "optionalDependencies")
    )
    return manifest if declared else None


def _via_path_or_corepack(tool: str, args: str, source: str, fail: Failure) -> str:
    missing = fail(
        f"{source} asks for {tool}, and this sandbox has neither {tool} nor corepack "
        f"(Ribbit's sandbox image ships npm only)"
    )
    quoted = shlex.quote(tool)
    return (
        f"if command -v {quoted} >/dev/null 2>&1; then {tool} {args}; "
        f"elif command -v corepack >/dev/null 2>&1; then "
        f"COREPACK_ENABLE_DOWNLOAD_PROMPT=0 corepack {tool} {args}; "
        f"else {missing}; fi"
    )
