"""Patches that weaken the tests instead of fixing the code: a test file deleted, a
test or an assertion removed, a skip or xfail marker, an assertion that cannot fail, a
loose tolerance, tests deselected by the runner's configuration, and code anywhere
that can rewrite what the test run reports. Read from the patch text's added and
removed lines (a Python line's comment, and a whole-line ``//`` comment in Go, Rust and
JavaScript, is prose, not code), and a Go file's package clause from the file as the
patch leaves it; hygiene.py reports each as its finding.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from worker.gates.patch import FileChange, ParsedPatch

# Test support counts as test code: a conftest.py, a tests/__init__.py or a helper in a
# test folder changes what the tests see.
TEST_PATH_RE = re.compile(
    r"(^|/)(tests?|testing|spec|__tests__)/|(^|/)(test_[^/]*|[^/]*_test"
    r"|[^/]*_tests|conftest)\.py$|(^|/)[^/]*\.(test|spec)\.[jt]sx?$"
    r"|(^|/)[^/]*_test\.go$",
    re.I,
)
_TEST_DEF_RE = re.compile(
    r"^\s*(?:async\s+)?def\s+(test\w*)\s*\(|^\s*class\s+(Test\w*)"
    r"|^\s*(?:it|test|describe)\s*\(\s*['\"`](.+?)['\"`]"
    r"|^func\s+(Test\w+)\s*\("
)
_SKIP_RE = re.compile(
    r"@pytest\.mark\.(skip|skipif|xfail)\b|\bpytest\.(skip|xfail|importorskip)"
    r"\s*\(|@unittest\.(skip|skipIf|skipUnless|expectedFailure)\b"
    r"|\.skipTest\s*\(|\b(it|test|describe)\.(skip|todo)\s*\(|\bx(it|describe)"
    r"\s*\(|\bt\.Skip(Now|f)?\s*\(|raise\s+(unittest\.)?SkipTest\b"
)
_ASSERT_RE = re.compile(
    r"^\s*assert\b|\bself\.assert\w+\s*\(|\bself\.fail\s*\(|\bpytest\.raises"
    r"\s*\(|\bexpect\s*\(|\bassert_\w+\s*\(|\bt\.(Error|Fatal)f?\s*\("
)
_TRIVIAL_ASSERT_RE = re.compile(
    r"^\s*assert\s+(True|1|not\s+(False|0|None))\s*(,|$|#)"
    r"|\bself\.assertTrue\s*\(\s*True\s*\)|^\s*assert\s+.*\bor\s+True"
    r"\s*(,|$|#)|expect\s*\(\s*true\s*\)\.toBe\s*\(\s*true\s*\)"
)
_APPROX_TOL_RE = re.compile(
    r"\b(?:approx|isclose|allclose|assert_allclose)\s{0,8}\(.{0,200}?\b(rel|abs"
    r"|rtol|atol)\s*=\s*([0-9.eE+\-]+)"
)
_PLACES_RE = re.compile(r"\bassert(?:Not)?AlmostEqual\s{0,8}\(.{0,200}?\bplaces\s*=\s*([01])\b")
_COLLECT_IGNORE_RE = re.compile(
    r"\bcollect_ignore(_glob)?\b|--deselect\b|--ignore(-glob)?[=\s]"
    r"|\bpytest_collection_modifyitems\b|(^|\s)-k\s"
)
_TEST_CONFIG_FILES = {
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "conftest.py",
    "noxfile.py",
    "jest.config.js",
    "jest.config.ts",
    "vitest.config.ts",
}
# Code that can rewrite what the test run reports: pytest's reporting hooks (a
# makereport hook can turn every failure into a pass), exiting the interpreter early
# with success, and exit handlers (which run after the JUnit report is written).
_HARNESS_RE = re.compile(
    r"\bdef\s+pytest_(runtest_\w+|report_\w+|sessionfinish|terminal_summary|unconfigure"
    r"|exception_interact|itemcollected|deselected|make_collect_report|pycollect_\w+"
    r"|pyfunc_call|runtestloop|ignore_collect|collect_file|collection\w*|cmdline_\w+"
    r"|load_initial_conftests|pycollect_makeitem)\s*\("
)
# Anywhere in the patch, not only in tests: code the tests import runs in the runner's
# process. Exit hooks and hard exits run after the report is written; the report's
# path is in PYTEST_ADDOPTS; pytest's internals and plugin registration rewrite results.
_TAMPER_RE = re.compile(
    r"\b_exit\b|\batexit\b|\bPYTEST_ADDOPTS\b|\bjunit|\b_pytest\b|\bpytest_plugins\b"
    r"|\bpytest11\b|\bsys\.modules\s{0,8}\[[^\]]{0,200}\]\s{0,8}=(?!=)|\bsys\.excepthook\s*=(?!=)"
    r"|\bos\.kill\s*\(\s*os\.getpid|\bsignal\.SIGKILL\b|\bos\.abort\b"
)
# Go, Rust and node --test code under test runs inside the test process, whose output is
# the runner's report (test2json reads Go's framing lines, Ribbit reads libtest's, the
# node --test parent reads its file's child's v8-serialized events) and which Ribbit does
# not watch. To forge a pass it prints a passing run's lines and ends that process with
# success before its failing test reports. Go's ``os.Exit`` cannot during a test (``go
# test`` makes it panic inside M.Run), so every other way out, by any package name or
# alias (``syscall.Exit``, ``unix.Exit``, ``Exec``, raw system calls, a linkname into the
# runtime, cgo), and ``os.Exit`` itself in a library's code (a package ``init`` runs
# before M.Run); in Rust ``exit``/``abort`` however imported, libc's exits, execs and raw
# system calls, FFI, inline assembly, and a panic hook (it runs on a failing assertion,
# before libtest hears of it); in JavaScript any reference to an exit, and ``process``
# itself under another name. An exit whose only status is a non-zero literal cannot end
# a run with success, so it stays allowed in all three (``log.Exit(2)``,
# ``std::process::exit(1)`` in a CLI's main, ``process.exit(1)``). A method or field of
# the same name is another thing: tokio's ``handle.abort()``, tracing's ``fn exit``, a
# result's ``res.Exit != 0``, an ``os.SyscallError``'s ``se.Syscall``.
_FAILURE_CALL = r"\s*\(\s*[1-9]\d*\s*\)"
_GO_FIELD_USE = r"\s*(?:[=!<>]=?|,|\))"
_GO_EXIT_RE = re.compile(
    rf"(?<!\bos)\.\s*Exit\b(?!{_FAILURE_CALL})(?!{_GO_FIELD_USE})"
    rf"|\b(?:syscall|unix)\s*\.\s*Exit\b(?!{_FAILURE_CALL})"
    r"|\b(?:syscall|unix)\s*\.\s*(?:Exec|ForkExec|(?:Raw)?Syscall\w*)\b"
    r"|\b(?:Raw)?Syscall(?:6|NoError)?\s*\(|\bSYS_EXIT\w*|\bSYS_EXEC\w*|go:linkname"
    # cgo: a call into C, or the import whose preamble can run C before main.
    r'|(?<![.\w])C\s*\.\s*[A-Za-z_]\w*|\bimport\s+"C"|^\s*"C"\s*$'
)
# A package's assembly: a system call, or a jump into the runtime's exit.
_GO_ASM_EXIT_RE = re.compile(r"\bSYSCALL\b|\bSVC\b|\bINT\s+\$0x80\b|\u00b7exit\b")
_GO_OS_EXIT_RE = re.compile(rf"\bos\s*\.\s*Exit\b(?!{_FAILURE_CALL})")
_NOT_A_METHOD = r"(?<![.\w])(?<!\bfn )"
_RUST_EXIT_RE = re.compile(
    rf"{_NOT_A_METHOD}(?:exit|_exit)(?!{_FAILURE_CALL})\s*\(|{_NOT_A_METHOD}abort\s*\("
    rf"|\bprocess\s*::\s*abort\b|\bprocess\s*::\s*exit\b(?!{_FAILURE_CALL})"
    # Imported under another name: `use std::process::{exit as q};`, over several lines.
    r"|\bprocess\s*::\s*\{[^}]{0,200}\b(?:exit|abort)\b|(?<![.\w])(?:exit|abort)\s+as\s"
    # libc's ways out by name; its other calls (isatty, getuid...) end nothing.
    r"|\blibc\s*::\s*(?:_?exit|_Exit|abort|exec\w*|fexecve|syscall|kill|raise|fork|vfork|posix_spawn\w*)\b"
    r'|\bextern\s+"C"|\b(?:global_)?asm!|\bset_hook\b|\bCommandExt\b|\bexecv\w*'
    r"|\.\s*exec\s*\(\s*\)"
)
_JS_PROCESS = r"(?:(?:globalThis|global|window|self)\s*\.\s*)?process"
_JS_EXIT_RE = re.compile(
    # process.exit.call(process, 0) and Reflect.apply(process.exit, ...) exit too.
    r"\bprocess\s*\.\s*(?:exit|reallyExit)\b(?!\s*\(\s*[1-9]\d*\s*\))|\bprocess\s*\[[^\]]"
    r"|\bprocess\s*\.\s*(?:binding|_linkedBinding)\b|--expose-internals"
    # `process` under another name: `const p = process;`, `const { exit } = process`.
    rf"|(?<![=!<>])=>?\s*{_JS_PROCESS}\s*(?:[;,)]|$)|\.\.\.\s*{_JS_PROCESS}\b(?!\s*\.)"
    r"|\[\s*['\"`]process['\"`]\s*\]"
    r"|\b(?:import|export)\s+(?!process\s+from\b)[^'\"`;]{0,200}\bfrom\s*['\"`](?:node:)?process['\"`]"
    r"|(?<!\bprocess = )\b(?:require|import)\s*\(\s*['\"`](?:node:)?process['\"`]"
)
# The runner's own framing written from code: Go's test2json lines (and the \x16 byte
# that marks them from Go 1.20 on: raw, or written as an escape before framing words,
# since the escape alone is also a terminal's Ctrl-V), libtest's result, count and binary
# lines (a result after a test name's space, not "Checking {}... ok"), node's child event
# stream (its serializer, its event names, the variable that tells a child it is one;
# ``v8.serialize`` alone is the deep-clone idiom) and Node 18's TAP.
_GO_FRAMING_WORD = r"(?:---|===|\b(?:PASS|FAIL|SKIP|RUN|PAUSE|CONT|NAME)\b)"
_GO_FRAMING_RE = re.compile(
    r"(?:---|===)\s*(?:PASS|FAIL|SKIP|RUN|PAUSE|CONT|NAME)\b|\x16"
    rf"|\\(?:x16|026|u0016|U00000016).{{0,80}}?{_GO_FRAMING_WORD}"
)
_RUST_FRAMING_RE = re.compile(
    r"test result:|(?:^|[\s\"'`]|\"\{[^}]{0,40}\})\.\.\. (?:ok|FAILED|ignored)\b"
    r"|running \d+ tests?|\bRunning (?:unittests|tests/)|\bDoc-tests\b"
)
_JS_FRAMING_RE = re.compile(
    r"\bDefaultSerializer\b|\bNODE_TEST_CONTEXT\b"
    r"|\btest:(?:pass|fail|start|plan|complete|enqueue|dequeue|diagnostic|summary)\b"
    r"|# Subtest:|\b(?:not )?ok \d+ - "
)
_REL_TOL_LIMIT = 0.05
_ABS_TOL_LIMIT = 1.0


@dataclass(frozen=True)
class Weakening:
    """One way the patch weakens the tests."""

    rule: str
    message: str
    path: str
    line: int | None = None


def is_test_path(path: str) -> bool:
    return bool(TEST_PATH_RE.search(path))


def _test_names(lines: Iterable[tuple[int, str]]) -> Counter[str]:
    names: Counter[str] = Counter()
    for _, text in lines:
        m = _TEST_DEF_RE.match(text)
        if m:
            names[next(g for g in m.groups() if g)] += 1
    return names


# Which files a line rule reads: test-runner configuration (by file name), every file
# (code the tests import runs in the runner's process), test files, or one language's
# files; "go-library" is a non-test Go file outside package main.
LineScope = Literal["test-config", "any", "tests", "go", "go-asm", "go-library", "rust", "js"]
# The languages whose code under test Ribbit runs unwatched inside the test process.
_LANGUAGE_SUFFIXES: dict[LineScope, tuple[str, ...]] = {
    "go": (".go",),
    "go-asm": (".s",),
    "rust": (".rs",),
    "js": (".js", ".cjs", ".mjs", ".jsx", ".ts", ".cts", ".mts", ".tsx"),
}
# A patched file's text (its head is enough) by repository path; None where it cannot be
# read (the patch did not apply, or the path is no regular file).
PatchedText = Callable[[str], str | None]
# A Go file's package clause: the first thing after comments (a "package main" in a
# leading comment is prose).
_GO_PACKAGE_RE = re.compile(r"\A\ufeff?(?:\s|//[^\n]*|/\*.*?\*/)*package\s+(\w+)", re.S)
# A whole-line `//` comment is prose in Go, Rust and JavaScript, but for Go's `//go:`
# directives, and for a line holding a quote, a backtick, a backslash, `$` or a line
# break other than "\n": such a line may sit inside a string that it closes, continues
# onto a printed line or interpolates into (`${...}`).
_SLASH_COMMENT_RE = re.compile(r"^\s*//(?!go:)[^'\"`\\$\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]*$")
_LANGUAGE_SCOPES: tuple[LineScope, ...] = (*_LANGUAGE_SUFFIXES, "go-library")
_SLASH_COMMENT_SUFFIXES = (
    _LANGUAGE_SUFFIXES["go"] + _LANGUAGE_SUFFIXES["rust"] + _LANGUAGE_SUFFIXES["js"]
)
_ENDS_PROCESS = (
    "the patch adds {} code that can end or replace the test process from inside "
    "(its runner then reports what the process printed last)"
)
_WRITES_FRAMING = "the patch adds {} code that writes the test runner's own result lines"


@dataclass(frozen=True)
class LineRule:
    """An added line that weakens the tests: one of ``patterns`` found in it (and ``when``
    holds for the match) in a file of ``scope``. ``message`` is formatted with the
    match's groups."""

    rule: str
    scope: LineScope
    patterns: tuple[re.Pattern[str], ...]
    message: str
    when: Callable[[re.Match[str]], bool] = lambda _match: True


