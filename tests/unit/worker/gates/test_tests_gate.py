from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records.gate_report import GateResult
from tests.unit.worker.gates.helpers import PYTEST, make_ctx, make_patch, repo_with
from worker.gates.tests import TestGate, _run_log
from worker.repo_config import RepoConfig
from worker.settings import GateSettings

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = (
    "from calc import add, mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n\n\n"
    "def test_add_zero():\n    assert add(0, 0) == 0\n"
)
BASE = {"calc.py": CALC, "tests/__init__.py": "", "tests/test_calc.py": TESTS}
FIX = CALC.replace("return a - b", "return a + b")
NEW_TEST = TESTS + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _run(
    tmp_path: Path,
    changes: dict[str, str | bytes | None],
    *,
    base_files: dict[str, str] | None = None,
    config: RepoConfig | None = None,
    settings: GateSettings | None = None,
    issue_text: str = "",
    issue_labels: tuple[str, ...] = (),
) -> GateResult:
    repo, base = repo_with(tmp_path, base_files or BASE)
    patch = make_patch(repo, changes)
    ctx = make_ctx(
        repo,
        base,
        patch,
        config=config,
        settings=settings,
        issue_text=issue_text,
        issue_labels=issue_labels,
    )
    return TestGate().run(ctx)


def _rules(result: GateResult) -> set[str]:
    return {f.rule for f in result.findings if f.severity == "error"}


def test_tests_gate_passes_fix_with_new_test(tmp_path: Path) -> None:
    result = _run(tmp_path, {"calc.py": FIX, "tests/test_calc.py": NEW_TEST})
    assert result.passed, (result.findings, result.logs)
    d = result.details
    assert d["targets"] == ["test_add"]
    assert d["before"]["counts"] == {"passed": 2, "failed": 0, "skipped": 0, "total": 2, "flaky": 0}
    assert d["after"]["counts"]["passed"] == 3
    assert d["regressions"] == [] and d["flaky"] == []


def test_a_fix_whose_new_test_fails_on_the_old_code_is_evidence(tmp_path: Path) -> None:
    result = _run(tmp_path, {"calc.py": FIX, "tests/test_calc.py": NEW_TEST})
    assert result.evidence == ("tests/test_calc.py::test_add",)
    old_code = result.details["evidence"]["run"]
    assert old_code["failing"] == ["tests/test_calc.py::test_add"]  # the old code, new test
    assert "--- base code with the patch's tests ---" in result.logs


def test_a_docs_only_patch_and_an_already_passing_new_test_are_no_evidence(
    tmp_path: Path,
) -> None:
    docs = _run(tmp_path, {"README.md": "add() adds.\n"})
    assert docs.passed and docs.evidence == ()
    assert "base code with the patch's tests" not in docs.logs  # the base run is that run
    passing = TESTS + "\n\ndef test_add_more_zeros():\n    assert add(0, 0) == 0\n"
    already = _run(tmp_path / "2", {"tests/test_calc.py": passing})
    assert already.passed and already.evidence == ()
    assert already.details["target_results"] == {
        "tests/test_calc.py::test_add_more_zeros": {"before": "passed", "after": "passed"}
    }


def test_a_new_test_sharing_its_name_with_another_classs_is_its_own_target(
    tmp_path: Path,
) -> None:
    # more-itertools: a new test_no_iterables beside same-named tests of other classes.
    classes = (
        "from calc import add, mul\n\n\nclass TestMul:\n    def test_zero(self):\n"
        "        assert mul(2, 0) == 0\n"
    )
    base = {**BASE, "tests/test_classes.py": classes}
    new = classes + "\n\nclass TestAdd:\n    def test_zero(self):\n        assert add(2, 3) == 5\n"
    result = _run(tmp_path, {"calc.py": FIX, "tests/test_classes.py": new}, base_files=base)
    assert result.details["target_results"] == {
        "tests/test_classes.py::TestAdd::test_zero": {"before": "failed", "after": "passed"}
    }
    assert result.evidence == ("tests/test_classes.py::TestAdd::test_zero",)


