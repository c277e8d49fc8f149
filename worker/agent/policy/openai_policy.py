"""An OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp, Ollama) with
native function calling; from vLLM and SGLang it records the same token ids and log-probs
as the transformers backend (:mod:`worker.agent.served_tokens`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import requests

from bot.retrying import retry, stop_after_attempts, wait_exponential
from bot.store.records.trajectory import FinishReason, ToolCall
from worker.agent.parser import CALL_OPEN, THINK_CLOSE, parse_completion
from worker.agent.policy.base import (
    AssistantTurn,
    ContextWindowExceeded,
    PolicyError,
    StopCheck,
    assistant_count,
    completion_budget,
    length_finish,
)
from worker.agent.policy.decoding import as_written, decode_turn
from worker.agent.policy.served_tokenizer import load_served_tokenizer
from worker.agent.served_tokens import TOKEN_REQUEST_FIELDS, served_tokens
from worker.settings import AgentSettings, ModelSettings


class OpenAIPolicy:
    """An OpenAI-compatible chat-completions server, over plain ``requests``.

    Cancellation is checked between attempts and turns (a request in flight is not
    interrupted; its read timeout bounds it). Transient failures (connection refused,
    timeouts, 429, 5xx) are retried a bounded number of times with backoff.
    """

    name = "openai"

    def __init__(
        self,
        model: ModelSettings,
        defaults: AgentSettings | None = None,
        *,
        session: requests.Session | None = None,
        tokenizer: Any | None = None,
    ) -> None:
        self.settings = model
        self.model_name = model.model
        self.defaults = defaults or AgentSettings()
        self.url = model.openai_base_url.rstrip("/") + "/chat/completions"
        self._session = session or requests.Session()
        if tokenizer is not None:  # the trainer's, when the served name is an adapter's
            self._tokenizer: Any | None = tokenizer

    @property
    def tokenizer(self) -> Any | None:
        """The served model's tokenizer, for counting context as Leaf does and decoding
        the sampled ids: from wherever its weights are on this host (served_tokenizer.py),
        only from local files, so an offline worker does not stall in hub retries. None:
        the loop falls back to Leaf's bytes / 4."""
        if not hasattr(self, "_tokenizer"):
            self._tokenizer = load_served_tokenizer(self.settings)
        return self._tokenizer

    def _headers(self) -> dict[str, str]:
        key = self.settings.openai_api_key
        return {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}

    def prompt_tokens(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        limits: AgentSettings,
    ) -> int | None:
        """The prompt's length as the server will render it (the chat template with the
        same tools and thinking flag), or None without a tokenizer that can render it."""
        tokenizer = self.tokenizer
        if tokenizer is None:
            return None
        try:
            ids = tokenizer.apply_chat_template(
                list(messages),
                tools=list(tools),
                add_generation_prompt=True,
                enable_thinking=limits.enable_thinking,
                tokenize=True,
                return_dict=False,
            )
        except Exception:
            return None
        return len(ids)

    def completion_budget(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        limits: AgentSettings,
    ) -> int | None:
        """The in-process backend's budget (the cap cut to the room left in the window),
        so a turn stops for the same reason on every backend; raises
        ContextWindowExceeded, as that backend does, when the prompt leaves no room.
        None where the prompt cannot be counted: then no cap is sent, as Leaf sends
        none, and the server gives the turn the rest of its window. A fixed
        ``max_completion_tokens`` would make the server refuse every prompt within that
        many tokens of the window (vLLM and SGLang check prompt + cap against it)."""
        prompt = self.prompt_tokens(messages, tools, limits)
        return None if prompt is None else completion_budget(prompt, limits)

    def request_body(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        limits: AgentSettings,
        budget: int | None = None,
    ) -> dict[str, Any]:
        # Leaf's request (agent.py @ 33de19f9: OpenAIChatClient.complete), with its
        # extra_body keys (top_p, top_k, min_p, repetition_penalty, chat_template_kwargs)
        # at the top level, where the OpenAI client puts them. vLLM and SGLang are also
        # asked for the token ids and log-probs the trainer needs (served_tokens.py);
        # other servers are not sent keys they may refuse.
        tokens = TOKEN_REQUEST_FIELDS if self.settings.openai_server != "other" else {}
        cap = {"max_completion_tokens": budget} if budget is not None else {}
        return {
            **tokens,
            "model": self.settings.model,
            "messages": [_to_openai_message(m) for m in messages],
            "tools": list(tools),
            "tool_choice": "auto",
            "temperature": limits.temperature,
            "parallel_tool_calls": True,
            **cap,
            "top_p": limits.top_p,
            # Not in OpenAI's API but accepted by vLLM, SGLang and llama.cpp servers.
            "top_k": limits.top_k,
            "min_p": limits.min_p,
            "repetition_penalty": limits.repetition_penalty,
            "chat_template_kwargs": {"enable_thinking": limits.enable_thinking},
        }

    def generate(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        limits: AgentSettings | None = None,
        should_stop: StopCheck | None = None,
    ) -> AssistantTurn:
        limits = limits or self.defaults
        stop = should_stop or (lambda: False)
        budget = self.completion_budget(messages, tools, limits)
        body = self.request_body(messages, tools, limits, budget)
        attempts = self.settings.openai_max_retries + 1

        def ask() -> AssistantTurn:
            if stop():
                raise _Cancelled
            try:
                resp = self._session.post(
                    self.url,
                    json=body,
                    headers=self._headers(),
                    timeout=(10.0, self.settings.openai_timeout_s),
                )
            except requests.ConnectionError as exc:
                raise _Transient(f"cannot connect ({type(exc).__name__})") from None
            except requests.Timeout:
                raise _Transient(f"no answer within {self.settings.openai_timeout_s:g} s") from None
            turn = self._parse_response(self._answer(resp), tools, assistant_count(messages))
            if turn.finish_reason == "length" and budget is not None:
                return replace(turn, finish_reason=length_finish(budget, limits))
            return turn

        def wait(seconds: float) -> None:
            if _sleep_unless(seconds, stop):
                raise _Cancelled

        try:
            # No jitter: one worker talks to its own server, and waits are cancellable.
            return retry(
                ask,
                retry_on=(_Transient,),
                stop=stop_after_attempts(attempts),
                wait=wait_exponential(self.settings.openai_retry_backoff_s),
                sleep=wait,
            )
        except _Cancelled:
            return AssistantTurn("", None, [], "cancelled")
        except _Transient as exc:
            raise PolicyError(
                f"the OpenAI-compatible server at {self.settings.openai_base_url} failed "
                f"{attempts} times (last: {exc}); is it running? "
                "(RIBBIT_MODEL__OPENAI_BASE_URL)"
            ) from None

    def _answer(self, resp: requests.Response) -> Any:
        """The answer's JSON; raises _Transient for what another try may not meet (429,
        5xx), ContextWindowExceeded for a prompt the server refused as too long."""
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _Transient(f"HTTP {resp.status_code}: {resp.text[:300]}")
        if resp.status_code >= 400:
            text = resp.text[:500]
            if "context" in text.lower() and ("length" in text.lower() or "token" in text.lower()):
                raise ContextWindowExceeded(f"server refused the prompt: {text}")
            raise PolicyError(f"{self.url} answered HTTP {resp.status_code}: {text}")
        try:
            return resp.json()
        except ValueError:
            raise PolicyError(
                f"{self.url} answered with something that is not JSON: {resp.text[:200]!r}"
            ) from None

    def _parse_response(
        self, data: Any, tools: Sequence[dict[str, Any]], turn: int
    ) -> AssistantTurn:
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise PolicyError(f"unexpected chat-completions answer: {str(data)[:300]}") from None
        tokens = served_tokens(data)
        tokenizer = self.tokenizer if tokens is not None else None
        if tokens is not None and tokenizer is not None:
            # The sampled ids decoded as in process: the server's parse of the arguments
            # is not the model's (decoding.py).
            raw_text, parsed = decode_turn(
                tokenizer,
                tokens.prompt_token_ids,
                tokens.completion_token_ids,
                tools,
                id_prefix=f"call_{turn}",
            )
            content, reasoning, calls = parsed.content, parsed.reasoning, parsed.tool_calls
        else:
            content, reasoning, calls, raw_text = _server_turn(message, tools, turn)
        finish_raw = choice.get("finish_reason")
        finish: FinishReason = "length" if finish_raw == "length" else "stop"
        usage = data.get("usage") or {}
        return AssistantTurn(
            content=content,
            reasoning=reasoning,
            tool_calls=calls,
            finish_reason=finish,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            raw_text=raw_text,
            prompt_token_ids=tokens.prompt_token_ids if tokens else None,
            completion_token_ids=tokens.completion_token_ids if tokens else None,
            completion_logprobs=tokens.completion_logprobs if tokens else None,
        )


