"""TrainerStore's named queries on a real (SQLite) database."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest

from bot.store.db import Database
from bot.store.jobs import JobSpec, JobStore
from bot.store.outcomes import OutcomeStore
from bot.store.records.outcome import OutcomeRecord
from bot.store.records.review import ReviewFeedback
from bot.store.tables import utcnow
from trainer.store import IndexEntry, ModelVersion, TrainerStore, TrainingEnvironment

_OUTCOME = OutcomeRecord(
    forge="github",
    repo="o/r",
    pr_number=1,
    issue_number=1,
    job_id=None,
    human_authored=False,
    state="merged",
    actor=None,
    decided_at=None,
    time_to_merge_s=None,
    revisions=0,
    review_comments=ReviewFeedback(),
    bot_diff=None,
    merged_diff=None,
    diff_similarity=None,
)


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()


def _job(db: Database, forge: str, repo: str, issue: int) -> str:
    store = JobStore(db)
    with db.session() as session:
        job = store.create(
            session, JobSpec(kind="solve", forge=forge, repo=repo, issue_number=issue)
        )
        assert job is not None
        return job.id


def test_outcomes_and_jobs_per_repository(db: Database) -> None:
    outcomes = OutcomeStore(db)
    outcomes.save(replace(_OUTCOME, repo="o/b"))
    outcomes.save(_OUTCOME)
    outcomes.save(replace(_OUTCOME, pr_number=2))
    outcomes.save(replace(_OUTCOME, forge="gitlab", pr_number=3))
    early = _job(db, "github", "o/r", 1)
    late = _job(db, "github", "o/r", 2)
    JobStore(db).update(early, created_at=utcnow() - timedelta(hours=1))
    _job(db, "gitlab", "o/j", 1)
    store = TrainerStore(db)
    assert [o.repo for o in store.outcomes()] == ["o/b", "o/r", "o/r", "o/r"]
    assert store.outcome_repos() == [("github", "o/b"), ("github", "o/r"), ("gitlab", "o/r")]
    assert store.repos_with_data() == {
        ("github", "o/b"),
        ("github", "o/r"),
        ("gitlab", "o/r"),
        ("gitlab", "o/j"),
    }
    mine = store.repo_outcomes("github", "o/r")
    assert [o.pr_number for o in mine] == [1, 2]
    assert [o.pr_number for o in store.outcomes_by_id([mine[1].id])] == [2]
    assert [j.id for j in store.repo_jobs("github", "o/r")] == [early, late]


def test_delete_repo_data_in_one_go(db: Database) -> None:
    OutcomeStore(db).save(_OUTCOME)
    OutcomeStore(db).save(replace(_OUTCOME, pr_number=2))
    job_id = _job(db, "github", "o/r", 1)
    JobStore(db).update(
        job_id, instructions="fix it", result={"version": 1, "diff": "secret", "turns": 3}
    )
    store = TrainerStore(db)
    store.index_environments("/s", [IndexEntry("e1", "o/r", "train", 0, 0)])
    (first, second) = store.repo_outcomes("github", "o/r")
    store.delete_repo_data(
        outcome_ids=[first.id],
        environment_ids=["e1"],
        job_ids=[job_id],
        kept_result_keys=frozenset({"version", "turns"}),
    )
    assert [o.id for o in store.repo_outcomes("github", "o/r")] == [second.id]
    assert store.environment_store_path("e1") is None
    job = JobStore(db).get(job_id)
    assert (job.result, job.instructions) == ({"version": 1, "turns": 3}, None)


def test_index_follows_entries_of_its_own_store_only(db: Database) -> None:
    store = TrainerStore(db)
    store.index_environments(
        "/a", [IndexEntry("e1", "o/r", "train", 0, 0), IndexEntry("e2", "o/r", "train", 0, 0)]
    )
    store.index_environments("/b", [IndexEntry("b1", "o/x", "train", 0, 0)])
    store.index_environments("/a", [IndexEntry("e1", "o/r2", "heldout", 4, 1)])
    with db.session() as session:
        rows = {r.instance_id: r for r in session.query(TrainingEnvironment)}
    assert sorted(rows) == ["b1", "e1"]
    e1 = rows["e1"]
    assert (e1.repo, e1.split, e1.calibration_k, e1.calibration_solved) == ("o/r2", "heldout", 4, 1)
    assert store.environment_store_path("b1") == "/b"


def test_versions_and_heldout(db: Database) -> None:
    store = TrainerStore(db)
    added = store.add_version(ModelVersion(name="v1", base_model="b", line="x"))
    assert added is not None and added.id is not None
    assert store.add_version(ModelVersion(name="v1", base_model="other")) is None
    store.add_version(ModelVersion(name="v2", base_model="b"))
    assert [v.name for v in store.versions()] == ["v1", "v2"]
    assert [v.name for v in store.versions("x")] == ["v1"]
    assert store.record_heldout("v1", rate=0.5, envs=10, low=0.2, high=0.8, k=2)
    assert not store.record_heldout("v9", rate=0.5, envs=10, low=0.2, high=0.8, k=2)
    v1 = store.version("v1")
    assert v1 is not None
    assert (v1.heldout_pass_rate, v1.heldout_envs, v1.heldout_k) == (0.5, 10, 2)
    assert store.version("v9") is None


def test_rollback_target_is_the_latest_retired_promotion(db: Database) -> None:
    now = utcnow()
    with db.session() as session:
        session.add_all(
            [
                ModelVersion(name="old", base_model="b", state="retired", promoted_at=now),
                ModelVersion(
                    name="newer",
                    base_model="b",
                    state="retired",
                    promoted_at=now + timedelta(days=1),
                ),
                ModelVersion(name="never", base_model="b", state="retired"),
                ModelVersion(name="cur", base_model="b", state="promoted", promoted_at=now),
            ]
        )
    with db.session() as session:
        previous = TrainerStore.previously_promoted_in(session, "default")
        current = TrainerStore.promoted_in(session, "default")
        assert previous is not None and previous.name == "newer"
        assert current is not None and current.name == "cur"
        assert TrainerStore.previously_promoted_in(session, "other") is None
