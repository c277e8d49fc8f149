"""The agent loop: ask the policy for a turn, run its tool calls, repeat
(:class:`AgentRun`; :func:`run_agent` runs one).

Its stop conditions and their names are Leaf's (microsoft/FrogNano
``frognano/harness/leaf/agent.py`` @ 33de19f9). The run ends, and says why
(:data:`~bot.store.records.trajectory.ExitReason`), when:

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

from bot.store.records.trajectory import ExitReason, ToolObservation, Trajectory, TurnRecord
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


class AgentStopped(Exception):
    """How a run ends: every stop condition raises this with its reason.

    A stop is not a failure (``agent`` is the model's own final answer); raising makes
    each condition one line where it is detected, and :meth:`AgentRun.run` the one
    place that turns a stop into a result.
    """

    def __init__(self, reason: ExitReason, error: str | None = None) -> None:
        super().__init__(reason if error is None else f"{reason}: {error}")
        self.reason: ExitReason = reason
        self.error = error


class AgentRun:
    """One run of the loop: :meth:`run` calls :meth:`step` until a stop; in each step
    :meth:`query_policy` asks the policy and :meth:`execute_actions` runs the turn's tool calls.

    Shaped like mini-swe-agent's ``DefaultAgent`` (run/step/query/execute_actions; ``query``
    is ``query_policy`` here, a name no store query is mistaken for) so a variant
    overrides one method, not a copy of the loop.
    """

    def __init__(
        self,
        task: AgentTask,
        sandbox: Sandbox,
        policy: Policy,
        limits: AgentSettings,
        *,
        cancel: threading.Event | None = None,
        on_turn: Callable[[TurnRecord], None] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.policy = policy
        self.limits = limits
        self.cancel = cancel
        self.on_turn = on_turn
        self.started = time.monotonic()
        self.deadline = self.started + limits.max_minutes * 60
        self.messages = initial_messages(task)
        self.trajectory = Trajectory(
            messages=self.messages,
            tools=TOOL_SCHEMAS,
            policy=policy.name,
            model=policy.model_name,
            sampling=sampling_summary(limits),
            started_at=datetime.now(UTC).isoformat(),
            task=asdict(task),
        )
        self.toolbox = ToolBox(
            sandbox,
            options=tool_options(limits),
            # Leaf lets a running tool finish; the deadline cuts it only through its exec
            # limit (time left + a minute), so only cancellation returns early here.
            should_stop=self.cancelled,
            time_left=lambda: self.deadline - time.monotonic(),
        )
        self.tokenizer = policy_tokenizer(policy)

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    def should_stop(self) -> bool:
        return self.cancelled() or self.out_of_time()

    def run(self) -> AgentResult:
        exit_reason: ExitReason = "max_turns"
        error: str | None = None
        try:
            for index in range(self.limits.max_turns):
                self.step(index)
        except AgentStopped as stop:
            exit_reason, error = stop.reason, stop.error
        return self.finish(exit_reason, error)

    def step(self, index: int) -> None:
        """One turn: the policy's message, then its tool calls; raises
        :class:`AgentStopped` when the run ends at this turn."""
        if self.cancelled():
            raise AgentStopped("cancelled")
        if self.out_of_time():
            raise AgentStopped("max_time")
        gen_start = time.monotonic()
        turn = self.query_policy()
        generation_s = time.monotonic() - gen_start

        if turn.finish_reason == "cancelled":
            self.record(index, turn, [], generation_s, 0.0)
            raise AgentStopped("cancelled" if self.cancelled() else "max_time")
        self.messages.append(
            assistant_message(
                turn.content,
                turn.reasoning,
                [_call_message(c.id, c.name, c.arguments) for c in turn.tool_calls],
            )
        )
        if turn.finish_reason in ("length", "context_length"):
            self.record(index, turn, [], generation_s, 0.0)
            raise AgentStopped(_length_exit_reason(turn, self.limits))
        if not turn.tool_calls:
            self.record(index, turn, [], generation_s, 0.0)
            raise AgentStopped("agent")

        # Leaf's count after the assistant turn: its usage, else every message counted.
        if turn.prompt_tokens is not None and turn.completion_tokens is not None:
            context_tokens = turn.prompt_tokens + turn.completion_tokens
        else:
            context_tokens = count_message_tokens(self.messages, self.tokenizer)
        tools_start = time.monotonic()
        observations, results, failed = self.execute_actions(turn)
        self.record(index, turn, observations, generation_s, time.monotonic() - tools_start)

        if failed is not None:
            if self.cancelled():
                raise AgentStopped("cancelled")
            if self.out_of_time():
                raise AgentStopped("max_time")
            raise AgentStopped("tool_error", failed)
        context_tokens += count_message_tokens(results, self.tokenizer)
        if 0 < self.limits.max_context_tokens <= context_tokens:
            raise AgentStopped(
                "max_context_len",
                f"context holds {context_tokens} tokens of {self.limits.max_context_tokens}",
            )

    def query_policy(self) -> AssistantTurn:
        """The policy's next turn; a policy that fails ends the run."""
        try:
            return self.policy.generate(
                self.messages, TOOL_SCHEMAS, limits=self.limits, should_stop=self.should_stop
            )
        except ContextWindowExceeded as exc:
            raise AgentStopped("max_context_len", str(exc)) from exc
        except PolicyError as exc:
            raise AgentStopped("llm_query_error", str(exc)) from exc
        except Exception as exc:  # a broken policy must not take the job down uncounted
            log.exception("policy %s raised", self.policy.name)
            raise AgentStopped("llm_query_error", f"{type(exc).__name__}: {exc}") from exc

    def execute_actions(
        self, turn: AssistantTurn
    ) -> tuple[list[ToolObservation], list[dict[str, Any]], str | None]:
        """Run the turn's tool calls in order, appending each result to the conversation.

        Returns the observations, their tool messages and, when a call ended the episode
        (:class:`ToolRunError`), its error; the calls after it do not run. The turn is
        recorded before the run stops, so this returns the error rather than raising.
        """
        observations: list[ToolObservation] = []
        results: list[dict[str, Any]] = []
        for call in turn.tool_calls:
            try:
                observation = self.toolbox.run(call)
            except ToolRunError as exc:
                return observations, results, str(exc)
            observations.append(observation)
            results.append(tool_message(call.id, observation.content))
            self.messages.append(results[-1])
        return observations, results, None

    def record(
        self,
        index: int,
        turn: AssistantTurn,
        observations: list[ToolObservation],
        generation_s: float,
        tools_s: float,
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
        self.trajectory.turns.append(record)
        if self.on_turn is not None:
            try:
                self.on_turn(record)
            except Exception:  # progress reporting must never end a run
                log.exception("on_turn callback failed")

    def finish(self, exit_reason: ExitReason, error: str | None) -> AgentResult:
        """The patch is the sandbox's diff whatever the reason; the gates judge it."""
        diff = self.sandbox.diff()
        trajectory = self.trajectory
        trajectory.exit_reason = exit_reason
        trajectory.error = error
        trajectory.duration_s = time.monotonic() - self.started
        trajectory.diff = diff
        log.info("agent run ended: %s after %d turns", exit_reason, len(trajectory.turns))
        return AgentResult(exit_reason=exit_reason, diff=diff, trajectory=trajectory, error=error)


def run_agent(
    task: AgentTask,
    sandbox: Sandbox,
    policy: Policy,
    limits: AgentSettings,
    *,
    cancel: threading.Event | None = None,
    on_turn: Callable[[TurnRecord], None] | None = None,
) -> AgentResult:
    return AgentRun(task, sandbox, policy, limits, cancel=cancel, on_turn=on_turn).run()


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
