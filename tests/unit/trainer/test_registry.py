from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.store.db import Database
from trainer.promotion import JUDGE_VERSION
from trainer.registry import RegistryError, promote, promoted_model, register, rollback, versions
from trainer.store import ScoredEnv, TrainerStore


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()  # the real migrations, 0002 included
    yield database
    database.dispose()


def _register(db: Database, name: str, rate: float | None) -> None:
    register(
        db,
        name,
        base_model="base",
        adapter_path=f"/ckpt/{name}",
        heldout_pass_rate=rate,
        heldout_envs=10,
    )


def _score(db: Database, subject: str, solved: list[int], k: int = 1) -> None:
    """``subject``'s held-out results on the default line: env-i solved solved[i] of k."""
    TrainerStore(db).record_results(
        subject,
        "default",
        [ScoredEnv(f"env-{i}", f"hash-{i}", k, c, JUDGE_VERSION) for i, c in enumerate(solved)],
        judge=JUDGE_VERSION,
    )


def test_promote_only_if_better_then_roll_back(db: Database) -> None:
    # Changed on purpose (#33): "not worse" promoted ties; now a candidate must win the
    # paired test against the promoted version (or the base, for the first).
    assert promoted_model(db) is None
    _register(db, "v1", 0.5)
    _register(db, "v2", 0.2)
    _register(db, "v3", 0.9)
    _score(db, "base:base", [0] * 40)
    _score(db, "v1", [1] * 20 + [0] * 20)
    _score(db, "v2", [1] * 10 + [0] * 30)
    _score(db, "v3", [1] * 36 + [0] * 4)
    promote(db, "v1")
    with pytest.raises(RegistryError, match="v2 is not better than v1"):
        promote(db, "v2")
    promote(db, "v3")
    current = promoted_model(db)
    assert current is not None and current.name == "v3" and current.adapter_path == "/ckpt/v3"
    assert {v.name: v.state for v in versions(db)} == {
        "v1": "retired",
        "v2": "candidate",
        "v3": "promoted",
    }

    previous = rollback(db)
    assert previous is not None and previous.name == "v1"
    assert promoted_model(db).name == "v1"  # type: ignore[union-attr]
    assert rollback(db) is None  # back to the base model
    assert promoted_model(db) is None
    with pytest.raises(RegistryError, match="nothing to roll back"):
        rollback(db)


def test_promotion_needs_a_score_unless_forced(db: Database) -> None:
    _register(db, "v1", None)
    with pytest.raises(RegistryError, match="no per-environment results, re-score"):
        promote(db, "v1")
    promote(db, "v1", force=True)
    assert promoted_model(db).name == "v1"  # type: ignore[union-attr]


def test_bad_names_and_duplicates_are_refused(db: Database) -> None:
    with pytest.raises(RegistryError, match="not a valid version name"):
        _register(db, "../evil", 0.1)
    _register(db, "v1", 0.1)
    with pytest.raises(RegistryError, match="already exists"):
        _register(db, "v1", 0.1)
    with pytest.raises(RegistryError, match="no version"):
        promote(db, "nope")


def test_a_version_is_registered_only_with_an_absolute_adapter_path(db: Database) -> None:
    # Relative to the registering process's folder, it names nothing for a worker.
    with pytest.raises(RegistryError, match="the adapter path must be absolute; got 'run/adapter'"):
        register(db, "v1", base_model="org/base", adapter_path="run/adapter")
    assert register(db, "v1", base_model="org/base", adapter_path="/runs/adapter").name == "v1"
