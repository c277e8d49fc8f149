"""Mirror the on-disk environment store into the ``training_environments`` table, so
dashboards and workers can see what exists without reading the store's files."""

from __future__ import annotations

from sqlalchemy import delete, select

from bot.store.db import Database
from trainer.envs.storage import EnvironmentStore
from trainer.store import TrainingEnvironment


def sync_index(db: Database, store: EnvironmentStore) -> int:
    """Upsert every stored environment, drop rows of environments gone from this store;
    returns how many are indexed."""
    envs = {e.instance_id: e for e in store}
    root = str(store.root.resolve())
    with db.session() as s:
        rows = {r.instance_id: r for r in s.scalars(select(TrainingEnvironment))}
        for instance_id, env in envs.items():
            row = rows.get(instance_id)
            if row is None:
                row = TrainingEnvironment(instance_id=instance_id, repo=env.repo, store_path=root)
                s.add(row)
            row.repo, row.split, row.store_path = env.repo, env.split, root
            row.calibration_k = env.calibration.k
            row.calibration_solved = env.calibration.solved
        gone = [i for i, r in rows.items() if r.store_path == root and i not in envs]
        if gone:
            s.execute(delete(TrainingEnvironment).where(TrainingEnvironment.instance_id.in_(gone)))
    return len(envs)
