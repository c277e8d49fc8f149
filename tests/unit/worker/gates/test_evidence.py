"""Evidence that a patch fixes something (issue #31): the one fail-to-pass judge, the
levels it gives, target tests named uniquely, and "not run" never taken as a pass.
Hand-built runs (no test command runs here); tests/unit/worker/gates/test_tests_gate.py
and the adversarial corpus run real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records.gate_report import Finding, GateReport, GateResult, Verdict
from tests.unit.worker.gates.test_tests_judge import ctx
from worker.gates.evidence import (
    ABSENT,
    base_with_patch_tests,
    could_not_load,
    fail_to_pass,
    is_test_file,
)
from worker.gates.judge import SuiteRun, judge, shown_fixed
from worker.gates.junit import Outcome, TestCase
from worker.gates.targets import TargetTest, _enclosing_test, _test_class
from worker.gates.trees import PatchTrees

FILE = "tests/test_more.py"


def case(test_id: str, outcome: Outcome) -> TestCase:
    """A pytest case from its node id: ``tests/test_more.py::TestA::test_x[1]``."""
    path, *parts = test_id.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return TestCase(test_id, parts[-1], ".".join([module, *parts[:-1]]), outcome)


def run(label: str, exit_code: int = 0, **outcomes: Outcome) -> SuiteRun:
    """A run with a per-test report of FILE's tests; ``outcomes`` maps each test's id
    within the file (``::`` written ``__``) to its outcome."""
    by_id = ids(**outcomes)
    return SuiteRun(
        label,
        exit_code=exit_code,
        first_exit_code=exit_code,
        junit=True,
        final={i: "failed" if o == "error" else o for i, o in by_id.items()},
        cases={i: case(i, o) for i, o in by_id.items()},  # type: ignore[arg-type]
    )


def ids(**outcomes: Outcome) -> dict[str, Outcome]:
    return {f"{FILE}::{k.replace('__', '::')}": o for k, o in outcomes.items()}


# -- the one rule --------------------------------------------------------------------------


def test_fail_to_pass_counts_failed_or_errored_without_and_passed_with() -> None:
    without = ids(a="failed", b="error", d="passed", e="skipped", f="failed")
    with_patch = ids(a="passed", b="passed", c="passed", d="passed", e="passed", f="skipped")
    # c did not exist without the patch's code, though its module ran: no evidence.
    assert fail_to_pass(without, with_patch) == [f"{FILE}::{n}" for n in "ab"]
    # Its module could not be collected there (pytest's collection error): evidence.
    assert fail_to_pass({**without, "tests.test_more": "error"}, with_patch) == [
        f"{FILE}::{n}" for n in "abc"
    ]


def test_a_skipped_or_xfailed_test_is_never_a_pass() -> None:
    # JUnit reports xfail as skipped: a target that is skipped or xfails with the patch
    # shows nothing, whatever it did without it.
    assert fail_to_pass(ids(a="failed"), ids(a="skipped")) == []
    assert fail_to_pass({}, ids(a="skipped")) == []
    before = run("before", a="passed")
    after = run("after", a="passed", t="skipped")
    findings, details = judge(ctx(), before, after, [TargetTest("t", FILE)])
    assert [(f.rule, f.severity) for f in findings] == [("target-test-fails", "error")]
    assert details["target_failures"] == [f"{FILE}::t"]


def test_a_flaky_test_shows_nothing() -> None:
    assert fail_to_pass(ids(a="failed"), ids(a="passed"), flaky=[f"{FILE}::a"]) == []


def test_the_environment_builder_judges_with_the_same_rule() -> None:
    import trainer.envs.builder as builder
    import trainer.envs.patches as patches

    assert builder.evidence.fail_to_pass is fail_to_pass
    assert patches.is_test_path is is_test_file


def test_test_files_are_the_builders_and_the_gates() -> None:
    for path in ("tests/test_x.py", "pkg/test_x.py", "conftest.py", "x_test.go", "a/b.test.ts"):
        assert is_test_file(path), path
    for path in ("calc.py", "README.md", "src/lib.rs", "docs/testing.md"):
        assert not is_test_file(path), path


# -- the gate's evidence -------------------------------------------------------------------


def test_a_new_test_failing_on_the_old_code_is_evidence() -> None:
    old_code = run("old", 1, a="passed", t="failed")
    after = run("after", a="passed", t="passed")
    assert shown_fixed(old_code, after, run("before", a="passed")) == [f"{FILE}::t"]


def test_a_new_test_already_passing_on_the_old_code_is_no_evidence() -> None:
    old_code = run("old", a="passed", t="passed")
    after = run("after", a="passed", t="passed")
    assert shown_fixed(old_code, after, run("before", a="passed")) == []


def test_a_patch_without_tests_is_judged_on_the_base_run_and_shows_nothing() -> None:
    before = run("before", a="passed")
    assert shown_fixed(before, run("after", a="passed"), before) == []


def test_a_timed_out_run_is_no_evidence() -> None:
    old_code = run("old", 1, t="failed")
    after = run("after", t="passed")
    after.timed_out = True
    assert shown_fixed(old_code, after, old_code) == []


def test_without_per_test_reports_the_command_itself_is_the_evidence() -> None:
    old_code = SuiteRun("old", exit_code=1, first_exit_code=1)
    fixed = SuiteRun("after", exit_code=0, first_exit_code=0)
    assert shown_fixed(old_code, fixed, old_code) != []
    flaky = SuiteRun("after", exit_code=0, first_exit_code=1)
    assert shown_fixed(old_code, flaky, old_code) == []
    passing = SuiteRun("old", exit_code=0, first_exit_code=0)
    assert shown_fixed(passing, fixed, passing) == []


# -- unique test ids -----------------------------------------------------------------------


def test_same_named_tests_in_other_classes_are_other_tests() -> None:
    # more-itertools: a new TestNew::test_no_iterables beside four older ones.
    old = run(
        "old",
        TestA__test_no_iterables="passed",
        TestB__test_no_iterables="passed",
    )
    new = run(
        "after",
        TestA__test_no_iterables="passed",
        TestB__test_no_iterables="passed",
        TestNew__test_no_iterables="passed",
    )
    target = TargetTest("test_no_iterables", FILE, cls="TestNew")
    _, details = judge(ctx(), old, new, [target], old_code=old)
    assert details["target_results"] == {
        f"{FILE}::TestNew::test_no_iterables": {"before": "absent", "after": "passed"}
    }
    # The old code ran with the patch's test file (a run of its own, not the base's),
    # and the file could not be collected there: the new test could not run, evidence.
    base = run("before", TestA__test_no_iterables="passed", TestB__test_no_iterables="passed")
    broken = _collection_error(run("old"))
    assert shown_fixed(broken, new, base) == [f"{FILE}::TestNew::test_no_iterables"]
    # Collected fine without the new test in it: the id came with the patch's code.
    assert shown_fixed(old, new, base) == []
    # With no test file of the patch's in it (the base run itself: Rust's tests share
    # the code's files), absence shows nothing.
    assert shown_fixed(broken, new, broken) == []
    # Nor does the absence of a test that passed on the base (a build the patch's tests
    # broke takes the package's other tests with it).
    assert shown_fixed(broken, new, new) == []


def _collection_error(suite: SuiteRun, module: str = "tests.test_more") -> SuiteRun:
    """``suite`` with pytest's report of ``module`` failing to collect (a case named by
    its dotted path, no class), as the gate keeps it: failed."""
    suite.final[module] = "failed"
    suite.cases[module] = TestCase(module, module, "", "error", "collection failure")
    return suite


def test_parametrisations_are_each_their_own_test() -> None:
    old = run("old", 1, **{"test_x[1]": "passed", "test_x[2]": "failed"})
    new = run("after", **{"test_x[1]": "passed", "test_x[2]": "passed"})
    _, details = judge(ctx(), old, new, [TargetTest("test_x", FILE)], old_code=old)
    assert details["target_results"] == {
        f"{FILE}::test_x[1]": {"before": "passed", "after": "passed"},
        f"{FILE}::test_x[2]": {"before": "failed", "after": "passed"},
    }
    assert shown_fixed(old, new, old) == [f"{FILE}::test_x[2]"]


def test_a_patched_methods_class_is_found_but_not_a_mixins() -> None:
    lines = [
        "class TestA:",
        "    def test_x(self):",
        "        assert 1",
        "",
        "class Mixin:",
        "    @property",
        "    def test_x(self):",
        "        assert 2",
        "",
        "class AddTest(unittest.TestCase):",
        "    def test_y(self):",
        "        assert 3",
        "",
        "def test_z():",
        "    assert 4",
    ]
    assert _test_class(lines, 3) == "TestA"
    assert _test_class(lines, 8) is None
    assert _test_class(lines, 12) == "AddTest"
    assert _test_class(lines, 15) is None


# A parametrised test as python-humanize writes them (tests/test_time.py at 906a38c^):
# the table sits in the decorator, below the test before it and above its own def.
PARAMETRISED = [
    "def test_naturaldelta(test_input, expected):",  # 1
    "    assert humanize.naturaldelta(test_input) == expected",
    "",
    "",
    '@freeze_time("2020-02-02")',  # 5
    "@pytest.mark.parametrize(",
    '    "test_input, expected",',
    "    [",
    '        (23.5, "23 seconds ago"),',  # 9
    '        (30, "30 seconds ago"),',
    "    ],",
    ")",
    "def test_naturaltime(",  # 13
    "    test_input: float, expected: str",
    ") -> None:",
    "    assert humanize.naturaltime(test_input) == expected",  # 16
    "",
    "CASES = [",  # 18
    "    (1, 2),",
    "]",
    "",
    "class TestRounding:",  # 22
    '    @pytest.mark.parametrize("x", [',
    "        1.5,",  # 24
    "    ])",
    "    def test_round(self, x):",
    "        assert round(x)",  # 27
]


@pytest.mark.parametrize(
    ("line", "name", "cls"),
    [
        (2, "test_naturaldelta", None),
        (5, "test_naturaltime", None),  # a decorator is part of the test it decorates
        (9, "test_naturaltime", None),  # a row of its parametrize table
        (16, "test_naturaltime", None),  # below a signature over several lines
        (19, None, None),  # module-level data: no test of its own
        (24, "test_round", "TestRounding"),
        (27, "test_round", "TestRounding"),
        (3, None, None),
    ],
)
def test_a_parametrize_row_belongs_to_the_test_it_decorates(
    line: int, name: str | None, cls: str | None
) -> None:
    assert _enclosing_test(PARAMETRISED, line) == name
    assert _test_class(PARAMETRISED, line) == cls


def test_a_file_that_does_not_parse_is_read_by_indentation() -> None:
    lines = ["def test_a(:", "    assert 1", "", "def test_b():", "    assert 2"]
    assert _enclosing_test(lines, 2) == "test_a"
    assert _enclosing_test(lines, 5) == "test_b"


# -- absent without the patch's code: could not load, or only not there -------------------


def test_an_id_the_patchs_code_brings_is_no_evidence() -> None:
    # ``@pytest.mark.parametrize("name", calc.NAMES)``: the patch adds a name to the code
    # list and touches a test file; the module collects on the old code with fewer rows.
    old_code = run("old", **{"test_x[add]": "passed", "test_x[mul]": "passed"})
    after = run(
        "after", **{"test_x[add]": "passed", "test_x[mul]": "passed", "test_x[div]": "passed"}
    )
    assert shown_fixed(old_code, after, run("before")) == []
    # The honest twin: the new test imports what the fix adds, so its module cannot be
    # collected on the old code, and every test of it is evidence.
    broken = _collection_error(run("old", 1))
    assert shown_fixed(broken, after, run("before")) == sorted(after.final)


def test_a_pytest_module_that_loaded_without_tests_is_no_evidence() -> None:
    # Tests defined only when the code has a name: the module collects no item on the
    # old code, which pytest reports as nothing, not as an error.
    assert not could_not_load(
        f"{FILE}::test_new", ids(a="passed") | {"tests/other.py::t": "passed"}
    )
    assert not could_not_load(f"{FILE}::test_new", {})


@pytest.mark.parametrize(
    ("error", "loaded"),
    [
        ("tests.test_more", False),  # the module itself
        ("tests", False),  # tests/__init__.py could not be imported: every module under it
        ("tests.__init__", False),
        ("tests.test_mo", True),  # another module, whose name only begins the same
        ("tests.test_more.x", True),
    ],
)
def test_a_collection_error_is_of_its_module_or_a_package_above(error: str, loaded: bool) -> None:
    without = ids(a="passed") | {error: "failed"}
    assert could_not_load(f"{FILE}::test_new", without) is not loaded
    assert not could_not_load(f"{FILE}::test_new", ids(a="passed") | {error: "skipped"})


def test_a_go_package_or_rust_target_that_did_not_build_reports_nothing_of_itself() -> None:
    # gotestsum writes a package that does not build as one failing case with
    # classname="" and name="TestMain", an id that names no package (its other
    # packages' cases are there); a subtest the code's list brings is absent from a
    # package that ran.
    go = {"example.com/calc/other::TestO": "passed", "::TestMain": "failed"}
    assert could_not_load("example.com/calc::TestAdd", go)
    ran = go | {"example.com/calc::TestOps": "passed", "example.com/calc::TestOps/mul": "passed"}
    assert not could_not_load("example.com/calc::TestOps/div", ran)
    assert could_not_load("src/lib.rs::tests::new", {"tests/cli.rs::runs": "passed"})
    assert not could_not_load("src/lib.rs::tests::new", {"src/lib.rs::tests::old": "passed"})
    # The gate's own marks of absence are not results of the package.
    assert could_not_load("example.com/calc::TestAdd", {"example.com/calc::TestOld": ABSENT})


def test_a_jest_file_that_failed_to_load_is_its_path() -> None:
    without = {"tests/a.test.js": "error", "tests/b.test.js::b works": "passed"}
    assert could_not_load("tests/a.test.js::a works", without)
    assert not could_not_load("tests/b.test.js::b new", without)


def test_gotestsums_testmain_of_a_package_that_did_not_build_names_no_package() -> None:
    # ``::TestMain`` says some package did not build, not which: the packages that ran
    # decide, as without it.
    broken = {"::TestMain": "failed", "example.com/calc/other::TestO": "passed"}
    assert could_not_load("example.com/calc::TestAdd", broken)
    ran = broken | {"example.com/calc::TestOps": "passed"}
    assert not could_not_load("example.com/calc::TestOps/div", ran)
    assert not could_not_load("example.com/calc::TestOps/div", ran | {"::TestMain": "error"})


def test_a_vitest_file_that_failed_to_load_is_its_path_twice() -> None:
    # vitest's JUnit writes a file that does not load as classname=name=<file>.
    without = {"tests/a.test.ts::tests/a.test.ts": "failed", "tests/b.test.ts::b ok": "passed"}
    assert could_not_load("tests/a.test.ts::parse > handles quotes", without)
    assert not could_not_load("tests/b.test.ts::b new", without)
    loaded = {"tests/a.test.ts::tests/a.test.ts": "passed", "tests/a.test.ts::parse > ok": "passed"}
    assert not could_not_load("tests/a.test.ts::parse > handles quotes", loaded)


@pytest.mark.parametrize(
    ("error", "loaded"),
    [
        (f"{FILE}::TestC", False),  # the class's collector (pytest_generate_tests raised)
        (f"{FILE}::TestC::test_new", False),  # the function's, above its parametrisations
        (f"{FILE}::TestCase", True),  # another class, whose name only begins the same
        (f"{FILE}::TestC::test_ne", True),
    ],
)
def test_a_collector_error_above_the_test_is_its_unit_failing(error: str, loaded: bool) -> None:
    without = ids(a="passed") | {error: "error"}
    assert could_not_load(f"{FILE}::TestC::test_new[1]", without) is not loaded
    assert not could_not_load(f"{FILE}::TestC::test_new[1]", ids(a="passed") | {error: "passed"})


def test_a_mocha_test_absent_from_a_reported_run_is_no_evidence() -> None:
    # mocha's xunit ids are ``<describe blocks>::<title>``. A spec file that does not
    # load stops mocha with no report, so a reported run loaded every file: a test absent
    # from it was brought by the code (a title, a describe block or a loop taken from it).
    without = {"parser::old case": "passed"}
    assert not could_not_load("parser::new case", without, "mocha")
    assert not could_not_load("parser quotes::new case", without, "mocha")
    # Where the runner is not known, a describe block that ran nowhere still counts as
    # failing, as a Go package that did not build does.
    assert not could_not_load("parser::new case", without)
    assert could_not_load("parser quotes::new case", without)


NODE_FILE = "/workspace/test/parser.test.js"


@pytest.mark.parametrize(
    ("without", "failing"),
    [
        ({"parser > old": "passed"}, False),  # every file loaded: the code made the test
        ({"parser > old": "failed"}, False),  # a failing test is no file that did not load
        ({"parser > old": "passed", NODE_FILE: "failed"}, True),
        ({"parser > old": "passed", "/workspace/test/parser.test.mjs": "error"}, True),
        ({"parser > old": "passed", NODE_FILE: "passed"}, False),  # a test named so
        ({"parser > old": "passed", "test/parser.test.js": "failed"}, False),  # not a path
    ],
)
def test_a_node_test_absent_counts_as_failing_only_when_a_file_did_not_load(
    without: dict[str, str], failing: bool
) -> None:
    # Node's test runner names no file in its ids and reports a file that does not load
    # as one failing case named by the file's path.
    assert could_not_load("parser > new", without, "node") is failing
    assert could_not_load("suite::new", without, "node") is failing  # "::" in a title


def test_an_id_that_names_no_module_keeps_absent_as_failing_where_the_runner_is_unknown() -> None:
    assert could_not_load("parser > new", {"parser > old": "passed"})


def test_the_runner_reaches_the_gates_evidence() -> None:
    def node_run(label: str, **final: Outcome) -> SuiteRun:
        return SuiteRun(label, exit_code=0, first_exit_code=0, junit=True, final=final)

    before, old_code = node_run("before", old="passed"), node_run("old code", old="passed")
    after = node_run("after", old="passed", made_by_the_code="passed")
    assert shown_fixed(old_code, after, before, "node") == []
    assert shown_fixed(old_code, after, before) == ["made_by_the_code"]


# -- the levels ----------------------------------------------------------------------------


def _report(*results: GateResult) -> GateReport:
    return GateReport.from_results(list(results), 1.0)


def test_the_three_levels() -> None:
    shown = GateResult("tests", passed=True, evidence=(f"{FILE}::t",))
    none = GateResult("tests", passed=True)
    hygiene = GateResult("hygiene", passed=True)
    blocked = GateResult("hygiene", passed=False, findings=(Finding("hygiene", "ci", "ci"),))
    verified = _report(shown, hygiene)
    assert verified.verdict is Verdict.VERIFIED and verified.passed and not verified.refused
    unverified = _report(none, hygiene)
    assert unverified.verdict is Verdict.UNVERIFIED
    assert not unverified.passed and not unverified.refused and unverified.may_push
    refused = _report(shown, blocked)
    assert refused.verdict is Verdict.REFUSED and not refused.passed and refused.refused
    assert _report().verdict is Verdict.REFUSED  # no gate ran: nothing was judged


def test_only_verified_is_passed_in_the_report() -> None:
    unverified = _report(GateResult("tests", passed=True))
    md = unverified.to_markdown()
    assert "### Ribbit gates: not verified" in md and "passed" not in md.split("\n")[0]
    assert "Not verified: no test fails without this patch" in md
    data = unverified.to_dict()
    assert data["passed"] is False and data["verdict"] == "unverified"
    verified = _report(GateResult("tests", passed=True, evidence=("t",)))
    assert "### Ribbit gates: passed" in verified.to_markdown()


def test_the_verdict_and_evidence_are_stored_and_old_rows_read_as_before_evidence() -> None:
    report = _report(GateResult("tests", passed=True, evidence=(f"{FILE}::t",)))
    again = GateReport.from_dict(report.to_dict())
    assert again == report
    assert again is not None and again.results[0].evidence == (f"{FILE}::t",)
    old = {"passed": True, "gates": [{"name": "tests", "passed": True}]}
    read = GateReport.from_dict(old)
    assert read is not None and read.verdict is Verdict.BEFORE_EVIDENCE
    assert not read.refused and read.may_push
    assert "judged before evidence" in read.to_markdown()


# -- the old code with the patch's tests ---------------------------------------------------


def test_the_old_code_tree_has_the_patchs_test_files_and_nothing_else(tmp_path: Path) -> None:
    from tests.fakes import git, make_git_repo

    before, after = tmp_path / "before", tmp_path / "after"
    files = {"calc.py": "old\n", "tests/test_a.py": "a\n", "tests/test_gone.py": "g\n"}
    make_git_repo(before, files)
    git(tmp_path, "clone", "-q", str(before), str(after))
    (after / "calc.py").write_text("new\n")
    (after / "tests/test_a.py").write_text("a2\n")
    (after / "tests/test_b.py").write_text("b\n")
    (after / "tests/test_gone.py").unlink()
    (after / "README.md").write_text("docs\n")
    git(after, "add", "-A")
    trees = PatchTrees(before=before, after=after, parsed=None)  # type: ignore[arg-type]
    with base_with_patch_tests(trees) as tree:
        assert tree is not None
        assert (tree / "calc.py").read_text() == "old\n"
        assert (tree / "tests/test_a.py").read_text() == "a2\n"
        assert (tree / "tests/test_b.py").read_text() == "b\n"
        assert not (tree / "tests/test_gone.py").exists()
        assert not (tree / "README.md").exists()
    assert not tree.exists()
    (after / "tests/test_a.py").write_text("a\n")
    (after / "tests/test_gone.py").write_text("g\n")
    (after / "tests/test_b.py").unlink()
    git(after, "add", "-A")
    with base_with_patch_tests(trees) as none:
        assert none is None  # no test file changed: the base tree is that tree


def test_two_new_rust_tests_of_one_name_are_listed_as_two() -> None:
    def rust(label: str, **outcomes: Outcome) -> SuiteRun:
        cases = {
            f"src/lib.rs::{m}::tests::display": TestCase(
                f"src/lib.rs::{m}::tests::display", f"{m}::tests::display", "src/lib.rs", o
            )
            for m, o in outcomes.items()
        }
        final = {i: c.outcome for i, c in cases.items()}
        return SuiteRun(label, exit_code=0, first_exit_code=0, junit=True, final=final, cases=cases)

    old, new = rust("old"), rust("after", point="passed", span="passed")
    _, details = judge(ctx(), old, new, [TargetTest("display", "src/lib.rs")], old_code=old)
    assert details["target_results"] == {
        "src/lib.rs::point::tests::display": {"before": "absent", "after": "passed"},
        "src/lib.rs::span::tests::display": {"before": "absent", "after": "passed"},
    }
