"""Data for the admin dashboard's tests: many jobs, a job with a real trajectory file
(written by bot.store.records.trajectory, the same code the worker uses), and outcomes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from bot.store.db import Database
from bot.store.tables import Job, Outcome

ADMIN_TOKEN = "admin-token-for-tests-0123456789"
HOSTILE = "<script>alert('pwned')</script>"
DIFF = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-return a - b\n+return a + b\n"
STATES = ("queued", "running", "succeeded", "failed", "cancelled")
KINDS = ("solve", "revise", "explain", "help")


def seed_jobs(db: Database, n: int, *, start: datetime | None = None) -> None:
    """``n`` jobs in every state and kind, one minute apart, newest last."""
    start = start or datetime(2026, 1, 1, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    for i in range(n):
        state = STATES[i % len(STATES)]
        created = start + timedelta(minutes=i)
        rows.append(
            {
                "id": f"{i:032x}",
                "kind": KINDS[i % len(KINDS)],
                "state": state,
                "forge": "github" if i % 3 else "gitlab",
                "repo": f"acme/repo{i % 7}",
                "issue_number": i,
                "held": False,
                "dispatched": True,
                "attempts": 1,
                "stage": "agent" if state == "running" else None,
                "failure_reason": "tests failed" if state == "failed" else None,
                "pr_number": 1000 + i if state == "succeeded" else None,
                "pr_url": f"https://github.com/acme/repo{i % 7}/pull/{1000 + i}"
                if state == "succeeded"
                else None,
                "created_at": created,
                "updated_at": created,
                "started_at": created + timedelta(seconds=5) if state != "queued" else None,
                "finished_at": created + timedelta(seconds=95)
                if state in ("succeeded", "failed", "cancelled")
                else None,
            }
        )
    with db.session() as session:
        for chunk in range(0, len(rows), 2000):
            session.execute(insert(Job), rows[chunk : chunk + 2000])


def write_trajectory(path: Path) -> None:
    """A two-turn trajectory whose observation carries a <script> (model output is untrusted)."""
    from bot.store.records.trajectory import (
        ToolCall,
        ToolObservation,
        Trajectory,
        TurnRecord,
        write_jsonl,
    )

    turns = [
        TurnRecord(
            index=0,
            content="Let me look at the failing test.",
            reasoning="The issue says add() is wrong.",
            tool_calls=[ToolCall(id="c1", name="bash", arguments={"command": "pytest -q"})],
            observations=[
                ToolObservation(
                    call_id="c1",
                    name="bash",
                    content=f"1 failed\n{HOSTILE}",
                    is_error=False,
                    exit_code=1,
                )
            ],
            finish_reason="stop",
        ),
        TurnRecord(
            index=1,
            content="Fixed add(); tests pass.",
            reasoning=None,
            tool_calls=[],
            observations=[],
            finish_reason="stop",
        ),
    ]
    write_jsonl(
        path,
        [
            Trajectory(
                messages=[],
                tools=[],
                turns=turns,
                exit_reason="agent",
                model="tiny",
                duration_s=12.5,
                diff=DIFF,
            )
        ],
    )


def seed_job_with_trajectory(db: Database, data_dir: Path, job_id: str = "f" * 32) -> str:
    path = data_dir / "trajectories" / f"{job_id}.jsonl"
    write_trajectory(path)
    now = datetime.now(UTC)
    result = {
        "trajectory_path": str(path),
        "diff": DIFF,
        # The shape bot.store.records.gate_report.GateReport.to_dict() writes.
        "gates": {
            "passed": False,
            "duration_s": 3.0,
            "summary": "tests ok, semgrep 1 error",
            "gates": [
                {
                    "name": "tests",
                    "passed": True,
                    "findings": [],
                    "logs": "1 passed",
                    "duration_s": 1.0,
                    "details": {},
                },
                {
                    "name": "semgrep",
                    "passed": False,
                    "logs": "",
                    "duration_s": 2.0,
                    "details": {},
                    "findings": [
                        {
                            "gate": "semgrep",
                            "rule": "no-eval",
                            "message": f"eval {HOSTILE}",
                            "path": "calc.py",
                            "line": 3,
                            "severity": "error",
                        }
                    ],
                },
            ],
        },
        "gates_summary": "tests ok, semgrep 1 error",
        "exit_reason": "completed",
        "turns": 2,
    }
    with db.session() as session:
        session.add(
            Job(
                id=job_id,
                kind="solve",
                state="succeeded",
                forge="github",
                repo="acme/calc",
                issue_number=7,
                pr_number=8,
                pr_url="https://github.com/acme/calc/pull/8",
                result=result,
                created_at=now,
                updated_at=now,
                started_at=now,
                finished_at=now,
            )
        )
    return job_id


def seed_outcomes(db: Database, weeks: int = 6) -> None:
    start = datetime(2026, 3, 2, 12, tzinfo=UTC)  # a Monday
    rows: list[Outcome] = []
    pr = 1
    for w in range(weeks):
        for k in range(5 + w):
            rows.append(
                Outcome(
                    forge="github",
                    repo="acme/calc",
                    pr_number=pr,
                    human_authored=False,
                    state="merged" if k % 3 else "closed",
                    revisions=1 if k % 4 == 0 else 0,
                    decided_at=start + timedelta(weeks=w, hours=k),
                )
            )
            pr += 1
    with db.session() as session:
        session.add_all(rows)
