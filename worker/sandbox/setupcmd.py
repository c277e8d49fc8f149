"""The setup command a repository gets when its ``.ribbit.yml`` names none.

A team that adds the label and nothing else should still get its dependencies
installed, as it would by following the project's own contributing notes: the usual
install for each ecosystem found at the top of the tree, in a fixed order (Python,
Node.js, Go, Rust), joined with ``&&``. Each rule reads only files of the base commit;
nothing here runs the repository's code. The command then runs like a hand-written one
(worker/sandbox/setup.py): in the job's virtualenv, with the registry-only proxy.

- Python: a package (``pyproject.toml`` with ``[project]``, ``[build-system]`` or
  Poetry's table; ``setup.py``; ``setup.cfg``; a ``src/`` layout is no different) is
  installed editable, with its test extra when it declares one (``test``, ``tests`` or
  ``testing``) and the extras its test environment names; the requirements of that
  environment go on the same ``pip install``, a package or not. The environment is the
  first declared of: a PEP 735 test group, a hatch test environment, a pdm test group,
  tox's ``[testenv]``, nox's ``tests`` session, then (with no test extra) a ``dev``
  group (worker/sandbox/testenvs.py has the order and why). A test requirements file
  (``requirements-dev.txt`` and the usual spellings) is installed too, unless the
  environment's own ``-r`` names it; a plain ``requirements.txt`` only when there is no
  package (the package's metadata names its own dependencies, and a pinned application
  file can fight them). An environment that cannot be installed as written (a cycle, a
  placeholder only its tool fills in, a path out of the tree) makes a step that fails,
  saying so.
- Node.js: npm, pnpm or yarn as ``packageManager`` or the lock file says, the lock
  honoured (worker/sandbox/nodesetup.py), when ``package.json`` declares any dependency.
- Go: ``go mod download`` when ``go.sum`` lists any module.
- Rust: ``cargo fetch`` when ``Cargo.toml`` has a dependency that is not a local path.

``.ribbit.yml`` always wins, ``setup: ""`` included (nothing to install), and a
deployment can turn detection off (``RIBBIT_SANDBOX__DETECT_SETUP``).
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Callable
from configparser import ConfigParser
from configparser import Error as ConfigParserError
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.hostgit import run_git
from worker.repo_config import RepoConfig
from worker.sandbox.depgroups import DependencyGroupError
from worker.sandbox.nodesetup import NODE_FILES, node_install
from worker.sandbox.testenvs import TestEnvironmentError, tests_environment

# Manifests larger than this are not read: a real one is a few KiB, and the tree is
# untrusted content.
_MAX_MANIFEST_BYTES = 1 << 20
_TEST_EXTRAS = ("test", "tests", "testing")
_TEST_REQUIREMENTS = (
    "requirements-dev.txt",
    "requirements_dev.txt",
    "requirements-test.txt",
    "requirements_test.txt",
    "requirements-tests.txt",
    "test-requirements.txt",
    "dev-requirements.txt",
    "requirements/dev.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
)
# Files a test environment's error can name first (else it is pyproject.toml's).
_DECLARING_FILES = ("pyproject.toml", "hatch.toml", "tox.ini", "setup.cfg", "noxfile.py")


@dataclass(frozen=True)
class DetectedSetup:
    """One ecosystem's install step and the file that called for it."""

    command: str
    source: str


# Reads one file of the repository by its path from the top: its text, or None when it
# is absent, not a regular file (a link could point out of the checkout) or huge.
RepoFiles = Callable[[str], "str | None"]


def tree_files(tree: Path) -> RepoFiles:
    """The files of a checkout on disk."""

    def read(name: str) -> str | None:
        path = tree / name
        try:
            if path.is_symlink() or not path.is_file():
                return None
            if path.stat().st_size > _MAX_MANIFEST_BYTES:
                return None
            return path.read_text(errors="replace")
        except OSError:
            return None

    return read


