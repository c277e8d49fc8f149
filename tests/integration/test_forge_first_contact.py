"""The trigger label is created on a repository's first job, through each real forge client
against the local forge: once per repository, an existing label left as it is, and a
forge that refuses or is down never failing the job."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from bot.forges import make_forge
from bot.forges.base import FORGE_NAMES, LABEL_COLOR, ForgeName, ForgePermissionDenied
from bot.runtime import Runtime
from bot.store.jobs import JobSpec
from tests.plugins.forge import ForgeWorld
from worker import jobs as jobs_mod
from worker.jobs import run_job
from worker.pipelines.replies import Replied
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration
LABELS = r"/labels"


@pytest.fixture
def runtime(forge_settings: WorkerSettings) -> Iterator[Runtime[WorkerSettings]]:
    rt = Runtime.open(forge_settings)
    yield rt
    rt.db.dispose()


@pytest.fixture(autouse=True)
def pipelines(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every job a reply that does nothing: what is tested is what runs before it."""
    table: dict[str, Any] = {"help": lambda ctx: Replied()}
    monkeypatch.setattr(jobs_mod, "PIPELINES", table)
    return table


def _job(rt: Runtime[WorkerSettings], world: ForgeWorld, kind: ForgeName, issue: int) -> str:
    with rt.db.session() as session:
        job = rt.store.create(
            session,
            JobSpec(kind="help", forge=kind, repo=world.repo(kind).full_name, issue_number=issue),
        )
        assert job is not None
        return job.id


def _label_requests(world: ForgeWorld) -> int:
    return sum(world.forge.request_count(m, LABELS) for m in ("GET", "POST"))


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_first_job_creates_the_label_and_later_jobs_do_not_ask(
    forge_world: ForgeWorld, runtime: Runtime[WorkerSettings], kind: ForgeName
) -> None:
    world = forge_world
    repo = world.forge.repo(kind, world.repo(kind).full_name)
    assert "ribbit" not in repo.labels

    assert run_job(runtime, _job(runtime, world, kind, 1)) == "succeeded"

    assert repo.labels["ribbit"].lstrip("#") == LABEL_COLOR
    asked = _label_requests(world)
    assert world.forge.request_count("POST", LABELS) == 1
    assert run_job(runtime, _job(runtime, world, kind, 2)) == "succeeded"
    assert _label_requests(world) == asked  # once per repository, not once per job


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_an_existing_label_is_left_as_it_is(
    forge_world: ForgeWorld, runtime: Runtime[WorkerSettings], kind: ForgeName
) -> None:
    world = forge_world
    repo = world.forge.repo(kind, world.repo(kind).full_name)
    repo.labels["ribbit"] = "ff0000"

    assert run_job(runtime, _job(runtime, world, kind, 1)) == "succeeded"

    assert repo.labels == {"ribbit": "ff0000"}
    assert world.forge.request_count("POST", LABELS) == 0


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_a_refusal_is_logged_and_the_job_goes_on(
    forge_world: ForgeWorld,
    runtime: Runtime[WorkerSettings],
    kind: ForgeName,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = forge_world
    full_name = world.repo(kind).full_name
    # Reading is not enough to create labels on either forge.
    world.forge.add_collaborator(kind, full_name, world.bot.login, "read")

    with caplog.at_level(logging.WARNING, logger="worker.first_contact"):
        assert run_job(runtime, _job(runtime, world, kind, 1)) == "succeeded"

    assert "ribbit" not in world.forge.repo(kind, full_name).labels
    assert "could not create the label 'ribbit'" in caplog.text
    # A refusal does not pass by asking again: the next job does not.
    asked = _label_requests(world)
    assert run_job(runtime, _job(runtime, world, kind, 2)) == "succeeded"
    assert _label_requests(world) == asked


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_a_forge_outage_leaves_the_label_to_the_next_job(
    forge_world: ForgeWorld, runtime: Runtime[WorkerSettings], kind: ForgeName
) -> None:
    world = forge_world
    fault = world.forge.fail_next(LABELS, count=100, status=502)

    assert run_job(runtime, _job(runtime, world, kind, 1)) == "succeeded"
    assert "ribbit" not in world.forge.repo(kind, world.repo(kind).full_name).labels

    fault.count = 0
    assert run_job(runtime, _job(runtime, world, kind, 2)) == "succeeded"
    assert "ribbit" in world.forge.repo(kind, world.repo(kind).full_name).labels


@pytest.mark.parametrize("kind", FORGE_NAMES)
def test_forge_ensure_label_says_whether_it_created_the_label(
    forge_world: ForgeWorld, forge_settings: WorkerSettings, kind: ForgeName
) -> None:
    world = forge_world
    forge = make_forge(forge_settings, kind)

    assert forge.ensure_label(world.repo(kind), "needs triage") is True
    assert forge.ensure_label(world.repo(kind), "needs triage") is False
    assert list(world.forge.repo(kind, world.repo(kind).full_name).labels) == ["needs triage"]

    world.forge.add_collaborator(kind, world.repo(kind).full_name, world.bot.login, "read")
    with pytest.raises(ForgePermissionDenied):
        forge.ensure_label(world.repo(kind), "other")
