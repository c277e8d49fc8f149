"""What every policy backend shares: the :class:`Policy` protocol, the turn it returns,
its errors, and how the loop counts context and reports sampling.

Sampling defaults (``worker.settings.AgentSettings``) are the values recommended for
this model family in thinking mode for precise coding tasks: temperature 0.6,
top_p 0.95, top_k 20, min_p 0, repetition_penalty 1.0 (Qwen3.5 model card,
"Best Practices: Thinking mode for precise coding tasks"; FrogNano-4B-2609 is a
``qwen3_5`` fine-tune and issue #5 quotes the same values from its card). 8,192
new tokens per turn, a 65,536-token context (the model allows up to 131,072)
and 100 turns are the limits the training harness used, as given in issue #5.
FrogNano's own ``generation_config.json`` and ``chat_template.jinja`` were not
reachable from here (no hub access; the public docs we could search show only
its discussion page), so nothing in the backends hard-codes them: the chat
template always comes from the tokenizer that ships with the weights.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from bot.store.records.trajectory import FinishReason, ToolCall
from worker.settings import AgentSettings

StopCheck = Callable[[], bool]
log = logging.getLogger(__name__)


class PolicyError(Exception):
    """The model backend failed (server down, weights missing, replay exhausted)."""


class ContextWindowExceeded(PolicyError):
    """The conversation no longer fits in the context window."""


@dataclass(frozen=True)
class AssistantTurn:
    content: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    finish_reason: FinishReason
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    raw_text: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None


@runtime_checkable
class Policy(Protocol):
    name: str  # backend: transformers, openai, replay, scripted
    model_name: str

    def generate(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        limits: AgentSettings | None = None,
        should_stop: StopCheck | None = None,
    ) -> AssistantTurn:
        """The next assistant turn. ``should_stop`` is polled while generating; when it
        turns true the turn ends early with finish_reason "cancelled"."""
        ...


def sampling_summary(limits: AgentSettings) -> dict[str, Any]:
    return {
        "temperature": limits.temperature,
        "top_p": limits.top_p,
        "top_k": limits.top_k,
        "min_p": limits.min_p,
        "repetition_penalty": limits.repetition_penalty,
        "max_new_tokens": limits.max_new_tokens,
        "max_context_tokens": limits.max_context_tokens,
        "enable_thinking": limits.enable_thinking,
    }


def completion_budget(prompt_tokens: int, limits: AgentSettings) -> int:
    """New tokens one turn may take, the same on every backend: the per-turn cap cut to
    the room the prompt leaves in the context window (Leaf's servers give a turn the
    rest of the window). Raises :class:`ContextWindowExceeded` when no room is left."""
    room = limits.max_context_tokens - prompt_tokens
    if room < 1:
        raise ContextWindowExceeded(
            f"prompt is {prompt_tokens} tokens; the context window is {limits.max_context_tokens}"
        )
    return min(limits.max_new_tokens, room)


def length_finish(budget: int, limits: AgentSettings) -> FinishReason:
    """Why a turn that used its whole budget stopped: the per-turn cap, or the window."""
    return "length" if budget == limits.max_new_tokens else "context_length"


def count_message_tokens(messages: Sequence[dict[str, Any]], tokenizer: Any | None) -> int:
    """Leaf's count of a list of messages (agent.py @ 33de19f9: _count_message_tokens):
    the chat template's token ids, else the compact JSON of the messages encoded without
    special tokens, else a quarter of its UTF-8 bytes rounded up. Leaf tries tiktoken
    between the last two, which knows no FrogNano name and so never counts for it."""
    if not messages:
        return 0
    serialized = json.dumps(list(messages), separators=(",", ":"), ensure_ascii=False)
    if tokenizer is not None:
        try:
            return len(
                tokenizer.apply_chat_template(list(messages), tokenize=True, return_dict=False)
            )
        except Exception:  # Qwen3.5's template refuses tool messages without a user turn
            try:
                return len(tokenizer.encode(serialized, add_special_tokens=False))
            except Exception:
                log.debug("the tokenizer could not count %d messages", len(messages))
    # surrogatepass: a lone surrogate in a call's arguments (JSON can spell one) counts
    # as the 3 bytes any BMP character does, instead of ending the run; Leaf keeps the
    # server's raw argument JSON in its messages, so it never meets one here.
    return math.ceil(len(serialized.encode("utf-8", "surrogatepass")) / 4)


def policy_tokenizer(policy: Policy) -> Any | None:
    """The tokenizer the loop counts context with: the policy's own when it has one."""
    return getattr(policy, "tokenizer", None)


def assistant_count(messages: Sequence[dict[str, Any]]) -> int:
    """How many assistant turns the conversation holds: the next turn's index."""
    return sum(1 for m in messages if m.get("role") == "assistant")
