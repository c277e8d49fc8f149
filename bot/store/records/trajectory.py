"""The record of one agent run, complete enough for the trainer to rebuild it.

A :class:`Trajectory` holds the exact chat messages the policy saw, one
:class:`TurnRecord` per model turn (reasoning, tool calls, tool observations,
timings, token counts) and why the run ended. With the transformers backend
(and the OpenAI one against vLLM or SGLang) each turn also keeps the prompt
token ids it was generated from and the generated token ids with the
log-probability each had under the distribution it was sampled from (after
temperature / top-k / top-p / min-p), so a trainer can rebuild every sequence
token for token and put loss only on model tokens
(:meth:`Trajectory.training_segments`).

The JSON form is versioned (``schema_version``); :meth:`Trajectory.from_json`
refuses versions it does not know instead of guessing.

Written by the agent loop (worker/agent/loop.py), read by the trainer, the replay policy
and the admin and reviewer pages (bot/web/admin/job_view.py): it lives in bot/, the bottom
layer, so that every reader uses these classes instead of parsing the JSON again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

SCHEMA_VERSION = 2

# Leaf's exit reasons (microsoft/FrogNano harness/leaf/agent.py @ 33de19f9), by name.
ExitReason = Literal[
    "agent",  # an assistant message without a tool call: the model's final answer
    "max_turns",
    "max_context_len",
    "max_tokens_per_turn",  # one turn ran out of new tokens before it ended
    "max_time",
    "llm_query_error",
    "tool_error",  # a tool call Leaf ends the episode on (the runner broke, bad timeout)
    "cancelled",
]
EXIT_REASONS: tuple[str, ...] = get_args(ExitReason)
# Version 1 used Ribbit's own names; old trajectory files still read.
_V1_EXIT_REASONS = {
    "completed": "agent",
    "max_context": "max_context_len",
    "max_tokens": "max_tokens_per_turn",
    "model_error": "llm_query_error",
}

FinishReason = Literal["stop", "length", "context_length", "cancelled"]


class TrajectoryFormatError(ValueError):
    """A trajectory file this code cannot read (wrong version or shape)."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None  # set when the call could not be parsed; never executed then


@dataclass(frozen=True)
class ToolObservation:
    call_id: str
    name: str
    content: str  # exactly what the model is shown
    is_error: bool
    duration_s: float = 0.0
    exit_code: int | None = None  # Bash only
    truncated: bool = False


@dataclass
class TurnRecord:
    index: int
    content: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    observations: list[ToolObservation]
    finish_reason: FinishReason
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    generation_s: float = 0.0
    tools_s: float = 0.0
    raw_text: str | None = None  # the decoded completion, before parsing
    # Transformers backend, or a vLLM/SGLang server: the exact ids the model was fed and
    # produced (None where the backend cannot tell).
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnRecord:
        data = dict(data)
        data["tool_calls"] = [ToolCall(**c) for c in data.get("tool_calls", [])]
        data["observations"] = [ToolObservation(**o) for o in data.get("observations", [])]
        return cls(**data)


@dataclass(frozen=True)
class TokenSegment:
    """One token sequence to train on: model tokens have mask 1, everything else 0."""

    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float | None]  # sampling log-prob for masked-in tokens, None elsewhere


@dataclass
class Trajectory:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    turns: list[TurnRecord] = field(default_factory=list)
    exit_reason: ExitReason | None = None
    error: str | None = None
    policy: str = ""
    model: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""  # ISO 8601, UTC
    duration_s: float = 0.0
    diff: str | None = None
    task: dict[str, Any] = field(default_factory=dict)  # the AgentTask, for grouping rollouts
    schema_version: int = SCHEMA_VERSION

    # -- tokens for the trainer ------------------------------------------------
    def training_segments(self) -> list[TokenSegment]:
        """Token sequences with a loss mask covering only generated tokens.

        Turns whose prompt starts with the previous segment's full token sequence are
        merged into it (one long sequence, the usual case when the chat template keeps
        earlier turns verbatim); otherwise a new segment begins, so nothing is ever
        trained on a sequence the model did not actually see.
        """
        segments: list[TokenSegment] = []
        ids: list[int] = []
        mask: list[int] = []
        lps: list[float | None] = []
        for turn in self.turns:
            prompt, completion = turn.prompt_token_ids, turn.completion_token_ids
            if prompt is None or completion is None:
                continue
            logprobs: list[float | None] = (
                list(turn.completion_logprobs)
                if turn.completion_logprobs is not None
                else [None] * len(completion)
            )
            if ids and prompt[: len(ids)] == ids:
                extra = prompt[len(ids) :]
            else:
                if ids:
                    segments.append(TokenSegment(ids, mask, lps))
                ids, mask, lps = [], [], []
                extra = list(prompt)
            ids = ids + extra + list(completion)
            mask = mask + [0] * len(extra) + [1] * len(completion)
            lps = lps + [None] * len(extra) + logprobs
        if ids:
            segments.append(TokenSegment(ids, mask, lps))
        return segments

    # -- serialisation ---------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["turns"] = [t.to_dict() for t in self.turns]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        version = data.get("schema_version")
        if version == 1:
            reason = data.get("exit_reason")
            if isinstance(reason, str):
                reason = _V1_EXIT_REASONS.get(reason, reason)
            data = {**data, "schema_version": SCHEMA_VERSION, "exit_reason": reason}
            version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            raise TrajectoryFormatError(
                f"trajectory schema_version {version!r} is not supported (this code reads "
                f"{SCHEMA_VERSION})"
            )
        data = dict(data)
        try:
            data["turns"] = [TurnRecord.from_dict(t) for t in data.get("turns", [])]
            trajectory = cls(**data)
        except TypeError as exc:
            raise TrajectoryFormatError(f"not a trajectory record: {exc}") from None
        if trajectory.exit_reason is not None and trajectory.exit_reason not in EXIT_REASONS:
            raise TrajectoryFormatError(f"unknown exit_reason {trajectory.exit_reason!r}")
        return trajectory

    @classmethod
    def from_json(cls, text: str) -> Trajectory:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TrajectoryFormatError(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise TrajectoryFormatError("a trajectory is a JSON object")
        return cls.from_dict(data)

    def write_jsonl(self, path: Path | str, *, append: bool = True) -> None:
        """Write this trajectory as one line of ``path`` (appended by default)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a" if append else "w", encoding="utf-8") as fh:
            fh.write(self.to_json() + "\n")

    @classmethod
    def read_jsonl(cls, path: Path | str) -> list[Trajectory]:
        return read_jsonl(path)


def write_jsonl(path: Path | str, trajectories: list[Trajectory]) -> None:
    """Write ``trajectories`` to ``path``, one per line, replacing the file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as fh:
        for trajectory in trajectories:
            fh.write(trajectory.to_json() + "\n")


def read_jsonl(path: Path | str) -> list[Trajectory]:
    out: list[Trajectory] = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(Trajectory.from_json(line))
            except TrajectoryFormatError as exc:
                raise TrajectoryFormatError(f"{path}:{lineno}: {exc}") from None
    return out
