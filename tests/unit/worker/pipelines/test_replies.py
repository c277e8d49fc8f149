"""The short replies (help, explain) and the one write-access check that the commands and
the solve run share, on the fake forge and a real job store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from bot.forges.base import IssueRef
from bot.store.jobs import JobSpec
from bot.store.payloads import UnknownWord
from bot.store.records import SolveRecord
from bot.store.records.trajectory import ToolCall, Trajectory, TurnRecord
from tests.unit.worker.pipelines.conftest import REPO, RepoWorld
from worker.jobs import JobContext, JobRefused
from worker.pipelines.replies import (
    HELP,
    MAX_STEPS,
    WRITE_ACCESS_REFUSAL,
    Explained,
    Replied,
    check_actor,
    explain,
    help_reply,
    reply_target,
    summarize_trajectory,
)


@pytest.fixture
def forge_calls(repo_world: RepoWorld) -> list[tuple[str, int | None]]:
    """The replies' forge is the world's fake, from the job's forge factory; what each job
    asked that factory for is kept."""
    return repo_world.forge_calls


def _job(world: RepoWorld, forge: str = "github", **spec: Any) -> JobContext:
    with world.store.db.session() as session:
        job = world.store.create(session, JobSpec(forge=forge, repo=REPO.full_name, **spec))
        assert job is not None
        job_id = job.id
    return world.context(job_id)


def _turn(index: int, *calls: tuple[str, dict[str, Any]]) -> TurnRecord:
    return TurnRecord(
        index=index,
        content="",
        reasoning=None,
        tool_calls=[ToolCall(f"c{index}-{i}", name, args) for i, (name, args) in enumerate(calls)],
        observations=[],
        finish_reason="stop",
    )


def _recorded_run(world: RepoWorld, tmp_path: Path, turns: list[TurnRecord], diff: str) -> None:
    """An earlier solve job on issue 1 that stored its trajectory and diff."""
    path = tmp_path / "trajectory.jsonl"
    Trajectory(messages=[], tools=[], turns=turns, exit_reason="agent").write_jsonl(path)
    solve = world.job("solve")
    world.store.record_solve(
        solve.job.id, SolveRecord(trajectory_path=str(path), diff=diff, turns=len(turns))
    )
    world.end(solve.job.id)


# -- the write-access check --------------------------------------------------------------


def test_a_writer_passes_the_check(repo_world: RepoWorld) -> None:
    check_actor(repo_world.job("help", actor="maya"), repo_world.forge)
    assert repo_world.forge.calls == ["has_write_access"]


def test_someone_without_write_access_is_refused_by_name(repo_world: RepoWorld) -> None:
    def refused_count() -> float:
        labels = {"kind": "help"}
        return REGISTRY.get_sample_value("ribbit_outsider_jobs_refused_total", labels) or 0.0

    before = refused_count()
    with pytest.raises(JobRefused) as refused:
        check_actor(repo_world.job("help", actor="otto"), repo_world.forge)
    assert str(refused.value) == f"otto {WRITE_ACCESS_REFUSAL}"
    assert refused_count() - before == 1  # an outsider's attempt, counted


def test_a_job_without_an_actor_is_refused_without_asking_the_forge(
    repo_world: RepoWorld,
) -> None:
    with pytest.raises(JobRefused):
        check_actor(_job(repo_world, kind="help", issue_number=1), repo_world.forge)
    assert repo_world.forge.calls == []


# -- where a reply goes ------------------------------------------------------------------


def test_on_github_a_reply_goes_to_the_pull_request_the_command_was_written_on(
    repo_world: RepoWorld, forge_calls: list[tuple[Any, ...]]
) -> None:
    ctx = _job(repo_world, kind="help", issue_number=1, pr_number=7, installation_id=42)
    forge, target = reply_target(ctx)
    assert forge is repo_world.forge and forge_calls == [("github", 42)]
    assert target == IssueRef(REPO, 7)


def test_on_gitlab_a_reply_goes_to_the_issue_the_merge_request_works_on(
    repo_world: RepoWorld, forge_calls: list[tuple[Any, ...]]
) -> None:
    ctx = _job(repo_world, forge="gitlab", kind="help", issue_number=1, pr_number=7)
    _, target = reply_target(ctx)
    assert forge_calls == [("gitlab", None)]
    assert target.number == 1 and target.repo.forge == "gitlab"


# -- help ---------------------------------------------------------------------------------


def test_help_lists_the_commands(repo_world: RepoWorld, forge_calls: list[Any]) -> None:
    assert help_reply(repo_world.job("help")) == Replied()
    assert list(repo_world.forge.comments.values()) == [HELP]


def test_help_names_the_word_that_is_no_command(
    repo_world: RepoWorld, forge_calls: list[Any]
) -> None:
    help_reply(repo_world.job("help", payload=UnknownWord("deploy")))
    [body] = repo_world.forge.comments.values()
    assert body == f"I don't know the command `deploy`.\n\n{HELP}"


def test_help_is_not_posted_for_someone_without_write_access(
    repo_world: RepoWorld, forge_calls: list[Any]
) -> None:
    with pytest.raises(JobRefused):
        help_reply(repo_world.job("help", actor="otto"))
    assert repo_world.forge.comments == {}


# -- explain ------------------------------------------------------------------------------


def test_explain_without_a_recorded_run_says_so(
    repo_world: RepoWorld, forge_calls: list[Any]
) -> None:
    assert explain(repo_world.job("explain")) == Explained(False)
    assert list(repo_world.forge.comments.values()) == [
        "There is no recorded agent run for this issue yet."
    ]


def test_explain_summarises_the_latest_run_and_names_what_it_changed(
    repo_world: RepoWorld, forge_calls: list[Any], tmp_path: Path
) -> None:
    turns = [
        _turn(0, ("Bash", {"command": "pytest -q"}), ("Read", {"file_path": "/workspace/calc.py"})),
        _turn(1, ("Grep", {"pattern": "def add"}), ("Submit", {})),
    ]
    diff = "--- a/calc.py\n+++ b/calc.py\n@@\n-x\n+y\n"
    _recorded_run(repo_world, tmp_path, turns, diff)
    assert explain(repo_world.job("explain")) == Explained(True)
    [body] = repo_world.forge.comments.values()
    assert body == (
        "**What the agent did** (ended: `agent`, 2 turns)\n\n"
        '1. `Bash` "pytest -q"\n'
        '2. `Read` "/workspace/calc.py"\n'
        '3. `Grep` "def add"\n'
        '4. `Submit` ""\n\n'
        "**Changed:** `calc.py`"
    )


def test_explain_makes_the_models_text_inert_before_posting(
    repo_world: RepoWorld, forge_calls: list[Any], tmp_path: Path
) -> None:
    _recorded_run(
        repo_world, tmp_path, [_turn(0, ("Bash", {"command": "echo @maya fixes #3"}))], ""
    )
    explain(repo_world.job("explain"))
    [body] = repo_world.forge.comments.values()
    assert "@maya" not in body and "@\u200bmaya" in body
    assert "fixes #3" not in body


def test_a_long_run_is_cut_at_max_steps_and_says_how_many_more(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    turns = [_turn(i, ("Bash", {"command": f"step {i}"})) for i in range(MAX_STEPS + 5)]
    Trajectory(messages=[], tools=[], turns=turns, exit_reason="max_turns").write_jsonl(path)
    lines = summarize_trajectory(path).splitlines()
    assert lines[2] == '1. `Bash` "step 0"'
    assert lines[-2] == f'{MAX_STEPS}. `Bash` "step {MAX_STEPS - 1}"'
    assert lines[-1] == "… and 5 more tool calls"
