"""A run's stages: the job's current stage, timed into the record and the metrics even
when the stage fails; a cancel is noticed as a stage starts."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from tests.unit.worker.pipelines.conftest import RepoWorld
from worker.jobs import JobCancelled
from worker.pipelines.workspace import Stages


def _count(stage: str) -> float:
    labels = {"kind": "solve", "stage": stage}
    return REGISTRY.get_sample_value("ribbit_job_stage_duration_seconds_count", labels) or 0.0


def test_a_stage_is_the_jobs_current_one_and_is_timed_even_when_it_fails(
    repo_world: RepoWorld,
) -> None:
    ctx = repo_world.job()
    stages = Stages(ctx)
    before = _count("gates")
    with stages("clone"):
        assert repo_world.store.get(ctx.job.id).stage == "clone"
    with pytest.raises(RuntimeError), stages("gates"):
        raise RuntimeError("the gates broke")
    assert set(stages.timings) == {"clone", "gates"}
    assert all(seconds >= 0 for seconds in stages.timings.values())
    assert _count("gates") == before + 1


def test_a_cancelled_job_starts_no_stage(repo_world: RepoWorld) -> None:
    ctx = repo_world.job()
    ctx.cancel.set()
    stages = Stages(ctx)
    with pytest.raises(JobCancelled), stages("agent"):
        pass
    assert stages.timings == {}
