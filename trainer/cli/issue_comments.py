"""Where `ribbit envs build` gets the issue's comments for an environment built from a
merged fix: from the configured forge (``--issue-number``), judged by the solve job's
own trust rule, and from a JSON file (``--comments-file``) that records each author's
trust as the job would have decided it."""

from __future__ import annotations

import json
from pathlib import Path

import click
from pydantic import TypeAdapter, ValidationError

from bot.forges.base import ForgeError, ForgeName, IssueRef, RepoRef
from worker.pipelines.issue_task import JudgedComment, judge_comments
from worker.settings import WorkerSettings

_FILE_COMMENTS = TypeAdapter(list[JudgedComment])


def forge_comments(
    settings: WorkerSettings, forge: ForgeName, repo: str, number: int
) -> tuple[JudgedComment, ...]:
    """The issue's comments as the forge has them now, each author judged as the solve
    job judges them (write access on the repository; the bot's own left out)."""
    from bot.forges import make_forge
    from worker.pipelines.trusted_text import TrustedText

    ref = RepoRef(forge, repo)
    try:
        client = make_forge(settings, forge)
        issue = client.get_issue(IssueRef(ref, number))
        return judge_comments(TrustedText(client, ref), issue.comments)
    except ForgeError as exc:
        raise click.ClickException(f"issue {repo}#{number} on {forge}: {exc}") from None


def file_comments(path: Path) -> tuple[JudgedComment, ...]:
    """The comments a JSON file lists: ``[{"author", "trust", "body"}]``, trust one of
    writer, outsider, bot."""
    try:
        return tuple(_FILE_COMMENTS.validate_python(json.loads(path.read_text("utf-8"))))
    except (ValueError, ValidationError) as exc:
        raise click.BadParameter(
            f"{path}: not a JSON list of {{author, trust, body}} ({exc})",
            param_hint="--comments-file",
        ) from None


def issue_comments(
    settings: WorkerSettings,
    forge: ForgeName,
    repo: str,
    *,
    number: int | None,
    path: Path | None,
) -> tuple[JudgedComment, ...]:
    """The forge's comments on issue ``number``, then the file's; none without either."""
    fetched = forge_comments(settings, forge, repo, number) if number is not None else ()
    return fetched + (file_comments(path) if path is not None else ())
