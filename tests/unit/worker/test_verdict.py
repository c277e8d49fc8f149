"""The test gate's details read for people: a broken base is not the patch's fault, a
change no test exercised is said plainly, passing target tests are listed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.store.records.gate_report import GateResult
from worker.gates.verdict import TestVerdict


def _details(
    before: dict[str, Any],
    after: dict[str, Any],
    targets: Sequence[str] = (),
    target_failures: Sequence[str] = (),
) -> dict[str, Any]:
    return {
        "before": before,
        "after": after,
        "targets": list(targets),
        "target_failures": list(target_failures),
    }


def test_base_failing_the_same_way_is_not_blamed_on_the_patch() -> None:
    run = {"exit_code": 127, "failing": [], "per_test": False}
    verdict = TestVerdict.from_details(_details(run, run))
    assert verdict.base_broken
    assert "no test passes" in verdict.base_reason
    assert "base tree's tests fail too" in verdict.notes_markdown()


def test_import_errors_before_and_after_are_a_broken_base_even_with_new_files() -> None:
    # The patch adds a test module, which fails to import like every other one.
    before = {"exit_code": 2, "failing": ["tests.test_calc"], "counts": {"passed": 0}}
    after = {"exit_code": 2, "failing": ["tests.test_add", "tests.test_calc"]}
    assert TestVerdict.from_details(_details(before, after)).base_broken
    # One test passing after the patch means the suite is not wholly broken.
    after_some = {**after, "counts": {"passed": 1}}
    assert not TestVerdict.from_details(_details(before, after_some)).base_broken


def test_the_same_failures_before_and_after_are_the_bases() -> None:
    before = {"exit_code": 1, "failing": ["a", "b"], "counts": {"passed": 5}}
    after = {"exit_code": 1, "failing": ["a"], "counts": {"passed": 7}}
    assert (
        "the same 1 test(s) fail" in TestVerdict.from_details(_details(before, after)).base_reason
    )


def test_new_failures_after_the_patch_are_the_patchs() -> None:
    before = {"exit_code": 1, "failing": ["a"], "per_test": True, "counts": {"passed": 3}}
    after = {"exit_code": 1, "failing": ["a", "b"], "per_test": True, "counts": {"passed": 3}}
    assert not TestVerdict.from_details(_details(before, after)).base_broken
    ok = {"exit_code": 0, "failing": [], "per_test": True}
    assert not TestVerdict.from_details(_details(ok, after)).base_broken


def test_a_base_run_without_its_runners_report_is_a_broken_base_whatever_the_patch_does() -> None:
    before = {"exit_code": 1, "per_test": False, "report_expected": True}
    after = {"exit_code": 0, "per_test": True, "counts": {"passed": 4}}
    verdict = TestVerdict.from_details(_details(before, after))
    assert verdict.base_broken and "without running its tests" in verdict.base_reason
    # ``make test`` may never report: its silent base is no sign of a broken set-up.
    shell = {"exit_code": 1, "per_test": False}
    assert not TestVerdict.from_details(_details(shell, after)).base_broken


def test_setup_failing_on_both_trees_is_a_broken_base() -> None:
    run = {"setup_failed": True, "exit_code": 127}
    assert TestVerdict.from_details(_details(run, run)).base_broken


def test_no_target_test_is_said_and_passing_targets_are_listed() -> None:
    ok = {"exit_code": 0, "failing": [], "per_test": True}
    assert (
        "No test exercised the change"
        in TestVerdict.from_details(_details(ok, ok)).notes_markdown()
    )
    verdict = TestVerdict.from_details(
        _details(ok, ok, targets=["test_add", "test_sub"], target_failures=["t.py::test_sub"])
    )
    assert verdict.passing_targets == ("test_add",)
    assert "`test_add`" in verdict.notes_markdown()
    assert "No test exercised" not in verdict.notes_markdown()


def test_target_tests_are_shown_with_their_result_before_and_after() -> None:
    ok = {"exit_code": 0, "failing": [], "per_test": True}
    details = _details(ok, ok, targets=["test_add", "test_sub"])
    details["target_results"] = {
        "test_add": {"before": "failed", "after": "passed"},
        "test_sub": {"before": "absent", "after": "passed"},
    }
    notes = TestVerdict.from_details(details).notes_markdown()
    assert (
        "- Target tests, before → with the patch: `test_add` failed → passed, "
        "`test_sub` not run → passed." in notes
    )
    # A record from before target results were kept says only what it knows.
    assert "before →" not in TestVerdict.from_details(_details(ok, ok, ["t"])).notes_markdown()


def test_a_target_tests_name_cannot_end_its_code_span() -> None:
    ok = {"exit_code": 0, "failing": [], "per_test": True}
    title = "quotes `x`\n# heading"
    details = _details(ok, ok, targets=[title])
    details["target_results"] = {title: {"before": "absent", "after": "passed"}}
    notes = TestVerdict.from_details(details).notes_markdown()
    assert "`quotes 'x' # heading` not run → passed" in notes
    assert "`quotes 'x' # heading`." in notes and "\n#" not in notes


def test_the_notes_name_the_evidence_or_say_there_is_none() -> None:
    ok = {"exit_code": 0, "failing": [], "per_test": True}
    details = _details(ok, ok, targets=["test_add"])
    shown = GateResult("tests", True, details=details, evidence=("t.py::TestAdd::test_add",))
    notes = TestVerdict.from_result(shown).notes_markdown()
    assert "- Fails without this patch's code and passes with it: `t.py::TestAdd::test_add`." in (
        notes
    )
    assert "No test fails without this patch" not in notes
    none = TestVerdict.from_result(GateResult("tests", True, details=details)).notes_markdown()
    assert "- No test fails without this patch" in none and "Fails without" not in none
    assert TestVerdict.from_result(None) == TestVerdict.from_details({})


def test_a_behaviour_change_shows_the_old_and_new_lines_side_by_side() -> None:
    ok = {"exit_code": 0, "failing": [], "per_test": True}
    details = _details(ok, ok, targets=["test_mul"])
    details["pinned"] = {
        "regressions": [],
        "behaviour_changes": [
            {"test": "t.py::test_mul", "old": ["assert mul(2, 3) == 6"], "new": ["assert a | b"]},
            "garbage",
        ],
    }
    notes = TestVerdict.from_details(details).notes_markdown()
    assert "**Changes behaviour the repository's tests pinned**" in notes
    assert "| `t.py::test_mul` | `assert mul(2, 3) == 6` | `assert a \\| b` |" in notes


def test_a_behaviour_change_an_issue_label_accepts_says_so() -> None:
    ok = {"exit_code": 0, "failing": [], "per_test": True}
    details = _details(ok, ok, targets=["test_mul"])
    moved = {"test": "t.py::test_mul", "old": ["assert mul(2, 3) == 6"], "new": ["assert 5"]}
    details["pinned"] = {"behaviour_changes": [moved], "accepted_by_label": "behaviour`change"}
    notes = TestVerdict.from_details(details).notes_markdown()
    assert "The issue is labelled `behaviour'change`, under which this repository's" in notes
    assert "they count as evidence" in notes and "A reviewer must confirm" not in notes
    details["pinned"]["accepted_by_label"] = None
    assert "A reviewer must confirm" in TestVerdict.from_details(details).notes_markdown()


def test_the_notes_say_whether_the_results_were_watched_or_self_reported() -> None:
    watched = {"exit_code": 0, "failing": [], "per_test": True, "watched": True}
    details = _details(watched, watched, targets=["t.py::test_add"])
    details["runner"] = "pytest"
    details["evidence"] = {"run": {**watched, "exit_code": 1}, "fail_to_pass": []}
    notes = TestVerdict.from_details(details).notes_markdown()
    assert "- How these results were read: every run was watched" in notes
    assert "could forge" not in notes
    # One unwatched run among them (here the old-code run the evidence comes from) and
    # the results are the test process's own word.
    details["evidence"]["run"]["watched"] = False
    notes = TestVerdict.from_details(details).notes_markdown()
    assert "unwatched (a pytest run did not start under Ribbit's bootstrap)" in notes
    assert "could forge them" in notes and "every run was watched" not in notes
    # No evidence run (nothing to show): the two trees' runs decide.
    del details["evidence"]
    assert "every run was watched" in TestVerdict.from_details(details).notes_markdown()
    details["evidence"] = {"run": {"exit_code": None, "watched": False}}
    assert "every run was watched" in TestVerdict.from_details(details).notes_markdown()


def test_an_unwatched_runner_is_named_with_the_way_to_a_watched_one() -> None:
    ran = {"exit_code": 0, "failing": [], "per_test": True}
    details = _details(ran, ran)
    details["runner"] = "shell"
    notes = TestVerdict.from_details(details).notes_markdown()
    assert "not a plain pytest command (`test` in `.ribbit.yml`)" in notes
    details["runner"] = "go"
    assert "Ribbit watches pytest runs only, not go" in (
        TestVerdict.from_details(details).notes_markdown()
    )
    # A record from before runs were kept, or a job that never ran its tests, claims
    # nothing either way.
    assert "How these results" not in TestVerdict.from_details({}).notes_markdown()
    unrun = _details({"exit_code": None}, {"exit_code": None})
    assert "How these results" not in TestVerdict.from_details(unrun).notes_markdown()
