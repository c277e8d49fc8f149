"""The install a Node.js repository gets with no ``setup`` in ``.ribbit.yml``: npm's,
pnpm's or yarn's, each with its lock file honoured.

Which manager, in this order: the one ``package.json``'s ``packageManager`` names
(``pnpm@9.1.0``); else the first lock file found of ``package-lock.json``,
``npm-shrinkwrap.json`` (``npm ci``), ``pnpm-lock.yaml`` (``pnpm install
--frozen-lockfile``), ``yarn.lock`` (``yarn install --frozen-lockfile``, or
``--immutable`` for yarn 2+, whose lock file starts with ``__metadata``); else ``npm
install``. Nothing is installed when ``package.json`` declares no dependency.

Ribbit's sandbox image has npm only (Debian's nodejs ships no corepack). pnpm and yarn
run from ``PATH`` when the sandbox has them (bubblewrap shows the host's); else npm runs
the release the repository asks for from the npm registry, through the registry proxy
(``npm exec --package=pnpm@9``: ``packageManager``'s version, else the pnpm major that
writes the lock file's format, yarn 1 for a classic ``yarn.lock``); else corepack, when
there is one (yarn 2+, which npm cannot run); with none of them the step fails saying
so rather than installing with npm, which would ignore the lock file the repository's
tests were run with. Corepack as Node 20 bundles it fails on signatures since the npm
registry rotated its keys; it comes after npm for that reason.
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
        pinned = _pnpm_release(version, files(lock) if lock else None)
        return _run_manager("pnpm", pinned, args, source, fail), source
    berry = (version and not version.startswith("1.")) or (
        lock is not None and "__metadata:" in (files(lock) or "")
    )
    args = "install --immutable" if berry else "install --frozen-lockfile"
    # yarn 2+ is no npm package to run (its releases are corepack's or the repository's).
    pinned = None if berry else f"yarn@{_exact(version) or '1'}"
    return _run_manager("yarn", pinned, args if lock else "install", source, fail), source


def _exact(version: str) -> str:
    """``9.1.0`` of packageManager's ``9.1.0+sha512.…`` (npm knows no hash suffix)."""
    return version.split("+", 1)[0]


def _pnpm_release(version: str, lock: str | None) -> str | None:
    """The pnpm to run from the npm registry: packageManager's, else the major release
    that writes the lock file's format, else None (a format Ribbit does not know)."""
    if version:
        return f"pnpm@{_exact(version)}"
    first = next((line for line in (lock or "").splitlines() if line.strip()), "")
    key, _, value = first.partition(":")
    if key.strip() != "lockfileVersion":
        return None if lock else "pnpm@9"
    major = value.strip().strip("'\"").split(".")[0]
    # pnpm 9 writes 9.0, pnpm 8 6.0, pnpm 7 5.4; a pnpm reads the formats it writes.
    return {"9": "pnpm@9", "6": "pnpm@8", "5": "pnpm@7"}.get(major)


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


def _run_manager(tool: str, pinned: str | None, args: str, source: str, fail: Failure) -> str:
    """The manager from PATH, else ``pinned`` run by npm from the registry, else
    corepack's, else a step that fails saying the sandbox has none of them."""
    lacks = (
        f"no {tool}, no npm to fetch {pinned} and no corepack"
        if pinned
        else f"no {tool} and no corepack (Ribbit's sandbox image has neither, and this "
        f"{tool} is no release npm can fetch)"
    )
    missing = fail(f"{source} asks for {tool}, and this sandbox has {lacks}")
    steps = [f"if command -v {tool} >/dev/null 2>&1; then {tool} {args}; "]
    if pinned is not None:
        steps.append(
            "elif command -v npm >/dev/null 2>&1; then "
            f"npm exec --yes {NPM_FLAGS} --package={shlex.quote(pinned)} -- {tool} {args}; "
        )
    steps.append(
        "elif command -v corepack >/dev/null 2>&1; then "
        f"COREPACK_ENABLE_DOWNLOAD_PROMPT=0 corepack {tool} {args}; "
    )
    return "".join(steps) + f"else {missing}; fi"
