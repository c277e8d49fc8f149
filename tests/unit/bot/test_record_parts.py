"""The solve record's typed parts (set-up, sandbox image, publish plan): stored rows read
back typed and write back the same JSON, key for key and in the same order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.forges.branches import UnsafeRefError
from bot.store.records import ImageRecord, SetupRecord, SolveRecord
from bot.store.records.gate_report import Verdict

# The parts as the worker wrote them before they were typed (SetupResult.to_dict(),
# ImageChoice.to_dict(), PublishPlan.to_dict()), key order included.
SETUP_ROW: dict[str, Any] = {
    "command": "pip install -e .",
    "ok": True,
    "exit_code": 0,
    "timed_out": False,
    "duration_s": 12.345,
    "network": True,
    "blocked": ["GET evil.example.com:443 (host not on the allow-list)"],
    "restored_from": None,
    "output_tail": "Successfully installed calc-0.1\n",
}
IMAGE_ROW: dict[str, Any] = {
    "image": "ribbit-repo-calc:1a2b",
    "requested": "Dockerfile `Dockerfile` (from `.ribbit.yml`)",
    "built": True,
    "note": None,
}
PUBLISH_ROW: dict[str, Any] = {
    "branch": "ribbit/issue-1-fix-add",
    "base_sha": "a" * 40,
    "diff": "--- a/calc.py\n+++ b/calc.py\n",
    "commit_message": "Fix: add\n\nMachine-written by Ribbit (job j1); needs human review.",
    "commit_date": "1764000000 +0000",
    "title": "Fix add (#1)",
    "body": "Fixes #1",
    "labels": ["bot"],
    "reviewers": ["maya"],
    "passed": False,
    "summary_line": "tests: passed",
    "report_md": "### Gates",
    "revise": False,
    "verdict": "unverified",
}
ROW: dict[str, Any] = {
    "version": 1,
    "branch": "ribbit/issue-1-fix-add",
    "setup": SETUP_ROW,
    "sandbox_image": IMAGE_ROW,
    "exit_reason": "submitted",
    "turns": 3,
    "publish": PUBLISH_ROW,
}


def test_a_stored_row_reads_its_parts_typed() -> None:
    record = SolveRecord.from_json(ROW)
    assert record.setup == SetupRecord(
        command="pip install -e .",
        ok=True,
        exit_code=0,
        timed_out=False,
        duration_s=12.345,
        network=True,
        blocked=("GET evil.example.com:443 (host not on the allow-list)",),
        restored_from=None,
        output_tail="Successfully installed calc-0.1\n",
    )
    assert record.sandbox_image == ImageRecord(
        image="ribbit-repo-calc:1a2b",
        requested="Dockerfile `Dockerfile` (from `.ribbit.yml`)",
        built=True,
        note=None,
    )
    assert record.publish is not None
    assert (record.publish.labels, record.publish.verdict) == (("bot",), Verdict.UNVERIFIED)


def test_a_stored_row_writes_back_the_same_json() -> None:
    assert json.dumps(SolveRecord.from_json(ROW).to_json()) == json.dumps(ROW)


@pytest.mark.parametrize(
    ("part", "record"),
    [(SETUP_ROW, SetupRecord), (IMAGE_ROW, ImageRecord)],
)
def test_each_part_writes_the_keys_it_read_in_their_order(
    part: dict[str, Any], record: Any
) -> None:
    newer = {**part, "added_later": [1]}  # a key of a newer version, kept
    assert json.dumps(record.from_json(newer).to_json()) == json.dumps(newer)


def test_parts_from_older_code_are_written_back_as_they_were() -> None:
    # A setup from before its report had every key reads as absent; a plan from before
    # the verdict levels reads as judged before evidence. Neither gains or loses a key.
    plan = {k: v for k, v in PUBLISH_ROW.items() if k != "verdict"}
    row = {"setup": {"ok": False}, "sandbox_image": {"image": 7}, "publish": plan}
    record = SolveRecord.from_json(row)
    assert (record.setup, record.sandbox_image) == (None, None)
    assert record.publish is not None and record.publish.verdict is Verdict.BEFORE_EVIDENCE
    assert json.dumps(record.to_json()) == json.dumps({"version": 1, **row})


def test_a_part_given_anew_replaces_the_rows_copy() -> None:
    record = SolveRecord.from_json({"setup": {"ok": False}, "publish": PUBLISH_ROW})
    assert "publish" not in record.with_(publish=None).to_json()
    setup = SetupRecord.from_json(SETUP_ROW)
    assert record.with_(setup=setup).to_json()["setup"] == SETUP_ROW


def test_a_stored_plan_with_an_unsafe_branch_reads_but_is_refused_before_use() -> None:
    # The pages show the record; the worker checks the plan before handing it to git.
    row = {"publish": {**PUBLISH_ROW, "branch": "--upload-pack=evil"}}
    plan = SolveRecord.from_json(row).publish
    assert plan is not None
    with pytest.raises(UnsafeRefError):
        plan.checked()


def test_a_number_is_written_back_as_it_was_stored() -> None:
    # JSON's 2 and 2.0 are different text: a duration stored as an int stays one.
    part = SetupRecord.from_json({**SETUP_ROW, "duration_s": 2})
    assert part is not None and json.dumps(part.to_json()) == json.dumps(
        {**SETUP_ROW, "duration_s": 2}
    )
