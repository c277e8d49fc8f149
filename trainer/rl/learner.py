"""The learner: log-probs of rollout tokens under the current weights, and GRPO updates.

- LoRA (peft) by default; full fine-tuning when asked. With LoRA the reference
  model for the KL term is the same weights with the adapter switched off, so
  no second copy is kept.
- fp32 on CPU, bf16 on GPU (the dtype the model was loaded with; log-softmax is
  always taken in fp32).
- Log-probs are computed in chunks of positions through the lm_head, each chunk
  under activation checkpointing, so the full ``(T, vocab)`` logits never exist at
  once (a 65k-token rollout times a 150k vocab would not fit).
- Logits are divided by the sampling temperature so the learner scores tokens
  under the distribution they were sampled from. Top-k/top-p are not modelled:
  keep them off for training (the TrainSettings defaults) or the ratios are
  biased.
- With one update per batch the ratio is exactly 1 and the "old" log-probs are
  the current ones detached (no extra forward pass); with more, they are
  computed once before the first update.
- Sequences are processed one at a time with batch-wide loss weights, so memory
  holds one sequence's activations and the update is still the batch's.
- Checkpoints hold the trainable weights, the optimizer, the step and every RNG
  state, so a resumed run takes exactly the step the original would have.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from trainer.config import TrainSettings
from trainer.rl.loss import LossConfig, policy_loss, token_weights

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass(frozen=True)
class Sample:
    """One token sequence to learn from, with its rollout's advantage."""

    input_ids: list[int]
    loss_mask: list[int]
    advantage: float


@dataclass(frozen=True)
class StepStats:
    loss: float
    policy_loss: float
    kl: float
    clip_fraction: float
    tokens: int
    grad_norm: float


def default_dtype() -> torch.dtype:
    return torch.bfloat16 if torch.cuda.is_available() else torch.float32


def load_base_model(path: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=default_dtype())
    if torch.cuda.is_available():
        model = model.to("cuda")  # type: ignore[arg-type]
    return model, tokenizer