# In report order: a file's rules of one scope are walked line by line, each line through
# the rules in this order.
LINE_RULES: tuple[LineRule, ...] = (
    LineRule(
        "tests-deselected",
        "test-config",
        (_COLLECT_IGNORE_RE,),
        "the patch makes the test run skip or deselect tests",
    ),
    LineRule(
        "test-harness-tampered",
        "any",
        (_HARNESS_RE, _TAMPER_RE),
        "the patch adds code that can change what the test run reports",
    ),
    LineRule("test-harness-tampered", "go", (_GO_EXIT_RE,), _ENDS_PROCESS.format("Go")),
    LineRule("test-harness-tampered", "go", (_GO_FRAMING_RE,), _WRITES_FRAMING.format("Go")),
    LineRule(
        "test-harness-tampered",
        "go-library",
        (_GO_OS_EXIT_RE,),
        "the patch adds os.Exit to a Go library's code, where it can run outside a test "
        "(a package init), and end the test process with success",
    ),
    LineRule("test-harness-tampered", "go-asm", (_GO_ASM_EXIT_RE,), _ENDS_PROCESS.format("Go")),
    LineRule("test-harness-tampered", "go-asm", (_GO_FRAMING_RE,), _WRITES_FRAMING.format("Go")),
    LineRule("test-harness-tampered", "rust", (_RUST_EXIT_RE,), _ENDS_PROCESS.format("Rust")),
    LineRule("test-harness-tampered", "rust", (_RUST_FRAMING_RE,), _WRITES_FRAMING.format("Rust")),
    LineRule("test-harness-tampered", "js", (_JS_EXIT_RE,), _ENDS_PROCESS.format("JavaScript")),
    LineRule(
        "test-harness-tampered", "js", (_JS_FRAMING_RE,), _WRITES_FRAMING.format("JavaScript")
    ),
    LineRule("test-skipped", "tests", (_SKIP_RE,), "the patch adds a skip or xfail marker"),
    LineRule(
        "trivial-assert",
        "tests",
        (_TRIVIAL_ASSERT_RE,),
        "the patch adds an assertion that cannot fail",
    ),
    LineRule(
        "loose-tolerance",
        "tests",
        (_APPROX_TOL_RE,),
        "the patch sets a loose tolerance ({0}={1})",
        when=lambda m: _loose(m[1], m[2]),
    ),
    LineRule(
        "loose-tolerance", "tests", (_PLACES_RE,), "the patch compares to 0 or 1 decimal places"
    ),
)


