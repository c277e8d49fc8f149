from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.store.records.trajectory import (
    SCHEMA_VERSION,
    ToolCall,
    TrajectoryFormatError,
    TurnRecord,
)
from tests.fakes import local_sandboxes, record_replay
from worker.agent import AgentTask, Trajectory, read_jsonl, write_jsonl
from worker.agent.cli import execute, read_issue_file, run, with_checkout_facts
from worker.settings import AgentSettings, ModelSettings

EDIT = (
    "<tool_call>\n<function=Edit>\n<parameter=file_path>\ncalc.py\n</parameter>\n"
    "<parameter=old_string>\nreturn a - b\n</parameter>\n<parameter=new_string>\n"
    "return a + b\n</parameter>\n<parameter=replace_all>\ntrue\n</parameter>\n</function>\n"
    "</tool_call>"
)


def test_read_issue_file_json_and_text(tmp_path: Path) -> None:
    j = tmp_path / "issue.json"
    j.write_text(
        json.dumps(
            {
                "title": "Bug",
                "body": "It breaks.",
                "test_command": "make test",
                "comments": [{"author": "ann", "body": "Me too."}],
                "repo": "acme/calc",
                "number": 12,
            }
        )
    )
    task = read_issue_file(j)
    assert (task.title, task.body, task.test_command) == ("Bug", "It breaks.", "make test")
    assert (task.repo, task.number) == ("acme/calc", 12)
    assert task.comments[0].author == "ann"
    t = tmp_path / "issue.md"
    t.write_text("# add() subtracts\n\nSee calc.py.\n")
    assert read_issue_file(t) == AgentTask(title="add() subtracts", body="See calc.py.")


def test_ribbit_run_reads_the_footer_facts_from_the_checkout(repo: Path, tmp_path: Path) -> None:
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    head = git("rev-parse", "HEAD")
    untagged = with_checkout_facts(AgentTask("t", "b", repo="acme/calc", number=4), repo)
    assert (untagged.base_commit, untagged.version) == (head, None)
    git("tag", "v1.2")
    tagged = with_checkout_facts(AgentTask("t", "b"), repo)
    assert (tagged.base_commit, tagged.version) == (head, "v1.2")
    given = with_checkout_facts(AgentTask("t", "b", base_commit="abc", version="9"), repo)
    assert (given.base_commit, given.version) == ("abc", "9")  # the issue file wins
    assert with_checkout_facts(AgentTask("t", "b"), tmp_path).base_commit is None  # no git


def test_cli_execute_with_replay(repo: Path, tmp_path: Path) -> None:
    replay = record_replay(repo, tmp_path / "rec.jsonl", [EDIT, "done"], AgentTask("t", "b"))
    out = tmp_path / "out.jsonl"
    episode = execute(
        AgentTask("t", "b"),
        repo,
        ModelSettings(policy="replay", replay_file=replay),
        AgentSettings(),
        local_sandboxes(),
        out,
    )
    assert episode.setup.ok and episode.agent is not None
    result = episode.agent
    assert result.exit_reason == "agent"
    assert "+    return a + b" in result.diff
    assert (repo / "calc.py").read_text().count("a - b") == 2  # the checkout is untouched
    assert read_jsonl(out)[0].diff == result.diff


def test_cli_command_help() -> None:
    out = CliRunner().invoke(run, ["--help"])
    assert out.exit_code == 0
    for flag in (
        "--checkout",
        "--issue-file",
        "--policy",
        "--model",
        "--replay",
        "--trajectory-out",
        "--backend",
    ):
        assert flag in out.output
    # The directory's old spelling still works for a release, but is not offered.
    assert "--repo" not in out.output


def _trajectory() -> Trajectory:
    turns = [
        TurnRecord(
            0,
            "",
            "think",
            [ToolCall("c0", "Glob", {"pattern": "*"})],
            [],
            "stop",
            prompt_token_ids=[1, 2, 3],
            completion_token_ids=[4, 5],
            completion_logprobs=[-0.1, -0.2],
        ),
        TurnRecord(
            1,
            "done",
            None,
            [],
            [],
            "stop",
            prompt_token_ids=[1, 2, 3, 4, 5, 6, 7],
            completion_token_ids=[8],
            completion_logprobs=[-0.3],
        ),
        TurnRecord(
            2,
            "again",
            None,
            [],
            [],
            "stop",
            prompt_token_ids=[9, 9],
            completion_token_ids=[10],
            completion_logprobs=[-0.4],
        ),
    ]
    return Trajectory(
        messages=[{"role": "user", "content": "x"}],
        tools=[],
        turns=turns,
        exit_reason="agent",
        policy="transformers",
        model="m",
    )


def test_trajectory_json_round_trip(tmp_path: Path) -> None:
    traj = _trajectory()
    back = Trajectory.from_json(traj.to_json())
    assert back == traj
    path = tmp_path / "many.jsonl"
    write_jsonl(path, [traj, traj])
    assert read_jsonl(path) == [traj, traj]
    assert json.loads(traj.to_json())["schema_version"] == SCHEMA_VERSION


def test_trajectory_refuses_unknown_versions_and_shapes(tmp_path: Path) -> None:
    data = json.loads(_trajectory().to_json())
    with pytest.raises(TrajectoryFormatError, match="schema_version 99"):
        Trajectory.from_dict({**data, "schema_version": 99})
    with pytest.raises(TrajectoryFormatError, match="exit_reason"):
        Trajectory.from_dict({**data, "exit_reason": "bored"})
    with pytest.raises(TrajectoryFormatError, match="not a trajectory"):
        Trajectory.from_dict({**data, "surprise": 1})
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(TrajectoryFormatError, match=r"bad\.jsonl:1"):
        read_jsonl(bad)


def test_training_segments_merge_prefix_turns_and_mask_model_tokens() -> None:
    first, second = _trajectory().training_segments()
    assert first.input_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert first.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert first.logprobs == [None, None, None, -0.1, -0.2, None, None, -0.3]
    assert second.input_ids == [9, 9, 10] and second.loss_mask == [0, 0, 1]
