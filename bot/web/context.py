"""The context a handler gets: the event, settings, the open transaction, verbs to decide."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from sqlalchemy.orm import Session

from bot.settings import Settings
from bot.store.jobs import IntakeView, JobSpec, JobStore
from bot.store.tables import Job
from bot.web.events import CommentCreated, Event, IssueLabeled

OutsiderAttempt = Literal["command", "review"]
OUTSIDER_ATTEMPTS: tuple[OutsiderAttempt, ...] = ("command", "review")


@dataclass
class Context:
    """What a handler sees: the event, settings, the open transaction, and verbs to decide."""

    event: Event
    settings: Settings
    store: JobStore
    session: Session
    bot_logins: frozenset[str]
    jobs: list[Job] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refusal: str | None = None
    ignored: str | None = None
    # Set when the delivery was someone without write access trying to steer the bot
    # (a command, a review): counted by the web app (ribbit_outsider_attempts_total).
    outsider: OutsiderAttempt | None = None

    @property
    def is_bot(self) -> bool:
        actor = self.event.actor
        return actor.is_bot or actor.login.lower() in self.bot_logins

    @cached_property
    def view(self) -> IntakeView:
        """The event's repository and issue as a new agent job needs them (pause, trigger
        label, today's jobs, the active job), read once, in one statement."""
        event = self.event
        issue = event.issue_number if isinstance(event, IssueLabeled | CommentCreated) else None
        return self.store.intake_view(self.session, event.forge, event.repo, issue)

    def create_job(self, spec: JobSpec) -> Job | None:
        if (spec.forge, spec.repo) == (self.event.forge, self.event.repo):
            held = self.view.paused
        else:
            held = self.store.is_paused(self.session, spec.forge, spec.repo)
        job = self.store.create(self.session, spec, held=held)
        if job is not None:
            self.jobs.append(job)
            if held:
                self.notes.append(f"job {job.id} held: the bot is paused")
        return job

    def ignore(self, reason: str) -> None:
        self.ignored = reason

    def ignore_outsider(self, attempt: OutsiderAttempt, reason: str) -> None:
        """Ignore an outsider's attempt (no job, no reply, nothing on the issue), counted."""
        self.outsider = attempt
        self.ignored = reason

    def refuse(self, reason: str) -> None:
        self.refusal = reason
