"""Changes to how tests are found and run: a patch that edits them changes the
yardstick it is measured with.

A ``pytest.ini`` with ``python_files = check_*.py``, a ``conftest.py`` hook that
returns early from the run loop, a ``testpaths`` or ``addopts`` line, a jest
``testMatch``, a Makefile ``test`` recipe: each can make the old tests vanish or
report success without touching a test file. The hygiene gate reports every such
change as a finding that blocks unless the repository opted into ``warn``
(``gates.test_config_changes`` in ``.ribbit.yml``); then the test gate also runs the
patched code with the base's configuration.

What counts is decided by comparing the before and after trees (what git applied),
section by section for shared files (``setup.cfg``, ``tox.ini``, ``pyproject.toml``,
``package.json``, ``Makefile``): a patch that only adds a dependency to
``pyproject.toml`` is not a discovery change.
"""

from __future__ import annotations

import configparser
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.gates.trees import applied_changes, regular_file_inside

# Whole files whose only job is configuring a test runner (or the interpreter the
# tests run in: a ``sitecustomize.py`` or ``.pth`` file runs before any test).
_RUNNER_FILES = re.compile(
    r"(^|/)(\.?pytest\.ini|conftest\.py|noxfile\.py|sitecustomize\.py|usercustomize\.py"
    r"|[^/]*\.pth|jest\.config\.[cm]?[jt]s(on)?|vitest\.config\.[cm]?[jt]s"
    r"|vitest\.workspace\.[cm]?[jt]s|karma\.conf\.[jt]s|\.mocharc\.[a-z]+|ava\.config\.[cm]?js"
    r"|phpunit\.xml(\.dist)?|\.rspec|go\.work|\.bazelrc)$"
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
        section = _SECTIONED.get(name)
        if section is None:
            continue
        old, new = _read(before, path), _read(after, path)
        if section(old) != section(new):
            found.append(DiscoveryChange(path, _SECTION_NAMES[name]))
    return found


def _read(tree: Path, rel: str) -> str | None:
    file = regular_file_inside(tree, rel)
    if file is None:
        return None
    try:
        with file.open("rb") as fh:
            data = fh.read(_MAX_CONFIG_BYTES + 1)
    except OSError:
        return None
    return data.decode(errors="replace")


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


def _pyproject(text: str | None) -> Any:
    if text is None:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return ("unreadable", text)
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


_SECTIONED = {
    "setup.cfg": _ini_sections,
    "tox.ini": _ini_sections,
    "pyproject.toml": _pyproject,
    "package.json": _package_json,
    "makefile": _makefile,
    "gnumakefile": _makefile,
}
_SECTION_NAMES = {
    "setup.cfg": "its [tool:pytest] section",
    "tox.ini": "its [pytest] or [testenv] sections",
    "pyproject.toml": "its test-runner sections ([tool.pytest*], tox, nox, hatch, entry points)",
    "package.json": "its test scripts or runner configuration",
    "makefile": "its test targets or variables",
    "gnumakefile": "its test targets or variables",
}
