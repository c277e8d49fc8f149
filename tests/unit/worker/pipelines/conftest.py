"""One repository on the fake forge and a job store, for the pipelines' parts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.forges.base import RepoRef
from bot.store.db import Database
from bot.store.jobs import JobSpec, JobState, JobStore
from tests.fakes import FakeForge, git, make_git_repo
from tests.plugins.e2e import ISSUE, REPO_FILES
from worker.jobs import JobContext
from worker.settings import WorkerSettings

REPO = RepoRef("github", "acme/calc")


@dataclass
class RepoWorld:
    forge: FakeForge
    store: JobStore
    settings: WorkerSettings
    # What each job asked its forge factory for: (forge, installation id).
    forge_calls: list[tuple[str, int | None]] = field(default_factory=list)

    def forges(self, forge: str, *, installation_id: int | None = None) -> FakeForge:
        """The jobs' forge factory: the world's fake, whatever they ask for."""
        self.forge_calls.append((forge, installation_id))
        return self.forge

    def job(self, kind: str = "solve", actor: str = "maya", **spec: Any) -> JobContext:
        """A new job on issue 1 (``spec``: more JobSpec fields), as the worker hands it out."""
        with self.store.db.session() as session:
            job = self.store.create(
                session,
                JobSpec(kind, "github", REPO.full_name, issue_number=1, actor=actor, **spec),  # type: ignore[arg-type]
            )
            assert job is not None
            job_id = job.id
        return self.context(job_id)

    def context(self, job_id: str) -> JobContext:
        """The job as stored now (what a rerun of it starts from)."""
        return JobContext(
            job=self.store.get(job_id),
            settings=self.settings,
            store=self.store,
            forges=self.forges,  # type: ignore[arg-type]
        )

    def end(self, job_id: str, state: JobState = "succeeded") -> None:
        """Run the job to ``state``, so that another may start on the issue."""
        self.store.transition(job_id, "running")
        self.store.transition(job_id, state)


@pytest.fixture
def repo_world(tmp_path: Path, settings: WorkerSettings) -> Iterator[RepoWorld]:
    src = tmp_path / "src"
    make_git_repo(src, REPO_FILES)
    bare = tmp_path / "calc.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    forge = FakeForge(bare)
    forge.add_issue(1, *ISSUE)
    db = Database(settings.effective_database_url)
    db.migrate()
    yield RepoWorld(forge, JobStore(db), settings)
    db.dispose()