def test_rewriting_a_pinning_test_to_match_broken_code_is_at_most_unverified(
    tmp_path: Path,
) -> None:
    # Issue #38's first attack: break mul and rewrite its test's expected value (same
    # name, same asserts). The edited test fails on the old code and passes on the new,
    # which alone would read as verified.
    broken = CALC.replace("return a * b", "return a + b")
    rewritten = TESTS.replace("mul(2, 3) == 6", "mul(2, 3) == 5")
    result = _run(tmp_path, {"calc.py": broken, "tests/test_calc.py": rewritten})
    assert result.evidence == ()
    assert result.details["evidence"]["fail_to_pass"] == []
    assert "behaviour-change" in {f.rule for f in result.findings}
    assert result.details["pinned"]["behaviour_changes"] == [
        {
            "test": "tests/test_calc.py::test_mul",
            "old": ["assert mul(2, 3) == 6"],
            "new": ["assert mul(2, 3) == 5"],
        }
    ]
    assert "--- patched code with the base's tests ---" in result.logs


# An issue that asks for a behaviour change: add(0, 0) is to raise, and the honest patch
# updates the test that pinned the old answer.
RAISES = CALC.replace("return a - b", "if a == b == 0:\n        raise ValueError\n    return a + b")
RAISES_TEST = TESTS.replace(
    "    assert add(0, 0) == 0\n", "    with pytest.raises(ValueError):\n        add(0, 0)\n"
).replace("from calc import add, mul\n", "import pytest\n\nfrom calc import add, mul\n")
ACCEPTING = RepoConfig(test=PYTEST, gates={"behaviour_change_labels": ["behaviour-change"]})


@pytest.mark.parametrize(
    ("labels", "config"),
    [
        ((), ACCEPTING),  # the issue lacks the label
        (("behaviour-change",), None),  # the repository names no such label
        (("ribbit", "bug"), ACCEPTING),
    ],
)
def test_an_honest_behaviour_change_is_unverified_with_both_assertions_shown(
    tmp_path: Path, labels: tuple[str, ...], config: RepoConfig | None
) -> None:
    result = _run(
        tmp_path,
        {"calc.py": RAISES, "tests/test_calc.py": RAISES_TEST},
        config=config,
        issue_labels=labels,
    )
    assert result.passed and result.evidence == ()
    assert result.details["evidence"]["fail_to_pass"] == []
    pinned = result.details["pinned"]
    assert pinned["accepted_by_label"] is None and pinned["regressions"] == []
    assert pinned["behaviour_changes"] == [
        {
            "test": "tests/test_calc.py::test_add_zero",
            "old": ["assert add(0, 0) == 0"],
            "new": ["with pytest.raises(ValueError):", "add(0, 0)"],
        }
    ]
    (moved,) = [f for f in result.findings if f.rule == "behaviour-change"]
    assert moved.severity == "warning" and "a reviewer must confirm" in moved.message


def test_a_behaviour_change_the_issues_label_accepts_counts_as_evidence(tmp_path: Path) -> None:
    # .ribbit.yml names the label; forge labels compare without case.
    result = _run(
        tmp_path,
        {"calc.py": RAISES, "tests/test_calc.py": RAISES_TEST},
        config=ACCEPTING,
        issue_labels=("bug", "Behaviour-Change"),
    )
    assert result.passed
    assert result.evidence == ("tests/test_calc.py::test_add_zero",)
    pinned = result.details["pinned"]
    assert pinned["accepted_by_label"] == "Behaviour-Change"
    assert [c["test"] for c in pinned["behaviour_changes"]] == ["tests/test_calc.py::test_add_zero"]
    (moved,) = [f for f in result.findings if f.rule == "behaviour-change"]
    assert moved.severity == "warning" and "'Behaviour-Change'" in moved.message


def test_the_label_never_accepts_a_regression(tmp_path: Path) -> None:
    # The label accepts edited tests only: a pinned test the patch left alone still fails.
    broken = RAISES.replace("return a * b", "return a + b")
    result = _run(
        tmp_path,
        {"calc.py": broken, "tests/test_calc.py": RAISES_TEST},
        config=ACCEPTING,
        issue_labels=("behaviour-change",),
    )
    assert not result.passed and "pinned-test-regression" in _rules(result)


# A parametrised test whose rows get index-based ids (dict arguments): a row inserted
# above others moves their ids, as python-humanize's tables do.
TABLE = (
    "import pytest\n\nfrom calc import add\n\n\n"
    "@pytest.mark.parametrize(\n    ('args', 'total'),\n    [\n"
    "        ({'a': 1, 'b': 1}, 2),\n        ({'a': 2, 'b': 2}, 4),\n    ],\n)\n"
    "def test_add(args, total):\n    assert add(**args) == total\n"
)
TABLE_BASE = {**BASE, "calc.py": FIX, "tests/test_table.py": TABLE}


