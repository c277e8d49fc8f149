"""The forge-neutral records: defaults every forge client relies on."""

from __future__ import annotations

from bot.forges.base import GATES_NAME, CommitStatus, GateReview


def test_status_and_check_run_share_the_gates_name() -> None:
    status = CommitStatus(state="success")
    review = GateReview(key="job:sha", passed=True, title="t", summary="s")
    assert status.context == review.name == GATES_NAME == "ribbit/gates"
