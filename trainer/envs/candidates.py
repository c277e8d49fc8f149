"""Environment candidates from the outcome store (what happened to the bot's PRs).

- A merged PR whose job stored its task record
  (:class:`bot.store.records.TaskRecord`, in the job's row) becomes a
  build: base = the recorded base commit, fix = the merged diff, problem statement
  = the issue's title and body, setup and test commands = the repository's
  ``.ribbit.yml`` at the time of the job. Everything comes from the database, so any
  host can build it; a job without a record (or with an empty issue text) is
  rejected with ``no_problem_statement``, never built with an empty one.
- A closed (rejected) bot PR is not an environment; it is kept as a rejection that
  points at its trajectory (a negative example) with the reviewers' comments as
  hints for a later attempt.
- A merged PR with no recorded base (a human fix for an issue, say) is rejected
  with that reason: building needs the commit the fix was made on.

Outcomes are chosen by forge and repository: ``acme/calc`` on GitHub and on a
GitLab instance are different projects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.store.db import Database
from bot.store.records import SolveRecord
from bot.store.tables import Job, Outcome
from trainer.envs.builder import BuildRejected, BuildSpec, EnvironmentBuilder
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment, Provenance, Rejection
from trainer.store import TrainerStore


@dataclass
class OutcomeImport:
    built: list[Environment] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def _comments(outcome: Outcome) -> list[str]:
    data: dict[str, Any] = outcome.review_comments or {}
    texts = [str(c.get("body", "")) for c in data.get("comments", [])]
    texts += [str(r.get("body", "")) for r in data.get("reviews", [])]
    return [t.strip() for t in texts if t and t.strip()]


def _first_message(job: Job | None) -> str | None:
    """The job's exact first message, for rollouts to replay: a solve job's only. A
    revision's is another task (the PR's diff and its reviews), and its diff would hand
    a rollout from the base commit the bot's own answer."""
    if job is None or job.kind != "solve" or job.solve_record.task is None:
        return None
    return job.solve_record.task.first_message


def environments_from_outcomes(
    db: Database,
    forge: str,
    repo: str,
    repo_dir: Path,
    builder: EnvironmentBuilder,
    store: EnvironmentFolders,
    *,
    test_command: str | None = None,
) -> OutcomeImport:
    """Build (or reject, with the reason) every recorded outcome of ``repo`` on
    ``forge``. ``test_command`` overrides the job's recorded one."""
    report = OutcomeImport()
    trainer_store = TrainerStore(db)
    outcomes = trainer_store.repo_outcomes(forge, repo)
    jobs = {j.id: j for j in trainer_store.repo_jobs(forge, repo)}
    for outcome in outcomes:
        job = jobs.get(outcome.job_id or "")
        record = job.solve_record if job is not None else SolveRecord()
        task = record.task
        candidate = f"{repo}#{outcome.pr_number}"
        rejection: Rejection | None = None
        if outcome.state != "merged":
            rejection = Rejection(
                candidate=candidate,
                reason="pr_not_merged",
                detail="closed without merge",
                negative_trajectory=record.trajectory_path,
                hints=_comments(outcome),
            )
        elif not record.base_sha or not outcome.merged_diff:
            rejection = Rejection(
                candidate=candidate,
                reason="no_base_commit",
                detail="no base commit or merged diff recorded for this PR",
            )
        elif task is None or not task.problem_statement:
            rejection = Rejection(
                candidate=candidate,
                reason="no_problem_statement",
                detail="the job stored no issue text (it predates task records)"
                if task is None
                else "the issue's title and body are empty",
            )
        if rejection is not None:
            store.reject(rejection)
            report.rejected.append(rejection)
            continue
        assert task is not None and record.base_sha is not None
        spec = BuildSpec(
            repo_dir=repo_dir,
            base=record.base_sha,
            fix="",
            fix_diff=outcome.merged_diff,
            issue_text=task.problem_statement,
            repo=repo,
            test_command=test_command or task.test_command,
            setup_commands=(task.setup_command,) if task.setup_command else (),
            image=task.image,
            hints_text="\n\n".join(_comments(outcome)),
            task_text=_first_message(job),
            provenance=Provenance(
                source="outcome",
                author="human" if outcome.human_authored else "bot",
                forge=forge,
                issue_number=outcome.issue_number,
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
