from __future__ import annotations

import shutil
from pathlib import Path

from sqlalchemy import select

from bot.store.db import Database
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.index import sync_index
from trainer.envs.schema import Calibration, Environment
from trainer.store import TrainingEnvironment


def _env(instance_id: str, patch: str) -> Environment:
    return Environment(
        instance_id=instance_id,
        repo="acme/calc",
        base_commit="a" * 40,
        problem_statement="x",
        patch=patch,
        test_patch="",
        FAIL_TO_PASS=["t"],
        PASS_TO_PASS=[],
    )


def test_index_follows_the_store(tmp_path: Path) -> None:
    db = Database("sqlite://")
    db.migrate()
    store = EnvironmentFolders(tmp_path / "store")
    store.add(_env("e1", "p1"))
    store.add(_env("e2", "p2"))
    assert sync_index(db, store) == 2
    store.update(
        store.get("e1").model_copy(
            update={"split": "heldout", "calibration": Calibration(k=4, solved=1)}
        )
    )
    shutil.rmtree(tmp_path / "store" / "envs" / "e2")
    assert sync_index(db, store) == 1
    with db.session() as s:
        rows = list(s.scalars(select(TrainingEnvironment)))
    assert [(r.instance_id, r.split, r.calibration_k, r.calibration_solved) for r in rows] == [
        ("e1", "heldout", 4, 1)
    ]
    db.dispose()
