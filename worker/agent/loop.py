"""The agent loop: ask the policy for a turn, run its tool calls, repeat.

Its stop conditions and their names are Leaf's (microsoft/FrogNano
``frognano/harness/leaf/agent.py`` @ 33de19f9). The run ends, and says why
(:data:`~bot.store.trajectory.ExitReason`), when:

- ``agent``: an assistant message has no tool call (the model's final answer);
- ``max_turns``: the turn budget is spent;
- ``max_context_len``: the conversation no longer fits the context window, counted as
  Leaf counts it after each turn's tool results: the turn's usage (prompt + completion
  tokens; without usage, all messages counted), plus the tool messages counted with the
  policy's tokenizer (:func:`~worker.agent.policy.count_message_tokens`); or the policy
  refused a prompt that does not fit (Leaf: the server's context-length error); or a
  turn was cut by length while the context was full;
- ``max_tokens_per_turn``: one turn used all its new tokens without ending (Leaf stops
  there: a half-written tool call is useless);
- ``max_time``: the wall-clock budget is spent (checked before each turn, as Leaf does;
  a tool still running is also cut at the deadline plus a minute, so the job's own
  time limit holds);
- ``llm_query_error``: the policy failed (server down, replay exhausted, a bug in it);
- ``tool_error``: a tool call Leaf ends the episode on (the runner outlived its limit, a
  Bash timeout that is not a number);
- ``cancelled``: the ``cancel`` event was set.

Tool calls of one message run one after another, in order, as in Leaf. The patch is
``sandbox.diff()`` at the end, whatever the reason; the caller's gates decide whether
it is any good. Only a broken sandbox (:class:`SandboxError`) escapes.

Prompt injection: issue text, repository files and tool output all reach the
model and may try to steer it. The loop does not try to defend with prompts.
It relies on the sandbox: no network, no credentials or host files inside, the
workspace a private copy. The worst a hijacked model can do is write a bad
patch, which is gated and only ever opened as a draft PR for human review.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from bot.store.trajectory import ExitReason, ToolObservation, Trajectory, TurnRecord
from worker.agent.policy import (
    AssistantTurn,
    ContextWindowExceeded,
    Policy,
    PolicyError,
    count_message_tokens,
    policy_tokenizer,
    sampling_summary,
)
from worker.agent.prompt import AgentTask, assistant_message, initial_messages, tool_message
from worker.agent.tools import TOOL_SCHEMAS, ToolBox, ToolOptions, ToolRunError
from worker.sandbox.base import Sandbox
from worker.settings import AgentSettings

log = logging.getLogger(__name__)


@dataclass
class AgentResult:
    exit_reason: ExitReason
    diff: str
    trajectory: Trajectory
    error: str | None = None  # what went wrong, for llm_query_error / tool_error / max_context_len

    @property
    def completed(self) -> bool:
        return self.exit_reason == "agent"


def run_agent(
    task: AgentTask,
    sandbox: Sandbox,
    policy: Policy,
    limits: AgentSettings,
    *,
    cancel: threading.Event | None = None,
    on_turn: Callable[[TurnRecord], None] | None = None,
) -> AgentResult:
    started = time.monotonic()
    deadline = started + limits.max_minutes * 60

    def cancelled() -> bool:
        return cancel is not None and cancel.is_set()

    def out_of_time() -> bool:
        return time.monotonic() >= deadline

    def should_stop() -> bool:
        return cancelled() or out_of_time()

    messages = initial_messages(task)
    trajectory = Trajectory(
        messages=messages,
        tools=TOOL_SCHEMAS,
        policy=policy.name,
        model=policy.model_name,
        sampling=sampling_summary(limits),
        started_at=datetime.now(UTC).isoformat(),
        task=asdict(task),
    )
    toolbox = ToolBox(
        sandbox,
        options=tool_options(limits),
        # Leaf lets a running tool finish; the deadline cuts it only through its exec
        # limit (time left + a minute), so only cancellation returns early here.
        should_stop=cancelled,
        time_left=lambda: deadline - time.monotonic(),
    )
    tokenizer = policy_tokenizer(policy)
    exit_reason: ExitReason = "max_turns"
    error: str | None = None

    for index in range(limits.max_turns):
        if cancelled():
            exit_reason = "cancelled"
            break
        if out_of_time():
            exit_reason = "max_time"
            break
        gen_start = time.monotonic()
        try:
            turn = policy.generate(messages, TOOL_SCHEMAS, limits=limits, should_stop=should_stop)
        except ContextWindowExceeded as exc:
            exit_reason, error = "max_context_len", str(exc)
            break
        except PolicyError as exc:
            exit_reason, error = "llm_query_error", str(exc)
            break
        except Exception as exc:  # a broken policy must not take the job down uncounted
            log.exception("policy %s raised", policy.name)
            exit_reason, error = "llm_query_error", f"{type(exc).__name__}: {exc}"
            break
        generation_s = time.monotonic() - gen_start

        if turn.finish_reason == "cancelled":
            _record(trajectory, index, turn, [], generation_s, 0.0, on_turn)
            exit_reason = "cancelled" if cancelled() else "max_time"
            break
        messages.append(
            assistant_message(
                turn.content,
                turn.reasoning,
                [_call_message(c.id, c.name, c.arguments) for c in turn.tool_calls],
            )
        )
        if turn.finish_reason in ("length", "context_length"):
            _record(trajectory, index, turn, [], generation_s, 0.0, on_turn)
            exit_reason = _length_exit_reason(turn, limits)
            break
        if not turn.tool_calls:
            _record(trajectory, index, turn, [], generation_s, 0.0, on_turn)
            exit_reason = "agent"
            break

        # Leaf's count after the assistant turn: its usage, else every message counted.
        if turn.prompt_tokens is not None and turn.completion_tokens is not None:
            context_tokens = turn.prompt_tokens + turn.completion_tokens
        else:
            context_tokens = count_message_tokens(messages, tokenizer)
        tools_start = time.monotonic()
        observations: list[ToolObservation] = []
        results: list[dict[str, Any]] = []
        failed: str | None = None
        for call in turn.tool_calls:
            try:
                observation = toolbox.run(call)
            except ToolRunError as exc:
                failed = str(exc)
                break
            observations.append(observation)
            results.append(tool_message(call.id, observation.content))
            messages.append(results[-1])
        _record(
            trajectory,
            index,
            turn,
            observations,
            generation_s,
            time.monotonic() - tools_start,
            on_turn,
        )

        if failed is not None:
            exit_reason = (
                "cancelled" if cancelled() else "max_time" if out_of_time() else "tool_error"
            )
            error = None if exit_reason != "tool_error" else failed
            break
        context_tokens += count_message_tokens(results, tokenizer)
        if 0 < limits.max_context_tokens <= context_tokens:
            exit_reason = "max_context_len"
            error = f"context holds {context_tokens} tokens of {limits.max_context_tokens}"
            break

    diff = sandbox.diff()
    trajectory.exit_reason = exit_reason
    trajectory.error = error
    trajectory.duration_s = time.monotonic() - started
    trajectory.diff = diff
    log.info("agent run ended: %s after %d turns", exit_reason, len(trajectory.turns))
    return AgentResult(exit_reason=exit_reason, diff=diff, trajectory=trajectory, error=error)


def tool_options(limits: AgentSettings) -> ToolOptions:
    return ToolOptions(
        keep_tail=limits.keep_output_tail,
        read_footer=limits.read_footer,
        clear_errors=limits.clear_errors,
        recover_malformed_calls=limits.recover_malformed_calls,
    )


def _length_exit_reason(turn: AssistantTurn, limits: AgentSettings) -> ExitReason:
    """Leaf's reading of a turn cut by length (agent.py @ 33de19f9: _length_exit_reason)."""
    if turn.finish_reason == "context_length":
        return "max_context_len"
    prompt, completion = turn.prompt_tokens, turn.completion_tokens
    if prompt is not None and completion is not None:
        if prompt + completion >= limits.max_context_tokens:
            return "max_context_len"
        if completion >= limits.max_new_tokens:
            return "max_tokens_per_turn"
        return "max_context_len"
    return "max_tokens_per_turn"


def _call_message(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _record(
    trajectory: Trajectory,
    index: int,
    turn: AssistantTurn,
    observations: list[ToolObservation],
    generation_s: float,
    tools_s: float,
    on_turn: Callable[[TurnRecord], None] | None,
) -> None:
    record = TurnRecord(
        index=index,
        content=turn.content,
        reasoning=turn.reasoning,
        tool_calls=list(turn.tool_calls),
        observations=observations,
        finish_reason=turn.finish_reason,
        prompt_tokens=turn.prompt_tokens,
        completion_tokens=turn.completion_tokens,
        generation_s=generation_s,
        tools_s=tools_s,
        raw_text=turn.raw_text,
        prompt_token_ids=turn.prompt_token_ids,
        completion_token_ids=turn.completion_token_ids,
        completion_logprobs=turn.completion_logprobs,
    )
    trajectory.turns.append(record)
    if on_turn is not None:
        try:
            on_turn(record)
        except Exception:  # progress reporting must never end a run
            log.exception("on_turn callback failed")
