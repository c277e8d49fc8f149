"""`/ribbit` commands from someone without write access: whatever order the workers run
a burst of them in, exactly one reply (the forge is a fake; the store is real)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

import worker.pipelines.slash_commands  # noqa: F401  (registers the command pipeline)
from bot.runtime import Runtime
from bot.store.jobs import JobSpec
from bot.store.payloads import CommandOrder
from tests.fakes import FakeForge, git, make_git_repo
from worker.jobs import run_job
from worker.settings import WorkerSettings


@pytest.fixture
def forge(tmp_path: Path) -> FakeForge:
    make_git_repo(tmp_path / "src", {"README.md": "calc\n"})
    git(tmp_path, "clone", "-q", "--bare", str(tmp_path / "src"), str(tmp_path / "calc.git"))
    fake = FakeForge(tmp_path / "calc.git", writers=("maya",))
    fake.add_issue(1, "add() subtracts", "fix it")
    return fake


@pytest.fixture
def runtime(settings: WorkerSettings, forge: FakeForge) -> Iterator[Runtime[WorkerSettings]]:
    """The worker's runtime with the fake as every job's forge."""
    built = Runtime.open(settings, forges=lambda *a, **kw: forge)  # type: ignore[arg-type,return-value]
    yield built
    built.db.dispose()


def _commands(runtime: Runtime, n: int, actor: str, issue_title: str | None = None) -> list[str]:
    """``n`` queued ``/ribbit retry`` command jobs on issue 1 of acme/calc, by ``actor``."""
    ids = []
    for _ in range(n):
        with runtime.db.session() as session:
            job = runtime.store.create(
                session,
                JobSpec(
                    "command",
                    "github",
                    "acme/calc",
                    issue_number=1,
                    issue_title=issue_title,
                    actor=actor,
                    payload=CommandOrder("retry", None),
                ),
            )
            assert job is not None
            ids.append(job.id)
    return ids


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_an_outsiders_burst_of_commands_gets_one_reply_in_any_run_order(
    runtime: Runtime, forge: FakeForge, order: tuple[int, ...]
) -> None:
    # The earliest command may run last (two pool threads, a redelivered message): those
    # that ran before it stayed silent for it, so it must not count them as having told.
    ids = _commands(runtime, 3, actor="otto")
    for i in order:
        assert run_job(runtime, ids[i]) == "failed"
    assert len(forge.comments) == 1
    [reply] = forge.comments.values()
    assert reply.startswith("@otto: only collaborators with write access")
    # A later command on the issue is refused in silence: they were told once.
    [later] = _commands(runtime, 1, actor="otto")
    assert run_job(runtime, later) == "failed" and len(forge.comments) == 1


def test_a_retry_starts_a_job_that_keeps_the_issue_title(runtime: Runtime) -> None:
    # Intake kept the title on the command job: the job it starts names the issue on its
    # pages even if it fails before the worker reads the issue.
    [command_id] = _commands(runtime, 1, actor="maya", issue_title="add() subtracts")
    assert run_job(runtime, command_id) == "succeeded"
    [solve] = [j for j in runtime.store.list() if j.kind == "solve"]
    assert solve.issue_title == "add() subtracts"