def _in_scope(change: FileChange, scope: LineScope, patched: PatchedText) -> bool:
    if scope == "test-config":
        return change.path.rsplit("/", 1)[-1] in _TEST_CONFIG_FILES
    if scope == "tests":
        return any(is_test_path(p.path) for p in change.paths)
    if scope == "go-library":
        path = change.path
        return (
            path.endswith(".go")
            and not path.endswith("_test.go")
            and (_go_package(change, patched) != "main")
        )
    if scope in _LANGUAGE_SUFFIXES:
        return change.path.endswith(_LANGUAGE_SUFFIXES[scope])
    return True


def _go_package(change: FileChange, patched: PatchedText) -> str | None:
    """The package a Go file declares: read from the patched file, else from the patch's
    lines when they start the file; None when neither says (the caller's rule then
    treats it as a library, where the exit is the stricter case)."""
    text = patched(change.path)
    if text is None:
        head = []
        for expected, (line_no, line) in enumerate(change.added, start=1):
            if line_no != expected:
                break
            head.append(line)
        text = "\n".join(head)
    match = _GO_PACKAGE_RE.match(text)
    return match[1] if match else None


def _code_of(path: str, text: str) -> str:
    """The part of an added line that the rules read: in a Python file, the line without
    its comment, so prose that names ``atexit`` or a pytest hook is not taken for code
    (colorama's real fix explains itself with "when atexit runs"). The tokenizer reads
    the line alone, so a line that really sits inside a string can look like a comment:
    a comment holding a quote could close that string and be code, and keeps its text.
    In Go, Rust and JavaScript a whole-line ``//`` comment is prose the same way
    (:data:`_SLASH_COMMENT_RE` says which are not)."""
    if path.endswith(_SLASH_COMMENT_SUFFIXES):
        return "" if _SLASH_COMMENT_RE.match(text) else text
    if not path.endswith((".py", ".pyi")):
        return text
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                if any(quote in token.string for quote in "'\""):
                    return text
                return text[: token.start[1]]
    except (tokenize.TokenError, SyntaxError):
        pass
    return text


