"""What the solve run's phases hand each other (worker/pipelines/solve.py): what it
settled before the agent (:class:`Prepared`), what the agent's episode gave once it ran
to the end (:class:`EpisodeRan`), and the job's record of them (:func:`solve_record`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.forges.base import Issue, PullRequest
from bot.store.records import SolveRecord, TaskRecord, WithheldText
from worker.pipelines.trusted_text import IssueText
from worker.repo_config import RepoConfig
from worker.settings import ModelSettings

if TYPE_CHECKING:
    from worker.agent.loop import AgentResult
    from worker.sandbox.repoimage import ImageChoice
    from worker.sandbox.setup import SetupResult


@dataclass(frozen=True)
class Prepared:
    """What a run settles before the agent starts."""

    config: RepoConfig  # .ribbit.yml, with the setup detected when it names none
    named_setup: bool  # .ribbit.yml names the setup (a failure then blames it, not detection)
    issue: Issue
    branch: str
    base_sha: str
    image: ImageChoice
    pr: PullRequest | None  # the pull request a revision works on

    @property
    def revise(self) -> bool:
        return self.pr is not None


@dataclass(frozen=True)
class EpisodeRan:
    """An episode (worker.agent.episode.Episode) whose setup succeeded, so the agent ran:
    the model that ran it, the setup step and the agent's result."""

    model: ModelSettings
    setup: SetupResult
    result: AgentResult


def solve_record(
    prepared: Prepared,
    agent: EpisodeRan,
    issue: IssueText,
    withheld: tuple[WithheldText, ...] | None,
    *,
    trajectory_path: Path,
    test_command: str,
    deployment_image: str,
) -> SolveRecord:
    """What the run made, for the job's record: ``issue`` as the prompt had it, what the
    trust rule kept out of it, and the trajectory written at ``trajectory_path``."""
    from worker.agent import first_user_message

    image, result = prepared.image, agent.result
    return SolveRecord(
        setup=agent.setup.to_record(),
        sandbox_image=image.to_record(),
        exit_reason=result.exit_reason,
        diff=result.diff,
        trajectory_path=str(trajectory_path),
        turns=len(result.trajectory.turns),
        branch=prepared.branch,
        withheld=withheld,
        task=TaskRecord(
            # The issue as the prompt had it, and the exact text the model had (rollouts of
            # environments built from this job replay it): training episodes are prompts too.
            first_message=first_user_message(result.trajectory.messages),
            issue_title=issue.title,
            issue_body=issue.body,
            base_sha=prepared.base_sha,
            test_command=test_command,
            setup_command=prepared.config.setup,
            # The image that ran (a repository's own, allowed and maybe built here),
            # so training episodes run where this one did; None: the deployment's.
            image=image.image if image.image != deployment_image else None,
        ),
    )
