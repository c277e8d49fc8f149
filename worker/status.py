"""The one status comment a job keeps on its issue, edited in place as the job moves.

The comment is created once (its id is stored on the job, so a retried or
reclaimed job edits the same comment instead of posting another) and always
shows the job's real state: it is rendered from what happened, never from a
guess about what will.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from bot.forges.base import Forge, ForgeError, IssueRef
from bot.forges.sanitize import sanitize_forge_text
from bot.store.jobs import JobStore

log = logging.getLogger(__name__)

Phase = Literal[
    "queued", "working", "gates", "opened", "failed", "refused", "cancelled", "no_change"
]

_ICONS: dict[Phase, str] = {
    "queued": "⏳",
    "working": "🛠️",
    "gates": "🔎",
    "opened": "✅",
    "failed": "❌",
    "refused": "🚫",
    "cancelled": "⏹️",
    "no_change": "🤷",
}


@dataclass(frozen=True)
class Status:
    phase: Phase
    detail: str = ""
    pr_url: str | None = None
    report_markdown: str | None = None


def render_status(job_id: str, status: Status) -> str:
    title = {
        "queued": "Queued",
        "working": "Working on it",
        "gates": "Checking the patch",
        "opened": "Draft pull request opened",
        "failed": "Failed",
        "refused": "Not started",
        "cancelled": "Cancelled",
        "no_change": "No change proposed",
    }[status.phase]
    lines = [
        f"<!-- ribbit:status job={job_id} -->",
        f"{_ICONS[status.phase]} **Ribbit: {title}**",
        "",
    ]
    if status.detail:
        lines += [status.detail, ""]
    if status.pr_url:
        lines += [f"Draft PR: {status.pr_url} — machine-written, needs human review.", ""]
    if status.report_markdown:
        lines += [
            "<details><summary>Gate report</summary>",
            "",
            sanitize_forge_text(status.report_markdown),  # test ids and paths from the patch
            "",
            "</details>",
            "",
        ]
    lines.append(
        f"<sub>job `{job_id[:12]}` · commands: `/ribbit retry`, `/ribbit stop`, "
        "`/ribbit explain`, `/ribbit revise <what to change>` (on the PR)</sub>"
    )
    return "\n".join(lines)


class StatusComment:
    def __init__(
        self, forge: Forge, issue: IssueRef, store: JobStore, job_id: str, comment_id: int | None
    ) -> None:
        self.forge, self.issue, self.store, self.job_id = forge, issue, store, job_id
        self.comment_id = comment_id

    def show(self, status: Status) -> None:
        """Post or edit the comment. A forge outage here is logged, not raised: the
        comment is a report about the job, and must not be what fails it."""
        body = render_status(self.job_id, status)
        try:
            if self.comment_id is None:
                self.comment_id = self.forge.post_comment(self.issue, body)
            else:
                self.forge.edit_comment(self.issue, self.comment_id, body)
            self.store.update(self.job_id, status_comment_id=self.comment_id)
        except ForgeError as exc:
            log.warning(
                "status comment for job %s not updated: %s",
                self.job_id,
                exc,
                extra={"job_id": self.job_id},
            )
