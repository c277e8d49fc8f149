"""The job lifecycle: claim, admission limits, cancellation, deferral, reclaiming."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import Any

import pytest

from bot.forges.base import ForgeUnavailable
from bot.runtime import Runtime
from bot.store.jobs import InvalidTransition, JobSpec, Limits
from bot.store.tables import utcnow
from tests.fakes import FakeResult
from worker import jobs as jobs_mod
from worker.jobs import JobContext, JobRefused, run_job
from worker.settings import WorkerSettings


def _aware(when: Any) -> Any:
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@pytest.fixture
def runtime(settings: WorkerSettings) -> Iterator[Runtime[WorkerSettings]]:
    rt = Runtime.open(settings)
    yield rt
    rt.db.dispose()


def make_job(rt: Runtime, issue: int = 1, repo: str = "o/r", kind: str = "solve") -> str:
    with rt.db.session() as s:
        job = rt.store.create(
            s,
            JobSpec(
                kind=kind,
                forge="github",
                repo=repo,  # type: ignore[arg-type]
                issue_number=issue,
            ),
        )
        assert job is not None
        return job.id


@pytest.fixture
def pipelines(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    table: dict[str, Any] = {}
    monkeypatch.setattr(jobs_mod, "PIPELINES", table)
    return table


def test_successful_job_records_result(runtime: Any, pipelines: dict[str, Any]) -> None:
    pipelines["solve"] = lambda ctx: FakeResult({"pr": 5})
    job_id = make_job(runtime)
    assert run_job(runtime, job_id) == "succeeded"
    job = runtime.store.get(job_id)
    assert (job.state, job.result, job.attempts) == ("succeeded", {"pr": 5}, 1)
    assert job.started_at and job.finished_at
    # A second delivery of the same message runs nothing.
    assert run_job(runtime, job_id) == "skipped"


def test_failing_pipeline_records_reason(runtime: Any, pipelines: dict[str, Any]) -> None:
    def boom(ctx: JobContext) -> None:
        raise RuntimeError("tests hung")

    pipelines["solve"] = boom
    job_id = make_job(runtime)
    assert run_job(runtime, job_id) == "failed"
    assert runtime.store.get(job_id).failure_reason == "RuntimeError: tests hung"


def test_refused_job(runtime: Any, pipelines: dict[str, Any]) -> None:
    def refuse(ctx: JobContext) -> None:
        raise JobRefused("mallory has no write access")

    pipelines["solve"] = refuse
    job_id = make_job(runtime)
    run_job(runtime, job_id)
    assert runtime.store.get(job_id).failure_reason == "refused: mallory has no write access"


def test_forge_outage_defers_instead_of_failing(runtime: Any, pipelines: dict[str, Any]) -> None:
    def limited(ctx: JobContext) -> None:
        raise ForgeUnavailable("rate limited", retry_after=42)

    pipelines["solve"] = limited
    job_id = make_job(runtime)
    before = utcnow()
    assert run_job(runtime, job_id, seq=1) == "deferred"
    job = runtime.store.get(job_id)
    assert job.state == "queued" and "rate limited" in job.failure_reason
    assert not job.dispatched and job.not_before is not None
    assert _aware(job.not_before) >= before + timedelta(seconds=42)
    # Not due yet: the sweep's dispatch sends nothing; when due it sends exactly once.
    assert runtime.store.take_pending_dispatch() == []
    later = before + timedelta(seconds=43)
    [due] = runtime.store.take_pending_dispatch(now=later)
    runtime.store.mark_dispatched([(due.id, due.dispatch_seq)])
    assert runtime.store.take_pending_dispatch(now=later) == []
    # The message of the first send is spent: a redelivery of it runs nothing.
    assert run_job(runtime, job_id, seq=1) == "skipped"
    pipelines["solve"] = lambda ctx: None
    assert run_job(runtime, job_id, seq=due.dispatch_seq) == "succeeded"
    assert runtime.store.get(job_id).attempts == 2


def test_concurrency_limit_per_repo_defers(runtime: Any, pipelines: dict[str, Any]) -> None:
    first, second = make_job(runtime, 1), make_job(runtime, 2)
    other_repo = make_job(runtime, 1, repo="o/other")
    assert runtime.store.claim(first, runtime.limits, stale_after=timedelta(minutes=1)) == "claimed"
    pipelines["solve"] = lambda ctx: None
    assert run_job(runtime, second) == "deferred"  # per-repo limit is 1 by default
    assert runtime.store.get(second).not_before is not None
    assert run_job(runtime, other_repo) == "succeeded"


def test_global_concurrency_limit(runtime: Any) -> None:
    ids = [make_job(runtime, n, repo=f"o/r{n}") for n in range(3)]
    limits = Limits(max_concurrent=2, max_concurrent_per_repo=5)
    outcomes = [runtime.store.claim(i, limits, stale_after=timedelta(minutes=1)) for i in ids]
    assert outcomes == ["claimed", "claimed", "no_slot"]


def test_concurrent_claims_never_exceed_the_limit(runtime: Any) -> None:
    ids = [make_job(runtime, n, repo=f"o/r{n}") for n in range(8)]
    limits = Limits(max_concurrent=3, max_concurrent_per_repo=5)
    results: list[str] = []
    lock = threading.Lock()

    def claim(job_id: str) -> None:
        outcome = runtime.store.claim(job_id, limits, stale_after=timedelta(minutes=1))
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=claim, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("claimed") == 3
    assert runtime.store.count_by_state()["running"] == 3


def test_cancel_while_running_stops_the_pipeline(
    runtime: Any, pipelines: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_mod, "HEARTBEAT_EVERY_S", 0.05)
    job_id = make_job(runtime)
    seen_cancel = threading.Event()

    def long_running(ctx: JobContext) -> None:
        with runtime.db.session() as s:
            runtime.store.cancel(s, s.get(type(ctx.job), job_id), "stopped by alice")
        # The heartbeat turns the cancelled state into the event: await it, no polling.
        if ctx.cancel.wait(30):
            seen_cancel.set()
            ctx.check_cancelled()

    pipelines["solve"] = long_running
    assert run_job(runtime, job_id) == "cancelled"
    assert seen_cancel.is_set()
    job = runtime.store.get(job_id)
    assert job.state == "cancelled" and job.failure_reason == "stopped by alice"


def test_job_of_a_dead_worker_is_reclaimed(runtime: Any, pipelines: dict[str, Any]) -> None:
    job_id = make_job(runtime)
    runtime.store.claim(job_id, runtime.limits, stale_after=timedelta(minutes=1))
    # Fresh heartbeat: another worker owns it.
    pipelines["solve"] = lambda ctx: None
    assert run_job(runtime, job_id) == "skipped"  # no chain of its own: the sweep owns it
    # The owner died: no heartbeat for longer than STALE_AFTER.
    from sqlalchemy import update

    from bot.store.tables import Job, utcnow

    with runtime.db.session() as s:
        s.execute(
            update(Job).where(Job.id == job_id).values(updated_at=utcnow() - timedelta(minutes=5))
        )
    assert run_job(runtime, job_id) == "succeeded"
    assert runtime.store.get(job_id).attempts == 2


def test_paused_job_is_held_not_run(runtime: Any, pipelines: dict[str, Any]) -> None:
    pipelines["solve"] = lambda ctx: None
    job_id = make_job(runtime)
    runtime.store.pause(forge="github", repo="o/r")
    assert run_job(runtime, job_id) == "held"
    assert runtime.store.get(job_id).state == "queued"
    assert runtime.store.resume(forge="github", repo="o/r") == [job_id]
    assert run_job(runtime, job_id) == "succeeded"


def test_state_machine_refuses_wrong_moves(runtime: Any) -> None:
    job_id = make_job(runtime)
    with pytest.raises(InvalidTransition):
        runtime.store.transition(job_id, "succeeded")  # queued -> succeeded skips running
    runtime.store.transition(job_id, "running")
    runtime.store.transition(job_id, "succeeded")
    with pytest.raises(InvalidTransition):
        runtime.store.transition(job_id, "failed")  # a success never turns into an error


def test_queue_position(runtime: Any) -> None:
    a, b = make_job(runtime, 1, repo="o/a"), make_job(runtime, 1, repo="o/b")
    assert (runtime.store.queue_position(a), runtime.store.queue_position(b)) == (1, 2)


def test_short_jobs_do_not_wait_behind_agent_jobs(runtime: Any, pipelines: dict[str, Any]) -> None:
    agent = make_job(runtime, 1)
    assert runtime.store.claim(agent, runtime.limits, stale_after=timedelta(minutes=1)) == "claimed"
    pipelines["command"] = lambda ctx: FakeResult({"ok": True})
    command = make_job(runtime, 1, kind="command")
    assert run_job(runtime, command) == "succeeded"  # per-repo limit 1 is taken by the agent


def test_forge_outage_fails_after_bounded_deferrals(
    runtime: Any, pipelines: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_mod, "MAX_FORGE_DEFERRALS", 2)

    def down(ctx: JobContext) -> None:
        raise ForgeUnavailable("GitHub answered 502")

    pipelines["solve"] = down
    job_id = make_job(runtime)
    assert run_job(runtime, job_id) == "deferred"
    assert run_job(runtime, job_id) == "failed"
    assert "after 2 attempts" in runtime.store.get(job_id).failure_reason


def _lose_worker(runtime: Runtime, job_id: str) -> None:
    from sqlalchemy import update

    from bot.store.tables import Job

    with runtime.db.session() as s:
        s.execute(
            update(Job).where(Job.id == job_id).values(updated_at=utcnow() - timedelta(hours=1))
        )


def test_sweep_requeues_a_lost_job_a_bounded_number_of_times(runtime: Any) -> None:
    from bot.queue import JobQueue
    from tests.fakes import RecordingDispatcher
    from worker.maintenance import Swept, sweep

    sent = RecordingDispatcher()
    queue = JobQueue(runtime.store, sent)
    job_id = make_job(runtime)
    for _ in range(jobs_mod.MAX_REQUEUES):
        job = runtime.store.get(job_id)
        assert (
            runtime.store.claim(
                job_id, runtime.limits, stale_after=timedelta(minutes=1), seq=job.dispatch_seq
            )
            == "claimed"
        )
        _lose_worker(runtime, job_id)
        assert sweep(runtime, queue=queue) == Swept(requeued=1, failed=0, dispatched=1)
    assert sent.sent == [job_id] * jobs_mod.MAX_REQUEUES
    runtime.store.claim(job_id, runtime.limits, stale_after=timedelta(minutes=1))
    _lose_worker(runtime, job_id)
    assert sweep(runtime, queue=queue) == Swept(requeued=0, failed=1, dispatched=0)
    job = runtime.store.get(job_id)
    assert job.state == "failed" and "lost 4 times" in job.failure_reason


def test_only_the_earliest_of_an_outsiders_commands_replies(runtime: Any) -> None:
    """Three `/ribbit retry` from one outsider, run by workers at the same time: the first
    tells them, the others see it coming (queued or running) or done, and stay quiet."""
    from worker.pipelines.slash_commands import _already_told

    ids = []
    for _ in range(3):
        with runtime.db.session() as s:
            job = runtime.store.create(
                s,
                JobSpec(kind="command", forge="gitlab", repo="o/r", issue_number=4, actor="otto"),
            )
            assert job is not None
            ids.append(job.id)
    first, second, third = (runtime.store.get(i) for i in ids)
    told = {
        j.id: _already_told(
            JobContext(job=j, settings=runtime.settings, store=runtime.store, forges=runtime.forges)
        )
        for j in (first, second, third)
    }
    assert told == {first.id: False, second.id: True, third.id: True}
    runtime.store.transition(first.id, "running")
    runtime.store.transition(first.id, "failed", reason="refused: otto does not have write access")
    assert _already_told(
        JobContext(job=third, settings=runtime.settings, store=runtime.store, forges=runtime.forges)
    )
    # Another actor, or another issue, is told on its own.
    with runtime.db.session() as s:
        other = runtime.store.create(
            s, JobSpec(kind="command", forge="gitlab", repo="o/r", issue_number=4, actor="eve")
        )
        assert other is not None
    other = runtime.store.get(other.id)
    assert not _already_told(
        JobContext(job=other, settings=runtime.settings, store=runtime.store, forges=runtime.forges)
    )
