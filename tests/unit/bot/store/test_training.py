"""TrainingStore: the promoted version a job runs and the dashboard's views of the
training tables, on a real (SQLite) database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from bot.store.db import Database
from bot.store.tables import utcnow
from bot.store.training import (
    ModelVersion,
    TrainingEnvironment,
    TrainingRun,
    TrainingStore,
    VersionRecord,
    valid_instance_id,
)


@pytest.fixture
def store(db: Database) -> TrainingStore:
    return TrainingStore(db)


def test_promoted_is_the_lines_newest_promotion(db: Database, store: TrainingStore) -> None:
    now = utcnow()
    with db.session() as session:
        session.add_all(
            [
                ModelVersion(name="a", base_model="b", state="retired", promoted_at=now),
                ModelVersion(
                    name="c", base_model="b", adapter_path="/x", state="promoted", promoted_at=now
                ),
                ModelVersion(name="d", base_model="b", state="promoted", line="other"),
                ModelVersion(name="e", base_model="b", state="candidate"),
            ]
        )
    found = store.promoted("default")
    assert found is not None
    assert (found.name, found.base_model, found.adapter_path) == ("c", "b", "/x")
    assert store.promoted("other") == VersionRecord("d", "b", None, None)
    assert store.promoted("none") is None


def test_table_view_newest_first_and_limited(db: Database, store: TrainingStore) -> None:
    start = utcnow() - timedelta(days=1)
    with db.session() as session:
        for n in range(3):
            session.add(
                TrainingEnvironment(
                    instance_id=f"e{n}",
                    repo="o/r",
                    store_path="/s",
                    created_at=start + timedelta(hours=n),
                )
            )
    view = store.table_view("training_environments", limit=2)
    assert view.exists and view.columns[0] == "instance_id"
    assert [row[0] for row in view.rows] == ["e2", "e1"]
    assert store.table_view("no_such_table", limit=2).exists is False


def test_environment_row(db: Database, store: TrainingStore) -> None:
    with db.session() as session:
        session.add(TrainingEnvironment(instance_id="e1", repo="o/r", store_path="/s"))
    row = dict(store.environment_row("e1") or [])
    assert (row["repo"], row["store_path"]) == ("o/r", "/s")
    assert store.environment_row("e2") is None


def test_reward_curves_oldest_first_without_empty_runs(db: Database, store: TrainingStore) -> None:
    with db.session() as session:
        for curve in ([0.1, 0.5], None, [], [0.2]):
            session.add(
                TrainingRun(base_model="b", output_dir="/o", settings={}, reward_curve=curve)
            )
    curves = store.reward_curves(limit=10)
    assert [(c.run_id, c.rewards) for c in curves] == [(1, [0.1, 0.5]), (4, [0.2])]
    assert [c.run_id for c in store.reward_curves(limit=1)] == [4]


def test_views_of_a_missing_table_are_empty(db: Database, store: TrainingStore) -> None:
    with db.engine.begin() as conn:
        conn.execute(text("DROP TABLE training_runs"))
    assert store.reward_curves(limit=10) == []


@pytest.mark.parametrize("instance_id", ["toy__toy-1", "a.b_c-9", "x" * 200, "..."])
def test_an_instance_id_is_one_safe_path_segment(instance_id: str) -> None:
    assert valid_instance_id(instance_id)


@pytest.mark.parametrize(
    "instance_id",
    ["", ".", "..", "../toy__toy-1", "a/b", "a b", "x" * 201, "café", "toy__toy-1\n"],
)
def test_ids_that_could_leave_their_folder_are_refused(instance_id: str) -> None:
    """The one rule the environment folders, the index and the dashboard's re-validation
    apply (trainer/envs/folders.py refuses the same ids)."""
    assert not valid_instance_id(instance_id)
