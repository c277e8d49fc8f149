"""Plays back a recorded trajectory (tests, debugging; never the default)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.store.records.trajectory import Trajectory, read_jsonl
from worker.agent.policy.base import AssistantTurn, PolicyError, StopCheck, assistant_count
from worker.settings import AgentSettings


class ReplayPolicy:
    """Plays back the assistant turns of a recorded trajectory, in order.

    Stateless: the turn to play is the number of assistant messages already in the
    conversation, so one instance can serve any number of runs.
    """

    name = "replay"

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self.model_name = f"replay:{trajectory.model}" if trajectory.model else "replay"

    @classmethod
    def from_file(cls, path: Path | str, index: int = 0) -> ReplayPolicy:
        trajectories = read_jsonl(path)
        if not trajectories or not 0 <= index < len(trajectories):
            raise PolicyError(f"{path}: no trajectory #{index} to replay")
        return cls(trajectories[index])

    def generate(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        limits: AgentSettings | None = None,
        should_stop: StopCheck | None = None,
    ) -> AssistantTurn:
        if should_stop is not None and should_stop():
            return AssistantTurn("", None, [], "cancelled")
        n = assistant_count(messages)
        if n >= len(self.trajectory.turns):
            raise PolicyError(f"replay has only {len(self.trajectory.turns)} turns")
        t = self.trajectory.turns[n]
        return AssistantTurn(
            content=t.content,
            reasoning=t.reasoning,
            tool_calls=list(t.tool_calls),
            finish_reason=t.finish_reason,
            prompt_tokens=t.prompt_tokens,
            completion_tokens=t.completion_tokens,
            raw_text=t.raw_text,
            prompt_token_ids=t.prompt_token_ids,
            completion_token_ids=t.completion_token_ids,
            completion_logprobs=t.completion_logprobs,
        )
