"""The one JUnit reader: pytest node ids for the layouts real projects use, proven by
giving every id back to pytest (a round trip through the one test runner)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from tests.fakes import LocalDirSandbox
from worker.gates.junit import (
    JUnitError,
    TestCase,
    libtest_unfinished,
    local_files,
    module_candidates,
    outcomes,
    parse_jest_json,
    parse_junit,
    parse_libtest,
    parse_node_tap,
)
from worker.gates.testrun import run_tests, select_batches

PYTEST = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"

MIXIN = """\
import unittest


class CacheMixin:
    Cache = dict

    def test_clear(self):
        c = self.Cache()
        c[1] = 1
        c.clear()
        self.assertEqual(0, len(c))

    def test_broken(self):
        self.assertEqual(1, 2)


class PlainBase:
    def test_inherited_plain(self):
        assert True
"""
SUB = """\
import unittest

import pytest

from tests import CacheMixin, PlainBase


class TestSub(CacheMixin, unittest.TestCase):
    pass


class TestOtherSub(CacheMixin, unittest.TestCase):
    def test_own(self):
        self.assertTrue(True)


class TestPlain(PlainBase):
    pass


class TestOuter:
    class TestInner:
        def test_nested(self):
            assert True

        @pytest.mark.parametrize("v", [1, 2])
        def test_nested_param(self, v):
            assert v


@pytest.mark.parametrize(
    "v", ["a::b", "c/d", "e f", "[g]", "h]", "1-a", "x.y"], ids=lambda v: v
)
def test_param(v):
    assert v


@pytest.fixture
def broken_fixture():
    raise RuntimeError("fixture breaks")


def test_errors(broken_fixture):
    pass


def test_skips():
    pytest.skip("not here")


def test_fails():
    assert False, "boom"
