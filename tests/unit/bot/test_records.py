"""The solve record: one typed reader for what solve jobs store in ``jobs.result``."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from bot.store.records import (
    CONTENT_FREE_FIELDS,
    SOLVE_RECORD_VERSION,
    TASK_KEY,
    SolveRecord,
    TaskRecord,
)
from bot.store.records.gate_report import Verdict

TASK = TaskRecord(
    issue_title="Fix add",
    issue_body="add(2, 2) is 5",
    base_sha="a" * 40,
    test_command="python -m pytest -q",
    setup_command="pip install -e .",
)

# A row as solve jobs wrote it before records were versioned (every key the pipeline used).
LEGACY_ROW: dict[str, Any] = {
    "setup": {"ok": True, "command": "pip install -e ."},
    "sandbox_image": {"image": "ribbit-sandbox:latest"},
    "exit_reason": "submitted",
    "diff": "--- a/calc.py\n+++ b/calc.py\n@@\n-x\n+y\n--- a/b.py\n+++ b/b.py\n",
    "trajectory_path": "/data/trajectories/j.jsonl",
    "turns": 3,
    "branch": "ribbit/issue-1-fix-add",
    "base_sha": "a" * 40,
    TASK_KEY: TASK.to_json(),
    # As GateReport.to_dict() wrote it: the record reads it back typed and writes it again.
    "gates": {
        "passed": True,
        "duration_s": 1.5,
        "summary": "tests ✔",
        "gates": [
            {
                "name": "tests",
                "passed": True,
                "findings": [],
                "logs": "",
                "duration_s": 1.5,
                "details": {},
            }
        ],
    },
    "gates_summary": "tests ✔",
    "pr_number": 7,
    "pr_url": "http://forge/acme/calc/pull/7",
    "head_sha": "b" * 40,
    "timings": {"clone": 0.5, "agent": 12},
}


def test_a_legacy_row_reads_as_version_one_and_writes_back_the_same_keys() -> None:
    record = SolveRecord.from_json(LEGACY_ROW)
    assert record.version == SOLVE_RECORD_VERSION == 1
    assert record.task == TASK and record.pr_number == 7 and record.turns == 3
    assert record.changed_files == ["b.py", "calc.py"]
    assert record.extra == {}
    assert record.to_json() == {**LEGACY_ROW, "version": 1}
    assert record.verdict is Verdict.BEFORE_EVIDENCE  # judged before the levels
    assert SolveRecord().verdict is None


def test_keys_of_a_newer_record_are_kept_through_a_read_and_a_write() -> None:
    row = {**LEGACY_ROW, "version": 2, "reviewer_score": 0.5}
    record = SolveRecord.from_json(row).with_(pr_url="http://forge/x/pull/8")
    assert record.version == 2 and record.extra == {"reviewer_score": 0.5}
    assert record.to_json() == {**row, "pr_url": "http://forge/x/pull/8"}


@pytest.mark.parametrize("garbage", [None, [], "x", 3])
def test_a_result_that_is_not_an_object_is_an_empty_record(garbage: Any) -> None:
    assert SolveRecord.from_json(garbage) == SolveRecord()
    assert SolveRecord().to_json() == {"version": 1}


def test_values_of_the_wrong_type_read_as_absent() -> None:
    record = SolveRecord.from_json(
        {
            "diff": 5,
            "turns": True,  # a bool is not a count
            "pr_number": "7",
            "gates": [1],
            TASK_KEY: {"issue_title": "t"},  # missing required fields
            "timings": {"clone": "slow", "agent": 2},
        }
    )
    assert record.diff is None and record.turns is None and record.pr_number is None
    assert record.gates is None and record.task is None
    assert record.timings == {"agent": 2.0}


def test_absent_steps_are_left_out_of_the_row() -> None:
    # Data retention and the admin page tell "has data" from the keys present.
    row = SolveRecord.from_json({"setup": {"ok": False}}).with_(timings={"setup": 1.0}).to_json()
    assert row == {"version": 1, "setup": {"ok": False}, "timings": {"setup": 1.0}}


def test_the_summary_line_falls_back_to_the_reports_own() -> None:
    assert SolveRecord.from_json(LEGACY_ROW).summary_line == "tests ✔"
    older = {k: v for k, v in LEGACY_ROW.items() if k != "gates_summary"}
    assert SolveRecord.from_json(older).summary_line == "tests ✔"
    assert SolveRecord.from_json({"gates": {"summary": 3}}).summary_line is None


def test_what_a_deleted_repositorys_records_keep_holds_no_content() -> None:
    """`ribbit data delete` cuts a stored record to CONTENT_FREE_FIELDS (trainer/data.py):
    record fields that say how the run ended, none that holds code, text or a path."""
    assert {f.name for f in fields(SolveRecord)} >= CONTENT_FREE_FIELDS
    row = SolveRecord.from_json(LEGACY_ROW).to_json()
    kept = {k: v for k, v in row.items() if k in CONTENT_FREE_FIELDS}
    assert kept == {"version": SOLVE_RECORD_VERSION, "exit_reason": "submitted", "turns": 3}


def test_the_base_commit_has_one_home_the_task() -> None:
    # The top-level key is the task's, written back from it: a row where the two disagree
    # (hand-edited) reads and writes the task's, so the trainer's check and its build agree.
    row = {**LEGACY_ROW, "base_sha": "c" * 40}
    record = SolveRecord.from_json(row)
    assert record.base_sha == TASK.base_sha
    assert record.extra == {}
    assert record.to_json()["base_sha"] == TASK.base_sha
    assert "base_sha" not in {f.name for f in fields(SolveRecord)}


def test_a_row_from_before_task_records_keeps_its_base_commit() -> None:
    row = {"base_sha": "d" * 40, "turns": 2}
    record = SolveRecord.from_json(row)
    assert record.task is None and record.base_sha == "d" * 40
    assert record.to_json() == {**row, "version": 1}
