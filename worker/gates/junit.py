"""Per-test outcomes from JUnit XML, the one report format nearly every test runner
writes (pytest --junitxml, jest-junit, go-junit-report, surefire...), under the ids
the runner itself accepts.

For pytest the id is the node id as pytest collected it
(``tests/test_lru.py::LRUCacheTest::test_missing``, ``tests/t.py::test_f[a::b]``), the
form SWE-bench's FAIL_TO_PASS lists use and ``pytest <id>`` selects. JUnit does not
carry it: pytest writes ``classname`` (the node id's path with ``/`` turned into
``.`` and ``.py`` dropped, then its classes) and ``name`` (the function, with its
parameters untouched). The xunit1 family also writes ``file``, but that is where the
*function* is defined: for a test method inherited from a mixin in
``tests/__init__.py`` it names ``tests/__init__.py``, not the module pytest collected
the class from. So the id is rebuilt from ``classname``: the longest leading run of
its parts that is a file in the checkout (asked through ``existing``) is the path,
the rest are classes. Without a checkout to ask, the xunit1 ``file`` is used when
it is that prefix, else the path ends before the first capitalised part (a class).
Other runners' cases (a report whose suite is not named ``pytest`` and has no
``file``) keep ``classname::name``: for gotestsum, ``<import path>::TestX/sub``.
Node's junit reporter writes every case with ``classname="test"`` and nests
``describe`` blocks as suites, so its ids are the suite names and the test's, joined
by `` > `` (``parser > quotes > keeps spaces``); Node 18 has no junit reporter, and
:func:`parse_node_tap` reads its TAP into the same ids. Rust's libtest writes no JUnit on a
stable toolchain: :func:`parse_libtest` reads its console output into the same
records, ``<target>::<test path>`` (``src/lib.rs::tests::it_works``,
``tests/cli.rs::runs``, ``doc:mycrate::src/lib.rs - add (line 3)``). jest needs no
reporter package for per-test results: its built-in ``--json`` report is read by
:func:`parse_jest_json` into the same records, ``<file>::<describe blocks and title>``
(``tests/cron.test.js::cron setTime runs once``), the name jest's ``-t`` matches.

The XML comes out of a sandbox, so it is untrusted: documents with a DOCTYPE are
refused outright (no entity expansion, no external entities), and size is capped.

This module uses the standard library only, and nothing else of Ribbit's:
:mod:`trainer.envs.export` embeds its source in the evaluation scripts it writes.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import Literal

Outcome = Literal["passed", "failed", "error", "skipped"]
# How a report's ids are built: "auto" tells pytest's reports from others' by the
# report itself; "plain" is classname::name whatever the report says (a Go package
# named ``pytest`` must not switch on pytest's rules); "nested" is Node's; "jest" is
# jest's own JSON report (parse_jest_json), not JUnit.
Flavour = Literal["auto", "plain", "nested", "jest"]
NESTED_SEPARATOR = " > "
MAX_JUNIT_BYTES = 32 * 1024 * 1024
# Worst first: when one id is reported twice, the worse outcome stands.
_RANK: dict[str, int] = {"error": 0, "failed": 1, "skipped": 2, "passed": 3}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_MAX_DOTTED_GAPS = 4
Existing = Callable[[Collection[str]], Collection[str]]


class JUnitError(ValueError):
    """Not a JUnit document we can read."""


@dataclass(frozen=True)
class TestCase:
    __test__ = False  # not a pytest test class, whatever its name says

    id: str  # pytest: the node id; other runners: "classname::name"
    name: str
    classname: str
    outcome: Outcome
    message: str = ""
    file: str = ""  # xunit1: where the test function is defined

    @property
    def base_name(self) -> str:
        """The function name without parametrisation: ``test_x[1]`` -> ``test_x``."""
        return self.name.split("[", 1)[0]

    @property
    def failed(self) -> bool:
        """A failed assertion or an error (in a fixture, at collection): not passed."""
        return self.outcome in ("failed", "error")


@dataclass(frozen=True)
class _Raw:
    classname: str
    name: str
    file: str
    outcome: Outcome
    message: str
    pytest: bool  # the report is pytest's (its suite is named so, or it has xunit1 files)
    nested: str  # the enclosing suites' names and the case's, joined (Node's ids)

    def case(self, case_id: str) -> TestCase:
        """The test case under ``case_id``; only the id depends on the runner."""
        return TestCase(
            id=case_id,
            name=self.name,
            classname=self.classname,
            outcome=self.outcome,
            message=self.message,
            file=self.file,
        )


def parse_junit(
    data: bytes | str, existing: Existing | None = None, flavour: Flavour = "auto"
) -> list[TestCase]:
    """The report's test cases. ``existing`` answers which of the given paths (relative
    to the directory the tests ran in) are files there; without it, ids are rebuilt
    from the report alone (right unless a module is named with a capital letter, or a
    test is inherited from another module under xunit2)."""
    raws = _read(data.encode() if isinstance(data, str) else data)
    if flavour != "auto":
        return [
            raw.case(raw.nested if flavour == "nested" else f"{raw.classname}::{raw.name}")
            for raw in raws
        ]
    wanted = set()
    for raw in raws:
        wanted.update(module_candidates(raw.classname))
    found = set(existing(sorted(wanted))) if existing is not None and wanted else set()
    return [raw.case(_node_id(raw, found)) for raw in raws]


def outcomes(cases: Iterable[TestCase]) -> dict[str, Outcome]:
    """id -> outcome; an id reported more than once keeps its worst outcome, so a
    suite run twice cannot hide a failure behind a later pass."""
    merged: dict[str, Outcome] = {}
    for case in cases:
        was = merged.get(case.id)
        if was is None or _RANK[case.outcome] < _RANK[was]:
            merged[case.id] = case.outcome
    return merged


def local_files(root: str = ".") -> Existing:
    """``existing`` for a checkout on this machine (the evaluation script's case)."""

    def existing(paths: Collection[str]) -> list[str]:
        return [p for p in paths if os.path.isfile(os.path.join(root, p))]

    return existing


def module_candidates(classname: str) -> list[str]:
    """The files a classname's leading parts could name, shortest prefix first:
    ``tests.test_x.TestA`` -> ``tests.py``, ``tests/test_x.py``, ``tests.test_x.py``,
    ``tests.test_x`` (a non-Python test file), ... A dot in the classname is a folder
    separator or a dot in a folder's name (``tests/v1.2/test_x.py``)."""
    return [path for path, _ in _candidates(classname)]


def _candidates(classname: str) -> list[tuple[str, int]]:
    """(path, how many classname parts it spans) for :func:`module_candidates`."""
    parts = classname.split(".")
    if not classname or any(not p or p in (".", "..") for p in parts):
        return []
    found: list[tuple[str, int]] = []
    for k in range(1, len(parts) + 1):
        gaps = k - 1
        # Dots inside folder names are rare; beyond a few gaps only "/" is tried, so a
        # long classname costs a handful of candidates, not 2**gaps.
        choices = range(2**gaps) if gaps <= _MAX_DOTTED_GAPS else [0]
        for mask in choices:
            path = parts[0]
            for i in range(gaps):
                path += ("." if mask >> i & 1 else "/") + parts[i + 1]
            found.append((path + ".py", k))
            if mask >> (gaps - 1) & 1 if gaps else False:
                found.append((path, k))  # its last dot starts an extension
    return found


def _read(data: bytes) -> list[_Raw]:
    if len(data) > MAX_JUNIT_BYTES:
        raise JUnitError("JUnit report too large")
    lowered = data.lower()
    if b"<!doctype" in lowered or b"<!entity" in lowered:
        raise JUnitError("JUnit report with a DOCTYPE refused")
    try:
        root = ET.fromstring(data)  # noqa: S314 - see the module docstring
    except ET.ParseError as exc:
        raise JUnitError(f"not XML: {exc}") from None
    if root.tag not in {"testsuites", "testsuite"}:
        raise JUnitError(f"not a JUnit report (root <{root.tag}>)")
    suites = [root, *root.iter("testsuite")]
    by_pytest = any(s.get("name") == "pytest" for s in suites) or any(
        c.get("file") for c in root.iter("testcase")
    )
    raws = []
    for case, suites_above in _cases(root, ()):
        outcome: Outcome = "passed"
        message = ""
        for child in case:
            if child.tag in ("error", "failure"):
                # pytest reports a test that failed and then errored in teardown with
                # both; the error is the worse outcome.
                kind: Outcome = "error" if child.tag == "error" else "failed"
                if outcome not in ("error", "failed") or kind == "error":
                    outcome = kind
                    message = (child.get("message") or (child.text or "")).strip()[:500]
            elif child.tag == "skipped" and outcome == "passed":
                outcome = "skipped"
                message = (child.get("message") or "").strip()[:500]
        raws.append(
            _Raw(
                classname=case.get("classname", ""),
                name=case.get("name", ""),
                file=case.get("file", ""),
                outcome=outcome,
                message=message,
                pytest=by_pytest,
                nested=NESTED_SEPARATOR.join([*suites_above, case.get("name", "")]),
            )
        )
    return raws


def _cases(
    element: ET.Element, suites: tuple[str, ...]
) -> Iterable[tuple[ET.Element, tuple[str, ...]]]:
    """Every testcase in document order, with the names of the suites around it (the
    root's own name left out: it is the run's, not a describe block's)."""
    for child in element:
        if child.tag == "testcase":
            yield child, suites
        elif child.tag == "testsuite":
            yield from _cases(child, (*suites, child.get("name", "")))
        else:
            yield from _cases(child, suites)


def _dotted(path: str) -> str:
    """pytest's own mangling of a node id's path into a classname prefix."""
    return re.sub(r"\.py$", "", path.replace("/", "."))


def _node_id(raw: _Raw, found: set[str]) -> str:
    if not raw.classname:
        return raw.name
    parts = raw.classname.split(".")
    # The longest existing prefix wins: tests/foo.py beside tests/foo/test_bar.py must
    # not swallow test_bar as a class.
    spans = [(k, path) for path, k in _candidates(raw.classname) if path in found]
    if spans:
        k, path = max(spans, key=lambda span: span[0])
        return _join(path, parts[k:], raw.name)
    if raw.file and (
        raw.classname == _dotted(raw.file) or raw.classname.startswith(_dotted(raw.file) + ".")
    ):
        # Exact even with dots in folder names (tests/v1.2/test_x.py).
        return _join(raw.file, parts[len(_dotted(raw.file).split(".")) :], raw.name)
    if not raw.pytest or not all(_IDENT.fullmatch(p) for p in parts):
        return f"{raw.classname}::{raw.name}"  # jest, go, surefire... select by these
    first_class = next((i for i, p in enumerate(parts) if p[:1].isupper()), len(parts))
    if first_class == 0:
        return f"{raw.classname}::{raw.name}"
    return _join("/".join(parts[:first_class]) + ".py", parts[first_class:], raw.name)


def _join(path: str, classes: list[str], name: str) -> str:
    return "::".join([path, *classes, name])


# libtest's console lines (Rust's built-in test harness, what ``cargo test`` runs).
# cargo announces each test binary on stderr before running it ("Running unittests
# src/lib.rs (target/debug/deps/x-123)", "Running tests/cli.rs (...)", "Doc-tests x");
# the binary then prints "running N tests", one line per test, and a summary.
# cargo's own status lines, right-aligned: "     Running unittests src/lib.rs
# (target/debug/deps/calc-1a2b3c4d5e6f7a8b)", "   Doc-tests calc". Anchored to the whole
# line, so an honest test that prints "Running migrations (3 pending)" opens no block.
_LIBTEST_TARGET = re.compile(
    r"^ +Running (?:unittests )?(\S+) \(([^()]*/deps/[^/()\s]+-[0-9a-f]+(?:\.exe)?)\)\s*$"
)
# The first line of a cargo run's output (testcmd._cargo_package_step): where it runs.
CARGO_ROOT_MARK = "ribbit-cargo-root "
_LIBTEST_DOCS = re.compile(r"^ +Doc-tests (\S+)\s*$")
_LIBTEST_START = re.compile(r"^running (\d+) tests?$")
_LIBTEST_CASE = re.compile(r"^test (.+) \.\.\. (ok|FAILED|ignored(?:, .*)?)$")
_LIBTEST_SUMMARY = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored;"
)
_LIBTEST_OUTCOME: dict[str, Outcome] = {"ok": "passed", "FAILED": "failed"}


