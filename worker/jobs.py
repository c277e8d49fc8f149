"""Running one job: claim it, keep its heartbeat, honour cancellation, record the end.

Pipelines (what a job kind actually does) register here by kind; this module
owns only the lifecycle, so every kind gets the same guarantees: a job runs
at most once at a time, a worker killed mid-job leaves it to be reclaimed, a
forge outage defers it instead of failing it, and the recorded end is always
the real one.

Re-sending has one owner, the sweep (worker.maintenance): a job that must wait (no
free slot, a forge outage) goes back to the store with a not-before time and its
task ends; it never also retries itself. A message that is not the job's latest send
(an earlier one, a broker redelivery) runs nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, Protocol

from bot.forges import ForgeFactory
from bot.forges.base import ForgeUnavailable
from bot.runtime import Runtime
from bot.store.failure import FailureReason
from bot.store.jobs import JobStore
from bot.store.tables import Job, utcnow
from worker.first_contact import ensure_trigger_label
from worker.metrics import record_job, record_sandbox_failure
from worker.sandbox.base import SandboxError
from worker.settings import WorkerSettings

log = logging.getLogger(__name__)

HEARTBEAT_EVERY_S = 5.0
# A running job without a heartbeat for this long belongs to a dead worker.
STALE_AFTER = timedelta(seconds=60)
# A forge that stays unavailable for this many attempts fails the job instead of deferring.
MAX_FORGE_DEFERRALS = 20
# A job whose worker died this many times (it may be what kills it) fails instead.
MAX_REQUEUES = 3
# How long a job without a free slot waits before the sweep sends it again.
NO_SLOT_WAIT = timedelta(seconds=15)
DEFAULT_FORGE_WAIT_S = 30.0


class JobCancelled(Exception):
    """The job was cancelled (``/ribbit stop``, superseded) while it ran."""


class JobRefused(Exception):
    """The job must not run (actor without write access, invalid .ribbit.yml...); the
    message is the recorded reason and is safe to show on the issue. ``failure``: the
    structured reason (what failed, its output, who can fix it), where there is one."""

    def __init__(self, message: str, *, failure: FailureReason | None = None) -> None:
        super().__init__(message)
        self.failure = failure


@dataclass
class JobContext:
    job: Job
    settings: WorkerSettings
    store: JobStore
    forges: ForgeFactory
    cancel: threading.Event = field(default_factory=threading.Event)

    def stage(self, name: str) -> None:
        self.check_cancelled()
        self.store.update(self.job.id, stage=name)
        log.info("job %s: %s", self.job.id, name, extra={"job_id": self.job.id})

    def check_cancelled(self) -> None:
        if self.cancel.is_set():
            raise JobCancelled(self.job.id)


class JobResult(Protocol):
    """What a pipeline ends with: a record of the module that owns it. Its JSON is what
    the job's ``result`` column keeps (written here, in one place, when the job succeeds),
    and only that module names its keys."""

    def to_json(self) -> dict[str, Any]: ...


Pipeline = Callable[[JobContext], "JobResult | None"]
PIPELINES: dict[str, Pipeline] = {}
# Called while a job waits for a free slot, with its 1-based queue position (to tell the
# issue where it stands); failures there never affect the job.
WaitingHook = Callable[[Runtime[WorkerSettings], Job, int], None]
WAITING_HOOKS: dict[str, WaitingHook] = {}


def pipeline(kind: str) -> Callable[[Pipeline], Pipeline]:
    def register(fn: Pipeline) -> Pipeline:
        PIPELINES[kind] = fn
        return fn

    return register


RunOutcome = Literal["succeeded", "failed", "cancelled", "skipped", "held", "deferred"]


class _Heartbeat(threading.Thread):
    """Refreshes the job's heartbeat and turns a cancelled state into the cancel event."""

    def __init__(self, store: JobStore, job_id: str, cancel: threading.Event) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.store, self.job_id, self.cancel = store, job_id, cancel
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(HEARTBEAT_EVERY_S):
            try:
                state = self.store.heartbeat(self.job_id)
            except Exception:  # the database blinked; try again next beat
                log.warning("heartbeat for job %s failed", self.job_id, exc_info=True)
                continue
            if state != "running":
                self.cancel.set()