"""
DOTTED = "def test_in_dotted_dir():\n    assert True\n"
SRC = '''\
def double(x):
    """
    >>> double(2)
    4
    """
    return 2 * x
'''
TEST_SRC = "from pkg.mod import double\n\n\ndef test_double():\n    assert double(3) == 6\n"
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["src"]\n'

EXPECTED = {
    "tests/test_sub.py::TestSub::test_clear": "passed",
    "tests/test_sub.py::TestSub::test_broken": "failed",
    "tests/test_sub.py::TestOtherSub::test_clear": "passed",
    "tests/test_sub.py::TestOtherSub::test_broken": "failed",
    "tests/test_sub.py::TestOtherSub::test_own": "passed",
    "tests/test_sub.py::TestPlain::test_inherited_plain": "passed",
    "tests/test_sub.py::TestOuter::TestInner::test_nested": "passed",
    "tests/test_sub.py::TestOuter::TestInner::test_nested_param[1]": "passed",
    "tests/test_sub.py::TestOuter::TestInner::test_nested_param[2]": "passed",
    "tests/test_sub.py::test_param[a::b]": "passed",
    "tests/test_sub.py::test_param[c/d]": "passed",
    "tests/test_sub.py::test_param[e f]": "passed",
    "tests/test_sub.py::test_param[[g]]": "passed",
    "tests/test_sub.py::test_param[h]]": "passed",
    "tests/test_sub.py::test_param[1-a]": "passed",
    "tests/test_sub.py::test_param[x.y]": "passed",
    "tests/test_sub.py::test_errors": "error",
    "tests/test_sub.py::test_skips": "skipped",
    "tests/test_sub.py::test_fails": "failed",
    "tests/v1.2/test_dotted.py::test_in_dotted_dir": "passed",
    "tests/test_src.py::test_double": "passed",
    "src/pkg/mod.py::pkg.mod.double": "passed",
}


PROJECT = {
    "pyproject.toml": PYPROJECT,
    "tests/__init__.py": MIXIN,
    "tests/test_sub.py": SUB,
    "tests/v1.2/test_dotted.py": DOTTED,
    "tests/test_src.py": TEST_SRC,
    "src/pkg/__init__.py": "",
    "src/pkg/mod.py": SRC,
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for rel, text in PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


COMMAND = f"{PYTEST} --doctest-modules src tests"


def test_round_trip_every_id_selects_exactly_its_test(project: Path) -> None:
    with LocalDirSandbox(project) as sandbox:
        run = run_tests(sandbox, COMMAND, timeout=120)
        assert run.report, run.log()
        assert run.outcomes == EXPECTED, run.log()
        ids = sorted(run.outcomes)
        # The selected run is the plain command plus the ids (doctests need their option).
        again = run_tests(sandbox, f"{PYTEST} --doctest-modules", timeout=120, select=ids)
        assert again.outcomes == EXPECTED, again.log()
        assert "not found" not in again.log()
        for one in (
            "tests/test_sub.py::TestSub::test_clear",
            "tests/test_sub.py::test_param[a::b]",
            "tests/test_sub.py::test_param[e f]",
            "tests/test_sub.py::test_param[[g]]",
        ):
            single = run_tests(sandbox, PYTEST, timeout=120, select=[one])
            assert list(single.outcomes) == [one], single.log()


@pytest.mark.parametrize("family", ["xunit1", "xunit2"])
def test_ids_are_the_same_in_both_junit_families(project: Path, family: str) -> None:
    with LocalDirSandbox(project) as sandbox:
        sandbox.exec(f"{COMMAND} --junitxml=report.xml -o junit_family={family}", timeout=120)
        data = sandbox.read_file("report.xml")
        cases = parse_junit(data, local_files(str(sandbox.workspace)))
    assert outcomes(cases) == EXPECTED
    if family == "xunit1":
        inherited = next(c for c in cases if c.id == "tests/test_sub.py::TestSub::test_clear")
        assert inherited.file == "tests/__init__.py"  # what the old reader made the id of


def test_without_a_checkout_xunit1_ids_still_name_the_collected_module(project: Path) -> None:
    with LocalDirSandbox(project) as sandbox:
        sandbox.exec(f"{PYTEST} tests --junitxml=r.xml -o junit_family=xunit1", timeout=120)
        cases = parse_junit(sandbox.read_file("r.xml"))
    got = outcomes(cases)
    assert got["tests/test_sub.py::TestSub::test_clear"] == "passed"
    assert got["tests/v1.2/test_dotted.py::test_in_dotted_dir"] == "passed"
    assert not any(i.startswith("tests/__init__.py") for i in got)


def _report(cases: str, suite: str = "pytest") -> bytes:
    return f'<testsuites><testsuite name="{suite}">{cases}</testsuite></testsuites>'.encode()


def test_statuses_stay_distinct() -> None:
    cases = parse_junit(
        _report(
            '<testcase classname="t.test_a" name="test_p"/>'
            '<testcase classname="t.test_a" name="test_f"><failure message="x"/></testcase>'
            '<testcase classname="t.test_a" name="test_e"><error message="y"/></testcase>'
            '<testcase classname="t.test_a" name="test_s"><skipped message="z"/></testcase>'
            '<testcase classname="t.test_a" name="test_fe"><failure/><error/></testcase>'
        )
    )
    assert {c.name: c.outcome for c in cases} == {
        "test_p": "passed",
        "test_f": "failed",
        "test_e": "error",
        "test_s": "skipped",
        "test_fe": "error",
    }
    assert [c.failed for c in cases] == [False, True, True, False, True]


def test_a_repeated_id_keeps_its_worst_outcome() -> None:
    case = '<testcase classname="t.test_a" name="test_x">{}</testcase>'
    cases = parse_junit(_report(case.format("<failure/>") + case.format("")))
    assert outcomes(cases) == {"t/test_a.py::test_x": "failed"}


def test_a_suite_run_twice_shows_its_failure(project: Path) -> None:
    # The same module twice on one command line: pytest runs it twice; the failed run
    # must be the case the gate sees, whatever order the report lists them in.
    with LocalDirSandbox(project) as sandbox:
        command = f"{PYTEST} tests/v1.2/test_dotted.py --keep-duplicates"
        sandbox.write_file("flip.py", b"")
        sandbox.write_file(
            "tests/v1.2/conftest.py",
            b"import os\n\ndef pytest_runtest_call(item):\n"
            b"    if os.path.exists('flip.py'):\n        os.remove('flip.py')\n"
            b"        raise AssertionError('first run fails')\n",
        )
        run = run_tests(sandbox, f"{command} tests/v1.2/test_dotted.py", timeout=120)
    (case,) = run.by_id.values()
    assert case.outcome == "failed" and len(run.cases) == 2, run.log()


def test_other_runners_keep_classname_and_name() -> None:
    jest = _report(
        '<testcase classname="math add" name="adds two numbers"/>'
        '<testcase classname="com.example.FooTest" name="testBar"/>',
        suite="jest tests",
    )
    assert [c.id for c in parse_junit(jest)] == [
        "math add::adds two numbers",
        "com.example.FooTest::testBar",
    ]


def test_hostile_reports_are_refused() -> None:
    with pytest.raises(JUnitError):
        parse_junit(b'<!DOCTYPE x [<!ENTITY a "b">]><testsuite/>')
    with pytest.raises(JUnitError):
        parse_junit(b"<html/>")
    with pytest.raises(JUnitError):
        parse_junit(b"not xml")


def test_classnames_that_climb_out_name_no_files() -> None:
    assert module_candidates("..etc.passwd") == []
    assert module_candidates("a..b") == []
    assert module_candidates("tests.test_x.TestA")[:4] == [
        "tests.py",
        "tests/test_x.py",
        "tests.test_x.py",
        "tests.test_x",
    ]
    assert "tests/v1.2/test_x.py" in module_candidates("tests.v1.2.test_x.TestA")
    assert len(module_candidates(".".join("abcdefghijklmnopqrstuvwxyz"))) < 200


def test_select_batches_fit_one_environment_string() -> None:
    ids = [f"tests/test_x.py::test_{i}[{'a b' * 5}]" for i in range(5000)]
    batches = select_batches(ids, limit=10_000)
    assert [i for b in batches for i in b] == ids
    assert all(sum(len(shlex.quote(i)) + 1 for i in b) <= 10_000 for b in batches)


def test_case_is_not_collected_by_pytest() -> None:
    assert TestCase.__test__ is False


# cargo test's own output (rustc 1.96): cargo's target lines on stderr, libtest's on
# stdout, one file. The failing test printed a line that looks like a result; libtest
# shows it in the failures section, which is not read as results.
CARGO_OUTPUT = """\
   Compiling pg-rs v0.1.0 (/workspace)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.67s
     Running unittests src/lib.rs (/opt/ribbit/cache/cargo-target/debug/deps/pg_rs-8966)

