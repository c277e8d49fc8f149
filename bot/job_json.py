"""A job as ``ribbit jobs --json`` and ``ribbit jobs show`` print it."""

from __future__ import annotations

from typing import Any


def job_dict(job: Any) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "state": job.state,
        "stage": job.stage,
        "forge": job.forge,
        "repo": job.repo,
        "issue": job.issue_number,
        "pr": job.pr_number,
        "actor": job.actor,
        "held": job.held,
        "attempts": job.attempts,
        "failure_reason": job.failure_reason,
        # The structured reason (bot/store/failure.py), where the job stored one.
        "failure": None if job.failure is None else job.failure.to_json(),
        "superseded_by": job.superseded_by,
        "branch": job.branch,
        "pr_url": job.pr_url,
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }
