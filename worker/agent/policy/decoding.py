"""The model's sampled tokens to its turn, one decoding for every backend.

The in-process backend decodes the tokens it sampled and parses the text with
:func:`worker.agent.parser.parse_completion`. A server's own tool parser decodes
arguments its way: SGLang 0.5.18's parameter conversion turns the literal ``null`` into
None for any parameter type (an Edit's ``new_string="null"`` then deletes the match) and
any boolean that is not ``true`` into False (``replace_all="yes"`` or ``"1"``). So a
served turn whose completion token ids came back (vLLM and SGLang return them when
asked, :mod:`worker.agent.served_tokens`) is decoded here from those ids, exactly as in
process; the server's parsed ``tool_calls`` are only the fallback, made to agree where
they can (:func:`as_written`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from worker.agent.parser import THINK_OPEN, ParsedTurn, parameter_types, parse_completion

EOS_TOKENS = ("<|im_end|>", "<|endoftext|>")  # Qwen3.5 ends a turn with either
# Enough of the prompt's tail to hold the generation prompt's ``<think>\n``.
_PROMPT_TAIL_TOKENS = 16


def completion_text(tokenizer: Any, completion_ids: Sequence[int]) -> str:
    """The completion as the model wrote it, special tokens kept, the end-of-turn token
    that stopped it removed."""
    text = str(tokenizer.decode(list(completion_ids), skip_special_tokens=False))
    for token in EOS_TOKENS:
        if text.endswith(token):
            return text[: -len(token)]
    return text


def opens_thinking(prompt_text: str) -> bool:
    """Whether the prompt ends inside a ``<think>`` block (Qwen3.5's generation prompt in
    thinking mode), so the completion starts with reasoning."""
    return prompt_text.rstrip().endswith(THINK_OPEN)


def decode_turn(
    tokenizer: Any,
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    tools: Sequence[dict[str, Any]],
    *,
    id_prefix: str,
) -> tuple[str, ParsedTurn]:
    """(the completion's text, its parse) from token ids, as the in-process backend
    decodes what it sampled."""
    tail = tokenizer.decode(list(prompt_ids[-_PROMPT_TAIL_TOKENS:]), skip_special_tokens=False)
    text = completion_text(tokenizer, completion_ids)
    parsed = parse_completion(
        text, tools, thinking_open=opens_thinking(str(tail)), id_prefix=id_prefix
    )
    return text, parsed


def as_written(
    name: str, arguments: dict[str, Any], tools: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """A server's parsed arguments brought back to what Ribbit's parser gives where that
    can be known: a string parameter holds the text the model wrote, so a None, boolean
    or number the server made of it is written back as its JSON text (``null``,
    ``true``, ``5``). A boolean the server already collapsed (``"yes"`` -> False) cannot
    be recovered; the token-id path above has no such loss."""
    types = parameter_types(tools).get(name, {})
    out = dict(arguments)
    for key, value in arguments.items():
        if types.get(key) == "string" and not isinstance(value, str):
            out[key] = json.dumps(value)
    return out