running 4 tests
test tests::it_works ... ok
test tests::slow ... ignored, needs a network
test top ... ok
test tests::it_fails ... FAILED

failures:

---- tests::it_fails stdout ----
test tests::it_works ... FAILED

thread 'tests::it_fails' panicked at src/lib.rs:10:59:
assertion `left == right` failed

failures:
    tests::it_fails

test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.10s

error: test failed, to rerun pass `--lib`
     Running tests/integ.rs (/opt/ribbit/cache/cargo-target/debug/deps/integ-0455)

running 1 test
test integ_one ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests pg_rs

running 1 test
test src/lib.rs - add (line 3) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.19s
"""


def test_libtest_output_read_into_test_cases() -> None:
    assert outcomes(parse_libtest(CARGO_OUTPUT)) == {
        "src/lib.rs::tests::it_works": "passed",
        "src/lib.rs::tests::slow": "skipped",
        "src/lib.rs::top": "passed",
        "src/lib.rs::tests::it_fails": "failed",
        "tests/integ.rs::integ_one": "passed",
        "doc:pg_rs::src/lib.rs - add": "passed",
    }


def _artifact(manifest: str, binary: str) -> str:
    record = {"reason": "compiler-artifact", "manifest_path": manifest, "executable": binary}
    return json.dumps(record, separators=(",", ":"))


def _workspace_output(*artifacts: str, after: str = "") -> str:
    """A workspace's run as testcmd asks for it: the root, the binaries' records, then
    cargo test's own output (two crates, each with a src/lib.rs test of one name)."""
    deps = "/opt/ribbit/cache/cargo-target/debug/deps"
    block = (
        "\nrunning 1 test\ntest tests::it_works ... {}\n\n"
        "test result: {}. {} passed; {} failed; 0 ignored;\n"
    )
    return (
        "ribbit-cargo-root /workspace\n"
        + "".join(a + "\n" for a in artifacts)
        + f"     Running unittests src/lib.rs ({deps}/calc-1a2b)\n"
        + block.format("ok", "ok", 1, 0)
        + after
        + "     Running unittests src/lib.rs (target/debug/deps/app-3c4d)\n"
        + block.format("FAILED", "FAILED", 0, 1)
    )


