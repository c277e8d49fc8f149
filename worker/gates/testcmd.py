"""Which command runs a repository's tests, and how Ribbit asks it for per-test results.

A repository names its test command in ``.ribbit.yml``; when it names none, the
usual one for its ecosystem is used, decided from the base tree's files (never the
patched tree's: a patch must not choose its own yardstick):

- pytest signs (``pytest.ini``, ``conftest.py``, ``[tool.pytest*]``, ``[tool:pytest]``,
  ``tox.ini``, ``test_*.py`` files): ``python -m pytest -q``;
- ``go.mod``: ``go test ./...``, reported through gotestsum (``go test -json``);
- ``Cargo.toml``: ``cargo test`` (``--workspace`` for a workspace), read from libtest's
  console output (cargo-nextest is not packaged where Ribbit runs);
- ``package.json`` whose ``test`` script runs ``node --test``, ``jest``, ``vitest`` or
  ``mocha``: that script (npm's placeholder script, which only fails, counts as none);
- anything else: ``python -m pytest -q`` (worker/repo_config.py's DEFAULT_TEST_COMMAND).

Each runner gets its report the way it takes one without the repository's help, so
the report lands in the fresh folder :mod:`worker.gates.testrun` makes (its path is
``$RIBBIT_JUNIT`` there): pytest through ``PYTEST_ADDOPTS``; node through
``--test-reporter=junit`` (TAP on Node 18); gotestsum through ``--junitfile``; jest
through its built-in ``--json`` report (:func:`worker.gates.junit.parse_jest_json`), so
no reporter package is needed, mocha through its built-in xunit reporter, and vitest
through its built-in junit reporter; cargo's own output is the report. jest and mocha
run in the process that runs the tests, so they are started through Ribbit's launcher
(nodelaunch.js, written to a fresh folder in the sandbox's /tmp by the run's own
script): it hands Ribbit's options to the runner's own command-line entry point, keeps
the report in memory and sends it over a signed channel on fd 3 (``Invocation.channel``;
no report path exists for the tests to find), and
leaves ``process.argv`` as the plain command has it, because a project's tests may
parse it (commander.js's fail on an option they do not know); vitest's tests run in
pool workers, whose argv is the pool's, so vitest takes its options as written. A
runner followed by ``&&`` and more (``jest && tsc``) reports per test for the runner,
and the rest counts by its exit code. ``npm test`` runs the package's ``pretest``
script first, so Ribbit does too when it runs that script's runner itself (broofa/mime
compiles the TypeScript its tests import there); it runs before every run, a
selection's included, and counts by its exit code. Selected ids go to the
runner the way it selects: pytest node ids; ``go test -run '^(TestX)$' <package>``;
``cargo test <target> -- --exact <name>``; ``node --test --test-name-pattern``;
``jest --testNamePattern``, ``vitest -t``, ``mocha --grep``. Selection may run more
than was asked for (a name shared by two packages or files); callers read the ids they
asked about.

A command the repository wrote is recognised when it is one of these runners' plain
forms (``go test ./...``, ``cargo test --lib``, ``node --test test/``, ``npx jest``,
``npx mocha``,
``npm test`` with such a script); any other command (``make test``, a script) is
run as written, with pytest's report still asked for through the environment, and
is judged on its exit code when no report comes back.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from worker.gates.junit import (
    CARGO_ROOT_MARK,
    MAX_JUNIT_BYTES,
    NESTED_SEPARATOR,
    Flavour,
    doc_test_filter,
)
from worker.gates.trees import regular_file_inside
from worker.repo_config import DEFAULT_TEST_COMMAND, RepoConfig

Runner = Literal["pytest", "go", "cargo", "node", "jest", "vitest", "mocha", "shell"]
ReportKind = Literal["junit", "output"]
REPORT_VAR = "RIBBIT_JUNIT"
_REPORT = f'"${REPORT_VAR}"'
# Where the launcher puts the report's in-memory place into Ribbit's arguments (nodelaunch.js).
LAUNCH_REPORT = "{report}"
_MAX_FILE_BYTES = 1024 * 1024
# npm init's placeholder test script: it only fails, so the package has no tests.
_NPM_PLACEHOLDER = re.compile(r"no test specified", re.I)
# go test flags that take a value as the next word (``-tags foo``); the rest are
# ``-flag`` or ``-flag=value``. Anything else not starting with ``-`` is a package.
_GO_VALUE_FLAG_NAMES = (
    "tags run skip timeout count p parallel cpu ldflags gcflags asmflags mod coverprofile "
    "covermode coverpkg exec o bench benchtime blockprofile cpuprofile memprofile "
    "mutexprofile outputdir trace toolexec shuffle vet modfile pkgdir overlay pgo fuzz "
    "fuzztime list"
)
_GO_VALUE_FLAGS = frozenset(_GO_VALUE_FLAG_NAMES.split())


@dataclass(frozen=True)
class Invocation:
    """One run of a test command as Ribbit makes it: the shell text to run (it may
    refer to ``$RIBBIT_JUNIT``, the report's path), what the report is, and how its
    ids are built."""

    script: str
    # "junit": the file at $RIBBIT_JUNIT (jest's own JSON for jest); "output": the console
    report: ReportKind
    flavour: Flavour = "auto"
    env: dict[str, str] = field(default_factory=dict)
    # What the gate log says ran, where ``script`` alone would not say it plainly (the
    # launcher's source is in the script; what matters is what the runner was told).
    shown: str = ""
    # The runner writes its report whenever it gets to run its tests, so a run with no
    # report means the runner never ran them (a set-up problem), not a missing feature.
    report_expected: bool = False
    # The report comes over the launcher's signed channel on fd 3 (nodelaunch.js), never
    # through a file at $RIBBIT_JUNIT, which code the tests start could find and rewrite.
    channel: bool = False

    @property
    def ran(self) -> str:
        return self.shown or self.script


@dataclass(frozen=True)
class TestCommand:
    """A repository's test command and the runner behind it."""

    __test__ = False  # not a pytest test class, whatever its name says

    command: str  # as a person runs it; shown in reports and to the agent
    runner: Runner
    source: str  # where it came from: ".ribbit.yml", "go.mod", "package.json", ...
    args: tuple[str, ...] = ()  # the runner's own words after its name (recognised forms)
    # What a compound command runs after its runner (``jest && tsc``: ``tsc``), judged
    # by its exit code alone; "" for a plain runner command.
    then: str = ""
    # What npm runs before the test script (package.json's ``pretest``), judged by its
    # exit code; "" when there is none or the command is not ``npm test``.
    before: str = ""

    def invocation(self, select: Sequence[str] = ()) -> Invocation:
        """How Ribbit runs it, with per-test reporting and, when given, only the tests
        ``select`` names (pytest's selection travels in the environment instead; see
        worker/gates/testrun.py). A selection runs the runner part alone: the rest of a
        compound command is about no test."""
        build = _INVOKE.get(self.runner)
        if build is None:
            return Invocation(self.command, "junit")
        how = build(self, list(select))
        if self.then and not select:
            # fd 3 is the launcher's channel: the rest of the command does not get it.
            script = f"( {how.script} ) && ( {_NPM_PATH}; {self.then} ) 3>&-"
            shown = f"{how.ran}\n# then, judged by its exit code: {self.then}"
            how = replace(how, script=script, shown=shown)
        if self.before:
            # Even for a selection: the tests may import what it builds.
            script = f"( {_NPM_PATH}; {self.before} ) 3>&- && ( {how.script} )"
            shown = f"# first, judged by its exit code: {self.before}\n{how.ran}"
            how = replace(how, script=script, shown=shown)
        return how


# Scripts run as the package manager would run them: the package's tools on PATH.
_NPM_PATH = 'PATH="$PWD/node_modules/.bin:$PATH"'


def detect_test_command(tree: Path) -> TestCommand:
    """The usual test command for the repository checked out at ``tree``."""
    if _pytest_signs(tree):
        return TestCommand(DEFAULT_TEST_COMMAND, "pytest", "pytest files")
    if _file(tree, "go.mod") is not None:
        return TestCommand("go test ./...", "go", "go.mod", ("./...",))
    cargo = _file(tree, "Cargo.toml")
    if cargo is not None:
        try:
            manifest = tomllib.loads(cargo)
        except tomllib.TOMLDecodeError:
            manifest = {}
        if "workspace" in manifest:
            return TestCommand("cargo test --workspace", "cargo", "Cargo.toml", ("--workspace",))
        return TestCommand("cargo test", "cargo", "Cargo.toml")
    script = _npm_test_script(tree)
    if script is not None:
        found = recognise(script, "package.json")
        if found.runner not in ("shell", "pytest"):
            return replace(found, command="npm test", before=_npm_pretest(tree))
        return TestCommand("npm test", "shell", "package.json")
    return TestCommand(DEFAULT_TEST_COMMAND, "pytest", "default")


def resolve_test_command(config: RepoConfig, tree: Path | None) -> TestCommand:
    """The command that tests the repository: the one ``.ribbit.yml`` names, else the
    one detected in ``tree`` (the base commit's checkout), else pytest's."""
    if "test" in config.model_fields_set or tree is None:
        return recognise(config.test, ".ribbit.yml", tree)
    return detect_test_command(tree)


def recognise(command: str, source: str, tree: Path | None = None) -> TestCommand:
    """``command`` with its runner, when it is one of the plain forms Ribbit knows how
    to ask for per-test results (``npm test`` and friends through ``tree``'s
    package.json); otherwise a shell command."""
    compound = _compound(command, source, tree)
    if compound is not None:
        return compound
    try:
        words = shlex.split(command)
    except ValueError:
        return TestCommand(command, "shell", source)
    if any(_SHELL_SYNTAX.search(w) for w in words) or not words:
        return TestCommand(command, "shell", source)
    if words[:2] == ["go", "test"]:
        return TestCommand(command, "go", source, tuple(words[2:]))
    if words[:2] == ["cargo", "test"]:
        return TestCommand(command, "cargo", source, tuple(words[2:]))
    if words[:2] == ["node", "--test"]:
        return TestCommand(command, "node", source, tuple(words[2:]))
    # A package manager running the repository's own binary: ``npx jest``, ``yarn
    # jest`` (tiny-invariant's script), ``pnpm vitest``, ``pnpm exec vitest run``.
    head = words
    if words[0] in ("npx", "yarn", "pnpm"):
        head = words[2:] if words[1:2] == ["exec"] else words[1:]
    if head[:1] == ["jest"]:
        return TestCommand(command, "jest", source, tuple(head[1:]))
    if head[:1] == ["mocha"]:
        return TestCommand(command, "mocha", source, tuple(head[1:]))
    if head[:1] == ["vitest"]:
        rest = head[1:]
        if rest[:1] == ["run"]:
            rest = rest[1:]
        return TestCommand(command, "vitest", source, tuple(rest))
    if words[0] in ("pytest", "py.test") or words[:3] == ["python", "-m", "pytest"]:
        return TestCommand(command, "pytest", source, tuple(words[1:]))
    if words in (["npm", "test"], ["npm", "run", "test"], ["yarn", "test"], ["pnpm", "test"]):
        script = _npm_test_script(tree) if tree is not None else None
        if script is not None:
            found = recognise(script, source)
            if found.runner not in ("shell", "pytest"):
                # Run as the script says (its tools on PATH), shown as the repo says;
                # npm runs ``pretest`` first (yarn 1 too; pnpm by default does not).
                before = _npm_pretest(tree) if words[0] in ("npm", "yarn") else ""
                return replace(found, command=command, before=before)
    if len(words) >= 3 and PYTHON_WORD.fullmatch(words[0]) and words[1:3] == ["-m", "pytest"]:
        return TestCommand(command, "pytest", source, tuple(words[3:]))
    return TestCommand(command, "shell", source)


def _compound(command: str, source: str, tree: Path | None) -> TestCommand | None:
    """``<a JavaScript runner> && <anything>`` (commander.js's ``jest && npm run
    check:type:ts``): the runner reports per test, the rest by its exit code."""
    first, sep, rest = command.partition("&&")
    if not sep or not rest.strip():
        return None
    runner = recognise(first.strip(), source, tree)
    if runner.runner not in _COMPOUND_RUNNERS or runner.then:
        return None
    return replace(runner, command=command, then=rest.strip())


_COMPOUND_RUNNERS = ("node", "jest", "vitest", "mocha")


# The interpreter word of a plain ``python -m pytest`` form: python, python3, python3.12
# (as found on PATH; one named by a path is a command of its own, run as written).
PYTHON_WORD = re.compile(r"python(3(\.\d+)?)?")


# Words that make a command more than one plain program run: pipes, lists,
# redirections, substitutions, environment assignments.
_SHELL_SYNTAX = re.compile(r"[|;&<>`$()]|^[A-Za-z_][A-Za-z0-9_]*=")


def _file(tree: Path, rel: str) -> str | None:
    file = regular_file_inside(tree, rel)
    if file is None:
        return None
    try:
        with file.open("rb") as fh:
            return fh.read(_MAX_FILE_BYTES).decode(errors="replace")
    except OSError:
        return None


def _pytest_signs(tree: Path) -> bool:
    if any(_file(tree, name) is not None for name in ("pytest.ini", "conftest.py", "tox.ini")):
        return True
    pyproject = _file(tree, "pyproject.toml")
    if pyproject is not None:
        try:
            tool = tomllib.loads(pyproject).get("tool", {})
        except tomllib.TOMLDecodeError:
            tool = {}
        if isinstance(tool, dict) and "pytest" in tool:
            return True
    setup_cfg = _file(tree, "setup.cfg")
    if setup_cfg is not None:
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        try:
            parser.read_string(setup_cfg)
        except configparser.Error:
            pass
        else:
            if parser.has_section("tool:pytest"):
                return True
    # Test files at the top or in the usual folders; a bounded look, not a walk.
    for folder in (tree, tree / "tests", tree / "test"):
        if folder.is_dir() and not folder.is_symlink():
            try:
                names = [p.name for p in folder.iterdir()]
            except OSError:
                continue
            if any(re.fullmatch(r"test_\w+\.py|\w+_test\.py", n) for n in names):
                return True
    return False


def _npm_test_script(tree: Path) -> str | None:
    script = _npm_script(tree, "test")
    if script is None or _NPM_PLACEHOLDER.search(script):
        return None
    return script


def _npm_pretest(tree: Path | None) -> str:
    return (_npm_script(tree, "pretest") or "") if tree is not None else ""


def _npm_script(tree: Path, name: str) -> str | None:
    """package.json's script ``name``; None when there is none (or only blanks)."""
    text = _file(tree, "package.json")
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    scripts = data.get("scripts") if isinstance(data, dict) else None
    script = scripts.get(name) if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip():
        return None
    return script.strip()


def _quote(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _alternation(names: Sequence[str]) -> str:
    """An anchored regular expression that matches exactly the given names (Go's RE2
    and JavaScript's both read this escaping)."""
    escaped = sorted({re.sub(r"([\\.+*?()|\[\]{}^$/-])", r"\\\1", n) for n in names})
    return "^(" + "|".join(escaped) + ")$"


def _pytest(cmd: TestCommand, select: list[str]) -> Invocation:
    del select  # through PYTEST_ADDOPTS
    return Invocation(cmd.command, "junit", report_expected=True)


def _go(cmd: TestCommand, select: list[str]) -> Invocation:
    args = list(cmd.args)
    if select:
        flags: list[str] = []
        i = 0
        while i < len(args):
            word = args[i]
            if not word.startswith("-"):
                i += 1  # a package pattern: replaced by the selected tests' packages
                continue
            name = word.lstrip("-").split("=", 1)[0]
            width = 2 if name in _GO_VALUE_FLAGS and "=" not in word else 1
            if name not in ("run", "skip"):
                flags += args[i : i + width]
            i += width
        packages = sorted({s.split("::", 1)[0] for s in select if "::" in s})
        tests = [s.split("::", 1)[1].split("/", 1)[0] for s in select if "::" in s]
        args = [*flags, "-run", _alternation(tests), *packages]
    go_test = _quote(["go", "test", *args])
    # gotestsum runs ``go test -json`` and writes JUnit; where it is missing the tests
    # still run, judged on their exit code.
    script = (
        "if command -v gotestsum >/dev/null 2>&1; then "
        f"gotestsum --format standard-verbose --junitfile {_REPORT} -- {_quote(args)}; "
        f"else {go_test}; fi"
    )
    return Invocation(script, "junit", "plain")


def _cargo(cmd: TestCommand, select: list[str]) -> Invocation:
    args = list(cmd.args)
    cargo_args, test_args = args, []
    if "--" in args:
        cut = args.index("--")
        cargo_args, test_args = args[:cut], args[cut + 1 :]
    if "--no-fail-fast" not in cargo_args:
        # Every target runs even when one fails, so no test vanishes behind a failure.
        cargo_args = ["--no-fail-fast", *cargo_args]
    if not select:
        words = ["cargo", "test", *cargo_args] + (["--", *test_args] if test_args else [])
        return Invocation(_cargo_package_step(cargo_args) + _quote(words), "output")
    targets: list[str] = []
    names: list[str] = []
    doc_filters: set[str] = set()
    for test_id in select:
        target, _, name = test_id.partition("::")
        if target.startswith("doc:"):
            # Doc test ids carry no line (junit._doc_ids): a substring filter finds them.
            doc_filters.add(doc_test_filter(name))
            continue
        for flag in _cargo_target(target):
            if flag not in targets:
                targets.append(flag)
        names.append(name)
    runs = []
    if names:
        runs.append(
            _cargo_package_step([*cargo_args, *targets])
            + _quote(["cargo", "test", *cargo_args, *targets, "--", *test_args, "--exact"])
            + " "
            + _quote(sorted(set(names)))
        )
    if doc_filters:
        runs.append(
            _quote(["cargo", "test", *cargo_args, "--doc", "--", *test_args, *sorted(doc_filters)])
        )
    if len(runs) == 1:
        return Invocation(runs[0], "output")
    # One exit status for both runs: failing if either failed.
    return Invocation(f"( {runs[0]}; r=$?; {runs[1]} || r=$?; exit $r )", "output")


def _cargo_package_step(cargo_args: list[str]) -> str:
    """What a cargo run prints before its tests so that each test binary's package is
    known (junit.parse_libtest): its folder, then cargo's own record of every test
    binary it builds (``--no-run``, nothing of the repository's runs; diagnostics as
    text). cargo names a binary's source relative to its package ("src/lib.rs"), so in
    a workspace two crates' tests would share ids. Not for a doc-test-only run (cargo
    refuses ``--no-run`` there; doc tests are named by crate) or where the command sets
    its own message format."""
    if "--doc" in cargo_args or any(a.startswith("--message-format") for a in cargo_args):
        return ""
    build = ["cargo", "test", "--no-run", "--message-format=json-render-diagnostics"]
    # Only the records of binaries (a dependency's library has none: hundreds of lines
    # a big workspace needs none of); a failed build ends the run with cargo's status.
    return (
        f"printf '{CARGO_ROOT_MARK}%s\\n' \"$PWD\"; {_quote([*build, *cargo_args])}"
        """ | grep -F '"executable":"/'; s=${PIPESTATUS[0]}; [ "$s" = 0 ] || exit "$s"; """
    )


def _cargo_target(target: str) -> list[str]:
    """The cargo flags that build and run the test binary an id's target names."""
    if target.startswith("doc:"):
        return ["--doc"]
    parts = target.split("/")
    if parts[-2:] == ["src", "lib.rs"]:
        return ["--lib"]
    if parts[-2:] == ["src", "main.rs"] or parts[-3:-1] == ["src", "bin"]:
        return ["--bins"]
    if len(parts) >= 2 and parts[-2] == "tests" and target.endswith(".rs"):
        return ["--test", parts[-1][: -len(".rs")]]
    return []


def _node(cmd: TestCommand, select: list[str]) -> Invocation:
    words = ["node", "--test"]
    reporters = [
        *("--test-reporter=spec", "--test-reporter-destination=stdout"),
        "--test-reporter=junit",
    ]
    names = [s.rsplit(NESTED_SEPARATOR, 1)[-1] for s in select]
    pattern = [f"--test-name-pattern={_alternation(names)}"] if names else []
    rest = _quote([*pattern, *cmd.args])
    tap = [*reporters[:2], "--test-reporter=tap"]
    # Node's junit reporter came in 20.10 (21.3 on 21); Debian bookworm's Node 18 writes
    # TAP (read by parse_node_tap) and before 18.15 no report at all (exit code only).
    script = (
        f"v=$(node -e {shlex.quote(_NODE_REPORTER)} 2>/dev/null); "
        f'if [ "$v" = junit ]; then '
        f"{_quote([*words, *reporters])} --test-reporter-destination={_REPORT} {rest}; "
        f'elif [ "$v" = tap ]; then '
        f"{_quote([*words, *tap])} --test-reporter-destination={_REPORT} {rest}; "
        f"else {_quote(words)} {rest}; fi"
    )
    return Invocation(script, "junit", "nested")


_NODE_REPORTER = (
    "const [a, b] = process.versions.node.split('.').map(Number);"
    "const junit = a > 21 || (a === 21 && b >= 3) || (a === 20 && b >= 10);"
    "console.log(junit ? 'junit' : a > 18 || (a === 18 && b >= 15) ? 'tap' : 'none')"
)


def _jest(cmd: TestCommand, select: list[str]) -> Invocation:
    names = [s.split("::", 1)[-1] for s in select]
    pattern = [f"--testNamePattern={_alternation(names)}"] if names else []
    files = sorted({s.split("::", 1)[0] for s in select if "::" in s})
    # jest's own JSON report (no reporter package to install); its ids are the file and
    # the describe blocks and the test's title joined by spaces, what ``-t`` matches.
    ribbit = ["--ci", "--json", f"--outputFile={LAUNCH_REPORT}", *pattern, *files]
    return _launched(cmd, "jest", ribbit, "jest")


def _mocha(cmd: TestCommand, select: list[str]) -> Invocation:
    # Ids are the xunit report's suite and title; mocha's --grep matches the full title,
    # the two joined by a space (a test outside any describe block has no suite).
    names = [" ".join(p for p in s.split("::", 1) if p) for s in select]
    pattern = ["--grep", _alternation(names)] if names else []
    ribbit = ["--reporter", "xunit", "--reporter-option", f"output={LAUNCH_REPORT}", *pattern]
    return _launched(cmd, "mocha", ribbit, "plain")


def _launched(cmd: TestCommand, runner: str, ribbit: list[str], flavour: Flavour) -> Invocation:
    """A JavaScript runner started through Ribbit's launcher (nodelaunch.js): Ribbit's
    arguments reach the runner's own parser, never the tests' ``process.argv``, which
    stays what the plain command gives them."""
    bin_path = f"node_modules/.bin/{runner}"
    launch = {"runner": runner, "bin": bin_path, "cap": MAX_JUNIT_BYTES, "args": ribbit}
    source = Path(__file__).with_name("nodelaunch.js").read_text()
    # A fresh folder outside the workspace, so the launcher is nothing the tests collect.
    script = (
        "l=$(mktemp -d /tmp/ribbit-launch-XXXXXXXX) && "
        f'printf %s {shlex.quote(source)} >"$l/launch.js" || exit 97; '
        f"RIBBIT_LAUNCH={shlex.quote(json.dumps(launch))} "
        f'node "$l/launch.js" {_quote(cmd.args)}; rc=$?; rm -rf -- "$l"; exit $rc'
    )
    told = _quote([runner, *cmd.args, *ribbit]).replace(LAUNCH_REPORT, "<in-memory>")
    shown = (
        f"{told}  # through Ribbit's launcher: the tests' process.argv is "
        f"{_quote(['node', bin_path, *cmd.args])}"
    )
    return Invocation(script, "junit", flavour, shown=shown, report_expected=True, channel=True)


def _vitest(cmd: TestCommand, select: list[str]) -> Invocation:
    names = [s.split("::", 1)[-1] for s in select]
    files = sorted({s.split("::", 1)[0] for s in select if "::" in s})
    pattern = ["-t", _alternation(names)] if names else []
    runner = _quote(["vitest", "run", *cmd.args, *pattern, *files])
    script = (
        f'PATH="$PWD/node_modules/.bin:$PATH"; {runner} --reporter=default '
        f"--reporter=junit --outputFile.junit={_REPORT}"
    )
    return Invocation(script, "junit", "plain", report_expected=True)


_INVOKE = {
    "pytest": _pytest,
    "go": _go,
    "cargo": _cargo,
    "node": _node,
    "jest": _jest,
    "vitest": _vitest,
    "mocha": _mocha,
}
