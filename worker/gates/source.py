"""Source checks that read a changed file as the interpreter does, not as a regex does.

A patch can make a file mean something else than it reads: a ``# coding: utf-7``
declaration turns what every viewer shows as a comment into code (``+AAo-`` decodes
to a newline), and bidirectional control characters (Trojan Source) reorder what a
reviewer sees. Code can also behave well only while it is being judged: correct when
``pytest`` is in ``sys.modules``, when ``PYTEST_CURRENT_TEST``/``CI``/``RIBBIT_*`` is
set, when ``/workspace`` exists or the host name is the sandbox's; and a test helper
(``tests/__init__.py``, a ``conftest.py``, a module under a test folder) can rebind
the code under test so that only the tests see the fixed version.

So, for every file the patch changes:

- the coding declaration is read with :func:`tokenize.detect_encoding`, on the bytes,
  exactly as CPython reads it; anything but UTF-8 (or ASCII) is a finding;
- any bidirectional control character anywhere in the file is a finding;
- non-test Python code is parsed (``ast``) and every name is resolved through its
  imports and simple assignments (``from os import environ as e; e.get(...)`` reads
  ``os.environ``), and strings are folded (``"PYTEST_" + "CURRENT_TEST"``); lines the
  patch adds that probe the test runner or the sandbox are findings;
- test support code the patch changes is parsed too: a rebinding of an attribute of
  the repository's own non-test modules outside a test function is a finding.

Each finding names the mechanism, the file and the line. Only the lines the patch adds
are judged for detection and rebinding, so code that was there before is not the
patch's doing; the encoding and bidi checks judge the whole file, since a declaration
at the top changes how every line of it reads. The AST reading (names, probes,
rebindings) is probes.py's; this module reads the file and keeps what falls on the
lines the patch adds.
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from worker.gates.probes import (
    MARKER_PATH,
    RUNNER_NAME,
    STRONG_MARKER,
    Names,
    detection_findings,
    marker_rule,
    rebinding_findings,
)
from worker.gates.trees import regular_file_inside

# A file past this is not read whole; a Python file past it is a finding (a 3 MB line
# of padding must not push a probe out of reach: the diff's line limit does not see it).
_MAX_BYTES = 8 * 1024 * 1024
_ALLOWED_CODECS = {"utf-8", "ascii"}

# Trojan Source (CVE-2021-42574): embeddings, overrides, isolates and the implicit marks.
BIDI_CONTROLS = frozenset(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
)

# Files that drive builds, docs and CI rather than being the code under test: asking
# "am I on CI?" is their job.
_TOOLING = re.compile(
    r"(^|/)(noxfile|setup|fabfile|tasks|dodo)\.py$|^(docs?|\.github|ci|scripts|tools|benchmarks?)/"
)


@dataclass(frozen=True)
class SourceFinding:
    """One thing a changed file does that its text hides or that fakes a result."""

    rule: str  # source-encoding, bidi-control, runner-detection, sandbox-detection, ...
    path: str
    line: int | None
    message: str  # names the mechanism
    severity: Literal["error", "warning"] = "error"


@dataclass(frozen=True)
class ChangedFile:
    """A file the patch changes, as git applied it, with the lines it adds."""

    path: str
    added_lines: frozenset[int]
    is_test: bool


def check_files(
    after: Path, files: list[ChangedFile], repo_modules: frozenset[str]
) -> list[SourceFinding]:
    """Every source finding in the after tree's versions of ``files``. ``repo_modules``
    are the top-level names of the repository's own non-test code (for rebinding)."""
    found: list[SourceFinding] = []
    for changed in files:
        file = regular_file_inside(after, changed.path)
        if file is None:
            continue
        try:
            with file.open("rb") as fh:
                data = fh.read(_MAX_BYTES + 1)
        except OSError:
            continue
        if len(data) > _MAX_BYTES and is_python(changed.path, data):
            found.append(
                SourceFinding(
                    "source-too-large",
                    changed.path,
                    None,
                    f"a Python file over {_MAX_BYTES >> 20} MiB cannot be checked as the "
                    "interpreter reads it",
                )
            )
        found += check_bytes(changed, data[:_MAX_BYTES], repo_modules)
    return found


