"""The solve job's task for an issue, in one home for the job (solve.py) and for the
environments built from merged fixes (trainer/envs/builder.py), so that a rollout of
such an environment is shown what a job on that issue would have been shown.

The issue's comments arrive judged by the one trust rule (:class:`JudgedComment`, the
trust as :meth:`TrustedText.judge` decides it, or as an admin recorded it for a fix with
no job); :func:`prompt_comments` selects and formats the ones the prompt carries, and
:func:`issue_task` lays the whole :class:`~worker.agent.AgentTask` out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.forges.base import Comment
from bot.hostgit import latest_tag
from worker.agent.repo_task import repo_instructions
from worker.pipelines.trusted_text import IssueText, Trust, TrustedText
from worker.repo_config import RepoConfig

if TYPE_CHECKING:
    from worker.agent import AgentTask, IssueComment

# The newest comments only: a long thread would crowd the issue itself out of the
# model's context, and the latest words are the ones closest to what is wanted now.
MAX_PROMPT_COMMENTS = 20


@dataclass(frozen=True)
class JudgedComment:
    """One of the issue's comments, with what the trust rule made of its author."""

    author: str
    trust: Trust
    body: str


def judge_comments(trust: TrustedText, comments: Iterable[Comment]) -> tuple[JudgedComment, ...]:
    """The issue's comments, each judged by the rule (outsiders' counted as withheld)."""
    return tuple(
        JudgedComment(c.author, trust.judge("comment", c.author), c.body) for c in comments
    )


def prompt_comments(comments: Iterable[JudgedComment]) -> tuple[IssueComment, ...]:
    """The comments the prompt carries: writers' only, the newest few, each under its
    author (the prompt names who said what)."""
    from worker.agent import IssueComment

    kept = tuple(IssueComment(c.author, c.body) for c in comments if c.trust == "writer")
    return kept[-MAX_PROMPT_COMMENTS:]


def issue_task(
    text: IssueText,
    comments: Iterable[JudgedComment],
    *,
    repo: str,
    number: int,
    base_commit: str,
    config: RepoConfig,
    checkout: Path,
    extra_instructions: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> AgentTask:
    """The agent's task for the issue: its text as the rule let it through, its writers'
    comments, the footer, and the repository's instructions when it opted in."""
    from worker.agent import AgentTask, Vouched

    return AgentTask(
        title=text.title,
        body=text.body,
        comments=prompt_comments(comments),
        vouched=Vouched(text.author, text.vouched_by) if text.vouched_by else None,
        repo=repo,
        number=number,
        base_commit=base_commit,
        version=latest_tag(checkout),
        test_command=config.test,
        extra_instructions=extra_instructions,
        include_repo_context=config.prompt.include_repo_context,
        repo_instructions=repo_instructions(config, checkout),
        metadata=metadata or {},
    )
