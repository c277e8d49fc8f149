"""Token ids and sampling log-probs from an OpenAI-compatible server's chat completion.

Training on server rollouts needs, per turn, the exact prompt ids the server fed the
model, the ids it sampled and each one's log-prob (what :class:`TransformersPolicy`
records in process). Neither server returns them unless asked, and they put them in
different places:

- vLLM (the deploy files pin v0.28.0; the fields exist since v0.10.2): request
  ``return_token_ids: true`` -> ``prompt_token_ids`` on the response and ``token_ids`` on
  each choice; ``logprobs: true`` -> ``choices[i].logprobs.content[j].logprob``;
  ``return_tokens_as_token_ids: true`` spells each ``logprobs.content[j].token`` as
  ``"token_id:N"``, so the ids survive even where ``token_ids`` is missing. Matched
  against ``ChatCompletionRequest`` / ``ChatCompletionResponse`` /
  ``ChatCompletionResponseChoice`` in vllm-project/vllm
  ``vllm/entrypoints/openai/protocol.py`` (the stored copy, commit ec3b890c14b0, and the
  fields' descriptions quoted there). vLLM's log-probs ignore temperature unless the
  server runs with ``--logprobs-mode processed_logprobs`` (trainer/README.md).
- SGLang: ``return_prompt_token_ids`` / ``return_token_ids`` -> ``prompt_token_ids`` and
  ``token_ids`` on each choice, and the same ``logprobs.content`` list. Matched against
  ``ChatCompletionRequest`` / ``ChatCompletionResponseChoice`` in sgl-project/sglang
  ``python/sglang/srt/entrypoints/openai/protocol.py`` @ 004c82e07d87 (newer than the
  pinned v0.5.18 is not confirmed to carry them; an older server that lacks them gives
  untrainable turns, see below).

Each server ignores the other's request fields (unknown keys are dropped with a warning
by vLLM and silently by SGLang's pydantic models), so one request body serves both.

A server's answer is not trusted to be well formed: anything missing, of the wrong
type or of inconsistent length gives ``None`` (the turn is served, just not trainable),
and that is logged once per process, never raised.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Added to every chat-completions request (see the module docstring for who reads what).
TOKEN_REQUEST_FIELDS: dict[str, Any] = {
    "logprobs": True,
    "return_token_ids": True,  # vLLM >= 0.10.2, SGLang
    "return_tokens_as_token_ids": True,  # vLLM: logprobs tokens as "token_id:N"
    "return_prompt_token_ids": True,  # SGLang
}
TOKEN_ID_PREFIX = "token_id:"  # noqa: S105 (vLLM's spelling of a token id, no secret)


@dataclass(frozen=True)
class ServedTokens:
    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    completion_logprobs: list[float]


_warned = threading.Event()


def _warn_once(reason: str) -> None:
    if not _warned.is_set():
        _warned.set()
        log.warning(
            "the inference server returned no usable token ids/log-probs (%s): its turns "
            "are served but cannot be trained on (trainer/README.md, 'Server rollouts')",
            reason,
        )


def _int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list):
        return None
    # bool is an int subclass; a server never means True as a token id.
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return None
    return list(value)


def _ids_from_logprob_tokens(entries: list[Any]) -> list[int] | None:
    out: list[int] = []
    for entry in entries:
        token = entry.get("token") if isinstance(entry, dict) else None
        if not isinstance(token, str) or not token.startswith(TOKEN_ID_PREFIX):
            return None
        digits = token[len(TOKEN_ID_PREFIX) :]
        if not digits.isdigit() or not digits.isascii():
            return None
        out.append(int(digits))
    return out


def served_tokens(data: Any) -> ServedTokens | None:
    """The first choice's prompt ids, completion ids and log-probs, or None (logged once)
    when the answer does not carry all three consistently."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(choice, dict):
        return None
    # vLLM: on the response; SGLang: on the choice.
    prompt = _int_list(choice.get("prompt_token_ids"))
    if prompt is None and isinstance(data, dict):
        prompt = _int_list(data.get("prompt_token_ids"))
    logprobs = choice.get("logprobs")
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    if prompt is None or not prompt:
        _warn_once("no prompt_token_ids")
        return None
    if not isinstance(entries, list):
        _warn_once("no logprobs")
        return None
    values: list[float] = []
    for entry in entries:
        lp = entry.get("logprob") if isinstance(entry, dict) else None
        if isinstance(lp, bool) or not isinstance(lp, int | float) or math.isnan(lp) or lp > 0:
            _warn_once("a log-prob is not a number <= 0")
            return None
        values.append(float(lp))
    completion = _int_list(choice.get("token_ids"))
    if completion is None:
        completion = _ids_from_logprob_tokens(entries)
    if completion is None:
        _warn_once("no token_ids")
        return None
    if len(completion) != len(values):
        _warn_once(f"{len(completion)} token ids but {len(values)} log-probs")
        return None
    from_tokens = _ids_from_logprob_tokens(entries)
    if from_tokens is not None and from_tokens != completion:
        _warn_once("token_ids and the log-probs' tokens disagree")
        return None
    return ServedTokens(prompt, completion, values)
