"""Mirror the environment folders on disk (trainer/envs/folders.py) into the
``training_environments`` table, so dashboards and workers can see what exists without
reading the folders' files."""

from __future__ import annotations

from bot.store.db import Database
from trainer.envs.folders import EnvironmentFolders
from trainer.store import IndexEntry, TrainerStore


def sync_index(db: Database, store: EnvironmentFolders) -> int:
    """Upsert every stored environment, drop rows of environments gone from this store;
    returns how many are indexed."""
    entries = [
        IndexEntry(e.instance_id, e.repo, e.split, e.calibration.k, e.calibration.solved)
        for e in store
    ]
    TrainerStore(db).index_environments(str(store.root.resolve()), entries)
    return len({e.instance_id for e in entries})