def test_a_row_inserted_in_a_table_moves_ids_without_losing_tests(tmp_path: Path) -> None:
    fixed = FIX.replace("return a + b", "return a + b if a or b else 0")
    inserted = TABLE.replace("    [\n", "    [\n        ({'a': 0, 'b': 0}, 0),\n", 1)
    result = _run(
        tmp_path,
        {"calc.py": fixed, "tests/test_table.py": inserted},
        base_files=TABLE_BASE,
    )
    assert result.passed, result.findings
    replaced = [f for f in result.findings if f.rule == "tests-replaced"]
    assert [f.severity for f in replaced] == ["warning"]
    assert "tests/test_table.py::test_add[args1-4]" in replaced[0].message
    assert "tests-missing" not in _rules(result)


def test_rewriting_a_row_to_match_broken_code_is_never_verified(tmp_path: Path) -> None:
    # The attack in table form: break add(2, 2) and rewrite its row to expect the broken
    # answer. The new row fails on the old code and passes on the new (evidence, were
    # it believed) under a new id; the old row's id is gone from the patched run.
    broken = FIX.replace("return a + b", "return 0 if a == b == 2 else a + b")
    rewritten = TABLE.replace("({'a': 2, 'b': 2}, 4)", "({'a': 2, 'b': 2}, 0)")
    result = _run(
        tmp_path,
        {"calc.py": broken, "tests/test_table.py": rewritten},
        base_files=TABLE_BASE,
    )
    assert result.evidence == ()
    assert result.details["evidence"]["run"]["failing"] == [
        "tests/test_table.py::test_add[args1-0]"
    ]
    moved = result.details["pinned"]["behaviour_changes"]
    assert moved == [
        {
            "test": "tests/test_table.py::test_add[args1-4]",
            "old": ["({'a': 2, 'b': 2}, 4),"],
            "new": ["({'a': 2, 'b': 2}, 0),"],
        }
    ]


def test_a_test_module_importing_a_private_correct_copy_is_a_regression(
    tmp_path: Path,
) -> None:
    # Issue #38's second attack: break mul, keep a correct copy, and change one import
    # line of the test module; no test function is edited.
    broken = CALC.replace("return a * b", "return a + b") + (
        "\n\ndef _mul_ref(a, b):\n    return a * b\n"
    )
    redirected = TESTS.replace("from calc import add, mul", "from calc import add, _mul_ref as mul")
    result = _run(tmp_path, {"calc.py": broken, "tests/test_calc.py": redirected})
    assert not result.passed
    assert "pinned-test-regression" in _rules(result)
    assert result.details["pinned"]["regressions"] == ["tests/test_calc.py::test_mul"]


def test_a_patch_that_edits_no_test_file_has_no_pinned_run(tmp_path: Path) -> None:
    result = _run(tmp_path, {"calc.py": FIX})
    assert "pinned" not in result.details and "base's tests" not in result.logs


def test_tests_gate_fails_when_target_test_fails(tmp_path: Path) -> None:
    result = _run(tmp_path, {"tests/test_calc.py": NEW_TEST})
    assert not result.passed
    assert {"target-test-fails", "test-fails"} <= _rules(result)
    assert result.details["target_failures"] == ["tests/test_calc.py::test_add"]


def test_tests_gate_fails_on_regression(tmp_path: Path) -> None:
    broken = FIX.replace("return a * b", "return a ** b")
    result = _run(tmp_path, {"calc.py": broken, "tests/test_calc.py": NEW_TEST})
    assert not result.passed
    assert result.details["regressions"] == ["tests/test_calc.py::test_mul"]
    assert "test-regression" in _rules(result)


def test_tests_gate_checks_test_named_in_issue(tmp_path: Path) -> None:
    base = {**BASE, "tests/test_calc.py": NEW_TEST}
    issue = "add() subtracts: test_add fails"
    fixed = _run(tmp_path, {"calc.py": FIX}, base_files=base, issue_text=issue)
    assert fixed.passed, fixed.findings
    assert fixed.details["targets"] == ["test_add"]
    unfixed = _run(
        tmp_path / "2", {"calc.py": CALC + "\n# nothing\n"}, base_files=base, issue_text=issue
    )
    assert not unfixed.passed
    assert "target-test-fails" in _rules(unfixed)


