"""Environment candidates from the outcome store (what happened to the bot's PRs).

- A merged PR whose job recorded its base commit becomes a build: base = the
  job's ``base_sha``, fix = the merged diff, issue = the task the agent was given.
- A closed (rejected) bot PR is not an environment; it is kept as a rejection that
  points at its trajectory (a negative example) with the reviewers' comments as
  hints for a later attempt.
- A merged PR with no recorded base (a human fix for an issue, say) is rejected
  with that reason: building needs the commit the fix was made on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.store.db import Database
from bot.store.models import Job, Outcome
from trainer.envs.builder import BuildRejected, BuildSpec, EnvironmentBuilder
from trainer.envs.schema import Environment, Provenance, Rejection
from trainer.envs.storage import EnvironmentStore
from worker.agent.trajectory import TrajectoryFormatError, read_jsonl


@dataclass
class OutcomeImport:
    built: list[Environment] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def _comments(outcome: Outcome) -> list[str]:
    data: dict[str, Any] = outcome.review_comments or {}
    texts = [str(c.get("body", "")) for c in data.get("comments", [])]
    texts += [str(r.get("body", "")) for r in data.get("reviews", [])]
    return [t.strip() for t in texts if t and t.strip()]


def _issue_text(result: dict[str, Any]) -> str:
    path = result.get("trajectory_path")
    if not path or not Path(path).exists():
        return ""
    try:
        trajectories = read_jsonl(path)
    except (OSError, TrajectoryFormatError):
        return ""
    task = trajectories[-1].task if trajectories else {}
    return f"{task.get('title', '')}\n\n{task.get('body', '')}".strip()


def environments_from_outcomes(
    db: Database,
    repo: str,
    repo_dir: Path,
    builder: EnvironmentBuilder,
    store: EnvironmentStore,
    *,
    test_command: str = "python -m pytest",
) -> OutcomeImport:
    """Build (or reject, with the reason) every recorded outcome of ``repo``."""
    report = OutcomeImport()
    with db.session() as s:
        outcomes = list(s.scalars(select(Outcome).where(Outcome.repo == repo)))
        jobs = {j.id: j for j in s.scalars(select(Job).where(Job.repo == repo))}
    for outcome in outcomes:
        job = jobs.get(outcome.job_id or "")
        result: dict[str, Any] = (job.result or {}) if job is not None else {}
        candidate = f"{repo}#{outcome.pr_number}"
        rejection: Rejection | None = None
        if outcome.state != "merged":
            rejection = Rejection(
                candidate=candidate,
                reason="pr_not_merged",
                detail="closed without merge",
                negative_trajectory=result.get("trajectory_path"),
                hints=_comments(outcome),
            )
        elif not result.get("base_sha") or not outcome.merged_diff:
            rejection = Rejection(
                candidate=candidate,
                reason="no_base_commit",
                detail="no base commit or merged diff recorded for this PR",
            )
        if rejection is not None:
            store.reject(rejection)
            report.rejected.append(rejection)
            continue
        spec = BuildSpec(
            repo_dir=repo_dir,
            base=str(result["base_sha"]),
            fix="",
            fix_diff=outcome.merged_diff,
            issue_text=_issue_text(result),
            repo=repo,
            test_command=test_command,
            hints_text="\n\n".join(_comments(outcome)),
            provenance=Provenance(
                source="outcome", author="human" if outcome.human_authored else "bot"
            ),
        )
        try:
            env = builder.build(spec)
            store.add(env, repo_dir)
        except BuildRejected as exc:
            store.reject(exc.rejection)
            report.rejected.append(exc.rejection)
            continue
        report.built.append(env)
    return report
