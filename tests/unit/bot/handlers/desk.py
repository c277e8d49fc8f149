"""The handlers' test bench: a typed event dispatched through the composed registry with
a Context over a real migrated database, as intake does it, without HTTP, normalising or
the delivery row (bedevere's ``router.dispatch(event, FakeGH())`` in Ribbit terms)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from bot.forges.base import ForgeName
from bot.settings import Settings
from bot.store.db import Database
from bot.store.jobs import JobKind, JobSpec, JobState, JobStore
from bot.store.payloads import JobPayload
from bot.store.tables import Job
from bot.web.context import Context
from bot.web.events import Actor, Event
from bot.web.handlers import registry

FORGE: ForgeName = "github"
REPO = "acme/widgets"
BOT_LOGIN = "ribbit-bot"
ALICE = Actor("alice")
# The route from "queued" to each state, through the store's state machine.
_ROUTE: dict[JobState, tuple[JobState, ...]] = {
    "queued": (),
    "running": ("running",),
    "succeeded": ("running", "succeeded"),
    "failed": ("running", "failed"),
    "cancelled": ("cancelled",),
}


@dataclass
class HandlerDesk:
    db: Database
    store: JobStore
    settings: Settings
    bot_logins: frozenset[str] = field(default_factory=lambda: frozenset({BOT_LOGIN}))

    def dispatch(self, event: Event, *, settings: Settings | None = None) -> Context:
        """Run the event's handlers in one transaction, stopping at the first decision
        (as intake does), and return the context they decided on."""

        def decide(session: Session) -> Context:
            ctx = Context(
                event=event,
                settings=settings or self.settings,
                store=self.store,
                session=session,
                bot_logins=self.bot_logins,
            )
            handlers = registry.handlers_for(event.key)
            assert handlers, f"no handler registered for {event.key}"
            for handler in handlers:
                handler(ctx)
                if ctx.refusal or ctx.ignored:
                    break
            return ctx

        return self.db.transaction(decide)

    def seed(
        self,
        kind: JobKind,
        *,
        issue: int | None = None,
        pr: int | None = None,
        state: JobState = "queued",
        payload: JobPayload | None = None,
        repo: str = REPO,
    ) -> Job:
        """A job as earlier deliveries and the worker left it."""
        spec = JobSpec(
            kind=kind, forge=FORGE, repo=repo, issue_number=issue, pr_number=pr, payload=payload
        )
        with self.db.session() as session:
            job = self.store.create(session, spec)
        assert job is not None, "seeded a second active agent job for one issue"
        for step in _ROUTE[state]:
            job = self.store.transition(job.id, step)
        return job

    def stored(self, ctx: Context) -> list[Job]:
        """The jobs the handlers created, as committed (read back, payload decoded)."""
        return [self.store.get(job.id) for job in ctx.jobs]

    def count(self) -> int:
        return len(self.store.list(limit=10_000))

    def with_admission(self, **fields: Any) -> Settings:
        admission = self.settings.admission.model_copy(update=fields)
        return self.settings.model_copy(update={"admission": admission})


def decided(ctx: Context) -> tuple[str | None, str | None, int]:
    """(refusal, ignore reason, jobs created): what one delivery decided."""
    return ctx.refusal, ctx.ignored, len(ctx.jobs)