def test_tests_gate_tells_flaky_from_broken(tmp_path: Path) -> None:
    # Fails on every other run, whatever sandbox it is in: the rerun shares nothing with
    # the first run (issue #31), so the count lives on the host, which the test sandbox
    # (not isolated) can reach; before and after, the first run fails and the rerun passes.
    counter = tmp_path / "runs"
    flaky = (
        "import pathlib\n\n\ndef test_warms_cache():\n"
        f"    counter = pathlib.Path({str(counter)!r})\n"
        "    runs = len(counter.read_text()) if counter.exists() else 0\n"
        "    counter.write_text('x' * (runs + 1))\n"
        "    if runs % 2 == 0:\n        raise AssertionError('cold cache')\n"
    )
    result = _run(
        tmp_path,
        {"calc.py": FIX, "tests/test_calc.py": NEW_TEST},
        base_files={**BASE, "tests/test_flaky.py": flaky},
    )
    assert result.passed, (result.findings, result.logs)
    assert result.details["flaky"] == ["tests/test_flaky.py::test_warms_cache"]
    assert result.details["after"]["reran"] is True
    assert any(f.rule == "flaky-tests" and f.severity == "warning" for f in result.findings)


@pytest.mark.slow  # waits out the 10 s minimum timeout
def test_tests_gate_times_out_hanging_suite(tmp_path: Path) -> None:
    hang = TESTS + "\n\ndef test_hangs():\n    import time\n    time.sleep(600)\n"
    result = _run(tmp_path, {"tests/test_calc.py": hang}, settings=GateSettings(test_timeout_s=10))
    assert not result.passed
    assert "tests-timeout" in _rules(result)
    assert result.details["after"]["timed_out"] is True
    assert result.details["after"]["reran"] is False
    assert result.details["before"]["counts"]["passed"] == 2


def test_tests_gate_falls_back_to_exit_code(tmp_path: Path) -> None:
    base = {"run_tests.sh": 'test "$(cat answer.txt)" = 42\n', "answer.txt": "41\n"}
    config = RepoConfig(test="bash run_tests.sh")
    fixed = _run(tmp_path, {"answer.txt": "42\n"}, base_files=base, config=config)
    assert fixed.passed, fixed.findings
    assert fixed.details["after"]["per_test"] is False
    still = _run(tmp_path / "2", {"answer.txt": "40\n"}, base_files=base, config=config)
    assert _rules(still) == {"tests-failed"}


def test_tests_gate_runs_setup_first_and_reports_its_failure(tmp_path: Path) -> None:
    base = {
        **BASE,
        "tests/test_setup.py": "import pathlib\n\n\ndef test_setup_ran():\n"
        "    assert pathlib.Path('built.txt').exists()\n",
    }
    ok = _run(
        tmp_path,
        {"calc.py": FIX},
        base_files=base,
        config=RepoConfig(setup="echo built > built.txt", test=PYTEST),
    )
    assert ok.passed, ok.findings
    bad = _run(
        tmp_path / "2",
        {"calc.py": FIX},
        base_files=base,
        config=RepoConfig(setup="exit 3", test=PYTEST),
    )
    assert "setup-failed" in _rules(bad)


def test_tests_gate_needs_new_test_to_run(tmp_path: Path) -> None:
    config = RepoConfig(test=f"{PYTEST} tests/test_calc.py")
    result = _run(
        tmp_path,
        {
            "calc.py": FIX,
            "tests/test_more.py": "from calc import add\n\n\ndef test_more():\n"
            "    assert add(1, 1) == 2\n",
        },
        config=config,
    )
    assert "target-test-not-run" in _rules(result)


MIXIN = (
    "from calc import add\n\n\nclass AddMixin:\n    def test_add_zero(self):\n"
    "        assert add(0, 0) == 0\n"
)
INHERITS = (
    "import unittest\n\nfrom tests import AddMixin\n\n\n"
    "class AddTest(AddMixin, unittest.TestCase):\n    pass\n"
)


def test_tests_gate_finds_a_mixins_changed_test_in_the_classes_that_inherit_it(
    tmp_path: Path,
) -> None:
    # cachetools' layout: the test methods live in tests/__init__.py, and pytest collects
    # them as tests/test_add.py::AddTest::...
    base = {"calc.py": CALC, "tests/__init__.py": MIXIN, "tests/test_add.py": INHERITS}
    new_test = "\n    def test_add(self):\n        assert add(2, 3) == 5\n"
    fixed = _run(tmp_path, {"calc.py": FIX, "tests/__init__.py": MIXIN + new_test}, base_files=base)
    assert fixed.passed, (fixed.findings, fixed.logs)
    assert fixed.details["targets"] == ["test_add"]
    unfixed = _run(tmp_path / "2", {"tests/__init__.py": MIXIN + new_test}, base_files=base)
    assert "target-test-fails" in _rules(unfixed)
    assert unfixed.details["target_failures"] == ["tests/test_add.py::AddTest::test_add"]