def _line_findings(
    change: FileChange, scope: LineScope, patched: PatchedText = lambda _path: None
) -> list[Weakening]:
    """The findings of ``scope``'s rules on the file's added lines (none for a file out of
    the scope)."""
    if not _in_scope(change, scope, patched):
        return []
    rules = [r for r in LINE_RULES if r.scope == scope]
    found: list[Weakening] = []
    for line_no, line in change.added:
        text = _code_of(change.path, line)
        for rule in rules:
            match = next((m for p in rule.patterns if (m := p.search(text))), None)
            if match is not None and rule.when(match):
                message = rule.message.format(*match.groups())
                found.append(Weakening(rule.rule, message, path=change.path, line=line_no))
    return found


def check_tests_weakened(
    parsed: ParsedPatch, patched: PatchedText = lambda _path: None
) -> list[Weakening]:
    """Every way ``parsed`` weakens the tests; ``patched`` reads a file as the patch leaves
    it, where a rule needs more than the lines the patch adds (a Go file's package)."""
    found: list[Weakening] = []
    added_everywhere = _test_names(line for c in parsed.files for line in c.added)
    for change in parsed.files:
        old_path = change.old.path if change.old else None
        if change.status == "deleted" and old_path and is_test_path(old_path):
            found.append(
                Weakening("test-file-deleted", "the patch deletes a test file", path=old_path)
            )
        found += _line_findings(change, "test-config")
        found += _line_findings(change, "any")
        for language in _LANGUAGE_SCOPES:
            found += _line_findings(change, language, patched)
        if not _in_scope(change, "tests", patched):
            continue
        removed_names = _test_names(change.removed) - added_everywhere
        found += [
            Weakening(
                "test-removed", f"the patch removes the test `{test}`", path=old_path or change.path
            )
            for test in sorted(removed_names)
        ]
        found += _line_findings(change, "tests")
        if change.status != "deleted":
            removed_asserts = sum(1 for _, t in change.removed if _ASSERT_RE.search(t))
            added_asserts = sum(1 for _, t in change.added if _ASSERT_RE.search(t))
            if removed_asserts > added_asserts:
                found.append(
                    Weakening(
                        "assertions-removed",
                        f"the patch removes "
                        f"{removed_asserts - added_asserts} assertion(s) from "
                        "tests",
                        path=change.path,
                    )
                )
    return found


def _loose(kind: str, value: str) -> bool:
    try:
        number = float(value)
    except ValueError:
        return False
    limit = _ABS_TOL_LIMIT if kind in {"abs", "atol"} else _REL_TOL_LIMIT
    return number >= limit
