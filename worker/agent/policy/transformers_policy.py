"""In-process generation with ``transformers`` (the default backend, and what the trainer
plugs into). It renders the prompt with the tokenizer's own chat template, enforces the
context window before generating, and records the prompt ids, generated ids and their
sampling log-probs for the trainer.

torch and transformers are imported inside the functions that need them, so that
``import worker.agent`` stays light.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.store.records.trajectory import FinishReason
from worker.agent.parser import parse_completion
from worker.agent.policy.base import (
    AssistantTurn,
    PolicyError,
    StopCheck,
    assistant_count,
    completion_budget,
    length_finish,
)
from worker.agent.policy.decoding import EOS_TOKENS, completion_text, opens_thinking
from worker.agent.policy.fast_decode import DecodePlan, FastDecodeMode, plain, plan_decode
from worker.settings import AgentSettings, ModelSettings

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase
    from transformers.generation.utils import GenerateDecoderOnlyOutput

log = logging.getLogger(__name__)


@dataclass
class _LoadedModel:
    tokenizer: PreTrainedTokenizerBase
    model: PreTrainedModel
    eos_ids: list[int]
    decode: DecodePlan
    lock: threading.Lock = field(default_factory=threading.Lock)


_WEIGHTS: dict[tuple[str, str | None, str, Path | None, str], _LoadedModel] = {}
_WEIGHTS_LOCK = threading.Lock()


def _load_weights(settings: ModelSettings) -> _LoadedModel:
    key = (
        settings.model,
        settings.revision,
        settings.quantization,
        settings.adapter_path,
        settings.fast_decode,
    )
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
    return _wrap_loaded(model, tokenizer, name, settings.fast_decode)


def _wrap_loaded(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    name: str,
    fast_decode: FastDecodeMode | DecodePlan,
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
    decode = fast_decode if isinstance(fast_decode, DecodePlan) else plan_decode(model, fast_decode)
    return _LoadedModel(tokenizer=tokenizer, model=model, eos_ids=eos_ids, decode=decode)


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
        fast_decode: FastDecodeMode | DecodePlan = "off",
    ) -> TransformersPolicy:
        """Wrap weights already in memory (the trainer's policy model, a PEFT model).

        ``fast_decode`` is off by default here: the trainer's weights change between
        rollouts and may be FSDP-sharded, which the plain path alone has been run with."""
        policy = cls.__new__(cls)
        policy.settings = ModelSettings(model=model_name)
        policy.model_name = model_name
        policy.defaults = defaults or AgentSettings()
        policy._loaded = _wrap_loaded(model, tokenizer, model_name, fast_decode)
        return policy

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self._loaded.tokenizer

    @property
    def model(self) -> PreTrainedModel:
        return self._loaded.model

    @property
    def decode_plan(self) -> DecodePlan:
        return self._loaded.decode

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
        from transformers import StoppingCriteria, StoppingCriteriaList

        limits = limits or self.defaults
        stop = should_stop or (lambda: False)
        prompt = self.render(messages, tools, enable_thinking=limits.enable_thinking)
        prompt_ids: list[int] = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        n_prompt = len(prompt_ids)
        budget = completion_budget(n_prompt, limits)

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
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        with self._loaded.lock, torch.inference_mode():
            out = self._generate_ids(
                input_ids, config_kwargs, StoppingCriteriaList([_StopWhenTold()])
            )
        completion = out.sequences[0, n_prompt:].tolist()
        logprobs: list[float] = []
        if completion:
            # Log-probs of the distribution each token was sampled from: after repetition
            # penalty, temperature, top-k, top-p and min-p, exactly what generate() used.
            scores = torch.stack([s[0] for s in (out.scores or ())[: len(completion)]]).float()
            chosen = torch.tensor(completion, device=scores.device).unsqueeze(1)
            logprobs = torch.log_softmax(scores, dim=-1).gather(1, chosen).squeeze(1).tolist()
        finish: FinishReason
        if completion and completion[-1] in self._loaded.eos_ids:
            finish = "stop"
        elif stop():
            finish = "cancelled"
        elif len(completion) >= budget:
            finish = length_finish(budget, limits)
        else:
            finish = "stop"
        text = completion_text(self.tokenizer, completion)
        parsed = parse_completion(
            text,
            tools,
            thinking_open=opens_thinking(prompt),
            id_prefix=f"call_{assistant_count(messages)}",
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

    def _generate_ids(
        self, input_ids: torch.Tensor, config_kwargs: dict[str, Any], stopping: Any
    ) -> GenerateDecoderOnlyOutput:
        """generate() on the loaded model's decode plan; if the fast path fails (a graph
        that will not compile, a cache the model refuses at run time), the reason is
        logged, the plan falls back to plain for this model, and the turn is decoded
        again there, since a slow turn beats a failed job."""
        from transformers import GenerationConfig

        plan = self._loaded.decode
        try:
            return self._call_generate(
                input_ids, GenerationConfig(**config_kwargs, **plan.generation_kwargs()), stopping
            )
        except Exception as exc:
            if not plan.fast:
                raise
            log.warning("fast decoding failed, falling back to plain decoding: %r", exc)
            self._loaded.decode = plain(f"fast decoding failed: {exc!r}")
        return self._call_generate(input_ids, GenerationConfig(**config_kwargs), stopping)

    def _call_generate(
        self, input_ids: torch.Tensor, config: GenerationConfig, stopping: Any
    ) -> GenerateDecoderOnlyOutput:
        import torch

        return self.model.generate(  # type: ignore[operator]
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            generation_config=config,
            stopping_criteria=stopping,
            # transformers turns this on by itself for an FSDP-sharded model under
            # torchrun (an all-reduce per token, so every rank must generate as long as
            # the others); the trainer's ranks generate their own rollouts, with the
            # weights gathered first (trainer.distributed.gathered), so none waits.
            synced_gpus=False,
        )
