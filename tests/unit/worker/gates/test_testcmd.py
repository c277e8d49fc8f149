"""Test-command detection per ecosystem, recognition of the plain forms a repository
writes, and how each runner is asked for its report and for selected tests."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from worker.gates.judge import report_disagreement
from worker.gates.junit import TestCase
from worker.gates.testcmd import (
    detect_test_command,
    recognise,
    resolve_test_command,
)
from worker.repo_config import DEFAULT_TEST_COMMAND, RepoConfig
from worker.sandbox.base import ExecResult


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "command", "runner"),
    [
        ({"go.mod": "module x\n", "x_test.go": "package x\n"}, "go test ./...", "go"),
        ({"Cargo.toml": '[package]\nname = "x"\n'}, "cargo test", "cargo"),
        ({"Cargo.toml": '[workspace]\nmembers = ["a"]\n'}, "cargo test --workspace", "cargo"),
        ({"package.json": '{"scripts": {"test": "node --test"}}'}, "npm test", "node"),
        ({"package.json": '{"scripts": {"test": "jest --silent"}}'}, "npm test", "jest"),
        ({"package.json": '{"scripts": {"test": "vitest run"}}'}, "npm test", "vitest"),
        ({"package.json": '{"scripts": {"test": "mocha"}}'}, "npm test", "mocha"),
        # npm init's placeholder only fails: no tests, so pytest's default stands.
        (
            {
                "package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\"'
                ' && exit 1"}}'
            },
            DEFAULT_TEST_COMMAND,
            "pytest",
        ),
        ({"tests/test_x.py": "", "go.mod": "module x\n"}, DEFAULT_TEST_COMMAND, "pytest"),
        (
            {"pyproject.toml": "[tool.pytest.ini_options]\n", "Cargo.toml": ""},
            DEFAULT_TEST_COMMAND,
            "pytest",
        ),
        ({"README.md": "hi"}, DEFAULT_TEST_COMMAND, "pytest"),
    ],
)
def test_detection_per_ecosystem(
    tmp_path: Path, files: dict[str, str], command: str, runner: str
) -> None:
    found = detect_test_command(_tree(tmp_path, files))
    assert (found.command, found.runner) == (command, runner)


def test_the_configs_default_is_the_detected_fallback(tmp_path: Path) -> None:
    # One default test command: what .ribbit.yml implies and what detection falls back to.
    fallback = detect_test_command(_tree(tmp_path, {"README.md": "hi"}))
    assert RepoConfig().test == fallback.command == DEFAULT_TEST_COMMAND


def test_ribbit_yml_command_wins_over_detection(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"go.mod": "module x\n"})
    assert resolve_test_command(RepoConfig(), tree).runner == "go"
    named = resolve_test_command(RepoConfig(test="make check"), tree)
    assert (named.command, named.runner, named.source) == ("make check", "shell", ".ribbit.yml")
    # Naming pytest's default explicitly is a choice, not an absence.
    assert resolve_test_command(RepoConfig(test=DEFAULT_TEST_COMMAND), tree).runner == "pytest"


@pytest.mark.parametrize(
    ("command", "runner"),
    [
        ("go test -race ./...", "go"),
        ("cargo test --lib", "cargo"),
        ("node --test test/", "node"),
        ("npx jest", "jest"),
        ("npx mocha --recursive", "mocha"),
        ("npx vitest run", "vitest"),
        ("yarn jest", "jest"),
        ("pnpm vitest run --coverage", "vitest"),
        ("pnpm exec vitest", "vitest"),
        ("yarn lint", "shell"),
        ("python3 -m pytest -q", "pytest"),
        ("python3.12 -m pytest -x", "pytest"),  # watched, as watch_plan reads it
        ("/usr/bin/python3 -m pytest", "shell"),
        ("go test ./... && echo done", "shell"),
        ("GOFLAGS=-short go test ./...", "shell"),
        ("make test", "shell"),
        ("cargo test | tee log", "shell"),
        ("'unbalanced", "shell"),
    ],
)
def test_recognised_forms(command: str, runner: str) -> None:
    assert recognise(command, ".ribbit.yml").runner == runner


def test_npm_test_is_the_script_it_runs(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"package.json": '{"scripts": {"test": "node --test test/"}}'})
    found = recognise("npm test", ".ribbit.yml", tree)
    assert (found.command, found.runner, found.args) == ("npm test", "node", ("test/",))


def _words(script: str) -> list[str]:
    return shlex.split(script)


def test_go_reports_through_gotestsum_and_selects_per_package() -> None:
    go = recognise("go test -tags integration -run Old ./...", "x")
    plain = go.invocation()
    assert plain.report == "junit" and plain.flavour == "plain"
    assert 'gotestsum --format standard-verbose --junitfile "$RIBBIT_JUNIT" --' in plain.script
    assert "else go test -tags integration -run Old ./...; fi" in plain.script
    chosen = go.invocation(["example.com/a::TestX/sub_case", "example.com/b::Test.Y"])
    words = _words(chosen.script.split("; else ")[1].removesuffix("; fi"))
    # The command's own -run and package patterns give way to the selection; its other
    # flags stay.
    assert words == [
        *("go", "test", "-tags", "integration", "-run", r"^(TestX|Test\.Y)$"),
        *("example.com/a", "example.com/b"),
    ]


PACKAGES = (
    "printf 'ribbit-cargo-root %s\\n' \"$PWD\"; cargo test --no-run "
    '--message-format=json-render-diagnostics {args} | grep -F \'"executable":"/\'; '
    's=${{PIPESTATUS[0]}}; [ "$s" = 0 ] || exit "$s"; '
)


def _cargo_run(script: str, build_args: str) -> list[str]:
    """The test run's words, after the step that names each binary's package."""
    prefix = PACKAGES.format(args=build_args)
    assert script.startswith(prefix), script
    return _words(script.removeprefix(prefix))


def test_cargo_runs_every_target_and_selects_exact_names() -> None:
    cargo = recognise("cargo test --workspace -- --test-threads 2", "x")
    assert cargo.invocation().report == "output"
    assert _cargo_run(cargo.invocation().script, "--no-fail-fast --workspace") == [
        *("cargo", "test", "--no-fail-fast", "--workspace", "--", "--test-threads", "2"),
    ]
    chosen = cargo.invocation(["src/lib.rs::tests::a", "crates/b/tests/cli.rs::runs"])
    assert _cargo_run(chosen.script, "--no-fail-fast --workspace --lib --test cli") == [
        *("cargo", "test", "--no-fail-fast", "--workspace", "--lib", "--test", "cli"),
        *("--", "--test-threads", "2", "--exact", "runs", "tests::a"),
    ]
    # A command that sets its own message format gets no such step.
    own = recognise("cargo test --message-format=short", "x").invocation().script
    assert own == "cargo test --no-fail-fast --message-format=short"


def test_cargo_selects_doc_tests_by_their_item() -> None:
    cargo = recognise("cargo test -- --test-threads 2", "x")
    # Doc test ids hold no line (junit._doc_ids), and rustdoc splits its filters at
    # whitespace: the item's path, as a substring, selects its doc tests. cargo refuses
    # --no-run for doc tests, which are named by crate anyway: no package step.
    docs = cargo.invocation(["doc:x::src/lib.rs - add #2", "doc:x::src/lib.rs - Calc::add"])
    assert _words(docs.script) == [
        *("cargo", "test", "--no-fail-fast", "--doc", "--", "--test-threads", "2"),
        *("Calc::add", "add"),
    ]
    both = cargo.invocation(["src/lib.rs::tests::a", "doc:x::src/lib.rs - add"])
    assert both.script == (
        "( "
        + PACKAGES.format(args="--no-fail-fast --lib")
        + "cargo test --no-fail-fast --lib -- --test-threads 2 --exact tests::a; r=$?; "
        "cargo test --no-fail-fast --doc -- --test-threads 2 add || r=$?; exit $r )"
    )


def test_node_asks_for_junit_where_node_has_it_and_selects_by_name() -> None:
    node = recognise("node --test test/", "x")
    how = node.invocation(["suite A > adds (1+1)"])
    assert how.flavour == "nested"
    assert '--test-reporter=junit --test-reporter-destination="$RIBBIT_JUNIT"' in how.script
    pattern = shlex.quote(r"--test-name-pattern=^(adds \(1\+1\))$")
    assert pattern in how.script
    # Node 18 (Debian's) has no junit reporter but TAP; older ones neither.
    assert '--test-reporter=tap --test-reporter-destination="$RIBBIT_JUNIT"' in how.script
    assert how.script.endswith(f"else node --test {pattern} test/; fi")


def test_jest_and_vitest_reporters() -> None:
    jest = recognise("npx jest --coverage", "x").invocation(["src/a.test.js::math adds"])
    # jest's own JSON report: no reporter package needed in the repository.
    assert jest.flavour == "jest" and jest.report == "junit" and not jest.env
    # Through Ribbit's launcher (test_testcmd_node_launch.py runs it): the repository's
    # arguments on node's command line, Ribbit's only in what the launcher reads.
    assert 'node "$l/launch.js" --coverage; rc=$?' in jest.script
    assert '"args": ["--ci", "--json", "--outputFile={report}", ' in jest.script
    assert jest.ran.startswith(
        "jest --coverage --ci --json '--outputFile=<in-memory>' "
        "'--testNamePattern=^(math adds)$' src/a.test.js"
    )
    vitest = recognise("vitest run", "x").invocation()
    assert '--reporter=junit --outputFile.junit="$RIBBIT_JUNIT"' in vitest.script


def test_a_shell_command_runs_as_written() -> None:
    how = recognise("make test", "x").invocation(["tests/test_a.py::test_b"])
    assert how.script == "make test" and how.report == "junit" and how.flavour == "auto"


def _cases(**outcomes: str) -> dict[str, TestCase]:
    return {
        k: TestCase(k, k, "example.com/x", o)  # type: ignore[arg-type]
        for k, o in outcomes.items()
    }


def test_gotestsum_console_must_agree_with_its_report() -> None:
    ran = ExecResult(1, "=== RUN TestA\nDONE 2 tests, 1 failure in 0.5s\n", "", 0.1)
    assert report_disagreement(ran, _cases(TestA="passed", TestB="failed")) is None
    # A report rewritten after gotestsum wrote it (all passing, or a test dropped).
    assert report_disagreement(ran, _cases(TestA="passed", TestB="passed")) is not None
    assert report_disagreement(ran, _cases(TestB="failed")) is not None
    # A package that does not build is counted differently by the two: no verdict here.
    broken = ExecResult(1, "DONE 1 tests, 1 error in 0.5s\n", "", 0.1)
    assert report_disagreement(broken, _cases(TestA="passed", TestB="failed")) is None


def test_a_compound_test_script_reports_per_test_for_its_runner_and_exits_for_the_rest(
    tmp_path: Path,
) -> None:
    # commander.js's test script: jest, then a type check judged by its exit code.
    tree = _tree(tmp_path, {"package.json": json.dumps(COMMANDER_SCRIPTS)})
    found = detect_test_command(tree)
    assert (found.command, found.runner, found.then) == (
        "npm test",
        "jest",
        "npm run check:type:ts",
    )
    how = found.invocation()
    assert how.script.startswith("( l=$(mktemp -d")
    assert how.script.endswith(
        ') && ( PATH="$PWD/node_modules/.bin:$PATH"; npm run check:type:ts ) 3>&-'
    )
    assert how.ran.endswith("\n# then, judged by its exit code: npm run check:type:ts")
    # A selection runs only the runner: the rest is about no test.
    assert "check:type" not in found.invocation(["a.test.js::adds"]).script
    # Anything else joined by && stays a shell command, judged on its exit code.
    assert recognise("make build && make test", "x").runner == "shell"
    assert recognise("vitest run && tsc", "x").then == "tsc"


COMMANDER_SCRIPTS = {"scripts": {"test": "jest && npm run check:type:ts"}}


# broofa/mime 4.1.0's scripts: its tests import the JavaScript tsc compiles in pretest.
MIME_SCRIPTS = {
    "scripts": {
        "build": "rm -fr dist && tsc",
        "pretest": "npm run build",
        "test": "node --test && ./test/exports_test.sh",
    }
}


def test_npm_tests_pretest_script_runs_first_and_counts_by_its_exit_code(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"package.json": json.dumps(MIME_SCRIPTS)})
    found = detect_test_command(tree)
    assert (found.runner, found.before, found.then) == (
        "node",
        "npm run build",
        "./test/exports_test.sh",
    )
    how = found.invocation()
    assert how.script.startswith('( PATH="$PWD/node_modules/.bin:$PATH"; npm run build ) 3>&- && (')
    assert how.ran.startswith("# first, judged by its exit code: npm run build\n")
    # A selection needs what pretest builds too; the rest of the script it leaves out.
    selected = found.invocation(["class Mime > getType()"]).script
    assert selected.startswith('( PATH="$PWD/node_modules/.bin:$PATH"; npm run build ) 3>&- && (')
    assert "exports_test" not in selected
    # ``npm test`` in .ribbit.yml runs it as npm would; pnpm skips pre scripts by default.
    assert resolve_test_command(RepoConfig(test="npm test"), tree).before == "npm run build"
    assert recognise("pnpm test", "x", tree).before == ""
    # The runner named directly is no ``npm test``: no pretest.
    assert recognise("node --test", "x", tree).before == ""


def test_the_pretest_script_gates_the_runner(tmp_path: Path) -> None:
    # Run for real by bash: a failing pretest stops the runner (as npm test stops).
    tree = _tree(tmp_path, {"package.json": json.dumps({"scripts": {"test": "mocha"}})})
    (tmp_path / "ran").write_text("")
    for pretest, code in (("echo built >> ran", 0), ("exit 4", 4)):
        package = {"scripts": {"test": "mocha", "pretest": pretest}}
        (tree / "package.json").write_text(json.dumps(package))
        found = detect_test_command(tree)
        script = found.invocation().script.replace('node "$l/launch.js"', "echo tests >> ran")
        done = subprocess.run(["bash", "-c", script], cwd=tree, check=False)
        assert done.returncode == code
    assert (tmp_path / "ran").read_text() == "built\ntests\n"
