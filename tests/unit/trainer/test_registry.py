from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.store.db import Database
from trainer.registry import RegistryError, promote, promoted_model, register, rollback, versions


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


def test_promote_only_if_not_worse_then_roll_back(db: Database) -> None:
    assert promoted_model(db) is None
    _register(db, "v1", 0.3)
    _register(db, "v2", 0.2)
    _register(db, "v3", 0.3)
    promote(db, "v1")
    with pytest.raises(RegistryError, match="worse than the promoted v1"):
        promote(db, "v2")
    promote(db, "v3")  # equal is not worse
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
    with pytest.raises(RegistryError, match="no held-out score"):
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