def test_libtest_ids_in_a_workspace_name_each_crates_folder() -> None:
    # Without the folders both crates' tests had the id src/lib.rs::tests::it_works,
    # and the passing one hid the failing one.
    deps = "/opt/ribbit/cache/cargo-target/debug/deps"
    calc = _artifact("/workspace/crates/calc/Cargo.toml", f"{deps}/calc-1a2b")
    app = _artifact("/workspace/app/Cargo.toml", f"{deps}/app-3c4d")
    assert outcomes(parse_libtest(_workspace_output(calc, app))) == {
        "crates/calc/src/lib.rs::tests::it_works": "passed",
        "app/src/lib.rs::tests::it_works": "failed",
    }
    # The root's own package keeps its sources' paths (a single crate's ids as before);
    # a package outside the workspace is no folder of it.
    root = _artifact("/workspace/Cargo.toml", f"{deps}/calc-1a2b")
    outside = _artifact("/opt/vendor/app/Cargo.toml", f"{deps}/app-3c4d")
    assert set(outcomes(parse_libtest(_workspace_output(root, outside)))) == {
        "src/lib.rs::tests::it_works"
    }
    # Records only count before the first binary runs, and only under the root line.
    late = _workspace_output(calc, after=app + "\n")
    assert "app/src/lib.rs::tests::it_works" not in outcomes(parse_libtest(late))
    unrooted = _workspace_output(calc, app).split("\n", 1)[1]
    assert set(outcomes(parse_libtest(unrooted))) == {"src/lib.rs::tests::it_works"}


def test_two_packages_claiming_one_binary_make_the_output_unreadable() -> None:
    deps = "/opt/ribbit/cache/cargo-target/debug/deps"
    calc = _artifact("/workspace/calc/Cargo.toml", f"{deps}/calc-1a2b")
    forged = _artifact("/workspace/app/Cargo.toml", f"{deps}/calc-1a2b")
    with pytest.raises(JUnitError, match="two packages claim"):
        parse_libtest(_workspace_output(calc, forged))


def test_doc_tests_keep_their_id_when_lines_move() -> None:
    def doc_block(*names: str) -> str:
        lines = "".join(f"test {n} ... ok\n" for n in names)
        return (
            f"   Doc-tests strsim\n\nrunning {len(names)} tests\n{lines}\n"
            f"test result: ok. {len(names)} passed; 0 failed; 0 ignored; 0 measured; "
            "0 filtered out; finished in 0.19s\n"
        )

    # libtest sorts by name: "line 100" comes before "line 62".
    before = doc_block(
        "src/lib.rs - jaro (line 100)",
        "src/lib.rs - jaro (line 62)",
        "src/lib.rs - hamming (line 9) - compile fail",
    )
    # A patch adds five lines above them all.
    after = doc_block(
        "src/lib.rs - jaro (line 105)",
        "src/lib.rs - jaro (line 67)",
        "src/lib.rs - hamming (line 14) - compile fail",
    )
    ids = {
        "doc:strsim::src/lib.rs - jaro #1",
        "doc:strsim::src/lib.rs - jaro #2",
        "doc:strsim::src/lib.rs - hamming",
    }
    assert set(outcomes(parse_libtest(before))) == ids
    assert set(outcomes(parse_libtest(after))) == ids


@pytest.mark.parametrize(
    "forged",
    [
        # A test writes a result line past libtest's capture: one line too many.
        CARGO_OUTPUT.replace("test top ... ok\n", "test top ... ok\ntest tests::x ... ok\n"),
        # ...or turns its own failure into a pass: the summary disagrees.
        CARGO_OUTPUT.replace("test tests::it_fails ... FAILED", "test tests::it_fails ... ok"),
        # ...or ends the listing early to hide the lines after it.
        CARGO_OUTPUT.replace("test top ... ok\n", "test top ... ok\nfailures:\n"),
    ],
)
def test_libtest_output_that_disagrees_with_itself_is_refused(forged: str) -> None:
    with pytest.raises(JUnitError):
        parse_libtest(forged)


