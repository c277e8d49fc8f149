"""Gate findings placed on the patch's added lines, for check runs and MR discussions."""

from __future__ import annotations

from typing import Any

from bot.forges.base import Annotation
from bot.store.records.gate_report import GateReport
from worker.gates.review import gate_review, line_annotations

DIFF = """\
diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,3 +1,4 @@
 def add(a, b):
-    return a - b
+    return eval(f"{a} + {b}")
+
 # end
diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,5 @@
+from calc import add
+
+
+def test_add_two_numbers():
+    assert add(2, 3) == 6
"""


def _report(findings: list[Any], **tests_details: Any) -> GateReport | None:
    # Stored JSON read back as the job's record reads it (SolveRecord.from_json).
    return GateReport.from_dict(
        {
            "passed": False,
            "gates": [
                {"name": "semgrep", "passed": False, "findings": findings, "details": {}},
                {"name": "tests", "passed": False, "findings": [], "details": tests_details},
            ],
        }
    )


def test_findings_go_on_added_lines_only() -> None:
    report = _report(
        [
            {"gate": "semgrep", "rule": "no-eval", "message": "eval", "path": "calc.py", "line": 2},
            # Line 1 is context, not added: it cannot sit on the diff.
            {"gate": "semgrep", "rule": "old", "message": "x", "path": "calc.py", "line": 1},
            {"gate": "hygiene", "rule": "w", "message": "y", "path": "other.py", "line": 2},
            {"gate": "hygiene", "rule": "file", "message": "whole file", "path": "calc.py"},
            {"gate": "semgrep", "rule": "no-eval", "message": "eval", "path": "calc.py", "line": 2},
            {
                "gate": "hygiene",
                "rule": "i",
                "message": "@maya fixes #3",
                "path": "calc.py",
                "line": 3,
                "severity": "info",
            },
            "not a finding",
        ]
    )
    notes = line_annotations(report, DIFF)
    assert notes == (
        Annotation("calc.py", 2, "failure", "semgrep: no-eval", "eval"),
        Annotation("calc.py", 2, "failure", "hygiene: file", "whole file"),
        Annotation("calc.py", 3, "notice", "hygiene: i", "@\u200bmaya fixes #\u200b3"),
    )


def test_failing_tests_go_on_the_line_that_defines_them() -> None:
    report = _report(
        [],
        new_failures=["tests/test_add.py::test_add_two_numbers", "tests/test_other.py::test_x"],
        regressions=["tests/test_add.py::TestOld::test_gone[1-2]"],
    )
    notes = line_annotations(report, DIFF)
    assert [(n.path, n.line, n.title) for n in notes] == [
        ("tests/test_add.py", 1, "tests: test-regression"),  # not defined in the patch
        ("tests/test_add.py", 4, "tests: test-fails"),
    ]
    assert "test_add_two_numbers` fails with the patch" in notes[1].message


def test_unparseable_diff_or_report_gives_no_annotations() -> None:
    assert line_annotations(_report([]), "not a diff\n@@ broken") == ()
    assert line_annotations(None, DIFF) == ()
    assert line_annotations(GateReport.from_dict({"passed": False, "gates": "x"}), DIFF) == ()


def test_gate_review_key_names_job_and_commit_and_sanitises() -> None:
    review = gate_review(
        job_id="j1",
        head_sha="a" * 40,
        passed=True,
        summary_line="tests ✔",
        report_md="ping @maya",
        gates=_report([]),
        diff=DIFF,
        details_url="https://r.example/review/jobs/j1?sig=s",
    )
    assert review.key == f"ribbit-j1-{'a' * 40}"
    assert "@maya" not in review.summary and review.passed


def test_github_check_run_takes_at_most_50_annotations_in_its_one_request() -> None:
    from bot.forges.base import GateReview
    from bot.forges.github import MAX_ANNOTATIONS, _check_run_body

    notes = tuple(Annotation("a.py", n, "warning", "t", "m") for n in range(1, 61))
    body = _check_run_body("b" * 40, GateReview("k", False, "t", "s", notes))
    assert len(body["output"]["annotations"]) == MAX_ANNOTATIONS == 50
    assert "10 more findings are in the report" in body["output"]["summary"]
    assert body["conclusion"] == "failure" and body["external_id"] == "k"


def test_github_check_run_succeeds_only_for_verified_and_is_neutral_for_unverified() -> None:
    from bot.forges.base import GateReview
    from bot.forges.github import _check_run_body

    def conclusion(passed: bool, unverified: bool) -> str:
        review = GateReview("k", passed, "t", "s", unverified=unverified)
        return str(_check_run_body("b" * 40, review)["conclusion"])

    assert conclusion(True, False) == "success"
    assert conclusion(False, True) == "neutral"
    assert conclusion(False, False) == "failure"
    made = gate_review(
        job_id="j1",
        head_sha="a" * 40,
        passed=False,
        unverified=True,
        summary_line="tests ✔",
        report_md="",
        gates=None,
        diff=DIFF,
        details_url=None,
    )
    assert made.unverified and not made.passed