def run_job(runtime: Runtime[WorkerSettings], job_id: str, seq: int | None = None) -> RunOutcome:
    """Run ``job_id`` through its pipeline (``seq``: the dispatch the message carried).

    "deferred" means the job is back in the store for the sweep to send at its time."""
    started = time.monotonic()
    outcome = _run_job(runtime, job_id, seq)
    try:
        record_job(runtime.store.get(job_id).kind, outcome, time.monotonic() - started)
    except Exception:  # metrics never decide a job's fate
        log.warning("could not record metrics of job %s", job_id, exc_info=True)
    return outcome


def _run_job(runtime: Runtime[WorkerSettings], job_id: str, seq: int | None) -> RunOutcome:
    store = runtime.store
    claim = store.claim(job_id, runtime.limits, stale_after=STALE_AFTER, seq=seq)
    if claim in {"finished", "stale", "running_elsewhere"}:
        # Running elsewhere: if that worker died, its heartbeat stops and the sweep
        # requeues the job; this message must not start a second chain of its own.
        return "skipped"
    if claim == "held":
        return "held"  # `ribbit resume` releases it to the sweep
    if claim == "no_slot":
        _tell_waiting(runtime, job_id)
        store.defer(job_id, utcnow() + NO_SLOT_WAIT, "waiting for a free slot")
        return "deferred"
    job = store.get(job_id)
    ctx = JobContext(job=job, settings=runtime.settings, store=store, forges=runtime.forges)
    beat = _Heartbeat(store, job_id, ctx.cancel)
    beat.start()
    try:
        ensure_trigger_label(ctx)
        handler = PIPELINES.get(job.kind)
        if handler is None:
            raise JobRefused(f"no pipeline for job kind {job.kind!r}")
        result = handler(ctx)
    except JobCancelled:
        return _end_cancelled(store, job_id)
    except ForgeUnavailable as exc:
        if store.get(job_id).attempts >= MAX_FORGE_DEFERRALS:
            store.transition(
                job_id,
                "failed",
                stage=None,
                reason=f"forge unavailable after {MAX_FORGE_DEFERRALS} attempts: {exc}",
            )
            return "failed"
        wait = exc.retry_after if exc.retry_after is not None else DEFAULT_FORGE_WAIT_S
        store.defer(job_id, utcnow() + timedelta(seconds=wait), f"deferred: {exc}")
        return "deferred"
    except JobRefused as exc:
        store.transition(
            job_id, "failed", reason=f"refused: {exc}", failure=exc.failure, stage=None
        )
        return "failed"
    except Exception as exc:
        log.exception("job %s failed", job_id, extra={"job_id": job_id})
        if isinstance(exc, SandboxError):
            record_sandbox_failure(store.get(job_id).stage)
        if store.get(job_id).state == "cancelled":
            return "cancelled"
        store.transition(job_id, "failed", reason=_reason(exc), stage=None)
        return "failed"
    finally:
        beat.stopped.set()
    if store.get(job_id).state == "cancelled":
        return "cancelled"
    stored = None if result is None else result.to_json()
    store.transition(job_id, "succeeded", result=stored, stage=None)
    return "succeeded"


def _tell_waiting(runtime: Runtime[WorkerSettings], job_id: str) -> None:
    job = runtime.store.get(job_id)
    hook = WAITING_HOOKS.get(job.kind)
    if hook is None:
        return
    position = runtime.store.queue_position(job_id)
    marker = f"waiting:{position}"
    if job.stage == marker:
        return  # already told; the position has not moved
    try:
        hook(runtime, job, position)
    except Exception:
        log.warning("could not report queue position of job %s", job_id, exc_info=True)
        return
    runtime.store.update(job_id, stage=marker)


def _end_cancelled(store: JobStore, job_id: str) -> RunOutcome:
    job = store.get(job_id)
    if job.state == "running":
        store.transition(job_id, "cancelled", reason="cancelled while running", stage=None)
    return "cancelled"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:2000]
