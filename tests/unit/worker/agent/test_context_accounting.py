"""Context accounting as Leaf does it (agent.py @ 33de19f9): after each turn's tool
results, the turn's usage (or every message counted) plus the tool messages counted with
the tokenizer; at or past max_context_tokens the run ends with ``max_context_len``."""

from __future__ import annotations

import json
import math
from typing import Any

from bot.store.records.trajectory import ToolCall
from tests.fakes import LocalDirSandbox, ScriptedPolicy
from worker.agent import AgentTask, run_agent
from worker.agent.policy import AssistantTurn, count_message_tokens
from worker.settings import AgentSettings

TASK = AgentTask(title="add() subtracts", body="Fix it.")
LIMITS = AgentSettings(max_context_tokens=1024)


class TemplateRefusingTokenizer:
    """Qwen3.5's template refuses a list of tool messages with no user turn, so Leaf
    counts the messages' compact JSON; this stub counts one token per character."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> list[int]:
        raise ValueError("No user query found in messages.")

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        assert add_special_tokens is False
        self.encoded.append(text)
        return [0] * len(text)


class TemplateTokenizer:
    """A template that renders anything: ``per_message`` tokens a message."""

    def __init__(self, per_message: int = 10) -> None:
        self.per_message = per_message

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> list[int]:
        assert kwargs == {"tokenize": True, "return_dict": False}
        return [0] * (self.per_message * len(messages))


def glob_turn(prompt: int | None, completion: int | None, n: int = 0) -> AssistantTurn:
    call = ToolCall(f"call_{n}", "Glob", {"pattern": "*.md"})
    return AssistantTurn("", None, [call], "stop", prompt, completion)


DONE = AssistantTurn("Done.", None, [], "stop", 10, 2)


def policy(turns: list[AssistantTurn], tokenizer: Any) -> ScriptedPolicy:
    scripted = ScriptedPolicy(turns)
    scripted.tokenizer = tokenizer  # type: ignore[attr-defined]
    return scripted


def tool_json(call_id: str, content: str) -> str:
    message = [{"role": "tool", "tool_call_id": call_id, "content": content}]
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def test_usage_plus_the_tool_results_reaching_the_cap_ends_the_run(
    sandbox: LocalDirSandbox,
) -> None:
    tokenizer = TemplateRefusingTokenizer()
    result_json = tool_json("call_0", "README.md")
    # usage 900 + the tool message's JSON: at the cap exactly (Leaf's test is >=).
    first = glob_turn(900, 1024 - 900 - len(result_json))
    result = run_agent(TASK, sandbox, policy([first, DONE], tokenizer), LIMITS)
    assert result.exit_reason == "max_context_len"
    assert tokenizer.encoded == [result_json]
    assert len(result.trajectory.turns) == 1


def test_one_token_under_the_cap_runs_on(sandbox: LocalDirSandbox) -> None:
    tokenizer = TemplateRefusingTokenizer()
    first = glob_turn(900, 1024 - 900 - len(tool_json("call_0", "README.md")) - 1)
    result = run_agent(TASK, sandbox, policy([first, DONE], tokenizer), LIMITS)
    assert result.exit_reason == "agent"


def test_without_usage_every_message_is_counted(sandbox: LocalDirSandbox) -> None:
    # With no usage Leaf counts every message after the turn: 100 tokens each here.
    turns = [glob_turn(None, None, n) for n in range(10)]
    result = run_agent(TASK, sandbox, policy(turns, TemplateTokenizer(100)), LIMITS)
    assert result.exit_reason == "max_context_len"
    # Turn k (0-based) ends with 2 + 2(k+1) messages = 100 * (4 + 2k) tokens >= 1024.
    k = math.ceil((1024 / 100 - 4) / 2)
    assert len(result.trajectory.turns) == k + 1 == 5


def test_count_falls_back_as_leaf_does() -> None:
    messages = [{"role": "tool", "tool_call_id": "c", "content": "é" * 7}]
    compact = json.dumps(messages, separators=(",", ":"), ensure_ascii=False)
    assert count_message_tokens(messages, None) == math.ceil(len(compact.encode()) / 4)
    assert count_message_tokens(messages, TemplateRefusingTokenizer()) == len(compact)
    assert count_message_tokens(messages, TemplateTokenizer()) == 10
    assert count_message_tokens([], TemplateTokenizer()) == 0
