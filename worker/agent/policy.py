"""Policies: what turns the conversation so far into the model's next turn.

Three backends share the :class:`Policy` protocol:

- :class:`TransformersPolicy` runs the weights in-process with ``transformers``
  (the default, and what the trainer plugs into). It renders the prompt with
  the tokenizer's own chat template, enforces the context window before
  generating, and records the prompt ids, generated ids and their sampling
  log-probs for the trainer.
- :class:`OpenAIPolicy` talks to an OpenAI-compatible chat-completions server
  (vLLM, SGLang, llama.cpp, Ollama) with native function calling; from vLLM and
  SGLang it records the same token ids and log-probs (:mod:`worker.agent.served_tokens`).
- :class:`ReplayPolicy` plays back a recorded trajectory (tests, debugging;
  never the default).

Sampling defaults (``bot.settings.AgentSettings``) are the values recommended for
this model family in thinking mode for precise coding tasks: temperature 0.6,
top_p 0.95, top_k 20, min_p 0, repetition_penalty 1.0 (Qwen3.5 model card,
"Best Practices: Thinking mode for precise coding tasks"; FrogNano-4B-2609 is a
``qwen3_5`` fine-tune and issue #5 quotes the same values from its card). 8,192
new tokens per turn, a 65,536-token context (the model allows up to 131,072)
and 100 turns are the limits the training harness used, as given in issue #5.
FrogNano's own ``generation_config.json`` and ``chat_template.jinja`` were not
reachable from here (no hub access; the public docs we could search show only
its discussion page), so nothing in this module hard-codes them: the chat
template always comes from the tokenizer that ships with the weights.

Imports of torch/transformers happen inside :class:`TransformersPolicy` so that
``import worker.agent`` stays light.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import requests

from bot.retrying import retry
from bot.settings import AgentSettings, ModelSettings
from worker.agent.parser import CALL_OPEN, THINK_CLOSE, THINK_OPEN, parse_completion
from worker.agent.served_tokens import TOKEN_REQUEST_FIELDS, served_tokens
from worker.agent.trajectory import FinishReason, ToolCall, Trajectory, read_jsonl

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

StopCheck = Callable[[], bool]
log = logging.getLogger(__name__)
EOS_TOKENS = ("<|im_end|>", "<|endoftext|>")  # Qwen3.5 ends a turn with either


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
    return math.ceil(len(serialized.encode("utf-8")) / 4)


def policy_tokenizer(policy: Policy) -> Any | None:
    """The tokenizer the loop counts context with: the policy's own when it has one."""
    return getattr(policy, "tokenizer", None)


# --------------------------------------------------------------------------- transformers
@dataclass
class _LoadedModel:
    tokenizer: PreTrainedTokenizerBase
    model: PreTrainedModel
    eos_ids: list[int]
    lock: threading.Lock = field(default_factory=threading.Lock)


_WEIGHTS: dict[tuple[str, str | None, str, Path | None], _LoadedModel] = {}
_WEIGHTS_LOCK = threading.Lock()


def _load_weights(settings: ModelSettings) -> _LoadedModel:
    key = (settings.model, settings.revision, settings.quantization, settings.adapter_path)
    with _WEIGHTS_LOCK:
        if key not in _WEIGHTS:
            # One set of weights per process: a promoted version replaces the previous one
            # instead of piling up copies in (GPU) memory.
            _WEIGHTS.clear()
            _WEIGHTS[key] = _load_weights_uncached(settings)
        return _WEIGHTS[key]


def _load_weights_uncached(settings: ModelSettings) -> _LoadedModel:
    import torch
    from huggingface_hub import constants as hub_constants
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # huggingface_hub reads HF_HUB_OFFLINE itself; asking for local files only when it is
    # set turns a would-be network timeout into an immediate, clear error.
    offline = bool(hub_constants.HF_HUB_OFFLINE)
    common: dict[str, Any] = {"revision": settings.revision, "local_files_only": offline}
    cuda = torch.cuda.is_available()
    kwargs: dict[str, Any] = {"dtype": torch.bfloat16 if cuda else torch.float32}
    if settings.quantization != "none":
        try:
            import bitsandbytes  # noqa: F401
        except ImportError:
            raise PolicyError(
                f"quantization={settings.quantization} needs bitsandbytes, which is not "
                "installed (pip install bitsandbytes, or set RIBBIT_MODEL__QUANTIZATION=none)"
            ) from None
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = (
            BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
            if settings.quantization == "4bit"
            else BitsAndBytesConfig(load_in_8bit=True)
        )
        kwargs["device_map"] = "auto"
    try:
        tokenizer = AutoTokenizer.from_pretrained(settings.model, **common)
        model = AutoModelForCausalLM.from_pretrained(settings.model, **common, **kwargs)
    except (OSError, ValueError) as exc:
        where = " (HF_HUB_OFFLINE is set: only local files are used)" if offline else ""
        raise PolicyError(f"cannot load model {settings.model!r}{where}: {exc}") from exc
    name = settings.model
    if settings.adapter_path is not None:
        from peft import PeftModel

        try:
            model = PeftModel.from_pretrained(model, str(settings.adapter_path))  # type: ignore[assignment]
        except (OSError, ValueError) as exc:
            raise PolicyError(f"cannot load adapter {settings.adapter_path}: {exc}") from exc
        name = f"{settings.model}+{settings.adapter_path.name}"
    if cuda and "device_map" not in kwargs:
        model = model.to("cuda")  # type: ignore[arg-type]
    model.eval()
    return _wrap_loaded(model, tokenizer, name)


def _wrap_loaded(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, name: str
) -> _LoadedModel:
    if not getattr(tokenizer, "chat_template", None):
        raise PolicyError(f"model {name!r} has no chat template in its tokenizer")
    eos_ids: list[int] = []
    for token in EOS_TOKENS:
        tid = tokenizer.convert_tokens_to_ids(token)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid not in eos_ids:
            eos_ids.append(tid)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in eos_ids:
        eos_ids.append(tokenizer.eos_token_id)
    if not eos_ids:
        raise PolicyError(f"model {name!r}: no end-of-turn token found")
    return _LoadedModel(tokenizer=tokenizer, model=model, eos_ids=eos_ids)


class TransformersPolicy:
    """In-process generation with transformers; one loaded copy per process and model."""

    name = "transformers"

    def __init__(self, model: ModelSettings, defaults: AgentSettings | None = None) -> None:
        self.settings = model
        self.model_name = model.model
        self.defaults = defaults or AgentSettings()
        self._loaded = _load_weights(model)

    @classmethod
    def from_model(
        cls,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        model_name: str = "in-memory",
        defaults: AgentSettings | None = None,
    ) -> TransformersPolicy:
        """Wrap weights already in memory (the trainer's policy model, a PEFT model)."""
        policy = cls.__new__(cls)
        policy.settings = ModelSettings(model=model_name)
        policy.model_name = model_name
        policy.defaults = defaults or AgentSettings()
        policy._loaded = _wrap_loaded(model, tokenizer, model_name)
        return policy

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self._loaded.tokenizer

    @property
    def model(self) -> PreTrainedModel:
        return self._loaded.model

    def render(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        enable_thinking: bool,
    ) -> str:
        text = self.tokenizer.apply_chat_template(
            list(messages),
            tools=list(tools),
            add_generation_prompt=True,
            enable_thinking=enable_thinking,
            tokenize=False,
        )
        assert isinstance(text, str)
        return text

    def generate(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        limits: AgentSettings | None = None,
        should_stop: StopCheck | None = None,
    ) -> AssistantTurn:
        import torch
        from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

        limits = limits or self.defaults
        stop = should_stop or (lambda: False)
        prompt = self.render(messages, tools, enable_thinking=limits.enable_thinking)
        prompt_ids: list[int] = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        n_prompt = len(prompt_ids)
        room = limits.max_context_tokens - n_prompt
        if room < 1:
            raise ContextWindowExceeded(
                f"prompt is {n_prompt} tokens; the context window is {limits.max_context_tokens}"
            )
        budget = min(limits.max_new_tokens, room)

        class _StopWhenTold(StoppingCriteria):
            def __call__(
                self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any
            ) -> torch.BoolTensor:
                flag = stop()
                return torch.full(
                    (input_ids.shape[0],), flag, dtype=torch.bool, device=input_ids.device
                )  # type: ignore[return-value]

        sample = limits.temperature > 0
        config_kwargs: dict[str, Any] = {
            "max_new_tokens": budget,
            "eos_token_id": self._loaded.eos_ids,
            "pad_token_id": self.tokenizer.pad_token_id or self._loaded.eos_ids[-1],
            "repetition_penalty": limits.repetition_penalty,
            "do_sample": sample,
            "return_dict_in_generate": True,
            "output_scores": True,
        }
        if sample:
            # Explicit values (top_k=0 means off) so the model's generation_config.json
            # cannot silently change what the settings say.
            config_kwargs.update(
                temperature=limits.temperature,
                top_p=limits.top_p,
                top_k=limits.top_k,
                min_p=limits.min_p,
            )
        config = GenerationConfig(**config_kwargs)
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        with self._loaded.lock, torch.inference_mode():
            out = self.model.generate(  # type: ignore[operator]
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                generation_config=config,
                stopping_criteria=StoppingCriteriaList([_StopWhenTold()]),
                # transformers turns this on by itself for an FSDP-sharded model under
                # torchrun (an all-reduce per token, so every rank must generate as long as
                # the others); the trainer's ranks generate their own rollouts, with the
                # weights gathered first (trainer.distributed.gathered), so none waits.
                synced_gpus=False,
            )
        completion = out.sequences[0, n_prompt:].tolist()
        logprobs: list[float] = []
        if completion:
            # Log-probs of the distribution each token was sampled from: after repetition
            # penalty, temperature, top-k, top-p and min-p, exactly what generate() used.
            scores = torch.stack([s[0] for s in out.scores[: len(completion)]]).float()
            chosen = torch.tensor(completion, device=scores.device).unsqueeze(1)
            logprobs = torch.log_softmax(scores, dim=-1).gather(1, chosen).squeeze(1).tolist()
        finish: FinishReason
        if completion and completion[-1] in self._loaded.eos_ids:
            finish = "stop"
        elif stop():
            finish = "cancelled"
        elif len(completion) >= budget:
            finish = "length" if budget == limits.max_new_tokens else "context_length"
        else:
            finish = "stop"
        text = str(self.tokenizer.decode(completion, skip_special_tokens=False))
        for token in EOS_TOKENS:
            if text.endswith(token):
                text = text[: -len(token)]
                break
        thinking_open = prompt.rstrip().endswith(THINK_OPEN)
        parsed = parse_completion(
            text, tools, thinking_open=thinking_open, id_prefix=f"call_{_assistant_count(messages)}"
        )
        return AssistantTurn(
            content=parsed.content,
            reasoning=parsed.reasoning,
            tool_calls=parsed.tool_calls,
            finish_reason=finish,
            prompt_tokens=n_prompt,
            completion_tokens=len(completion),
            raw_text=text,
            prompt_token_ids=prompt_ids,
            completion_token_ids=completion,
            completion_logprobs=logprobs,
        )


