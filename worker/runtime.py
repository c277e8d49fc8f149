"""What one worker process builds once and every task in it shares."""

from __future__ import annotations

from dataclasses import dataclass

from bot.store.db import Database
from bot.store.jobs import JobStore, Limits
from worker.settings import WorkerSettings as Settings  # bot's plus the worker's sections


@dataclass
class WorkerRuntime:
    settings: Settings
    db: Database
    store: JobStore

    @classmethod
    def build(cls, settings: Settings) -> WorkerRuntime:
        db = Database(settings.effective_database_url)
        db.migrate()
        return cls(settings=settings, db=db, store=JobStore(db))

    @property
    def limits(self) -> Limits:
        adm = self.settings.admission
        return Limits(
            max_concurrent=adm.max_concurrent_jobs,
            max_concurrent_per_repo=adm.max_concurrent_jobs_per_repo,
        )
