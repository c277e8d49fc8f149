"""The tests a patch is about: the test around each line it adds (Python's ``test_*``,
Go's ``TestX``, Rust's ``#[test]`` fns, JavaScript's ``it``/``test`` titles), the tests
the issue names, and which reported test cases each of them is (:func:`_matches`: by
file, class and name, never by name alone). The test gate (worker/gates/tests.py) judges
these; the pinned-test check (worker/gates/pinned.py) reads what the patch edits in them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from worker.gates.base import GateContext
from worker.gates.hygiene import is_test_path
from worker.gates.junit import NESTED_SEPARATOR, TestCase
from worker.gates.trees import PatchTrees, regular_file_inside

_ISSUE_TEST_RE = re.compile(r"\b(test_\w+|Test\w+)")
_PY_DEF_RE = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)\s*\(")
_PY_CLASS_RE = re.compile(r"^(\s*)class\s+(\w+)\s*[:(]")
_GO_FUNC_RE = re.compile(r"^func\s+(?:\([^)]*\)\s*)?(\w+)\s*[\[(]")
_GO_TEST_NAME_RE = re.compile(r"(?:Test|Fuzz)(?:[^a-z]\w*)?")
_RS_FN_RE = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+(\w+)")
# JavaScript and TypeScript test files (jest, vitest, node --test): a.test.ts, a.spec.js,
# and any script under a test folder.
_JS_EXT_RE = re.compile(r"\.[cm]?[jt]sx?$")
# it("title", ...), test('title', ...), it.only(`title`, ...): the title as a literal.
_JS_TEST_RE = re.compile(r"""^\s*(?:it|test)(?:\.\w+)*\s*\(\s*(['"`])((?:\\.|(?!\1).)*)\1""")
_JS_SUITE_RE = re.compile(r"^\s*(?:describe|suite)(?:\.\w+)*\s*\(")


@dataclass(frozen=True)
class TargetTest:
    name: str  # function name
    path: str | None  # the file, when the patch says
    # The pytest class the function is a method of (Python, when the patch says): tests
    # of one name in different classes of one file are different tests.
    cls: str | None = None


def target_tests(ctx: GateContext, trees: PatchTrees) -> list[TargetTest]:
    """Tests the patch adds or changes (the test function around each added line:
    Python's ``test_*``, Go's ``TestX``, Rust's ``#[test]`` fns), and tests the issue
    names."""
    targets: dict[tuple[str, str | None, str | None], TargetTest] = {}
    for change in trees.parsed.files:
        if change.new is None or change.new.escapes:
            continue
        path = change.new.path
        enclosing = _test_finder(path)
        lines = _lines(trees.after, path) if enclosing is not None else None
        if enclosing is None or lines is None:
            continue
        for line_no, _ in change.added:
            name = enclosing(lines, line_no)
            if name:
                cls = _test_class(lines, line_no) if enclosing is _enclosing_test else None
                targets[(name, path, cls)] = TargetTest(name=name, path=path, cls=cls)
    for name in _ISSUE_TEST_RE.findall(ctx.issue_text or ""):
        targets.setdefault((name, None, None), TargetTest(name=name, path=None))
    return list(targets.values())


def _test_finder(path: str) -> Callable[[list[str], int], str | None] | None:
    """How to find the test around a line of ``path``, or None: not a test file."""
    # Rust's unit tests live in the code's own files (a #[test] in src/lib.rs).
    if path.endswith(".py") and is_test_path(path):
        return _enclosing_test
    if path.endswith("_test.go"):
        return _enclosing_go_test
    if path.endswith(".rs"):
        return _enclosing_rust_test
    if _JS_EXT_RE.search(path) and is_test_path(path):
        return _enclosing_js_test
    return None


def _lines(tree: Path, path: str) -> list[str] | None:
    file = regular_file_inside(tree, path)
    if file is None:
        return None
    try:
        return file.read_text(errors="replace").splitlines()
    except OSError:
        return None


def edited_lines(trees: PatchTrees, target: TargetTest) -> tuple[list[str], list[str]]:
    """The lines the patch removes from and adds to the test ``target`` names (in the
    base's file and in the patched one): its assertions before and after, side by side."""
    old: list[str] = []
    new: list[str] = []
    finder = _test_finder(target.path or "")
    if finder is None:
        return old, new
    for change in trees.parsed.files:
        if change.new is None or change.new.path != target.path:
            continue
        base = _lines(trees.before, change.old.path) if change.old is not None else None
        after = _lines(trees.after, target.path)
        for lines, edits, into in ((base, change.removed, old), (after, change.added, new)):
            for line_no, text in edits:
                if lines is not None and finder(lines, line_no) == target.name and text.strip():
                    into.append(text.strip())
    return old, new


@dataclass(frozen=True)
class _PyTest:
    """A test function pytest collects from a file (module level, or a method of a
    class), and the lines that are it: from its first decorator (a ``parametrize``
    table is part of the test it decorates) to its last line."""

    name: str
    first: int  # 1-based, inclusive
    last: int
    cls: str | None  # the collected class it is a method of; None: module level or a mixin


@lru_cache(maxsize=32)
def _python_tests(source: str) -> tuple[_PyTest, ...] | None:
    """The test functions of a Python file, read by its syntax tree (a decorator's
    arguments and a signature over several lines defeat any reading by indentation);
    None: the file does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found: list[_PyTest] = []

    def visit(body: list[ast.stmt], cls: str | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, node.name if _collected_class(node) else None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                "test"
            ):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found.append(_PyTest(node.name, first, node.end_lineno or node.lineno, cls))

    visit(tree.body, None)
    return tuple(found)


def _collected_class(node: ast.ClassDef) -> bool:
    """Whether pytest collects the class's methods under its name: a ``Test*`` class or a
    unittest ``TestCase``; a mixin's methods run under the classes that inherit it."""
    bases = (ast.unparse(b) for b in node.bases)
    return node.name.startswith("Test") or any("TestCase" in b for b in bases)


def _holding(tests: tuple[_PyTest, ...], line_no: int) -> _PyTest | None:
    return next((t for t in tests if t.first <= line_no <= t.last), None)


def _test_class(lines: list[str], line_no: int) -> str | None:
    """The pytest class (``Test*``) whose method holds line ``line_no`` (1-based), or
    None: a module-level test, or a method of a mixin that ``Test*`` classes inherit
    (collected under their names, not the mixin's)."""
    tests = _python_tests("\n".join(lines))
    if tests is None:
        return _indented_test_class(lines, line_no)
    found = _holding(tests, line_no)
    return found.cls if found is not None else None


def _enclosing_test(lines: list[str], line_no: int) -> str | None:
    """The ``test_*`` function whose lines (its decorators included) hold line
    ``line_no`` (1-based)."""
    if not 1 <= line_no <= len(lines):
        return None
    own = lines[line_no - 1]
    if not own.strip() or own.lstrip().startswith("#"):
        return None  # blank lines and comments change no test
    tests = _python_tests("\n".join(lines))
    if tests is None:
        return _indented_enclosing_test(lines, line_no)
    found = _holding(tests, line_no)
    return found.name if found is not None else None


def _indented_test_class(lines: list[str], line_no: int) -> str | None:
    """:func:`_test_class` by indentation, for a file that does not parse."""
    own = lines[line_no - 1]
    indent = len(own) - len(own.lstrip())
    def_indent: int | None = None
    for i in range(line_no - 1, -1, -1):
        line = lines[i]
        if def_indent is None:
            m = _PY_DEF_RE.match(line)
            if m and (i == line_no - 1 or len(m[1]) < indent):
                def_indent = len(m[1])
            continue
        c = _PY_CLASS_RE.match(line)
        if c and len(c[1]) < def_indent:
            collected = c[2].startswith("Test") or "TestCase" in line
            return c[2] if collected else None
        if line[:1].strip() and not line.startswith(("#", "@")):
            return None  # reached module level: not in a class
    return None


def _indented_enclosing_test(lines: list[str], line_no: int) -> str | None:
    """:func:`_enclosing_test` by indentation, for a file that does not parse."""
    own = lines[line_no - 1]
    indent = len(own) - len(own.lstrip())
    for i in range(line_no - 1, -1, -1):
        m = _PY_DEF_RE.match(lines[i])
        if not m:
            continue
        def_indent = len(m[1])
        if i == line_no - 1 or def_indent < indent:
            return m[2] if m[2].startswith("test") else None
    return None


def _enclosing_go_test(lines: list[str], line_no: int) -> str | None:
    """The ``TestX`` function whose body (or ``func`` line) holds line ``line_no``:
    gofmt puts a top-level ``func`` and its closing ``}`` at column 0."""
    if not 1 <= line_no <= len(lines) or not lines[line_no - 1].strip():
        return None
    if lines[line_no - 1].lstrip().startswith("//"):
        return None
    for i in range(line_no - 1, -1, -1):
        m = _GO_FUNC_RE.match(lines[i])
        if m:
            return m[1] if _GO_TEST_NAME_RE.fullmatch(m[1]) else None
        if lines[i].startswith("}") and i != line_no - 1:
            return None  # after the end of the function above: not inside one
    return None


def _enclosing_rust_test(lines: list[str], line_no: int) -> str | None:
    """The ``#[test]`` function whose body (or ``fn`` line) holds line ``line_no``."""
    if not 1 <= line_no <= len(lines):
        return None
    own = lines[line_no - 1]
    if not own.strip() or own.lstrip().startswith("//"):
        return None
    indent = len(own) - len(own.lstrip())
    for i in range(line_no - 1, -1, -1):
        m = _RS_FN_RE.match(lines[i])
        if not m:
            if i == line_no - 1 and own.lstrip().startswith("#["):
                # An attribute (#[test], #[ignore]) belongs to the fn below it.
                below = next(
                    (j for j in range(line_no, len(lines)) if not _rust_attribute(lines[j])),
                    None,
                )
                fn = _RS_FN_RE.match(lines[below]) if below is not None else None
                return fn[2] if fn and below is not None and _rust_is_test(lines, below) else None
            continue
        if i == line_no - 1 or len(m[1]) < indent:
            return m[2] if _rust_is_test(lines, i) else None
    return None


def _enclosing_js_test(lines: list[str], line_no: int) -> str | None:
    """The title of the ``it``/``test`` call whose callback holds line ``line_no``, by
    indentation (test files are formatted; a formatter puts a callback's body deeper
    than its call): the nearest such call above, less indented than every line between."""
    if not 1 <= line_no <= len(lines):
        return None
    own = lines[line_no - 1]
    if not own.strip() or own.lstrip().startswith("//"):
        return None
    m = _JS_TEST_RE.match(own)
    if m:
        return _js_title(m)
    indent = len(own) - len(own.lstrip())
    for i in range(line_no - 2, -1, -1):
        line = lines[i]
        depth = len(line) - len(line.lstrip())
        if not line.strip() or depth >= indent:
            continue
        m = _JS_TEST_RE.match(line)
        if m:
            return _js_title(m)
        if depth == 0 or _JS_SUITE_RE.match(line):
            return None  # in a describe block or a helper, not in a test
        indent = depth
    return None


def _js_title(m: re.Match[str]) -> str | None:
    title = re.sub(r"\\(.)", r"\1", m[2])
    # A template literal with a placeholder has no fixed title to look for.
    return None if m[1] == "`" and "${" in title else title


def _rust_attribute(line: str) -> bool:
    text = line.strip()
    return text.startswith(("#[", "//"))


def _rust_is_test(lines: list[str], fn_line: int) -> bool:
    """Whether the attributes right above line ``fn_line`` (0-based) hold ``#[test]``."""
    for i in range(fn_line - 1, -1, -1):
        if lines[i].strip() == "#[test]":
            return True
        if not _rust_attribute(lines[i]):
            return False
    return False


def _rust_package(path: str) -> tuple[str, str]:
    """A Rust source path split into its package's folder and the path within it (the
    part from ``src/``, ``tests/``, ``benches/`` or ``examples/`` on): "calc/src/lib.rs"
    is ("calc", "src/lib.rs"), a single crate's "src/lib.rs" ("", "src/lib.rs")."""
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        if part in ("src", "tests", "benches", "examples"):
            return "/".join(parts[:i]), "/".join(parts[i:])
    return "", path


def _matches(case: TestCase, target: TargetTest) -> bool:
    if target.path is not None and target.path.endswith(".go"):
        # go test: classname is the package's import path, name "TestX" or "TestX/sub".
        if case.name != target.name and not case.name.startswith(target.name + "/"):
            return False
        folder = str(Path(target.path).parent)
        return folder == "." or case.classname.endswith("/" + folder)
    if target.path is not None and target.path.endswith(".rs"):
        # libtest: classname is the test binary's source, in a workspace's member after
        # its folder ("src/lib.rs", "tests/cli.rs", "crates/calc/src/lib.rs"), name the
        # test's module path ("tests::jaro_x").
        if case.name.rsplit("::", 1)[-1] != target.name or case.classname.startswith("doc:"):
            return False
        package, source = _rust_package(target.path)
        case_package, case_source = _rust_package(case.classname)
        if case_package != package:
            return False
        if source.startswith("tests/"):
            # tests/x.rs is its own binary; tests/x/helpers.rs belongs to one of them.
            nested = source.count("/") > 1
            return case_source == source or (nested and case_source.startswith("tests/"))
        return not case_source.startswith("tests/")
    if target.path is not None and _JS_EXT_RE.search(target.path):
        # jest: the file, and the describe blocks and title joined by spaces; vitest:
        # the file, and the same joined by " > ". Node's junit names no file.
        if case.classname in (target.path, "test"):
            return case.name == target.name or case.name.endswith(
                (" " + target.name, NESTED_SEPARATOR + target.name)
            )
        # mocha's xunit names no file either: its classname is the describe blocks'
        # titles (never a path), its name the test's own title.
        return not _JS_EXT_RE.search(case.classname) and case.name == target.name
    # An issue names a Rust test by its function: libtest's name is its module path.
    name = case.base_name.rsplit("::", 1)[-1]
    if name != target.name and case.classname.rsplit(".", 1)[-1] != target.name:
        return False
    if target.path is None:
        return True
    where = Path(target.path)
    # A test method in a package's __init__.py (a mixin, say) runs as a method of the
    # classes that inherit it, collected from the package's other modules.
    stem = where.parent.name if where.name == "__init__.py" else where.stem
    parts = case.classname.split(".")
    if target.cls is not None and case.classname and target.cls not in parts:
        return False  # the same name in another class of the file: another test
    return not case.classname or stem in parts