def test_libtest_binary_that_died_keeps_what_it_reported() -> None:
    died = CARGO_OUTPUT.split("test tests::it_fails ... FAILED")[0]
    assert set(outcomes(parse_libtest(died))) == {
        "src/lib.rs::tests::it_works",
        "src/lib.rs::tests::slow",
        "src/lib.rs::top",
    }


def test_libtest_names_the_binaries_that_ended_before_their_summary() -> None:
    """A binary that announced its tests and printed no summary died mid-run; code under
    test that prints a complete block of its own after libtest's "running N tests" and
    exits leaves the real block open (testrun refuses that with cargo exiting 0)."""
    assert libtest_unfinished(CARGO_OUTPUT) == []
    died = CARGO_OUTPUT.split("test tests::it_fails ... FAILED")[0]
    assert libtest_unfinished(died) == ["src/lib.rs"]
    forged = (
        "     Running unittests src/lib.rs (target/debug/deps/calc-1)\n\nrunning 2 tests\n"
        "     Running unittests src/lib.rs (target/debug/deps/calc-5f3a9e)\nrunning 2 tests\n"
        "test tests::a ... ok\ntest tests::b ... ok\n\n"
        "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"
    )
    assert set(outcomes(parse_libtest(forged))) == {"src/lib.rs::tests::a", "src/lib.rs::tests::b"}
    assert libtest_unfinished(forged) == ["src/lib.rs"]


def test_libtest_reads_only_cargos_own_target_lines() -> None:
    """A test run with ``--nocapture`` whose test prints a line starting "Running ... ("
    opens no block of its own: the binary finished, nothing is unfinished, every case is
    read (before cargo's line was anchored, this made an honest exit 0 a mismatch)."""
    printed = CARGO_OUTPUT.replace(
        "test tests::it_works ... ok\n",
        "Running migrations (3 pending)\n  Running seeds (db/seeds.sql)\n"
        "test tests::it_works ... ok\n",
    )
    assert libtest_unfinished(printed) == []
    assert outcomes(parse_libtest(printed)) == outcomes(parse_libtest(CARGO_OUTPUT))