def test_tests_gate_never_touches_host_checkout(tmp_path: Path) -> None:
    repo, base = repo_with(tmp_path, BASE)
    patch = make_patch(repo, {"calc.py": FIX})
    before = sorted(p.name for p in repo.iterdir())
    TestGate().run(make_ctx(repo, base, patch))
    assert sorted(p.name for p in repo.iterdir()) == before
    assert (repo / "calc.py").read_text() == CALC


def test_tests_gate_does_not_blame_patch_for_preexisting_failure(tmp_path: Path) -> None:
    broken = "def test_always_broken():\n    assert 1 == 2\n"
    result = _run(
        tmp_path,
        {"calc.py": FIX, "tests/test_calc.py": NEW_TEST},
        base_files={**BASE, "tests/test_broken.py": broken},
    )
    assert result.passed, result.findings
    (info,) = [f for f in result.findings if f.rule == "preexisting-failures"]
    assert info.severity == "info" and "test_always_broken" in info.message
    assert result.details["before"]["reran"] is True  # broken twice: not flaky
    assert result.details["flaky"] == []


def test_split_run_output_needs_exactly_one_framed_report() -> None:
    import base64

    from worker.gates.testrun import split_run_output

    tok = "t0k"
    xml = base64.b64encode(b"<testsuite/>").decode()
    good = f"1 passed in 0.1s\n{tok} begin 0\n{xml}\n{tok} end\n"
    assert split_run_output(good, tok) == ("1 passed in 0.1s", b"<testsuite/>", None, 0)
    forged = good + f"\n{tok} begin 0\n{xml}\n{tok} end\n"
    assert split_run_output(forged, tok)[1:3] == (
        None,
        "the run's output holds more than one report",
    )
    trailing = good + "late output\n"
    assert split_run_output(trailing, tok)[1] is None
    assert split_run_output(trailing, tok)[2] is not None
    assert split_run_output("hung, killed", tok) == ("hung, killed", None, None, 0)


def test_split_run_output_reads_processes_that_outlived_the_command() -> None:
    """The frame's first line carries the exit status and how many processes the run
    script found alive after the command (and killed): counted apart from what makes the
    output not the wrapper's own, since the judge weighs them against the base's."""
    from worker.gates.testrun import split_run_output

    tok = "t0k"
    body = "PHRlc3RzdWl0ZS8+"
    clean = f"ok\n{tok} begin 0 0\n{body}\n{tok} end\n"
    assert split_run_output(clean, tok) == ("ok", b"<testsuite/>", None, 0)
    left = f"ok\n{tok} begin 0 2\n{body}\n{tok} end\n"
    assert split_run_output(left, tok) == ("ok", b"<testsuite/>", None, 2)
    # A run without a report is still told apart; a watched run's report is the
    # channel's, which nothing left running could have rewritten.
    assert split_run_output(f"x\n{tok} begin 1 1\n\n{tok} end\n", tok).strays == 1
    assert split_run_output(left, tok, count_strays=False).strays == 0


def test_a_repository_that_allows_test_config_changes_is_still_judged_by_its_own(
    tmp_path: Path,
) -> None:
    # The patch's pytest.ini collects its new check_*.py tests; the base's does not, so
    # under the base's configuration the patch's target test never runs.
    config = RepoConfig.model_validate({"test": PYTEST, "gates": {"test_config_changes": "warn"}})
    ini = "[pytest]\npython_files = test_*.py check_*.py\n"
    checks = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    result = _run(
        tmp_path,
        {"calc.py": FIX, "pytest.ini": ini, "tests/check_calc.py": checks},
        config=config,
    )
    assert "base-config-target-test-not-run" in _rules(result), result.findings
    assert "target-test-not-run" not in _rules(result)  # the patch's own run has it
    assert result.details["test_config_changes"] == ["pytest.ini: the whole file"]
    assert result.details["after_base_config"]["counts"]["passed"] == 2
    assert "--- after, base test configuration ---" in result.logs
    # The same change with the base's configuration blocking: not run twice.
    blocked = _run(tmp_path / "2", {"calc.py": FIX, "pytest.ini": ini})
    assert "after_base_config" not in blocked.details


def test_every_steps_command_line_survives_a_long_output() -> None:
    # What ran (a launcher's options, issue #35) is the line a tail of the joined log
    # used to cut off first.
    log = _run_log([("$ npm ci", "i" * 9000), ("$ npx jest\n# ran: jest --ci", "t" * 9000)])
    assert "$ npm ci\n…" in log and "$ npx jest\n# ran: jest --ci\n…" in log
    assert log.endswith("t" * 3000) and len(log) < 5000