def _server_turn(
    message: dict[str, Any], tools: Sequence[dict[str, Any]], turn: int
) -> tuple[str, str | None, list[ToolCall], str]:
    """(content, reasoning, calls, raw text) as the server parsed them, for a server that
    returned no token ids or a policy without the tokenizer to decode them."""
    content = message.get("content") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning") or None
    calls: list[ToolCall] = []
    for i, raw in enumerate(message.get("tool_calls") or []):
        fn = raw.get("function") or {}
        call_id = raw.get("id") or f"call_{turn}_{i}"
        name = fn.get("name") or ""
        args_text = fn.get("arguments") or "{}"
        try:
            args = json.loads(args_text) if isinstance(args_text, str) else args_text
        except json.JSONDecodeError:
            error = "tool call arguments are not valid JSON"
            calls.append(ToolCall(call_id, name, {}, error=error))
            continue
        if not isinstance(args, dict):
            error = "tool call arguments are not an object"
            calls.append(ToolCall(call_id, name, {}, error=error))
            continue
        calls.append(ToolCall(call_id, name, as_written(name, args, tools)))
    raw_text = content
    if not calls and (CALL_OPEN in content or "<function=" in content or THINK_CLOSE in content):
        # A server started without a tool/reasoning parser hands back the raw text.
        parsed = parse_completion(content, tools, id_prefix=f"call_{turn}")
        content, calls = parsed.content, parsed.tool_calls
        reasoning = reasoning or parsed.reasoning
    return content, reasoning, calls, raw_text


def _to_openai_message(message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    if out.get("tool_calls"):
        out["tool_calls"] = [
            {
                **c,
                "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])},
            }
            for c in out["tool_calls"]
        ]
    return out


class _Transient(Exception):
    """A failure another try may not have (no connection, a timeout, 429, 5xx)."""


class _Cancelled(Exception):
    """The job was cancelled before or between tries."""


def _sleep_unless(seconds: float, stop: StopCheck) -> bool:
    """Sleep ``seconds`` in short slices; True if told to stop meanwhile."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if stop():
            return True
        time.sleep(min(left, 0.1))
    return stop()