def parse_libtest(data: bytes | str) -> list[TestCase]:
    """The tests libtest reports in ``cargo test``'s output (see :func:`_read_libtest`)."""
    return _read_libtest(data)[0]


def libtest_unfinished(data: bytes | str) -> list[str]:
    """The targets whose test binary announced its tests and printed no summary: it
    died mid-run, which libtest itself never does with success (a failing run exits
    101). One that cargo still counts as a success was ended from inside (code under
    test calling ``exit`` after printing results of its own)."""
    return _read_libtest(data)[1]


def _read_libtest(data: bytes | str) -> tuple[list[TestCase], list[str]]:
    """The tests libtest reports in ``cargo test``'s output (stdout and stderr
    together, in order), with ids ``<target>::<test path>``, and the targets whose
    binary died before its summary.

    The output is untrusted the way a JUnit file is, and easier to write to: a test
    can print a line that looks like a result. So each binary's lines are counted
    against the number it announced and against its summary, and any disagreement
    makes the whole output unreadable (:class:`JUnitError`). A binary that dies
    mid-run (no summary) keeps the results it printed; its unfinished test is
    simply absent. Captured output of failing tests comes after the results
    (a ``failures:`` section) and is not read as results."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_JUNIT_BYTES:
        raise JUnitError("test output too large")
    lines = raw.decode(errors="replace").splitlines()
    packages = _cargo_packages(lines)
    cases: list[TestCase] = []
    unfinished: list[str] = []
    target = ""
    block: list[TestCase] | None = None  # the current binary's results
    listing = False  # before its failures: section (captured output follows that)
    announced = 0
    for line in lines:
        line = line.rstrip("\r")
        m = _LIBTEST_TARGET.match(line) or _LIBTEST_DOCS.match(line)
        if m:
            if block is not None:
                cases += _doc_ids(block)  # the previous binary died before its summary
                unfinished.append(target)
            if m.re is _LIBTEST_TARGET:
                folder = packages.get(posixpath.basename(m[2]), "")
                target = f"{folder}/{m[1]}" if folder else m[1]
            else:
                target = f"doc:{m[1]}"
            block = None
            continue
        m = _LIBTEST_START.match(line)
        if m and block is None:
            block, announced, listing = [], int(m[1]), True
            continue
        if block is None:
            continue
        if line in ("failures:", "successes:"):
            listing = False
            continue
        m = _LIBTEST_CASE.match(line)
        if m and listing:
            outcome = _LIBTEST_OUTCOME.get(m[2], "skipped")
            block.append(TestCase(f"{target}::{m[1]}", m[1], target, outcome))
            continue
        m = _LIBTEST_SUMMARY.match(line)
        if m:
            _check_libtest_block(target, block, announced, m)
            cases += _doc_ids(block)
            block = None
    if block is not None:
        cases += _doc_ids(block)
        unfinished.append(target)
    return cases, unfinished


def _cargo_packages(lines: list[str]) -> dict[str, str]:
    """Each test binary's package folder (by the binary's file name), relative to the
    workspace's root, where the run printed them before its tests
    (testcmd._cargo_package_step: the root as its first line, then cargo's
    ``compiler-artifact`` records); a folder only where it is not the root, so a
    single crate's ids are its sources' own paths. Read only up to the first test
    binary's start: after it, anything may print anything. Two records that give one
    binary different packages make the output unreadable."""
    if not lines or not lines[0].startswith(CARGO_ROOT_MARK):
        return {}
    root = lines[0][len(CARGO_ROOT_MARK) :].rstrip("\r").rstrip("/")
    found: dict[str, str] = {}
    for line in lines[1:]:
        if _LIBTEST_TARGET.match(line) or _LIBTEST_DOCS.match(line):
            break
        if not line.startswith('{"reason":"compiler-artifact"'):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        binary, manifest = record.get("executable"), record.get("manifest_path")
        if not isinstance(binary, str) or not isinstance(manifest, str):
            continue
        folder = posixpath.dirname(manifest)
        if folder != root and not folder.startswith(root + "/"):
            continue  # a package outside the workspace (a path dependency): none of its tests run
        rel = folder[len(root) + 1 :]
        # By file name: cargo shows the binary's path relative to where it runs, or as
        # CARGO_TARGET_DIR has it; its name's hash already differs between packages.
        if found.setdefault(posixpath.basename(binary), rel) != rel:
            raise JUnitError(f"two packages claim the test binary {binary}")
    return found


# rustdoc names a doc test by its item and line: "src/lib.rs - jaro (line 147)",
# with a suffix for some ("... (line 9) - compile fail").
_DOC_TEST_LINE = re.compile(r"^(.*) \(line (\d+)\)(?: - .*)?$")
DOC_TEST_ORDINAL = re.compile(r" #\d+$")


def _doc_ids(block: list[TestCase]) -> list[TestCase]:
    """Doc tests named by their item alone (``src/lib.rs - jaro``): a patch that adds
    a line above an item's doc comment moves the line, and the same test would
    otherwise vanish and reappear under a new id (a passing test "missing" after the
    patch). An item's several doc tests are numbered in line order
    (``src/lib.rs - jaro #2``); :func:`doc_test_filter` selects them again (no
    selection could name a doc test whole: rustdoc splits filters at whitespace)."""
    if not block or not block[0].classname.startswith("doc:"):
        return block
    lines: dict[str, list[int]] = {}
    for case in block:
        m = _DOC_TEST_LINE.match(case.name)
        if m:
            lines.setdefault(m[1], []).append(int(m[2]))
    renamed = []
    for case in block:
        m = _DOC_TEST_LINE.match(case.name)
        if m is None:
            renamed.append(case)
            continue
        order = sorted(lines[m[1]])
        name = m[1] if len(order) == 1 else f"{m[1]} #{order.index(int(m[2])) + 1}"
        renamed.append(replace(case, id=f"{case.classname}::{name}", name=name))
    return renamed


def doc_test_filter(name: str) -> str:
    """A libtest filter (a substring, not ``--exact``) that runs the doc tests of the
    item a :func:`_doc_ids` name stands for. rustdoc splits its test arguments at
    whitespace, so no filter can hold the whole name: the item's path is used
    (``jaro``), which may run a few more doc tests (``jaro_winkler``)."""
    item = DOC_TEST_ORDINAL.sub("", name).split(" - ", 1)[-1]
    return max(item.split(), key=len, default=item)


def _check_libtest_block(
    target: str, block: list[TestCase], announced: int, summary: re.Match[str]
) -> None:
    passed, failed, ignored = (int(g) for g in summary.groups())
    got = [c.outcome for c in block]
    counts = (got.count("passed"), got.count("failed"), got.count("skipped"))
    if len(block) != announced or counts != (passed, failed, ignored):
        raise JUnitError(
            f"{target or 'a test binary'}: {len(block)} result lines {counts} against "
            f"{announced} announced and a summary of {passed} passed, {failed} failed, "
            f"{ignored} ignored"
        )


# Node's TAP reporter (Node 18, which has no junit reporter): every test starts with
# "# Subtest: NAME", indented four spaces per level, and ends with "ok N - NAME" or
# "not ok N - NAME" at the same indentation, directives after " # "; a YAML block
# ("---" ... "...") follows each result and may hold any text.
_TAP_SUBTEST = re.compile(r"^( *)# Subtest: (.*)$")
_TAP_RESULT = re.compile(r"^( *)(not ok|ok) \d+(?: - (.*?))?(?: # (SKIP|TODO)\b.*)?$", re.I)


def _tap_unescape(name: str) -> str:
    return re.sub(r"\\(.)", r"\1", name)


def parse_node_tap(data: bytes | str) -> list[TestCase]:
    """The leaf tests of Node's TAP output, with the ids :func:`parse_junit` gives
    Node's JUnit (``suite > test``): a test with subtests is a suite there, not a case."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_JUNIT_BYTES:
        raise JUnitError("TAP report too large")
    names: list[str] = []  # the open subtests, outermost first
    parents: set[int] = set()  # levels whose open subtest has subtests of its own
    in_yaml: str | None = None  # the indentation its block ends at
    cases: list[TestCase] = []
    for line in raw.decode(errors="replace").splitlines():
        if in_yaml is not None:
            if line == in_yaml + "...":
                in_yaml = None
            continue
        if line.strip() == "---":
            in_yaml = line[: len(line) - len(line.lstrip())]
            continue
        m = _TAP_SUBTEST.match(line)
        if m:
            level = len(m[1]) // 4
            del names[level:]
            parents.difference_update({lv for lv in parents if lv >= level})
            names.append(_tap_unescape(m[2]))
            if level:
                parents.add(level - 1)
            continue
        m = _TAP_RESULT.match(line)
        if not m:
            continue
        level = len(m[1]) // 4
        name = _tap_unescape(m[3] or "")
        leaf = level not in parents
        parents.discard(level)
        if not leaf:
            continue
        outcome: Outcome = "skipped" if m[4] else "failed" if m[2].lower() == "not ok" else "passed"
        ancestors = names[:level]
        cases.append(
            TestCase(
                id=NESTED_SEPARATOR.join([*ancestors, name]),
                name=name,
                classname="test",
                outcome=outcome,
            )
        )
    return cases


