"""Changes to how tests are found and run: a patch that edits them changes the
yardstick it is measured with.

A ``pytest.ini`` with ``python_files = check_*.py``, a ``conftest.py`` hook that
returns early from the run loop, a ``testpaths`` or ``addopts`` line, a jest
``testMatch``, a vitest ``test.exclude``, a Makefile ``test`` recipe, a cargo
``[[test]] harness = false`` or a ``.cargo/config.toml`` runner: each can make the old
tests vanish or report success without touching a test file. In test sources, the
lines that take tests out of a run without deleting them count too: a ``//go:build``
constraint, a ``testing.Short()`` guard or a ``TestMain`` in a Go test file, an
``#[ignore]`` in Rust, a ``.skip``/``.only``/``xit`` in a JavaScript test. The hygiene
gate reports every such change as a finding that blocks unless the repository opted
into ``warn`` (``gates.test_config_changes`` in ``.ribbit.yml``); then the test gate
also runs the patched code with the base's configuration.

What counts is decided by comparing the before and after trees (what git applied),
section by section for shared files (``setup.cfg``, ``tox.ini``, ``pyproject.toml``,
``package.json``, ``Makefile``): a patch that only adds a dependency to
``pyproject.toml`` is not a discovery change.
"""

from __future__ import annotations

import configparser
import functools
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.gates.trees import applied_changes, read_head

# Whole files whose only job is configuring a test runner (or the interpreter the
# tests run in: a ``sitecustomize.py`` or ``.pth`` file runs before any test).
_RUNNER_FILES = re.compile(
    r"(^|/)(\.?pytest\.ini|conftest\.py|noxfile\.py|sitecustomize\.py|usercustomize\.py"
    r"|[^/]*\.pth|jest\.config\.[cm]?[jt]s(on)?|vitest\.config\.[cm]?[jt]s"
    r"|vitest\.workspace\.[cm]?[jt]s|karma\.conf\.[jt]s|\.mocharc\.[a-z]+|ava\.config\.[cm]?js"
    r"|phpunit\.xml(\.dist)?|\.rspec|go\.work|\.bazelrc"
    # vite's config carries vitest's ``test`` block; cargo's config can alias
    # ``test`` or set a runner that every test binary is started through.
    r"|vite\.config\.[cm]?[jt]s|\.cargo/config(\.toml)?|\.node-test\.[cm]?js)$"
    # A module named like the runner or its parts shadows the real one when the tests
    # run from the repository root (``python -m pytest`` puts the cwd first on sys.path).
    r"|(^|/)(pytest|py|pluggy|iniconfig|unittest|nose2?|xmlrunner)\.py$"
    r"|(^|/)(_pytest|pytest|pluggy|unittest|nose2?)/"
)
_MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class DiscoveryChange:
    path: str
    what: str  # e.g. "[tool.pytest.ini_options]" or "the whole file"


def changed_paths(before: Path, after: Path) -> list[str]:
    """The paths git applied (renames split into delete + add, so both names count)."""
    del before  # the after tree's index against its HEAD is the whole change
    return [c.path for c in applied_changes(after)]


def discovery_changes(before: Path, after: Path, paths: list[str]) -> list[DiscoveryChange]:
    found: list[DiscoveryChange] = []
    for path in paths:
        name = path.rsplit("/", 1)[-1].casefold()
        if _RUNNER_FILES.search(path.casefold()):
            found.append(DiscoveryChange(path, "the whole file"))
            continue
        section = _SECTIONED.get(name) or (_makefile if name.endswith(".mk") else None)
        if section is None:
            marker = _marker_kind(path)
            if marker is not None:
                added = _added_markers(marker, _read(before, path), _read(after, path))
                if added:
                    found.append(DiscoveryChange(path, f"{marker[0]}: {added[0]!r}"))
            continue
        old, new = _read(before, path), _read(after, path)
        if section(old) != section(new):
            found.append(
                DiscoveryChange(path, _SECTION_NAMES.get(name, _SECTION_NAMES["makefile"]))
            )
    return found


def _read(tree: Path, rel: str) -> str | None:
    data = read_head(tree, rel, _MAX_CONFIG_BYTES + 1)
    return None if data is None else data.decode(errors="replace")


def _ini_sections(text: str | None) -> Any:
    if text is None:
        return None
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return ("unreadable", text)  # any edit of an unreadable file counts
    return {
        name: dict(parser.items(name))
        for name in parser.sections()
        if name in {"pytest", "tool:pytest", "coverage:run"} or name.startswith("testenv")
    }


