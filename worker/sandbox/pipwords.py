"""pip arguments as the Python tools' test environments spell them, read into one
record: requirement strings, ``-r``/``-c`` files, and the project's own extras.

tox ``deps`` lines, nox ``session.install(...)`` arguments, hatch and pdm dependency
lists all hand pip a mix of the three. Set-up detection (worker/sandbox/setupcmd.py)
installs the project itself once (``pip install -e .``), so a word that names the
project (``.``, ``-e .[test]``, ``{toxinidir}``) only adds its extras; every other word
must be something any pip installs from a registry, or the environment is refused with
the word that could not be read.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement

# The spellings of the project's own tree: tox's and hatch's placeholders for it,
# pdm's editable self-reference.
_PROJECT_ROOTS = frozenset({".", "{toxinidir}", "{tox_root}", "{root}", "file:///${PROJECT_ROOT}"})
_PROJECT = re.compile(r"^(?P<root>[^\[]+?)(?:\[(?P<extras>[^\]]*)\])?$")
# Options that change how pip resolves, never what the tests need: dropped.
_IGNORED_FLAGS = frozenset({"-U", "--upgrade", "--pre", "--no-deps", "-q", "--quiet", "-v"})
_FILE_FLAGS = {
    "-r": "requirement",
    "--requirement": "requirement",
    "-c": "constraint",
    "--constraint": "constraint",
}


class PipWordsError(ValueError):
    """A word a test environment hands pip that Ribbit cannot install from the base
    tree and the registries (a placeholder, a path out of the tree, a VCS URL)."""


@dataclass
class PipInputs:
    """What one test environment asks pip for, in the order it names them."""

    requirements: list[str] = field(default_factory=list)
    """PEP 508 strings."""
    requirement_files: list[str] = field(default_factory=list)
    """``-r`` files, relative to the top of the tree."""
    constraint_files: list[str] = field(default_factory=list)
    """``-c`` files, relative to the top of the tree."""
    extras: list[str] = field(default_factory=list)
    """Extras of the project itself (``.[test]``)."""

    def add_words(self, words: Iterable[str], where: str) -> None:
        """Read pip's arguments, one word each (``["-r", "req.txt", "pytest"]``)."""
        pending: str | None = None
        for word in words:
            flag, equals, value = word.partition("=")
            if (
                pending is None
                and equals
                and flag in ("--requirement", "--constraint", "--editable")
            ):
                self._add_option(flag, value, where)  # `--requirement=req.txt`
            elif pending is not None:
                self._add_option(pending, word, where)
                pending = None
            elif word in _FILE_FLAGS or word in ("-e", "--editable"):
                pending = word
            elif word[:2] in ("-r", "-c") and len(word) > 2 and not word.startswith("--"):
                self._add_option(word[:2], word[2:], where)
            elif word in _IGNORED_FLAGS:
                continue
            elif word.startswith("-"):
                raise PipWordsError(f"{where}: pip option {word!r} is not one Ribbit passes on")
            elif not self._add_project(word):
                self.requirements.append(_requirement(word, where))
        if pending is not None:
            raise PipWordsError(f"{where}: {pending} with nothing after it")

    def add_line(self, line: str, where: str) -> None:
        """One requirements-file-style line: an option and its value, or a requirement
        whose spaces (``foo >= 1``) belong to it."""
        line = line.strip()
        if line.startswith("-"):
            flag, _, rest = line.partition(" ")
            self.add_words([flag, rest.strip()] if rest.strip() else [flag], where)
        elif line:
            self.add_words([line], where)

    def _add_option(self, flag: str, value: str, where: str) -> None:
        if flag in ("-e", "--editable"):
            if not self._add_project(value):
                raise PipWordsError(f"{where}: editable {value!r} is not the project itself")
            return
        path = value.strip()
        if path.startswith("{toxinidir}/") or path.startswith("{tox_root}/"):
            path = path.split("/", 1)[1]
        if not path or path.startswith(("/", "-", "~")) or ".." in path.split("/") or "{" in path:
            raise PipWordsError(f"{where}: {flag} {value!r} is not a file of the tree")
        path = posixpath.normpath(path)  # `./req.txt` is the same file as `req.txt`
        kind = _FILE_FLAGS[flag]
        target = self.requirement_files if kind == "requirement" else self.constraint_files
        if path not in target:
            target.append(path)

    def _add_project(self, word: str) -> bool:
        # pdm writes `file:///${PROJECT_ROOT}/#egg=name`: the fragment only names it.
        match = _PROJECT.match(word.split("#", 1)[0].strip())
        if match is None or match["root"].rstrip("/") not in _PROJECT_ROOTS:
            return False
        for extra in (match["extras"] or "").split(","):
            if extra.strip() and extra.strip() not in self.extras:
                self.extras.append(extra.strip())
        return True


def _requirement(word: str, where: str) -> str:
    # Placeholders (tox's {env:X}, hatch's {root:uri}) need the tool to fill them in.
    if "{" in word or "$" in word:
        raise PipWordsError(f"{where}: {word!r} needs its tool to fill in a placeholder")
    try:
        Requirement(word)
    except InvalidRequirement:
        raise PipWordsError(f"{where}: {word!r} is no requirement pip can install") from None
    return word