@pytest.mark.parametrize(("cut_short", "refused"), [(False, False), (True, True)])
def test_a_cargo_run_that_exits_0_with_a_binary_cut_short_is_not_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut_short: bool, refused: bool
) -> None:
    """A stand-in ``cargo`` prints libtest's output and exits 0; cut short before a
    binary's summary, the run is not cargo's own (libtest exits 101 when a test fails)."""
    if cut_short:
        output = CARGO_OUTPUT.split("test tests::it_fails ... FAILED")[0]
    else:
        output = CARGO_OUTPUT.replace(
            "test tests::it_fails ... FAILED", "test tests::it_fails ... ok"
        )
        output = output.replace("2 passed; 1 failed", "3 passed; 0 failed")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "cargo").write_text(f"#!/bin/sh\nprintf %s {shlex.quote(output)}\nexit 0\n")
    (tools / "cargo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with LocalDirSandbox(workspace) as sandbox:
        run = run_tests(sandbox, "cargo test", timeout=30)
    assert run.report and run.exit_code == 0
    assert (run.tampered is not None) is refused, run.tampered
    if refused:
        assert "src/lib.rs" in str(run.tampered)


# Node 20's junit reporter: describe blocks are suites, every case's classname "test".
NODE_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites>
  <testcase name="top one" time="0.001" classname="test"/>
  <testsuite name="suite A" tests="2" failures="1">
    <testcase name="inner it" time="0.0002" classname="test"/>
    <testcase name="fails" time="0.001" classname="test">
      <failure type="testCodeFailure" message="1 !== 2">boom</failure>
    </testcase>
    <testsuite name="deeper"><testcase name="x::y" classname="test"/></testsuite>
  </testsuite>
  <testcase name="skipped" classname="test"><skipped type="skipped" message="true"/></testcase>
</testsuites>
"""


def test_node_ids_are_the_suite_path() -> None:
    assert outcomes(parse_junit(NODE_JUNIT, flavour="nested")) == {
        "top one": "passed",
        "suite A > inner it": "passed",
        "suite A > fails": "failed",
        "suite A > deeper > x::y": "passed",
        "skipped": "skipped",
    }


def test_plain_ids_ignore_pytest_rules() -> None:
    go = (
        '<testsuites><testsuite name="pytest"><testcase classname="example.com/pytest" '
        'name="TestA/sub" file="a_test.go"/></testsuite></testsuites>'
    )
    assert [c.id for c in parse_junit(go, flavour="plain")] == ["example.com/pytest::TestA/sub"]


# The same tests through Node 18's TAP reporter (no junit reporter there).
NODE_TAP = """\
TAP version 13
# Subtest: top one
ok 1 - top one
  ---
  duration_ms: 1.3
  ...
# Subtest: suite A
    # Subtest: inner it
    ok 1 - inner it
      ---
      duration_ms: 0.2
      ...
    # Subtest: fails
    not ok 2 - fails
      ---
      error: |-
        Expected values to be strictly equal:
        ok 9 - a line of the message, not a result
      ...
    # Subtest: deeper
        # Subtest: x::y
        ok 1 - x::y
          ---
          ...
        1..1
    ok 3 - deeper
      ---
      type: 'suite'
      ...
    1..3
not ok 2 - suite A
  ---
  type: 'suite'
  ...
# Subtest: skipped
ok 3 - skipped # SKIP
  ---
  ...
1..3
# tests 5
"""


def test_node_tap_gives_the_ids_node_junit_gives() -> None:
    assert outcomes(parse_node_tap(NODE_TAP)) == outcomes(parse_junit(NODE_JUNIT, flavour="nested"))


def _jest_file(name: str, tests: list[dict[str, object]], **extra: object) -> dict[str, object]:
    return {"name": name, "status": "passed", "message": "", "assertionResults": tests, **extra}


def _jest_test(ancestors: list[str], title: str, status: str) -> dict[str, object]:
    # The keys jest 29 writes for each test (`jest --json`), trimmed of timings.
    return {
        "ancestorTitles": ancestors,
        "title": title,
        "fullName": " ".join([*ancestors, title]),
        "status": status,
        "failureMessages": ["Error: expect(received).toBe(expected)"] if status == "failed" else [],
    }


def test_jest_json_read_into_test_cases() -> None:
    report = {
        "numTotalTests": 4,
        "testResults": [
            _jest_file(
                "/workspace/tests/cron.test.js",
                [
                    _jest_test(["cron", "setTime"], "should not start again", "failed"),
                    _jest_test(["cron"], "runs once", "passed"),
                    _jest_test([], "later", "todo"),
                    _jest_test(["cron"], "skipped one", "pending"),
                ],
            ),
            # A file that failed before any test ran (a syntax error): one error case,
            # so a patch cannot make a whole file's tests vanish and pass.
            _jest_file(
                "/workspace/tests/broken.test.js",
                [],
                status="failed",
                message="SyntaxError: Unexpected token",
            ),
        ],
    }
    cases = parse_jest_json(json.dumps(report), "/workspace")
    assert [(c.id, c.outcome) for c in cases] == [
        ("tests/cron.test.js::cron setTime should not start again", "failed"),
        ("tests/cron.test.js::cron runs once", "passed"),
        ("tests/cron.test.js::later", "skipped"),
        ("tests/cron.test.js::cron skipped one", "skipped"),
        ("tests/broken.test.js", "error"),
    ]
    assert cases[0].classname == "tests/cron.test.js"
    assert cases[0].name == "cron setTime should not start again"
    assert "toBe" in cases[0].message and "SyntaxError" in cases[-1].message
    # A path outside the root is kept whole rather than guessed at.
    [case] = parse_jest_json(
        json.dumps(
            {"testResults": [_jest_file("/elsewhere/a.test.js", [_jest_test([], "t", "passed")])]}
        ),
        "/workspace",
    )
    assert case.id == "/elsewhere/a.test.js::t"


@pytest.mark.parametrize(
    "forged",
    [
        "not json",
        "[]",
        '{"testResults": {}}',
        '{"testResults": [{"assertionResults": []}]}',
        '{"testResults": [{"name": "a.test.js"}]}',
        '{"testResults": [{"name": "a.test.js", "assertionResults": [{"status": "passed"}]}]}',
    ],
)
def test_jest_reports_that_are_not_jest_reports_are_refused(forged: str) -> None:
    with pytest.raises(JUnitError):
        parse_jest_json(forged, "/workspace")