def commit_files(repo_dir: Path, rev: str) -> RepoFiles:
    """The files of commit ``rev`` in a local clone, whatever its working tree holds
    (the trainer reads old commits of a clone checked out elsewhere)."""
    listed: dict[str, tuple[str, int]] | None = None

    def listing() -> dict[str, tuple[str, int]]:
        # One ls-tree for every name a rule may ask for: mode, object and size each. A
        # revision that reads as an option is no commit (and must not reach git's argv).
        out = (
            None
            if rev.startswith("-")
            else run_git(repo_dir, "ls-tree", "-z", "--long", rev, "--", *_CANDIDATES)
        )
        found: dict[str, tuple[str, int]] = {}
        if out is not None and out.returncode == 0:
            for entry in out.stdout.decode(errors="replace").split("\0"):
                meta, _, name = entry.partition("\t")
                parts = meta.split()
                if len(parts) == 4 and parts[0] in ("100644", "100755") and parts[3].isdigit():
                    found[name] = (parts[2], int(parts[3]))
        return found

    def read(name: str) -> str | None:
        nonlocal listed
        if listed is None:
            listed = listing()
        blob = listed.get(name)
        if blob is None or blob[1] > _MAX_MANIFEST_BYTES:
            return None
        out = run_git(repo_dir, "cat-file", "blob", blob[0])
        return out.stdout.decode(errors="replace") if out.returncode == 0 else None

    return read


def _toml(files: RepoFiles, name: str) -> dict[str, Any] | None:
    text = files(name)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _python_test_extra(pyproject: dict[str, Any] | None, files: RepoFiles) -> str | None:
    extras: set[str] = set()
    if pyproject:
        project = pyproject.get("project")
        if isinstance(project, dict) and isinstance(project.get("optional-dependencies"), dict):
            extras |= set(project["optional-dependencies"])
        tool = pyproject.get("tool")
        poetry = tool.get("poetry") if isinstance(tool, dict) else None
        if isinstance(poetry, dict) and isinstance(poetry.get("extras"), dict):
            extras |= set(poetry["extras"])
    cfg_text = files("setup.cfg")
    if cfg_text is not None:
        parser = ConfigParser(interpolation=None)
        try:
            parser.read_string(cfg_text)
        except ConfigParserError:
            pass
        else:
            if parser.has_section("options.extras_require"):
                extras |= set(parser["options.extras_require"])
    return next((name for name in _TEST_EXTRAS if name in extras), None)


def _python_package(pyproject: dict[str, Any] | None, files: RepoFiles) -> str | None:
    """The file that makes the tree a Python package, or None for no package."""
    tool = pyproject.get("tool") if pyproject else None
    if pyproject and (
        "project" in pyproject
        or "build-system" in pyproject
        or (isinstance(tool, dict) and isinstance(tool.get("poetry"), dict))
    ):
        return "pyproject.toml"
    return next((name for name in ("setup.py", "setup.cfg") if files(name) is not None), None)


def _python(files: RepoFiles) -> list[DetectedSetup]:
    pyproject = _toml(files, "pyproject.toml")
    package = _python_package(pyproject, files)
    extra = _python_test_extra(pyproject, files) if package else None
    try:
        env = tests_environment(pyproject or {}, files, has_test_extra=extra is not None)
    except (DependencyGroupError, TestEnvironmentError) as exc:
        where = "" if str(exc).startswith(_DECLARING_FILES) else "pyproject.toml "
        return [DetectedSetup(_fail(f"{where}{exc}"), "pyproject.toml")]
    found: list[DetectedSetup] = []
    args: list[str] = []
    if package:
        extras = list(env.extras if env else ()) + ([extra] if extra else [])
        chosen = ",".join(dict.fromkeys(extras))
        args = ["-e", f".[{chosen}]" if chosen else "."]
    if env is not None:
        args += list(env.requirements)
        for flag, paths in (("-r", env.requirement_files), ("-c", env.constraint_files)):
            args += [word for path in paths for word in (flag, path)]
    if args:
        command = "pip install " + " ".join(shlex.quote(arg) for arg in args)
        source = package or (env.source.split(" ", 1)[0] if env else "pyproject.toml")
        found.append(DetectedSetup(command, source))
    requirements = next((n for n in _TEST_REQUIREMENTS if files(n) is not None), None)
    if requirements is None and not package and files("requirements.txt") is not None:
        requirements = "requirements.txt"
    # The environment's own `-r` already installs it.
    if requirements is not None and requirements not in (env.requirement_files if env else ()):
        found.append(DetectedSetup(f"pip install -r {shlex.quote(requirements)}", requirements))
    return found