def _toml_reader(pick: Callable[[dict[str, Any]], Any]) -> Callable[[str | None], Any]:
    """What ``pick`` takes from a TOML file; None where there is no file, and the text
    itself where it does not parse (any edit of an unreadable file counts). The reader
    keeps ``pick``'s name and docstring but takes the file's text, as callers pass it."""

    # Not pick's annotations (wraps copies them): the reader's own say what it takes.
    @functools.wraps(pick, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
    def read(text: str | None) -> Any:
        if text is None:
            return None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return ("unreadable", text)
        return pick(data)

    # wraps would point inspect.signature at pick's (data: dict); callers pass the text.
    del read.__wrapped__
    return read


@_toml_reader
def _pyproject(data: dict[str, Any]) -> Any:
    """What decides how a Python project's tests run, from ``pyproject.toml``'s text
    (parsed by ``_toml_reader``): the test runners' and task tools' tables, and the entry
    points (a pytest plugin is one)."""
    tool = data.get("tool", {})
    keys = ("pytest", "hatch", "tox", "nox", "poe", "pdm", "uv")
    picked: dict[str, Any] = {k: tool.get(k) for k in keys}
    # A project's scripts and entry points can register pytest plugins (pytest11).
    picked["entry-points"] = data.get("project", {}).get("entry-points")
    return picked


def _package_json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return ("unreadable", text)
    if not isinstance(data, dict):
        return ("not an object", text)
    scripts = data.get("scripts") if isinstance(data.get("scripts"), dict) else {}
    test_scripts = {k: v for k, v in (scripts or {}).items() if "test" in str(k)}
    return {k: data.get(k) for k in ("jest", "vitest", "mocha", "ava")} | {"scripts": test_scripts}


_MAKE_TARGET = re.compile(r"^([A-Za-z0-9_.%/ -]+):(?!=)", re.M)


def _makefile(text: str | None) -> Any:
    """The recipes of targets named like tests, plus every variable assignment (a
    recipe's ``$(PYTEST_ARGS)`` is as much part of it as its text)."""
    if text is None:
        return None
    picked: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("\t"):
            if current is not None:
                current.append(line)
            continue
        m = _MAKE_TARGET.match(line)
        if m:
            targets = m[1].split()
            current = [line] if any("test" in t or "check" in t for t in targets) else None
            if current is not None:
                picked[line] = current
            continue
        current = None
        if re.match(r"^\s*(export\s+)?[A-Za-z_][A-Za-z0-9_]*\s*[:?+!]?=", line):
            picked.setdefault("__vars__", []).append(line.strip())
    return picked


@_toml_reader
def _cargo_manifest(data: dict[str, Any]) -> Any:
    """What decides which test targets cargo builds and how it runs them: the target
    tables (``[lib] test = false``, ``[[test]] harness = false``), the ``auto*``
    switches, the workspace's members, from ``Cargo.toml``'s text (parsed by
    ``_toml_reader``); a dependency added is not a discovery change."""
    package = data.get("package") if isinstance(data.get("package"), dict) else {}
    picked: dict[str, Any] = {k: data.get(k) for k in ("lib", "bin", "test", "bench", "example")}
    picked["auto"] = {k: v for k, v in (package or {}).items() if str(k).startswith("auto")}
    workspace = data.get("workspace") if isinstance(data.get("workspace"), dict) else {}
    picked["workspace"] = {
        k: (workspace or {}).get(k) for k in ("members", "exclude", "default-members")
    }
    return picked


# Lines that take tests out of a run without deleting a test, per kind of test source:
# (what to call them, which files, the pattern, the pattern that counts in a new file).
# An added line is a discovery change. In a new file most of them touch only the new
# tests, but a Go TestMain decides whether its whole package's tests run at all.
_GO_MARKER = r"^\s*//\s*(go:build|\+build)\b|\btesting\.Short\(\)|\bfunc\s+TestMain\s*\("
_RUST_MARKER = (
    r"#!?\s*\[\s*(ignore\b|cfg_attr\s*\([^\]\n]{0,300}\bignore\b|cfg\s*\(\s*(any\s*\(\s*\)|FALSE))"
)
_JS_TEST_FILE = (
    r"(^|/)[^/]*[._](test|spec)\.[cm]?[jt]sx?$|(^|/)(__tests__|tests?)/[^/]+\.[cm]?[jt]sx?$"
)
_JS_MARKER = (
    r"\b(describe|it|test|suite)\s*\.\s*(skip|only|todo)\b"
    r"|\bx(it|describe|test)\s*\(|\{\s*(skip|todo)\s*:"
)
_Marker = tuple[str, re.Pattern[str], re.Pattern[str], re.Pattern[str] | None]
_MARKERS: tuple[_Marker, ...] = (
    (
        "a Go build constraint, testing.Short guard or TestMain",
        re.compile(r"_test\.go$"),
        re.compile(_GO_MARKER),
        re.compile(r"\bfunc\s+TestMain\s*\("),
    ),
    (
        "a Rust #[ignore] or test-disabling cfg",
        re.compile(r"\.rs$"),
        re.compile(_RUST_MARKER),
        None,
    ),
    (
        "a JavaScript .skip/.only/x-prefixed test",
        re.compile(_JS_TEST_FILE),
        re.compile(_JS_MARKER),
        None,
    ),
)


def _marker_kind(path: str) -> _Marker | None:
    for marker in _MARKERS:
        if marker[1].search(path):
            return marker
    return None


def _added_markers(marker: _Marker, old: str | None, new: str | None) -> list[str]:
    """The marker lines ``new`` has that ``old`` does not (counted, so one moved
    somewhere else is not added, and a second copy is)."""
    pattern = marker[2] if old is not None else marker[3]
    if pattern is None:
        return []
    was: dict[str, int] = {}
    for line in (old or "").splitlines():
        if pattern.search(line):
            was[line.strip()] = was.get(line.strip(), 0) + 1
    added: list[str] = []
    for line in (new or "").splitlines():
        if pattern.search(line):
            key = line.strip()
            if was.get(key, 0) > 0:
                was[key] -= 1
            else:
                added.append(key[:200])
    return added


_SECTIONED = {
    "setup.cfg": _ini_sections,
    "tox.ini": _ini_sections,
    "pyproject.toml": _pyproject,
    "package.json": _package_json,
    "makefile": _makefile,
    "gnumakefile": _makefile,
    "cargo.toml": _cargo_manifest,
}
_SECTION_NAMES = {
    "setup.cfg": "its [tool:pytest] section",
    "tox.ini": "its [pytest] or [testenv] sections",
    "pyproject.toml": "its test-runner sections ([tool.pytest*], tox, nox, hatch, entry points)",
    "package.json": "its test scripts or runner configuration",
    "makefile": "its test targets or variables",
    "gnumakefile": "its test targets or variables",
    "cargo.toml": "its test targets ([lib]/[[bin]]/[[test]] tables, auto* switches, members)",
}
