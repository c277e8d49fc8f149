"""JobStore's named queries for the dashboard, the handlers, the notifications and the
metrics, on a real (SQLite) database."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.store.db import Database
from bot.store.jobs import JobKind, JobQuery, JobSpec, JobStore, RepoCount, RepoEndings
from bot.store.tables import utcnow


@pytest.fixture
def store(db: Database) -> JobStore:
    return JobStore(db)


def _job(
    store: JobStore,
    kind: JobKind = "solve",
    *,
    repo: str = "o/r",
    forge: str = "github",
    issue: int | None = 1,
    pr: int | None = None,
) -> str:
    with store.db.session() as session:
        job = store.create(
            session, JobSpec(kind=kind, forge=forge, repo=repo, issue_number=issue, pr_number=pr)
        )
        assert job is not None
        return job.id


def _finish(store: JobStore, job_id: str, state: str) -> None:
    store.transition(job_id, "running")
    store.transition(job_id, state)  # type: ignore[arg-type]


def test_listing_filters_pages_newest_first_and_counts_all(store: JobStore) -> None:
    ids = [_job(store, issue=n) for n in range(1, 6)]
    start = utcnow() - timedelta(hours=1)
    for n, job_id in enumerate(ids):  # creation times set apart: the order is by them
        store.update(job_id, created_at=start + timedelta(minutes=n))
    _job(store, "help", issue=9)
    _job(store, repo="o/other", issue=1)
    found = store.listing(JobQuery(kind="solve", repo="o/r"), limit=2, offset=1)
    assert found.total == 5
    assert [r.id for r in found.rows] == [ids[3], ids[2]]
    assert {(r.kind, r.repo, r.state) for r in found.rows} == {("solve", "o/r", "queued")}
    assert store.listing(JobQuery(state="running"), limit=10, offset=0).total == 0


def test_active_counts_split_queued_held_and_running(store: JobStore) -> None:
    _job(store, issue=1)
    running = _job(store, issue=2)
    store.transition(running, "running")
    held = _job(store, issue=3)
    store.update(held, held=True)
    _finish(store, _job(store, issue=4), "succeeded")
    counts = store.active_counts()
    assert (counts.queued, counts.held, counts.running) == (1, 1, 1)


def test_pull_request_lookups(store: JobStore, db: Database) -> None:
    solve = _job(store, issue=7, pr=None)
    store.update(solve, pr_number=40)
    outcome = _job(store, "outcome", issue=None, pr=40)
    with db.session() as session:
        latest = store.latest_on_pull_request(session, "github", "o/r", 40)
        assert latest is not None and latest.id == outcome
        # The newest job naming an issue, not the newest job.
        assert store.issue_of_pull_request(session, "github", "o/r", 40) == 7
        assert store.latest_on_pull_request(session, "gitlab", "o/r", 40) is None
        assert store.issue_of_pull_request(session, "github", "o/r", 41) is None


def test_agent_worked_on_counts_solve_and_revise_only(store: JobStore, db: Database) -> None:
    _job(store, "help", issue=3)
    _job(store, "revise", issue=5)
    with db.session() as session:
        assert not store.agent_worked_on(session, "github", "o/r", 3)
        assert store.agent_worked_on(session, "github", "o/r", 5)
        assert not store.agent_worked_on(session, "github", "o/other", 5)


def test_get_in_changes_in_the_callers_transaction(store: JobStore, db: Database) -> None:
    job_id = _job(store)
    with db.session() as session:
        job = store.get_in(session, job_id)
        assert job is not None
        store.cancel(session, job, "test")
        assert store.get_in(session, "missing") is None
    assert store.get(job_id).state == "cancelled"


def test_a_created_job_is_the_row_as_stored_and_changes_in_the_callers_transaction(
    store: JobStore, db: Database
) -> None:
    spec = JobSpec(kind="solve", forge="github", repo="o/r", issue_number=3, actor="a")
    with db.session() as session:
        job = store.create(session, spec)
        assert job is not None
        assert job in session and not session.dirty  # attached, with nothing left to write
        assert store.get_in(session, job.id) is job
        store.cancel(session, job, "superseded")  # frees the issue for another agent job
        again = store.create(session, spec)
        assert again is not None
    stored, second = store.get(job.id), store.get(again.id)
    assert (stored.state, stored.failure_reason, stored.actor) == ("cancelled", "superseded", "a")
    assert (second.state, second.dispatch_seq, second.held) == ("queued", 1, False)
    assert (job.kind, job.dispatch_seq, job.repo) == ("solve", 1, "o/r")


def test_per_repository_counts(store: JobStore) -> None:
    since = utcnow() - timedelta(minutes=1)
    for issue in (1, 2):
        _finish(store, _job(store, issue=issue), "failed")
    _finish(store, _job(store, issue=3), "succeeded")
    _finish(store, _job(store, "help", repo="o/b", issue=4), "failed")
    _job(store, repo="o/b", issue=5)
    assert store.failed_by_repo(since) == [
        RepoCount("github", "o/b", 1),
        RepoCount("github", "o/r", 2),
    ]
    assert store.agent_jobs_by_repo(since) == [
        RepoCount("github", "o/b", 1),
        RepoCount("github", "o/r", 3),
    ]
    assert store.agent_endings_by_repo(since) == [RepoEndings("github", "o/r", 3, 2)]
    later = utcnow() + timedelta(minutes=1)
    assert store.failed_by_repo(later) == store.agent_jobs_by_repo(later) == []


def test_visibility_is_recorded_per_repository(store: JobStore) -> None:
    assert store.visibility("github", "o/r") is None
    store.set_visibility("github", "o/r", private=True)
    store.set_visibility("github", "o/r", private=False)
    store.set_visibility("gitlab", "o/r", private=True)
    assert store.visibility("github", "o/r") is False
    assert store.visibility("gitlab", "o/r") is True


def test_visibility_recorded_in_the_callers_transaction_goes_with_it(store: JobStore) -> None:
    """Intake's write: kept with the webhook's jobs, or rolled back with them."""

    class Abort(Exception):
        pass

    with pytest.raises(Abort), store.db.session() as session:
        store.record_visibility(session, "github", "o/r", private=True)
        raise Abort
    assert store.visibility("github", "o/r") is None
    with store.db.session() as session:
        store.record_visibility(session, "github", "o/r", private=True)
        job = store.create(
            session, JobSpec(kind="solve", forge="github", repo="o/r", issue_number=1)
        )
        assert job is not None
    assert store.visibility("github", "o/r") is True
    assert store.get(job.id).repo == "o/r"