def _assistant_count(messages: Sequence[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


# --------------------------------------------------------------------------- openai
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
        """The served model's tokenizer, for counting context as Leaf does (it loads the
        model's tokenizer by name); only from local files, so an offline worker does not
        stall in hub retries. None: the loop falls back to Leaf's bytes / 4."""
        if not hasattr(self, "_tokenizer"):
            self._tokenizer = None
            try:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(
                    self.settings.model, local_files_only=True
                )
            except Exception:
                self._tokenizer = None
        return self._tokenizer

    def _headers(self) -> dict[str, str]:
        key = self.settings.openai_api_key
        return {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}

    def request_body(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        limits: AgentSettings,
    ) -> dict[str, Any]:
        # Leaf's request (agent.py @ 33de19f9: OpenAIChatClient.complete), with its
        # extra_body keys (top_p, top_k, min_p, repetition_penalty, chat_template_kwargs)
        # at the top level, where the OpenAI client puts them. vLLM and SGLang are also
        # asked for the token ids and log-probs the trainer needs (served_tokens.py);
        # other servers are not sent keys they may refuse.
        tokens = TOKEN_REQUEST_FIELDS if self.settings.openai_server != "other" else {}
        return {
            **tokens,
            "model": self.settings.model,
            "messages": [_to_openai_message(m) for m in messages],
            "tools": list(tools),
            "tool_choice": "auto",
            "temperature": limits.temperature,
            "parallel_tool_calls": True,
            "max_completion_tokens": limits.max_new_tokens,
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
        body = self.request_body(messages, tools, limits)
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
            if resp.status_code == 429 or resp.status_code >= 500:
                raise _Transient(f"HTTP {resp.status_code}: {resp.text[:300]}")
            if resp.status_code >= 400:
                text = resp.text[:500]
                if "context" in text.lower() and (
                    "length" in text.lower() or "token" in text.lower()
                ):
                    raise ContextWindowExceeded(f"server refused the prompt: {text}")
                raise PolicyError(f"{self.url} answered HTTP {resp.status_code}: {text}")
            try:
                data = resp.json()
            except ValueError:
                raise PolicyError(
                    f"{self.url} answered with something that is not JSON: {resp.text[:200]!r}"
                ) from None
            return self._parse_response(data, tools, _assistant_count(messages))

        def wait(seconds: float) -> None:
            if _sleep_unless(seconds, stop):
                raise _Cancelled

        try:
            # No jitter: one worker talks to its own server, and waits are cancellable.
            return retry(
                ask,
                retry_on=(_Transient,),
                attempts=attempts,
                base_delay=self.settings.openai_retry_backoff_s,
                sleep=wait,
                delay=lambda base, attempt: base * 2**attempt,
            )
        except _Cancelled:
            return AssistantTurn("", None, [], "cancelled")
        except _Transient as exc:
            raise PolicyError(
                f"the OpenAI-compatible server at {self.settings.openai_base_url} failed "
                f"{attempts} times (last: {exc}); is it running? "
                "(RIBBIT_MODEL__OPENAI_BASE_URL)"
            ) from None

    def _parse_response(
        self, data: Any, tools: Sequence[dict[str, Any]], turn: int
    ) -> AssistantTurn:
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise PolicyError(f"unexpected chat-completions answer: {str(data)[:300]}") from None
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
                calls.append(
                    ToolCall(call_id, name, {}, error="tool call arguments are not valid JSON")
                )
                continue
            if not isinstance(args, dict):
                calls.append(
                    ToolCall(call_id, name, {}, error="tool call arguments are not an object")
                )
                continue
            calls.append(ToolCall(call_id, name, args))
        raw_text = content
        if not calls and (
            CALL_OPEN in content or "<function=" in content or THINK_CLOSE in content
        ):
            # A server started without a tool/reasoning parser hands back the raw text.
            parsed = parse_completion(content, tools, id_prefix=f"call_{turn}")
            content, calls = parsed.content, parsed.tool_calls
            reasoning = reasoning or parsed.reasoning
        finish_raw = choice.get("finish_reason")
        finish: FinishReason = "length" if finish_raw == "length" else "stop"
        usage = data.get("usage") or {}
        tokens = served_tokens(data)
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


# --------------------------------------------------------------------------- replay
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
        n = _assistant_count(messages)
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


# --------------------------------------------------------------------------- factory
_POLICIES: dict[str, Policy] = {}
_POLICIES_LOCK = threading.Lock()


def load_policy(model: ModelSettings, agent: AgentSettings) -> Policy:
    """The policy for these settings, created once per process (weights load once per
    worker process, never per job)."""
    key = model.model_dump_json() + agent.model_dump_json()
    with _POLICIES_LOCK:
        policy = _POLICIES.get(key)
        if policy is None:
            if model.policy == "transformers":
                # Let go of policies holding earlier weights (a promotion or rollback).
                for old in [k for k, p in _POLICIES.items() if isinstance(p, TransformersPolicy)]:
                    del _POLICIES[old]
            policy = _create_policy(model, agent)
            _POLICIES[key] = policy
        return policy


def _create_policy(model: ModelSettings, agent: AgentSettings) -> Policy:
    if model.policy == "transformers":
        return TransformersPolicy(model, agent)
    if model.policy == "openai":
        return OpenAIPolicy(model, agent)
    if model.replay_file is None:
        raise PolicyError("policy=replay needs RIBBIT_MODEL__REPLAY_FILE")
    return ReplayPolicy.from_file(model.replay_file)
