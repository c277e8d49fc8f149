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
at the top changes how every line of it reads.
"""

from __future__ import annotations

import ast
import builtins
import codecs
import io
import itertools
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from worker.gates.trees import regular_file_inside

# A file past this is not read whole; a Python file past it is a finding (a 3 MB line
# of padding must not push a probe out of reach: the diff's line limit does not see it).
_MAX_BYTES = 8 * 1024 * 1024
_ALLOWED_CODECS = {"utf-8", "ascii"}

# Trojan Source (CVE-2021-42574): embeddings, overrides, isolates and the implicit marks.
BIDI_CONTROLS = frozenset(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
)

# Modules whose presence means "a test run is going on".
_RUNNER_MODULES = re.compile(
    r"^(pytest|_pytest(\..*)?|py\.test|pluggy|unittest(\..*)?|nose2?|xdist(\..*)?|doctest"
    r"|coverage|pytest_\w+|hypothesis)$"
)
# Environment variables a test runner, a CI service or Ribbit's sandbox sets.
_MARKER_ENV = re.compile(
    r"^(_?PYTEST\w*|CI|CI_\w+|CONTINUOUS_INTEGRATION|BUILD_ID|BUILD_NUMBER|GITHUB_ACTIONS"
    r"|GITHUB_WORKFLOW|GITHUB_RUN_\w+|GITLAB_CI|TRAVIS|CIRCLECI|JENKINS_\w+|BUILDKITE"
    r"|TF_BUILD|DRONE|CODEBUILD_\w+|RUNNER_\w+|TEAMCITY_VERSION|RIBBIT\w*|SANDBOX\w*"
    r"|BWRAP\w*|CONTAINER|container|KUBERNETES_SERVICE_HOST|TOX_\w+|NOX_\w+"
    r"|COV_CORE_\w+|UNITTEST\w*)$",
)
# Paths that exist only in the sandbox or in a container.
_MARKER_PATH = re.compile(
    r"^/(workspace|work|sandbox|\.dockerenv|run/\.containerenv|proc/(1|self)/(cgroup"
    r"|mountinfo|sched))(/|$)"
)
# String constants that name the judge wherever they appear (a key kept in a variable,
# a loop over ``os.environ``): weaker spellings such as "CI" count only where read.
_STRONG_MARKER = re.compile(
    r"^(_?PYTEST(_\w*)?|RIBBIT_\w*|/workspace(/.*)?|/\.dockerenv|/run/\.containerenv"
    r"|/proc/(1|self)/cgroup)$"
)
# Files that drive builds, docs and CI rather than being the code under test: asking
# "am I on CI?" is their job.
_TOOLING = re.compile(
    r"(^|/)(noxfile|setup|fabfile|tasks|dodo)\.py$|^(docs?|\.github|ci|scripts|tools|benchmarks?)/"
)
_ENV_OBJECTS = {"os.environ", "os.environb", "posix.environ"}
_ENV_GETTERS = {
    "os.getenv",
    "os.getenvb",
    *(f"{env}.{m}" for env in _ENV_OBJECTS for m in ("get", "pop", "setdefault", "__getitem__")),
    *(f"{env}.__contains__" for env in _ENV_OBJECTS),
}
_MODULE_GETTERS = {
    "sys.modules.get",
    "sys.modules.__getitem__",
    "sys.modules.__contains__",
    "sys.modules.pop",
    "importlib.util.find_spec",
    "pkgutil.find_loader",
}
_PATH_PROBES = {
    "open",
    "io.open",
    "os.open",
    "os.path.exists",
    "os.path.lexists",
    "os.path.isdir",
    "os.path.isfile",
    "os.path.islink",
    "os.path.ismount",
    "os.access",
    "os.stat",
    "os.lstat",
    "os.listdir",
    "os.scandir",
    "os.readlink",
    "pathlib.Path",
    "pathlib.PosixPath",
    "pathlib.PurePath",
    "glob.glob",
}
_HOST_PROBES = {
    "socket.gethostname",
    "socket.getfqdn",
    "platform.node",
    "platform.uname",
    "os.uname",
    "os.getcwd",
    "pathlib.Path.cwd",
    "getpass.getuser",
    "os.getlogin",
    "os.getppid",
    "sys.gettrace",
}


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
    names = _Names(tree)
    if changed.is_test:
        judged = _rebinding_findings(tree, names, repo_modules)
    elif _TOOLING.search(changed.path):
        return found  # build and CI tooling may ask where it runs; the code under test not
    else:
        judged = _detection_findings(tree, names)
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
            _STRONG_MARKER.match(value) or _RUNNER_NAME.match(value) or _MARKER_PATH.match(value)
        ):
            found.append(
                SourceFinding(
                    _marker_rule(value),
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


class _Names:
    """Where each name of a module comes from: imports and simple assignments, flow-
    insensitively (any binding anywhere counts), and the string constants names hold."""

    def __init__(self, tree: ast.AST) -> None:
        self.qualified: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        # Two passes, so an alias of an alias resolves whatever the order of definition.
        for _ in range(2):
            for node in ast.walk(tree):
                self._bind(node)

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.qualified[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.qualified[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                self.qualified[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                return
            qual = self.resolve(node.value)
            text = self.string(node.value)
            for target in targets:
                if isinstance(target, ast.Name):
                    if qual is not None:
                        self.qualified[target.id] = qual
                    if text is not None:
                        self.strings[target.id] = text

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for (``os.environ.get``), if any."""
        if isinstance(node, ast.Name):
            if node.id in self.qualified:
                return self.qualified[node.id]
            return node.id if hasattr(builtins, node.id) else None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            first = self.string(node.args[0]) if node.args else None
            if func in {"__import__", "importlib.import_module", "builtins.__import__"}:
                return first
            # A copy of a mapping reads the same keys: dict(os.environ), os.environ.copy().
            if func in {"dict", "copy.copy"} and len(node.args) == 1:
                return self.resolve(node.args[0])
            if isinstance(node.func, ast.Attribute) and node.func.attr == "copy" and not node.args:
                return self.resolve(node.func.value)
            if func in {"getattr", "builtins.getattr"} and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                attr = self.string(node.args[1])
                return None if base is None or attr is None else f"{base}.{attr}"
            return None
        if isinstance(node, ast.Subscript):
            # vars(os)["environ"], os.__dict__["environ"]
            key = self.string(node.slice)
            if key is None:
                return None
            if isinstance(node.value, ast.Call) and self.resolve(node.value.func) == "vars":
                base = self.resolve(node.value.args[0]) if node.value.args else None
                return None if base is None else f"{base}.{key}"
            if isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__":
                base = self.resolve(node.value.value)
                return None if base is None else f"{base}.{key}"
        return None

    def string(self, node: ast.AST) -> str | None:
        """The string an expression always evaluates to, folded from constant parts."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            value = node.value
            return value.decode(errors="replace") if isinstance(value, bytes) else value
        if isinstance(node, ast.Name):
            return self.strings.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.string(node.left), self.string(node.right)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.JoinedStr):
            parts = [self.string(v) for v in node.values]
            return None if None in parts else "".join(p or "" for p in parts)
        if isinstance(node, ast.FormattedValue) and node.format_spec is None:
            return self.string(node.value)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.List | ast.Tuple)
        ):
            sep = self.string(node.func.value)
            parts = [self.string(e) for e in node.args[0].elts]
            return None if sep is None or None in parts else sep.join(p or "" for p in parts)
        if isinstance(node, ast.Call) and self.resolve(node.func) == "str":
            return self.string(node.args[0]) if len(node.args) == 1 else None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"upper", "lower", "strip"}
            and not node.args
        ):
            inner = self.string(node.func.value)
            if inner is None:
                return None
            method: Callable[[str], str] = getattr(str, node.func.attr)
            return method(inner)
        return None

    def probed(self, node: ast.AST) -> str | None:
        """The dotted name behind a value, seen through calls and subscripts
        (``sys.argv[0]`` -> sys.argv, ``socket.gethostname()`` -> socket.gethostname)."""
        while isinstance(node, ast.Subscript | ast.Call):
            if isinstance(node, ast.Call):
                if (name := self.resolve(node)) is not None:
                    return name
                node = node.func
            else:
                node = node.value
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call):
            inner = self.probed(node.value)  # os.uname().nodename
            return None if inner is None else f"{inner}.{node.attr}"
        return self.resolve(node)


_Judged = tuple[str, int, str]  # (rule, line, message)


def _detection_findings(tree: ast.AST, names: _Names) -> Iterator[_Judged]:
    """Probes of the test runner or the sandbox in non-test code."""
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if line is None:
            continue
        if isinstance(node, ast.Compare):
            yield from _compare(node, names)
        elif isinstance(node, ast.Call):
            yield from _call(node, names)
        elif isinstance(node, ast.Subscript):
            target = names.resolve(node.value)
            key = names.string(node.slice)
            if key is not None and target is not None:
                yield from _lookup(target, key, line, "[...]")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _STRONG_MARKER.match(node.value)
        ):
            yield (
                _marker_rule(node.value),
                line,
                f"non-test code names {node.value!r}, which only the test run or the "
                "sandbox sets: code that behaves differently while it is judged",
            )


def _marker_rule(key: str) -> str:
    runner = "PYTEST" in key.upper() or _RUNNER_NAME.match(key)
    return "runner-detection" if runner else "sandbox-detection"


def _lookup(target: str, key: str, line: int, how: str) -> Iterator[_Judged]:
    getter = target.rsplit(".", 1)[0] if target.endswith(".__contains__") else target
    if getter in _ENV_OBJECTS or target in _ENV_GETTERS:
        if _MARKER_ENV.match(key):
            yield (
                _marker_rule(key),
                line,
                f"non-test code reads the environment variable {key!r} ({target}{how}), "
                "set by the test runner, CI or the sandbox: code that behaves differently "
                "while it is judged",
            )
    elif (target == "sys.modules" or target in _MODULE_GETTERS) and _RUNNER_MODULES.match(key):
        yield (
            "runner-detection",
            line,
            f"non-test code checks whether {key!r} is loaded ({target}{how}): code that "
            "behaves differently under the test runner",
        )


def _compare(node: ast.Compare, names: _Names) -> Iterator[_Judged]:
    operands = [node.left, *node.comparators]
    strings = [names.string(o) for o in operands]
    probes = [names.probed(o) for o in operands]
    for op, (left, right) in zip(node.ops, itertools.pairwise(operands), strict=True):
        if isinstance(op, ast.In | ast.NotIn):
            key, target = names.string(left), names.probed(right)
            if key is not None and target is not None:
                yield from _lookup(target, key, node.lineno, " membership")
    runner = next((s for s in strings if s and _RUNNER_NAME.match(s)), None)
    if runner is not None:
        yield (
            "runner-detection",
            node.lineno,
            f"non-test code compares something with {runner!r}: code that behaves "
            "differently under the test runner",
        )
        return
    # A host name or user compared with a value known in advance, not with another
    # run-time value (os.getcwd() != project_dir is ordinary).
    constant = any(_constant_like(o, names) for o in operands)
    for probe in probes:
        if constant and _is_host_probe(probe):
            yield (
                "sandbox-detection",
                node.lineno,
                f"non-test code compares {probe}() with something: code that can tell the "
                "sandbox's host, user or directory from others",
            )
        elif probe is not None and probe.split(".")[0] in {"sys", "os", "__main__"}:
            runner = next((s for s in strings if s and _mentions_runner(s)), None)
            if runner is not None:
                yield (
                    "runner-detection",
                    node.lineno,
                    f"non-test code compares {probe} with {runner!r}: code that behaves "
                    "differently under the test runner",
                )


def _is_host_probe(probe: str | None) -> bool:
    return probe is not None and (
        probe in _HOST_PROBES or probe.endswith(("uname.nodename", "uname.node"))
    )


def _constant_like(node: ast.AST, names: _Names) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(names.string(e) is not None for e in node.elts)
    return names.string(node) is not None


def _mentions_runner(text: str) -> bool:
    return bool(re.search(r"pytest|py\.test|unittest|nose|_jb_|testrunner", text, re.I))


# The runner's own name: compared with anything, or searched for, in code under test.
_RUNNER_NAME = re.compile(r"^(?i:_?pytest|py\.test)$")
_SEARCHES = {"startswith", "endswith", "find", "rfind", "index", "count", "__contains__"}


def _call(node: ast.Call, names: _Names) -> Iterator[_Judged]:
    first = names.string(node.args[0]) if node.args else None
    if first is None:
        return
    if (
        isinstance(node.func, ast.Attribute)
        and node.func.attr in _SEARCHES
        and _is_host_probe(names.probed(node.func.value))
    ):
        yield (
            "sandbox-detection",
            node.lineno,
            f"non-test code searches {names.probed(node.func.value)}() for {first!r}: code "
            "that can tell the sandbox's host, user or directory from others",
        )
        return
    if (
        isinstance(node.func, ast.Attribute)
        and node.func.attr in _SEARCHES
        and (_RUNNER_NAME.match(first) or _STRONG_MARKER.match(first))
    ):
        yield (
            _marker_rule(first),
            node.lineno,
            f"non-test code searches for {first!r} (.{node.func.attr}): code that behaves "
            "differently under the test runner",
        )
        return
    func = names.resolve(node.func)
    if func is None:
        return
    if func in _ENV_GETTERS or func in _MODULE_GETTERS:
        yield from _lookup(func, first, node.lineno, "(...)")
    elif func in _PATH_PROBES and _MARKER_PATH.match(first):
        yield (
            "sandbox-detection",
            node.lineno,
            f"non-test code probes the path {first!r} ({func}), which exists in the sandbox "
            "or a container: code that behaves differently while it is judged",
        )


def _rebinding_findings(
    tree: ast.AST, names: _Names, repo_modules: frozenset[str]
) -> Iterator[_Judged]:
    """Rebindings of the repository's own code by test support code outside a test
    function: a ``tests/__init__.py`` or ``conftest.py`` that puts a correct function in
    place of a broken one, so only the tests see it."""

    def owned(target: ast.AST) -> str | None:
        name = names.probed(target)
        if name is None or name.split(".")[0] not in repo_modules:
            return None
        return name

    def walk(node: ast.AST, in_test: bool) -> Iterator[_Judged]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(child, child.name.startswith("test"))
                continue
            if not in_test:
                yield from _rebinds(child, owned)
            yield from walk(child, in_test)

    yield from walk(tree, False)


def _rebinds(node: ast.AST, owned: Callable[[ast.AST], str | None]) -> Iterator[_Judged]:
    if not isinstance(node, ast.stmt):
        return
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    for target in targets:
        if isinstance(target, ast.Attribute) and (name := owned(target.value)):
            yield _rebinding(node.lineno, f"{name}.{target.attr}")
        elif (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Attribute)
            and target.value.attr == "__dict__"
            and (name := owned(target.value.value))
        ):
            yield _rebinding(node.lineno, f"{name}.__dict__[...]")
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        func = call.func
        # exec(fixed_source, calc.core.__dict__) / vars(calc.core)
        if isinstance(func, ast.Name) and func.id in {"exec", "eval"} and len(call.args) >= 2:
            space = call.args[1]
            if isinstance(space, ast.Attribute) and space.attr == "__dict__":
                space = space.value
            elif isinstance(space, ast.Call) and isinstance(space.func, ast.Name):
                space = space.args[0] if space.func.id == "vars" and space.args else space
            if (name := owned(space)) is not None:
                yield _rebinding(node.lineno, f"{func.id}(..., {name} namespace)")
        if (
            isinstance(func, ast.Name)
            and func.id in {"setattr", "delattr"}
            and call.args
            and (name := owned(call.args[0]))
        ):
            yield _rebinding(node.lineno, f"{func.id}({name}, ...)")
        elif (
            isinstance(func, ast.Attribute)
            and func.attr in {"update", "__setitem__", "setdefault"}
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == "__dict__"
            and (name := owned(func.value.value))
        ):
            yield _rebinding(node.lineno, f"{name}.__dict__.{func.attr}(...)")


def _rebinding(line: int, what: str) -> _Judged:
    return (
        "test-rebinds-code",
        line,
        f"test support code rebinds the code under test ({what}) outside a test "
        "function: the tests would see another version of the code than users do",
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
