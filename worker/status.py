"""The one status comment a job keeps on its issue, edited in place as the job moves.

The comment is created once (its id is stored on the job, so a retried or
reclaimed job edits the same comment instead of posting another) and always
shows the job's real state: it is rendered from what happened, never from a
guess about what will.

While the agent works, each finished turn is appended to the job's live log (bot.live,
read by the reviewer page) and the comment shows the turn count and current step, but
is edited for progress at most once per ``reviewer.status_edit_interval_s`` (forges
rate-limit edits, and every edit notifies nobody yet still costs an API call); a change
of phase is always shown at once. The comment carries the job's signed reviewer link.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bot import joblinks, live
from bot.forges.base import Forge, ForgeError, IssueRef
from bot.forges.sanitize import sanitize_forge_text
from bot.settings import Settings
from bot.store.jobs import JobStore
from bot.store.records.gate_report import Verdict

if TYPE_CHECKING:
    from bot.store.records.trajectory import TurnRecord

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
    progress: live.Progress | None = None
    # An opened PR's verdict: only a verified one gets ✅ (None: not a PR's status, or a
    # plan stored before the levels).
    verdict: Verdict | None = None


def render_status(job_id: str, status: Status, link: str | None = None) -> str:
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
    icon = _ICONS[status.phase]
    if status.phase == "opened" and status.verdict is Verdict.UNVERIFIED:
        icon, title = "⚠️", "Draft pull request opened, not verified"
    elif status.phase == "opened" and status.verdict is Verdict.REFUSED:
        icon, title = "❌", "Draft pull request opened, the gates failed"
    lines = [
        f"<!-- ribbit:status job={job_id} -->",
        f"{icon} **Ribbit: {title}**",
        "",
    ]
    if status.detail:
        lines += [status.detail, ""]
    if status.progress is not None:
        # Tool names come from model output.
        lines += [f"**Progress:** {sanitize_forge_text(status.progress.line())}", ""]
    if link:
        lines += [
            f"🔗 [Follow this job]({link}): every turn, the diff and the gate logs "
            "(a private link: do not share it outside the project).",
            "",
        ]
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
        self,
        forge: Forge,
        issue: IssueRef,
        store: JobStore,
        job_id: str,
        comment_id: int | None,
        *,
        link: str | None = None,
        min_progress_interval_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.forge, self.issue, self.store, self.job_id = forge, issue, store, job_id
        self.comment_id = comment_id
        self.link = link
        self.min_progress_interval_s = min_progress_interval_s
        self.clock = clock
        self.shown: Status | None = None
        self._shown_at: float | None = None

    @classmethod
    def for_job(
        cls,
        settings: Settings,
        forge: Forge,
        issue: IssueRef,
        store: JobStore,
        job_id: str,
        comment_id: int | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> StatusComment:
        """The job's comment as deployed: with its reviewer link (when links are set up)
        and the configured progress edit rate."""
        return cls(
            forge,
            issue,
            store,
            job_id,
            comment_id,
            link=job_link(settings, job_id),
            min_progress_interval_s=settings.reviewer.status_edit_interval_s,
            clock=clock,
        )

    def show_progress(self, progress: live.Progress) -> bool:
        """Show progress while the job is working, unless the comment was edited less
        than ``min_progress_interval_s`` ago; True when the comment was edited."""
        if self.shown is None or self.shown.phase != "working":
            return False
        since = None if self._shown_at is None else self.clock() - self._shown_at
        if since is not None and since < self.min_progress_interval_s:
            return False
        self.show(replace(self.shown, progress=progress))
        return True

    def show(self, status: Status) -> None:
        """Post or edit the comment. A forge outage here is logged, not raised: the
        comment is a report about the job, and must not be what fails it."""
        self.shown, self._shown_at = status, self.clock()
        body = render_status(self.job_id, status, self.link)
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


def job_link(settings: Settings, job_id: str) -> str | None:
    """The job's signed reviewer link (bot.joblinks), or None when not configured."""
    return joblinks.job_url(settings.reviewer, job_id, now=time.time())


class LiveTurns:
    """The agent loop's ``on_turn``: records each finished turn for the reviewer page and
    shows the count on the status comment (at the comment's bounded rate)."""

    def __init__(self, data_dir: Path, job_id: str, status: StatusComment) -> None:
        self.path = live.live_path(data_dir, job_id)
        live.clear(self.path)
        self.status = status
        self.turns = 0

    def __call__(self, record: TurnRecord) -> None:
        turn = record.to_dict()
        live.append_turn(self.path, turn)
        self.turns += 1
        self.status.show_progress(live.Progress(self.turns, live.step_for("agent", turn)))