def check_bytes(
    changed: ChangedFile, data: bytes, repo_modules: frozenset[str] = frozenset()
) -> list[SourceFinding]:
    found = bidi_findings(changed.path, data.decode("utf-8", errors="replace"))
    if not is_python(changed.path, data):
        return found
    encoding = encoding_finding(changed.path, data)
    if encoding is not None:
        return [*found, encoding]  # the AST would read what the codec makes of it
    try:
        tree = ast.parse(data, filename=changed.path)
    except (SyntaxError, ValueError) as exc:
        # Newer syntax than the worker's Python, or broken code: the tokens still show
        # the strings that name the judge.
        return [*found, *_unparsed_findings(changed, data, exc)]
    names = Names(tree)
    if changed.is_test:
        judged = rebinding_findings(tree, names, repo_modules)
    elif _TOOLING.search(changed.path):
        return found  # build and CI tooling may ask where it runs; the code under test not
    else:
        judged = detection_findings(tree, names)
    seen: set[tuple[str, int]] = set()
    for rule, line, message in judged:
        if line in changed.added_lines and (rule, line) not in seen:
            seen.add((rule, line))
            found.append(SourceFinding(rule, changed.path, line, message))
    return found


def _unparsed_findings(changed: ChangedFile, data: bytes, exc: Exception) -> list[SourceFinding]:
    found = [
        SourceFinding(
            "source-unparsed",
            changed.path,
            getattr(exc, "lineno", None),
            f"the file does not parse here ({type(exc).__name__}); only its tokens were "
            "checked for probes of the test run or the sandbox",
            severity="warning",
        )
    ]
    if changed.is_test or _TOOLING.search(changed.path):
        return found
    for token in _tokens(data):
        if token.type != tokenize.STRING or token.start[0] not in changed.added_lines:
            continue
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, str) and (
            STRONG_MARKER.match(value) or RUNNER_NAME.match(value) or MARKER_PATH.match(value)
        ):
            found.append(
                SourceFinding(
                    marker_rule(value),
                    changed.path,
                    token.start[0],
                    f"non-test code names {value!r}, which only the test run or the sandbox "
                    "has: code that behaves differently while it is judged",
                )
            )
    return found


def _tokens(data: bytes) -> Iterator[tokenize.TokenInfo]:
    """The file's tokens up to the first the tokenizer cannot read (an unclosed bracket
    at the end must not hide the strings before it)."""
    try:
        yield from tokenize.tokenize(io.BytesIO(data).readline)
    except (tokenize.TokenError, SyntaxError):
        return


def is_python(path: str, data: bytes) -> bool:
    if path.endswith((".py", ".pyw", ".pyi")):
        return True
    first = data.split(b"\n", 1)[0]
    return first.startswith(b"#!") and b"python" in first


def encoding_finding(path: str, data: bytes) -> SourceFinding | None:
    """The file's coding declaration, read as CPython reads it, if it is not UTF-8."""
    try:
        declared, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return SourceFinding(
            "source-encoding", path, 1, f"the file's coding declaration is unreadable ({exc})"
        )
    try:
        name = codecs.lookup(declared).name
    except LookupError:
        name = declared
    if name in _ALLOWED_CODECS or name.startswith("utf-8"):
        return None
    return SourceFinding(
        "source-encoding",
        path,
        _cookie_line(data),
        f"the file declares the source encoding {declared!r}: Python decodes it with that "
        "codec, so text that reads as a comment or a string can be code; only UTF-8 is "
        "allowed",
    )


def _cookie_line(data: bytes) -> int:
    for number, line in enumerate(data.splitlines()[:2], start=1):
        if re.match(rb"^[ \t\f]*#.*?coding[:=]", line):
            return number
    return 1


def bidi_findings(path: str, text: str) -> list[SourceFinding]:
    found = []
    # By "\n" as git numbers lines, not splitlines() (which also breaks at U+2028...).
    for number, line in enumerate(text.split("\n"), start=1):
        finding = bidi_in_line(path, number, line)
        if finding is not None:
            found.append(finding)
    return found


def bidi_in_line(path: str, number: int, line: str) -> SourceFinding | None:
    hidden = sorted({ch for ch in line if ch in BIDI_CONTROLS})
    if not hidden:
        return None
    names = ", ".join(f"U+{ord(ch):04X}" for ch in hidden)
    return SourceFinding(
        "bidi-control",
        path,
        number,
        f"a bidirectional control character ({names}): the line runs in another order "
        "than it reads (Trojan Source)",
    )


def repo_modules(tree: Path, is_test: Callable[[str], bool]) -> frozenset[str]:
    """Top-level names the repository's own code is imported by: packages and modules
    at the root and under ``src/``."""
    found: set[str] = set()
    for root in (tree, tree / "src"):
        try:
            entries = list(root.iterdir())
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if name.startswith(".") or is_test(f"{name}/") or is_test(name):
                continue
            if entry.is_symlink():
                continue
            if entry.is_dir() and name.isidentifier() and any(entry.glob("*.py")):
                found.add(name)  # a package, or a namespace package's portion
            elif entry.is_file() and name.endswith(".py") and name[:-3].isidentifier():
                found.add(name[:-3])
    return frozenset(found)
