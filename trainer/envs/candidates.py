"""Environment candidates from the outcome store (what happened to the bot's PRs).

- A merged PR whose job stored its task record
  (:class:`bot.store.records.TaskRecord`, in the job's row) becomes a
  build: base = the recorded base commit, fix = the merged diff, problem statement
  = the issue's title and body, setup and test commands = the repository's
  ``.ribbit.yml`` at the time of the job. Everything comes from the database, so any
  host can build it; a job without a record (or with an empty issue text) is
  rejected with ``no_problem_statement``, never built with an empty one.
- A closed (rejected) bot PR is not an environment and is never trained on; it is
  kept as a rejection (its trajectory, its reviewers' comments) and its patch checks
  every environment built for the same issue: one whose tests pass a patch people
  turned down cannot tell the fix from it, and is rejected (``passes_rejected_patch``).
- A merged PR with no recorded base (a human fix for an issue, say) is rejected
  with that reason: building needs the commit the fix was made on.

Outcomes are chosen by forge and repository: ``acme/calc`` on GitHub and on a
GitLab instance are different projects.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bot.store.db import Database
from bot.store.records import SolveRecord
from bot.store.records.review import ReviewFeedback
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
    return ReviewFeedback.from_json(outcome.review_comments).texts()


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
        rejection = _not_buildable(f"{repo}#{outcome.pr_number}", outcome, record)
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
            _tells_apart_rejected_patches(env, outcome, outcomes, repo_dir, builder)
            store.add(env, repo_dir)
        except BuildRejected as exc:
            store.reject(exc.rejection)
            report.rejected.append(exc.rejection)
            continue
        report.built.append(env)
    return report


def _not_buildable(candidate: str, outcome: Outcome, record: SolveRecord) -> Rejection | None:
    """Why an outcome builds no environment, or None when it can be built."""
    task = record.task
    if outcome.state != "merged":
        # Not trained on; its patch checks the environments built for the same issue
        # (_tells_apart_rejected_patches).
        return Rejection(
            candidate=candidate,
            reason="pr_not_merged",
            detail="closed without merge",
            negative_trajectory=record.trajectory_path,
            hints=_comments(outcome),
        )
    if not record.base_sha or not outcome.merged_diff:
        return Rejection(
            candidate=candidate,
            reason="no_base_commit",
            detail="no base commit or merged diff recorded for this PR",
        )
    if task is None or not task.problem_statement:
        return Rejection(
            candidate=candidate,
            reason="no_problem_statement",
            detail="the job stored no issue text (it predates task records)"
            if task is None
            else "the issue's title and body are empty",
        )
    return None


def _tells_apart_rejected_patches(
    env: Environment,
    merged: Outcome,
    outcomes: list[Outcome],
    repo_dir: Path,
    builder: EnvironmentBuilder,
) -> None:
    """Raise BuildRejected when the environment's tests pass a bot patch a reviewer
    closed unmerged for the same issue: they cannot tell the accepted fix from a
    rejected one, so their reward would pay for what people turned down. This is what
    closed PRs are kept for (trainer/README.md, "Closed PRs")."""
    if merged.issue_number is None:
        return
    rejected = [
        o
        for o in outcomes
        if o.state != "merged" and o.bot_diff and o.issue_number == merged.issue_number
    ]
    if not rejected:
        return
    from bot.hostgit import clone_at
    from trainer.rl.reward import compute_reward

    with tempfile.TemporaryDirectory(prefix="ribbit-rejected-") as tmp:
        checkout = clone_at(repo_dir, Path(tmp) / "base", env.base_commit)
        for closed in rejected:
            assert closed.bot_diff is not None
            graded = compute_reward(
                env, closed.bot_diff, checkout, builder.sandbox_factory, gates=[]
            )
            if graded.resolved:
                raise BuildRejected(
                    Rejection(
                        candidate=f"{env.repo}#{merged.pr_number}",
                        reason="passes_rejected_patch",
                        detail=f"its tests also pass the patch of #{closed.pr_number}, which "
                        f"a reviewer closed unmerged: they cannot tell the fix from it",
                    )
                )