# jest's statuses for a test; "pending" is an it.skip, "todo" an it.todo.
_JEST_OUTCOME: dict[str, Outcome] = {"passed": "passed", "failed": "failed"}


def parse_jest_json(data: bytes | str, root: str = "") -> list[TestCase]:
    """The tests in jest's ``--json`` report, with ids ``<file>::<full name>``: the file
    relative to ``root`` (jest writes absolute paths), the full name its describe
    blocks and title joined by spaces, as jest's ``-t`` matches it. A test file that
    failed before running any test (a syntax error, a failed import) is one case with
    outcome ``error`` and the file as its id, so a broken file cannot pass silently."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_JUNIT_BYTES:
        raise JUnitError("jest report too large")
    try:
        report = json.loads(raw)
    except ValueError as exc:
        raise JUnitError(f"not JSON: {exc}") from None
    files = report.get("testResults") if isinstance(report, dict) else None
    if not isinstance(files, list):
        raise JUnitError("not a jest report (no testResults)")
    prefix = root.rstrip("/") + "/" if root else ""
    cases: list[TestCase] = []
    for file in files:
        if not isinstance(file, dict) or not isinstance(file.get("name"), str):
            raise JUnitError("a jest test file without a name")
        path = file["name"]
        if prefix and path.startswith(prefix):
            path = path[len(prefix) :]
        tests = file.get("assertionResults")
        if not isinstance(tests, list):
            raise JUnitError(f"{path}: no assertionResults")
        if not tests:
            if file.get("status") == "failed":
                message = str(file.get("message") or "")[:500]
                cases.append(TestCase(path, "", path, "error", message.strip()))
            continue
        for test in tests:
            if not isinstance(test, dict) or not isinstance(test.get("title"), str):
                raise JUnitError(f"{path}: a test without a title")
            ancestors = test.get("ancestorTitles")
            if not isinstance(ancestors, list) or not all(isinstance(a, str) for a in ancestors):
                ancestors = []
            full = test.get("fullName")
            if not isinstance(full, str) or not full:
                full = " ".join([*ancestors, test["title"]])
            outcome = _JEST_OUTCOME.get(str(test.get("status")), "skipped")
            messages = test.get("failureMessages")
            message = ""
            if outcome == "failed" and isinstance(messages, list) and messages:
                message = str(messages[0]).strip()[:500]
            cases.append(TestCase(f"{path}::{full}", full, path, outcome, message))
    return cases
