"""ReplayPolicy: a recorded trajectory's assistant turns played back in order, chosen by
how many assistant turns the conversation already holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records.trajectory import ToolCall, Trajectory, TurnRecord, write_jsonl
from worker.agent.policy.base import PolicyError
from worker.agent.policy.replay_policy import ReplayPolicy


def _turn(index: int, content: str, *calls: ToolCall) -> TurnRecord:
    return TurnRecord(
        index=index,
        content=content,
        reasoning=f"thinking {index}",
        tool_calls=list(calls),
        observations=[],
        finish_reason="stop",
        prompt_tokens=10 + index,
        completion_tokens=2,
        raw_text=f"raw {index}",
        prompt_token_ids=[1, 2],
        completion_token_ids=[3],
        completion_logprobs=[-0.5],
    )


RECORDED = Trajectory(
    messages=[],
    tools=[],
    turns=[
        _turn(0, "", ToolCall("c0", "Bash", {"command": "pytest -q"})),
        _turn(1, "done"),
    ],
    exit_reason="agent",
    model="frognano",
)
USER = {"role": "user", "content": "fix it"}
ASSISTANT = {"role": "assistant", "content": ""}
TOOL = {"role": "tool", "content": "ok"}


def test_the_turn_played_is_the_number_of_assistant_turns_so_far() -> None:
    policy = ReplayPolicy(RECORDED)
    first = policy.generate([USER], [])
    assert first.tool_calls == [ToolCall("c0", "Bash", {"command": "pytest -q"})]
    assert (first.reasoning, first.raw_text, first.prompt_tokens) == ("thinking 0", "raw 0", 10)
    assert (first.prompt_token_ids, first.completion_token_ids) == ([1, 2], [3])
    assert first.completion_logprobs == [-0.5] and first.finish_reason == "stop"
    # Stateless: the same instance serves a second run from its start, and tool messages
    # do not count as turns.
    assert policy.generate([USER, ASSISTANT, TOOL], []).content == "done"
    assert policy.generate([USER], []).tool_calls == first.tool_calls


def test_asking_past_the_recording_is_an_error() -> None:
    with pytest.raises(PolicyError, match="replay has only 2 turns"):
        ReplayPolicy(RECORDED).generate([USER, ASSISTANT, TOOL, ASSISTANT], [])


def test_a_stop_asked_for_ends_the_turn_as_cancelled() -> None:
    turn = ReplayPolicy(RECORDED).generate([USER], [], should_stop=lambda: True)
    assert (turn.content, turn.tool_calls, turn.finish_reason) == ("", [], "cancelled")


def test_the_model_name_says_what_is_replayed() -> None:
    assert ReplayPolicy(RECORDED).model_name == "replay:frognano"
    unnamed = Trajectory(messages=[], tools=[], turns=[], exit_reason="agent")
    assert ReplayPolicy(unnamed).model_name == "replay"


def test_from_file_picks_a_trajectory_by_index(tmp_path: Path) -> None:
    other = Trajectory(messages=[], tools=[], turns=[_turn(0, "other")], exit_reason="agent")
    path = tmp_path / "recorded.jsonl"
    write_jsonl(path, [RECORDED, other])
    assert ReplayPolicy.from_file(path).generate([USER], []).tool_calls
    assert ReplayPolicy.from_file(path, index=1).generate([USER], []).content == "other"
    for index in (2, -1):
        with pytest.raises(PolicyError, match=f"no trajectory #{index} to replay"):
            ReplayPolicy.from_file(path, index=index)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(PolicyError, match="no trajectory #0 to replay"):
        ReplayPolicy.from_file(empty)
