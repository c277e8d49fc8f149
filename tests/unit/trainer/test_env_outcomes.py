"""Environments from the outcome store: a merged bot PR builds, a closed one is kept as a
negative example with its review comments, an outcome without a base commit is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.db import Database
from bot.store.models import Job, Outcome
from tests.fakes import git
from tests.plugins.trainer import PYTEST, FixRepo, sandbox_factory
from trainer.envs.builder import EnvironmentBuilder
from trainer.envs.outcomes import environments_from_outcomes
from trainer.envs.storage import EnvironmentStore
from worker.agent import Trajectory


@pytest.fixture
def db() -> Iterator[Database]:
    database = Database("sqlite://")
    database.migrate()
    yield database
    database.dispose()


def test_outcomes_to_environments(db: Database, fix_with_new_test: FixRepo, tmp_path: Path) -> None:
    repo = fix_with_new_test
    merged_diff = git(repo.path, "diff", repo.base, repo.fix) + "\n"
    traj_path = tmp_path / "job1.jsonl"
    Trajectory(
        messages=[],
        tools=[],
        task={"title": "add is wrong", "body": "add(2, 3) is -1"},
    ).write_jsonl(traj_path)
    with db.session() as s:
        for job_id in ("job1", "job2"):
            s.add(
                Job(
                    id=job_id,
                    kind="solve",
                    state="succeeded",
                    forge="github",
                    repo="acme/calc",
                    result={"base_sha": repo.base, "trajectory_path": str(traj_path)},
                )
            )
        s.add(
            Outcome(
                forge="github",
                repo="acme/calc",
                pr_number=1,
                job_id="job1",
                state="merged",
                merged_diff=merged_diff,
                review_comments={"comments": [{"body": "also check negatives"}], "reviews": []},
            )
        )
        s.add(
            Outcome(
                forge="github",
                repo="acme/calc",
                pr_number=2,
                job_id="job2",
                state="closed",
                review_comments={"comments": [], "reviews": [{"body": "wrong approach"}]},
            )
        )
        s.add(
            Outcome(
                forge="github",
                repo="acme/calc",
                pr_number=3,
                state="merged",
                human_authored=True,
                merged_diff=merged_diff,
            )
        )
    store = EnvironmentStore(tmp_path / "store")
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=60)

    report = environments_from_outcomes(
        db, "acme/calc", repo.path, builder, store, test_command=PYTEST
    )

    (env,) = report.built
    assert env.FAIL_TO_PASS == ["tests/test_add.py::test_add"]
    assert env.problem_statement == "add is wrong\n\nadd(2, 3) is -1"
    assert env.hints_text == "also check negatives"
    assert env.provenance.source == "outcome" and env.provenance.author == "bot"
    assert store.get(env.instance_id) == env
    reasons = {r.candidate: r for r in store.rejections()}
    assert reasons["acme/calc#2"].reason == "pr_not_merged"
    assert reasons["acme/calc#2"].negative_trajectory == str(traj_path)
    assert reasons["acme/calc#2"].hints == ["wrong approach"]
    assert reasons["acme/calc#3"].reason == "no_base_commit"

    # Running it again finds the environment already stored.
    again = environments_from_outcomes(
        db, "acme/calc", repo.path, builder, store, test_command=PYTEST
    )
    assert not again.built and "duplicate" in {r.reason for r in again.rejected}
