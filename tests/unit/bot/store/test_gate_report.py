"""The gate report's stored form: what the gates write, the job's readers read back with
the same classes; rows of an odd shape read as absent instead of failing the page."""

from __future__ import annotations

import json

from bot.store.records.gate_report import JUDGE_VERSION, Finding, GateReport, GateResult, Verdict


def _report() -> GateReport:
    return GateReport.from_results(
        [
            GateResult("tests", True, logs="1 passed", duration_s=1.5, details={"flaky": []}),
            GateResult(
                "semgrep",
                False,
                findings=(
                    Finding("semgrep", "no-eval", "eval", path="a.py", line=3),
                    Finding("semgrep", "style", "hm", severity="warning"),
                ),
            ),
        ],
        duration_s=2.25,
    )


def test_the_stored_report_reads_back_as_written() -> None:
    report = _report()
    assert GateReport.from_dict(json.loads(report.to_json())) == report


def test_entries_of_the_wrong_shape_are_left_out() -> None:
    data = json.loads(_report().to_json())  # as the job's row keeps it
    data["gates"] += [1, None, {"name": "x"}, {"name": "y", "passed": "no"}]
    data["gates"][1]["findings"].append("not a finding")
    data["gates"][1]["duration_s"] = "slow"
    report = GateReport.from_dict(data)
    assert report is not None
    assert [r.name for r in report.results] == ["tests", "semgrep"]
    assert len(report.results[1].findings) == 2 and report.results[1].duration_s == 0.0


def test_what_is_not_a_report_reads_as_none() -> None:
    for data in (None, "x", [], {"gates": []}, {"passed": "yes", "gates": []}):
        assert GateReport.from_dict(data) is None, data
    assert GateReport.from_dict({"passed": False}) == GateReport(passed=False)


def test_a_finding_names_its_gate_and_reads_an_odd_severity_as_error() -> None:
    found = Finding.from_dict(
        {"rule": "r", "message": "m", "severity": "fatal", "line": True}, gate="g"
    )
    assert found == Finding("g", "r", "m", path=None, line=None, severity="error")
    assert Finding.from_dict(3) is None


def test_every_report_the_gates_write_names_its_judge_and_keeps_it() -> None:
    report = _report()
    assert report.judge == JUDGE_VERSION and report.current_judge
    stored = json.loads(report.to_json())
    assert stored["judge"] == JUDGE_VERSION
    read = GateReport.from_dict(stored)
    assert read is not None and read.judge == JUDGE_VERSION and read.current_judge


def test_a_report_stored_before_judges_were_recorded_names_none() -> None:
    old = {"passed": True, "duration_s": 1.0, "summary": "", "gates": []}
    report = GateReport.from_dict(old)
    assert report is not None
    assert report.verdict is Verdict.BEFORE_EVIDENCE and report.judge is None
    assert not report.current_judge
    assert report.to_dict() == old  # written back as it was: no judge claimed for it
    # An older judge, or a value of the wrong type, is not today's.
    for judge in ("reward-1", 2, ""):
        read = GateReport.from_dict({**old, "verdict": "verified", "judge": judge})
        assert read is not None and not read.current_judge


def test_the_trainer_scores_with_the_gates_judge() -> None:
    from trainer.promotion import JUDGE_VERSION as TRAINER_JUDGE

    assert TRAINER_JUDGE == JUDGE_VERSION