def _fail(reason: str) -> str:
    """A set-up step that fails, saying why: detection found what the tests need but
    cannot install it, and installing less would only fail later, further from the cause."""
    message = f"ribbit: cannot install the test dependencies: {reason}"
    hint = "fix it, or set `setup` in .ribbit.yml"
    return f"printf '%s\\n' {shlex.quote(message)} {shlex.quote(hint)} >&2 && false"


def _node(files: RepoFiles) -> list[DetectedSetup]:
    found = node_install(files, _fail)
    if found is None:
        return []
    command, source = found
    return [DetectedSetup(command, source)]


def _go(files: RepoFiles) -> list[DetectedSetup]:
    if files("go.mod") is None:
        return []
    sums = files("go.sum")
    if sums is None or not sums.strip():
        return []
    return [DetectedSetup("go mod download", "go.sum")]


def _cargo_needs_fetch(manifest: dict[str, Any]) -> bool:
    tables: list[Any] = [manifest.get(k) for k in _CARGO_DEP_TABLES]
    targets = manifest.get("target")
    if isinstance(targets, dict):
        for target in targets.values():
            if isinstance(target, dict):
                tables += [target.get(k) for k in _CARGO_DEP_TABLES]
    workspace = manifest.get("workspace")
    if isinstance(workspace, dict):
        tables.append(workspace.get("dependencies"))
    for table in tables:
        if not isinstance(table, dict):
            continue
        for spec in table.values():
            # `name = "1.0"` or a table without `path`: fetched from a registry or git.
            if not isinstance(spec, dict) or "path" not in spec:
                return True
    return False


_CARGO_DEP_TABLES = ("dependencies", "dev-dependencies", "build-dependencies")


def _rust(files: RepoFiles) -> list[DetectedSetup]:
    manifest = _toml(files, "Cargo.toml")
    if manifest is None or not _cargo_needs_fetch(manifest):
        return []
    return [DetectedSetup("cargo fetch", "Cargo.toml")]


_RULES: tuple[Callable[[RepoFiles], list[DetectedSetup]], ...] = (_python, _node, _go, _rust)
# Every file a rule reads, so a commit's listing is one git call.
_CANDIDATES: tuple[str, ...] = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    *_TEST_REQUIREMENTS,
    "hatch.toml",
    "tox.ini",
    "noxfile.py",
    *NODE_FILES,
    "go.mod",
    "go.sum",
    "Cargo.toml",
)


def detect_setup(files: RepoFiles | Path) -> list[DetectedSetup]:
    """The usual install steps for a repository (a checkout, or a reader of a commit's
    files), in order."""
    read = tree_files(files) if isinstance(files, Path) else files
    return [step for rule in _RULES for step in rule(read)]


def with_detected_setup(
    config: RepoConfig, files: RepoFiles | Path, *, enabled: bool = True
) -> RepoConfig:
    """``config`` with ``setup`` filled from the tree when ``.ribbit.yml`` sets none.

    A ``setup`` key in the file wins, even empty (the team says there is nothing to
    install); so does a deployment that turned detection off."""
    if not enabled or "setup" in config.model_fields_set:
        return config
    steps = detect_setup(files)
    if not steps:
        return config
    # model_copy marks `setup` as set, so calling this again on its result changes nothing.
    return config.model_copy(update={"setup": " && ".join(step.command for step in steps)})
