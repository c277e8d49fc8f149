"""From a verified delivery to stored jobs: normalise, deduplicate, decide, enqueue.

Sans-IO with respect to HTTP (the Flask blueprint in bot/web/webhooks.py does
that part), so the same path serves webhooks, tests and the benchmark. The
delivery row, the handler decisions and the new jobs are one transaction, the
only one a webhook waits for (shared with the webhooks that arrived with it, each
decided as if alone: bot/store/db.py's GroupCommit); jobs are handed to the broker
after it commits, by a background sender, and a job whose hand-off failed (or never
happened) stays queued and undispatched until ``JobQueue.dispatch_pending`` re-sends it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy.orm import Session

from bot.admission import ALLOW_LIST_VAR, repo_allowed
from bot.queue import BackgroundSender, Dispatcher, JobQueue
from bot.settings import Settings
from bot.store.db import GroupCommit
from bot.store.jobs import DuplicateDelivery, JobStore
from bot.store.tables import Job
from bot.web import normalize
from bot.web.context import Context, OutsiderAttempt
from bot.web.events import Event, Ignored, Ping
from bot.web.handlers import registry

log = logging.getLogger(__name__)

Status = Literal["accepted", "ignored", "refused", "duplicate"]


@dataclass(frozen=True)
class IntakeResult:
    status: Status
    reason: str = ""
    job_ids: tuple[str, ...] = ()
    key: str = ""
    # What outsiders tried in this delivery (Context.ignore_outsider), for the metric.
    outsiders: tuple[OutsiderAttempt, ...] = ()

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status}
        if self.reason:
            body["reason"] = self.reason
        if self.job_ids:
            body["job_id"] = self.job_ids[0]
            body["job_ids"] = list(self.job_ids)
        return body


Normaliser = Callable[[str, str, Any], "Event | Ignored | list[Event]"]
NORMALISERS: dict[str, Normaliser] = {
    "github": normalize.from_github,
    "gitlab": normalize.from_gitlab,
}


class Intake:
    def __init__(self, settings: Settings, store: JobStore, dispatcher: Dispatcher) -> None:
        self.settings = settings
        self.store = store
        self.queue = JobQueue(store, dispatcher)
        self.bot_logins = frozenset(
            {settings.github.bot_login.lower(), settings.gitlab.bot_username.lower()}
        )
        self.sender = BackgroundSender(self.queue.send)
        # Concurrent webhooks share a transaction (one commit for several), each with its
        # own result: see GroupCommit.
        self.commits = GroupCommit(store.db)

    def handle(
        self,
        forge: str,
        event_name: str,
        delivery_id: str,
        payload: Any,
        *,
        body_sha256: str | None = None,
    ) -> IntakeResult:
        """Raises normalize.PayloadError for a payload of the wrong shape (answered 400).
        ``body_sha256``: the signed body's hash; a body seen before under another delivery
        id is a replay and answered as a duplicate."""
        normalised = NORMALISERS[forge](event_name, delivery_id, payload)
        events = normalised if isinstance(normalised, list) else [normalised]
        first = events[0]
        key = first.key

        def decide_and_record(session: Session) -> tuple[IntakeResult, list[Job]]:
            jobs: list[Job] = []
            if isinstance(first, Ignored):
                result = IntakeResult("ignored", first.reason, key=key)
            else:
                result, jobs = self._decide(
                    session, [e for e in events if not isinstance(e, Ignored)]
                )
            # Last, with its outcome: a delivery id or body seen before fails here and the
            # whole transaction, jobs included, rolls back. Concurrent duplicates serialise
            # on the unique keys, so exactly one of them commits.
            self.store.record_delivery(
                session,
                forge=forge,
                delivery_id=delivery_id,
                event=event_name,
                key=key,
                outcome=result.status,
                reason=result.reason or None,
                job_id=result.job_ids[0] if result.job_ids else None,
                body_sha256=body_sha256,
            )
            return result, jobs

        try:
            result, jobs = self.commits.run(decide_and_record)
        except DuplicateDelivery:
            return IntakeResult("duplicate", "delivery already received", key=key)
        # Only after the commit (a worker must find the job) and off the request path: the
        # answer does not wait on the broker, and a send that fails leaves the job for the
        # sweep.
        self.sender.submit(jobs)
        return result

    def flush(self) -> None:
        """Wait until the jobs of every delivery handled so far were handed to the broker
        (or failed to be): tests, and a server that stops."""
        self.sender.flush()

    def close(self) -> None:
        self.sender.close()

    def _decide(self, session: Session, events: list[Event]) -> tuple[IntakeResult, list[Job]]:
        jobs: list[Job] = []
        reasons: list[str] = []
        refused: str | None = None
        outsiders: list[OutsiderAttempt] = []
        key = events[0].key
        for event in events:
            if not isinstance(event, Ping) and not repo_allowed(
                self.settings.admission, event.forge, event.repo
            ):
                # Every kind of job, replies and bookkeeping too: the bot acts on nothing
                # outside the allow-list.
                refused = f"repository {event.forge}:{event.repo} is not in {ALLOW_LIST_VAR}"
                continue
            if event.confidential:
                refused = (
                    "confidential issue or internal note: Ribbit works in the open (a branch "
                    "and an ordinary MR), so it does not act on these"
                )
                continue
            ctx = Context(
                event=event,
                settings=self.settings,
                store=self.store,
                session=session,
                bot_logins=self.bot_logins,
            )
            handlers = registry.handlers_for(event.key)
            if not handlers:
                reasons.append(f"no handler for {event.key}")
            for handler in handlers:
                handler(ctx)
                if ctx.refusal or ctx.ignored:
                    break
            jobs.extend(ctx.jobs)
            if ctx.outsider is not None:
                outsiders.append(ctx.outsider)
            if ctx.jobs and event.private is not None and ctx.view.private != event.private:
                # Which model line may train on and serve the repository (bot/model_lines.py);
                # written only when it changed, so the usual webhook adds no statement.
                self.store.record_visibility(
                    session, event.forge, event.repo, private=event.private
                )
            reasons.extend(ctx.notes)
            if ctx.refusal:
                refused = ctx.refusal
            elif ctx.ignored and not ctx.jobs:
                reasons.append(ctx.ignored)
        tried = tuple(outsiders)
        if jobs:
            ids = tuple(j.id for j in jobs)
            return IntakeResult("accepted", "; ".join(reasons), ids, key, tried), jobs
        if refused:
            return IntakeResult("refused", refused, key=key, outsiders=tried), []
        reason = "; ".join(reasons) or "nothing to do"
        return IntakeResult("ignored", reason, key=key, outsiders=tried), []
