"""What each pipeline leaves in its job's ``result`` column, pinned key for key and in key
order: rows outlive the code that wrote them, so a change of a record's shape must show
up here, not in an old row a newer reader cannot read."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

import worker.pipelines  # noqa: F401  (registers the pipelines)
from bot.forges.base import PullRequestRef
from bot.runtime import Runtime
from bot.store.jobs import JobSpec
from bot.store.payloads import CommandOrder
from bot.store.records import SolveRecord
from tests.unit.worker.pipelines.conftest import REPO, RepoWorld
from tests.unit.worker.pipelines.test_revision import open_pr
from tests.unit.worker.pipelines.test_solve_run import World
from worker.jobs import PIPELINES, JobResult, run_job
from worker.pipelines.outcomes import OutcomeRecorded, Reconciled, reconcile_open_pull_requests
from worker.pipelines.replies import Explained, Replied
from worker.pipelines.slash_commands import CommandDone
from worker.pipelines.solve import SolveRun
from worker.settings import WorkerSettings


@pytest.fixture
def runtime(repo_world: RepoWorld, settings: WorkerSettings) -> Iterator[Runtime[WorkerSettings]]:
    """The worker's runtime on the world's database, with the world's fake as every forge."""
    built = Runtime.open(settings, forges=repo_world.forges)  # type: ignore[arg-type]
    yield built
    built.db.dispose()


def _stored(runtime: Runtime[WorkerSettings], job_id: str) -> list[tuple[str, Any]]:
    """The job's stored result as (key, value) pairs in stored order, after a successful run."""
    assert run_job(runtime, job_id) == "succeeded"
    result = runtime.store.get(job_id).result
    assert isinstance(result, dict)
    return list(result.items())


def _finished_solve(world: RepoWorld, pr_number: int, diff: str) -> str:
    """A succeeded solve job behind ``pr_number`` whose record holds ``diff``."""
    ctx = world.job("solve", pr_number=pr_number)
    world.store.record_solve(ctx.job.id, SolveRecord(diff=diff, turns=1))
    world.end(ctx.job.id)
    return ctx.job.id


def _merge(world: RepoWorld, number: int) -> None:
    pr = world.forge.pulls[number]
    world.forge.pulls[number] = dataclasses.replace(pr, state="merged", merged_by="maya")


def test_help_stores_that_it_replied(repo_world: RepoWorld, runtime: Runtime) -> None:
    job = repo_world.job("help")
    assert _stored(runtime, job.job.id) == [("replied", True)]


def test_explain_without_a_run_stores_that_it_explained_nothing(
    repo_world: RepoWorld, runtime: Runtime
) -> None:
    job = repo_world.job("explain")
    assert _stored(runtime, job.job.id) == [("explained", False)]


def test_a_stop_with_nothing_running_stores_no_cancel_and_no_start(
    repo_world: RepoWorld, runtime: Runtime
) -> None:
    job = repo_world.job("command", payload=CommandOrder("stop", None))
    assert _stored(runtime, job.job.id) == [
        ("command", "stop"),
        ("cancelled", None),
        ("started", None),
    ]


def test_a_retry_stores_the_job_it_stopped_and_the_one_it_started(
    repo_world: RepoWorld, runtime: Runtime
) -> None:
    running = repo_world.job("solve")
    retry = repo_world.job("command", payload=CommandOrder("retry", running.job.id))
    stored = _stored(runtime, retry.job.id)
    started = runtime.store.get(running.job.id).superseded_by
    assert started is not None
    assert stored == [("command", "retry"), ("cancelled", running.job.id), ("started", started)]


def test_an_outcome_stores_the_pr_its_state_revisions_and_similarity(
    repo_world: RepoWorld, runtime: Runtime
) -> None:
    number = open_pr(repo_world)
    diff = repo_world.forge.get_pull_request_diff(PullRequestRef(REPO, number))
    _finished_solve(repo_world, number, diff)
    _merge(repo_world, number)
    job = repo_world.job("outcome", pr_number=number)
    assert _stored(runtime, job.job.id) == [
        ("pr", number),
        ("state", "merged"),
        ("revisions", 0),
        ("diff_similarity", 1.0),
    ]