class Learner:
    def __init__(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, settings: TrainSettings
    ) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        self.is_lora = settings.finetune == "lora"
        if settings.gradient_checkpointing:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        if self.is_lora:
            from peft import LoraConfig, get_peft_model

            target: Any = settings.lora_target_modules
            if target != "all-linear":
                target = [t.strip() for t in target.split(",") if t.strip()]
            config = LoraConfig(
                r=settings.lora_r,
                lora_alpha=settings.lora_alpha,
                lora_dropout=settings.lora_dropout,
                target_modules=target,
                task_type="CAUSAL_LM",
            )
            self.model: Any = get_peft_model(model, config)
            self.ref_model: Any = None
        else:
            self.model = model
            self.ref_model = None
            if settings.kl_coef > 0:
                import copy

                self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.params, lr=settings.learning_rate, weight_decay=settings.weight_decay
        )
        self.loss_config = LossConfig(
            eps_low=settings.eps_low,
            eps_high=settings.eps_high,
            aggregation=settings.aggregation,  # type: ignore[arg-type]
            kl_coef=settings.kl_coef,
        )
        self.step_count = 0

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # -- log-probs -------------------------------------------------------------
    def _backbone_and_head(self, model: Any) -> tuple[Any, Any]:
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        return base.model, base.get_output_embeddings()

    def token_logprobs(self, input_ids: list[int], *, model: Any = None) -> Tensor:
        """``(T-1,)`` log-prob of each token given those before it (position t scores
        ``input_ids[t+1]``)."""
        model = model if model is not None else self.model
        backbone, head = self._backbone_and_head(model)
        ids = torch.tensor([input_ids], dtype=torch.long, device=self.device)
        hidden = backbone(input_ids=ids).last_hidden_state[0, :-1]
        targets = ids[0, 1:]
        temperature = self.settings.temperature

        def chunk_logprobs(h: Tensor, t: Tensor) -> Tensor:
            logits = head(h).float() / temperature
            return torch.log_softmax(logits, dim=-1).gather(1, t.unsqueeze(1)).squeeze(1)

        size = self.settings.logprob_chunk_tokens
        parts = []
        for start in range(0, hidden.shape[0], size):
            h, t = hidden[start : start + size], targets[start : start + size]
            if torch.is_grad_enabled():
                parts.append(checkpoint(chunk_logprobs, h, t, use_reentrant=False))
            else:
                parts.append(chunk_logprobs(h, t))
        return torch.cat(parts)

    def _ref_logprobs(self, input_ids: list[int]) -> Tensor:
        with torch.no_grad():
            if self.is_lora:
                with self.model.disable_adapter():
                    return self.token_logprobs(input_ids)
            return self.token_logprobs(input_ids, model=self.ref_model)

    # -- updates ---------------------------------------------------------------
    def step(self, samples: list[Sample]) -> StepStats:
        """One batch: ``updates_per_batch`` optimizer updates on these samples.

        Sequences go through forward and backward one at a time (gradients
        accumulate), so memory holds one sequence's activations, while the loss
        weights come from the whole batch's mask: the update is the same as one
        taken on the batch at once.
        """
        if not samples:
            raise ValueError("no samples to learn from")
        device = self.device
        length = max(len(s.input_ids) for s in samples) - 1
        masks = [torch.tensor(s.loss_mask[1:], dtype=torch.float32, device=device) for s in samples]
        batch_mask = self._pad(masks, length)
        weights = token_weights(batch_mask, self.loss_config)
        advantages = torch.tensor([s.advantage for s in samples], device=device)
        refs: list[Tensor | None] = [
            self._ref_logprobs(s.input_ids) if self.settings.kl_coef > 0 else None for s in samples
        ]
        olds: list[Tensor | None] = [None] * len(samples)
        if self.settings.updates_per_batch > 1:
            self.model.eval()
            with torch.no_grad():
                olds = [self.token_logprobs(s.input_ids) for s in samples]
        stats: StepStats | None = None
        self.model.train()
        for _ in range(self.settings.updates_per_batch):
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum = pg_sum = kl_sum = clip_sum = 0.0
            tokens = 0
            for i, sample in enumerate(samples):
                n = masks[i].shape[0]
                logprobs = self.token_logprobs(sample.input_ids).unsqueeze(0)
                old, ref = olds[i], refs[i]
                out = policy_loss(
                    logprobs,
                    old.unsqueeze(0) if old is not None else logprobs.detach(),
                    advantages[i : i + 1],
                    masks[i].unsqueeze(0),
                    self.loss_config,
                    ref_logprobs=ref.unsqueeze(0) if ref is not None else None,
                    weights=weights[i : i + 1, :n],
                )
                out.loss.backward()
                loss_sum += float(out.loss.detach())
                pg_sum += float(out.policy_loss)
                kl_sum += float(out.kl) * out.tokens
                clip_sum += float(out.clip_fraction) * out.tokens
                tokens += out.tokens
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.settings.max_grad_norm)
            self.optimizer.step()
            stats = StepStats(
                loss=loss_sum,
                policy_loss=pg_sum,
                kl=kl_sum / max(tokens, 1),
                clip_fraction=clip_sum / max(tokens, 1),
                tokens=tokens,
                grad_norm=float(grad_norm),
            )
        self.model.eval()
        self.step_count += 1
        assert stats is not None
        return stats

    @staticmethod
    def _pad(rows: list[Tensor], length: int) -> Tensor:
        return torch.stack([torch.nn.functional.pad(r, (0, length - r.shape[0])) for r in rows])

    # -- checkpoints -----------------------------------------------------------
    def trainable_state(self) -> dict[str, Tensor]:
        if self.is_lora:
            from peft import get_peft_model_state_dict

            return {k: v.detach().clone() for k, v in get_peft_model_state_dict(self.model).items()}
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def save(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.trainable_state(), directory / "weights.pt")
        torch.save(self.optimizer.state_dict(), directory / "optimizer.pt")
        torch.save(
            {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                "python": random.getstate(),
            },
            directory / "rng.pt",
        )
        (directory / "state.json").write_text(json.dumps({"step": self.step_count}))
        if self.is_lora:
            # A plain peft adapter folder too: what the registry points workers at.
            self.model.save_pretrained(directory / "adapter")
        return directory

    def load(self, directory: Path) -> None:
        weights = torch.load(directory / "weights.pt", map_location=self.device)
        if self.is_lora:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(self.model, weights)
        else:
            self.model.load_state_dict(weights)
        self.optimizer.load_state_dict(
            torch.load(directory / "optimizer.pt", map_location=self.device)
        )
        rng = torch.load(directory / "rng.pt", weights_only=False)
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        random.setstate(rng["python"])
        self.step_count = int(json.loads((directory / "state.json").read_text())["step"])
