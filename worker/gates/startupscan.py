"""What a test interpreter runs before Ribbit's pytest bootstrap, and the runner it then
holds still: read INSIDE the sandbox, right before a watched run, by the same interpreter
started with ``-I -S`` (no site-packages, no ``.pth`` line, no ``sitecustomize``, no
environment variable of Python's, no current folder on ``sys.path``), so nothing of the
repository or its environment runs while it reads.

The bootstrap (worker/gates/watchboot.py) is the ``-c`` program of ``python -P``: by the
time it runs, ``site`` has run every ``import`` line of every ``.pth`` file in the site
folders and imported ``sitecustomize``/``usercustomize``. Code there runs before the
channel's key exists and can be the whole run (it could write a channel of its own).
pytest, pluggy and the plugins pytest loads by entry point are what the bootstrap
snapshots as the runner. All of them live in the set-up environment, which the base's
set-up made; a set-up step that runs again over the patched tree (a copy of the package
installed again, a patch's new dependencies) can write there. So this lists each of
them with a digest of its bytes, and the host compares the patched run's list with the
base run's (worker/gates/startup.py).

Given when the set-up environment's restore into the sandbox ended, it lists every file
of the virtual environment changed since (``written`` rows), but the files of the copy
of the package pip installed again from the tree: code a build step left there runs in
the test process as installed code, which the watch does not attribute.

It lists the workspace's test files and the files that decide how its tests run as well
(``workspace`` rows): a set-up step over the patched tree runs there too, and the host
compares those rows with the tree it built (a ``conftest.py`` the patched build code
wrote is in no diff the gates read).

Prints one JSON list of ``[kind, name, digest]`` rows; its argument is the pattern of
test paths. Kept to the standard library of the sandbox's Python (3.11 or later: ``-P``
runs there only), and to reading files.
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import os
import site
import sys
from importlib.machinery import PathFinder
from typing import Any

# Inlined by worker.gates.startup.scan_source(), as the bootstrap's parts are.
from worker.gates.watchcopies import _workspace_dists  # ribbit-watch: inlined

# pytest's own distribution (pytest, _pytest and the ``py`` shim) and what it imports
# as it starts: the bootstrap holds these still as the runner.
_RUNNER = ("pytest", "_pytest", "py", "pluggy", "iniconfig")
# Files read in all, so a huge environment cannot make the scan endless.
_MAX_FILES = 200_000
# The workspace's files that decide which tests run and how (pytest's and tox's
# configuration, conftest.py, what site imports); the test files are listed too.
_DISCOVERY = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "sitecustomize.py",
        "usercustomize.py",
    }
)
# Left out of the workspace's walk: what pytest never collects from (its default
# ``norecursedirs``: build output such as setuptools' copies of the package's tests,
# which each tree's own install rewrites), installed packages, hidden folders and
# virtual environments.
_SKIPPED = (
    "node_modules",
    "__pycache__",
    "site-packages",
    "dist-packages",
    "build",
    "dist",
    "venv",
    "CVS",
    "_darcs",
    "{arch}",
)


class _Budget:
    def __init__(self) -> None:
        self.files = 0


def _file_digest(path: str, budget: _Budget) -> str:
    budget.files += 1
    if budget.files > _MAX_FILES:
        return "over-limit"
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    return digest.hexdigest()


def _tree_digest(top: str, budget: _Budget) -> str:
    """Every file under ``top`` (links named, not followed; bytecode caches left out:
    Python checks them against their sources), names and bytes together."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, top)
            if os.path.islink(path):
                what = "link:" + os.readlink(path)
            else:
                what = _file_digest(path, budget)
            digest.update(f"{rel}\0{what}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _module_digest(name: str, path: list[str], budget: _Budget) -> tuple[str, str] | None:
    """Where the top-level module ``name`` is found on ``path`` and a digest of what it
    is (a package's whole folder); None where it is not found."""
    try:
        spec = PathFinder.find_spec(name, path)
    except (ImportError, ValueError, OSError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        tops = sorted(spec.submodule_search_locations)
        digest = hashlib.sha256()
        for top in tops:
            line = f"{top}\0{_tree_digest(top, budget)}\n"
            digest.update(line.encode("utf-8", "surrogateescape"))
        return ",".join(tops), digest.hexdigest()
    if spec.origin and os.path.isfile(spec.origin):
        return spec.origin, _file_digest(spec.origin, budget)
    return None


def _venv() -> tuple[str, str] | None:
    """The virtual environment ``site`` would find (its prefix and pyvenv.cfg): beside
    the executable or one folder up, as ``site.venv`` looks."""
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    prefix = os.path.dirname(exe_dir)
    for folder in (exe_dir, prefix):
        cfg = os.path.join(folder, "pyvenv.cfg")
        if os.path.isfile(cfg):
            return prefix, cfg
    return None


def _system_site(cfg: str) -> bool:
    try:
        with open(cfg, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return True
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "include-system-site-packages":
            return value.strip().lower() == "true"
    return True


def _site_dirs() -> list[str]:
    """The folders ``site`` would process, a few more rather than one less: the virtual
    environment's, the base's where the environment sees them, the user's. Each
    prefix's ``lib/pythonX.Y/site-packages`` is named here too: a distribution's own
    ``site`` (Debian's) lists it for a virtual environment only once ``site.venv`` has
    run, which ``-S`` skips."""
    venv = _venv()
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    libdirs = list(dict.fromkeys([sys.platlibdir, "lib"]))
    prefixes: list[str] = []
    system = True
    if venv is not None:
        prefixes.append(venv[0])
        system = _system_site(venv[1])
    if system:
        prefixes += [sys.base_prefix, sys.base_exec_prefix]
    dirs: list[str] = []
    for prefix in dict.fromkeys(prefixes):
        dirs += [os.path.join(prefix, lib, version, "site-packages") for lib in libdirs]
        dirs += site.getsitepackages([prefix])
    if system:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _imported_names(line: str) -> list[str]:
    """The top-level modules an executable ``.pth`` line imports: its import statements
    and ``__import__("...")`` calls with a constant name."""
    try:
        tree = ast.parse(line)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("__import__", "import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.append(node.args[0].value)
    return [n.split(".")[0] for n in names if n]


def _pth_files(
    site_dirs: list[str], budget: _Budget
) -> tuple[list[list[str]], list[str], list[str]]:
    """Every ``.pth`` file's row, the folders their path lines add, the modules their
    import lines import (``site.addpackage``'s reading, nothing run)."""
    rows: list[list[str]] = []
    added: list[str] = []
    imported: list[str] = []
    for folder in site_dirs:
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            rows.append(["pth", path, _file_digest(path, budget)])
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            for line in lines:
                if line.startswith("#") or not line.strip():
                    continue
                if line.startswith(("import ", "import\t")):
                    imported += _imported_names(line)
                    continue
                target = os.path.join(folder, line.rstrip())
                if os.path.isdir(target):
                    added.append(target)
    return rows, added, imported


def _plugins(site_dirs: list[str]) -> list[tuple[str, str]]:
    """``(distribution, entry)`` for every ``pytest11`` entry point: the plugins pytest
    loads by itself."""
    found: list[tuple[str, str]] = []
    for folder in site_dirs:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            path = os.path.join(folder, name, "entry_points.txt")
            parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
            parser.optionxform = str  # type: ignore[assignment, method-assign]
            try:
                parser.read(path, encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError):
                found.append((name, "entry_points.txt unreadable"))
                continue
            if parser.has_section("pytest11"):
                for key, value in sorted(parser.items("pytest11")):
                    found.append((name, f"{key} = {value}"))
    return found


def _workspace_modules(dists: list[tuple[str, list[str]]]) -> set[str]:
    """The top-level modules of the distributions installed from the workspace: the
    repository's own code, wherever it was copied, is the patch's to change (a pytest
    plugin's repository, pytest's own)."""
    own: set[str] = set()
    for _info, paths in dists:
        for rel in paths:
            top = rel.split("/", 1)[0]
            if top.endswith((".dist-info", ".data")) or top in ("", "..", "."):
                continue
            own.add(top[: -len(".py")] if top.endswith(".py") else top)
    return own


def written_rows(since_ns: int, dists: list[tuple[str, list[str]]]) -> list[list[str]]:
    """Every file of the virtual environment changed after ``since_ns`` (when the
    set-up environment's restore into this sandbox ended), but the files of the
    distributions installed from the workspace: what a step after the restore (pip
    installing a copy of the package from the tree again, running its build code)
    wrote beside that copy. A file's change time is the kernel's, which no one in the
    sandbox can set back."""
    venv = _venv()
    if venv is None:
        return []
    own: set[str] = set()
    for info, paths in dists:
        folder = os.path.dirname(info)
        own.update(os.path.normpath(os.path.join(folder, rel)) for rel in paths)
    infos = tuple(info + "/" for info, _paths in dists)
    budget = _Budget()
    rows: list[list[str]] = []
    for top, dirs, files in os.walk(venv[0]):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(top, name)
            if path in own or path.startswith(infos):
                continue
            try:
                changed = os.lstat(path).st_ctime_ns
            except OSError:
                continue
            if changed > since_ns:
                what = "link:" + os.readlink(path) if os.path.islink(path) else None
                rows.append(["written", path, what or _file_digest(path, budget)])
    return rows


def workspace_rows(workspace: str, test_path: Any) -> list[list[str]]:
    """The workspace's test files and the files that decide how its tests run, each
    with a digest (``workspace`` ends with ``/``). The host reads its own tree the same
    way (worker/gates/startup.py), to see what a set-up step changed there."""
    budget = _Budget()
    rows: list[list[str]] = []
    for top, dirs, files in os.walk(workspace):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _SKIPPED
            and not d.endswith(".egg")
            and not os.path.exists(os.path.join(top, d, "pyvenv.cfg"))
        )
        for name in sorted(files):
            path = os.path.join(top, name)
            rel = path[len(workspace) :]
            tested = name.endswith(".py") and test_path.search(rel)
            if name in _DISCOVERY or name.endswith(".pth") or tested:
                if os.path.islink(path):
                    what = "link:" + os.readlink(path)
                else:
                    what = _file_digest(path, budget)
                rows.append(["workspace", rel, what])
    return rows


def scan(workspace: str, written_since: int | None = None) -> list[list[str]]:
    budget = _Budget()
    rows: list[list[str]] = []
    executable = os.path.realpath(sys.executable)
    rows.append(["interpreter", executable, _file_digest(executable, budget)])
    venv = _venv()
    if venv is not None:
        rows.append(["interpreter", venv[1], _file_digest(venv[1], budget)])
    site_dirs = _site_dirs()
    pth_rows, added, imported = _pth_files(site_dirs, budget)
    rows += pth_rows
    # sys.path as the bootstrap's interpreter has it when site is done (-P: no current
    # folder; the bootstrap appends the workspace after all of it).
    env_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = [*env_path, *sys.path, *site_dirs, *added]
    for name in sorted(set(imported)):
        found = _module_digest(name, path, budget)
        if found is not None:
            rows.append(["pth-module", f"{name} ({found[0]})", found[1]])
    for name in ("sitecustomize", "usercustomize"):
        found = _module_digest(name, path, budget)
        if found is not None:
            rows.append(["customize", f"{name} ({found[0]})", found[1]])
    dists = _workspace_dists(site_dirs, workspace)
    own = _workspace_modules(dists)

    def theirs(name: str, found: tuple[str, str]) -> bool:
        # The repository's own code (its tree, or a copy of it installed): the patch's
        # to change, judged as such; where it is and that it is there still count.
        return name in own or any(p.startswith(workspace) for p in found[0].split(","))

    for name in _RUNNER:
        found = _module_digest(name, path, budget)
        if found is not None:
            digest = "the workspace's" if theirs(name, found) else found[1]
            rows.append(["runner", f"{name} ({found[0]})", digest])
    for dist, entry in _plugins(site_dirs):
        module = entry.partition("=")[2].strip().partition(":")[0].strip().split(".")[0]
        found = _module_digest(module, path, budget) if module else None
        if found is None:
            rows.append(["plugin", f"{dist}: {entry}", "not found"])
        elif theirs(module, found):
            rows.append(["plugin", f"{dist}: {entry}", "the workspace's"])
        else:
            rows.append(["plugin", f"{dist}: {entry} ({found[0]})", found[1]])
    if written_since is not None:
        rows += written_rows(written_since, dists)
    if budget.files > _MAX_FILES:
        rows.append(["limit", f"more than {_MAX_FILES} files", ""])
    return sorted(rows)


if __name__ == "__main__":
    import re

    here = os.getcwd().rstrip("/") + "/"
    since = int(sys.argv[2]) if len(sys.argv) > 2 else None
    print(json.dumps(scan(here, since) + workspace_rows(here, re.compile(sys.argv[1], re.I))))