def test_an_outcome_of_a_closed_pr_stores_no_similarity(
    repo_world: RepoWorld, runtime: Runtime
) -> None:
    number = open_pr(repo_world)
    pr = repo_world.forge.pulls[number]
    repo_world.forge.pulls[number] = dataclasses.replace(pr, state="closed")
    job = repo_world.job("outcome", pr_number=number)
    assert _stored(runtime, job.job.id) == [
        ("pr", number),
        ("state", "closed"),
        ("revisions", 0),
        ("diff_similarity", None),
    ]


def test_reconcile_counts_the_prs_it_asked_about_and_those_it_recorded(
    repo_world: RepoWorld, runtime: Runtime
) -> None:
    merged, still_open = open_pr(repo_world), 99
    _finished_solve(repo_world, merged, "")
    _merge(repo_world, merged)
    with repo_world.store.db.session() as session:
        # A bot PR the forge still shows open: asked about, not recorded.
        spec = JobSpec("revise", "github", REPO.full_name, issue_number=2, pr_number=still_open)
        assert repo_world.store.create(session, spec) is not None
    repo_world.forge.pulls[still_open] = dataclasses.replace(
        repo_world.forge.pulls[merged], ref=PullRequestRef(REPO, still_open), state="open"
    )
    counts = reconcile_open_pull_requests(runtime)
    assert list(counts.to_json().items()) == [("checked", 2), ("repaired", 1)]


def test_a_published_solve_stores_its_record_with_the_prs_fields_and_no_plan(
    repo_world: RepoWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(repo_world.forge, repo_world.store, repo_world.settings)
    parts = world.parts()
    monkeypatch.setitem(PIPELINES, "solve", lambda ctx: SolveRun(ctx, parts).run())
    runtime = Runtime(world.settings, world.store.db, world.store, world.forges)  # type: ignore[arg-type]
    ctx = world.job()
    stored = dict(_stored(runtime, ctx.job.id))
    assert list(stored) == [
        "version",
        "task",
        "branch",
        "setup",
        "sandbox_image",
        "exit_reason",
        "diff",
        "turns",
        "trajectory_path",
        "gates",
        "gates_summary",
        "pr_number",
        "pr_url",
        "head_sha",
        "timings",
        "withheld",
        "base_sha",
    ]
    [pr] = world.forge.pulls.values()
    assert (stored["pr_number"], stored["pr_url"]) == (pr.ref.number, pr.url)
    assert stored["head_sha"] == world.forge.branch_sha(pr.head_branch)
    assert stored["base_sha"] == stored["task"]["base_sha"]
    # Read back and written again, the row is the same, key for key and in key order.
    assert list(SolveRecord.from_json(stored).to_json().items()) == list(stored.items())


@pytest.mark.parametrize(
    ("record", "stored"),
    [
        (Replied(), {"replied": True}),
        (Explained(True), {"explained": True}),
        (Explained(False), {"explained": False}),
        (CommandDone("stop", "j1", None), {"command": "stop", "cancelled": "j1", "started": None}),
        (
            CommandDone("revise", None, "j2"),
            {"command": "revise", "cancelled": None, "started": "j2"},
        ),
        (
            OutcomeRecorded(7, "merged", 2, 0.8125),
            {"pr": 7, "state": "merged", "revisions": 2, "diff_similarity": 0.8125},
        ),
        (
            OutcomeRecorded(8, "closed", 0, None),
            {"pr": 8, "state": "closed", "revisions": 0, "diff_similarity": None},
        ),
        (Reconciled(3, 0), {"checked": 3, "repaired": 0}),
    ],
)
def test_each_record_writes_the_json_its_pipeline_wrote_as_a_dict(
    record: JobResult, stored: dict[str, Any]
) -> None:
    assert list(record.to_json().items()) == list(stored.items())
