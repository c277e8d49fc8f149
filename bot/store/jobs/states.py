"""A job's states and the moves between them.

    queued ──> running ──> succeeded
      │  ^        │   └──> failed
      │  └────────┘ (requeued: forge rate limit, worker lost)
      └──> cancelled / failed           running ──> cancelled

Every change of state goes through :func:`move` (JobStore.transition, claim, cancel,
defer), which refuses moves the diagram does not have, so a job can never show a wrong
state (an error for a run that succeeded, say).
"""

from __future__ import annotations

from typing import Literal

from bot.store.failure import FailureReason
from bot.store.tables import Job, utcnow

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
ACTIVE_STATES: tuple[JobState, ...] = ("queued", "running")
TERMINAL_STATES: tuple[JobState, ...] = ("succeeded", "failed", "cancelled")

TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "cancelled", "failed"}),
    "running": frozenset({"succeeded", "failed", "cancelled", "queued"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}


class InvalidTransition(RuntimeError):
    pass


class JobNotFound(LookupError):
    pass


def move(
    job: Job,
    to: JobState,
    *,
    reason: str | None = None,
    failure: FailureReason | None = None,
) -> None:
    """``reason``: the one-line summary; ``failure``: the structured reason behind a
    failed job (bot/store/failure.py), written here once with it."""
    if to not in TRANSITIONS[job.state]:
        raise InvalidTransition(f"job {job.id}: {job.state} -> {to} is not allowed")
    now = utcnow()
    job.state = to
    if to == "running":
        job.started_at = now
        job.attempts += 1
    if to in TERMINAL_STATES:
        job.finished_at = now
        job.active_key = None
    if to == "queued":
        # Back to the sweep: whatever message brought it here is spent.
        job.dispatched = False
        job.dispatch_seq += 1
        job.not_before = None
    if reason is not None:
        job.failure_reason = reason
    if failure is not None:
        job.failure_detail = failure.to_json()
