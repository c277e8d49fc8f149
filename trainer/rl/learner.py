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
- Data parallel (``torchrun``, see :mod:`trainer.distributed`): each rank steps on
  its own samples with loss weights from the global batch totals, gradients are
  summed across ranks before clipping, and every rank takes the same update as one
  process would on the whole batch; the ranks' weights stay bit-identical.
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
from trainer.distributed import Ranks
from trainer.rl.loss import BatchTotals, LossConfig, policy_loss, token_weights

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass(frozen=True)
class Sample:
    """One token sequence to learn from, with its rollout's advantage."""

    input_ids: list[int]
    loss_mask: list[int]
    advantage: float
    # The sampling engine's log-prob of each token (position t: input_ids[t]), where it
    # is not the learner (an inference server); None: sampled by the learner's model.
    behaviour_logprobs: list[float] | None = None


@dataclass(frozen=True)
class StepStats:
    loss: float
    policy_loss: float
    kl: float
    clip_fraction: float
    tokens: int
    grad_norm: float
    # Over tokens with behaviour log-probs: mean |learner - sampler| log-prob, and the
    # share whose importance weight was capped (0 when every sample is the learner's).
    behaviour_gap: float = 0.0
    truncated_fraction: float = 0.0


def default_dtype() -> torch.dtype:
    return torch.bfloat16 if torch.cuda.is_available() else torch.float32


def load_base_model(
    path: str, *, dtype: torch.dtype | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model and tokenizer saved at ``path``, in ``dtype`` (default: bf16 on a GPU,
    fp32 on the CPU)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or default_dtype())
    if torch.cuda.is_available():
        model = model.to("cuda")  # type: ignore[arg-type]
    return model, tokenizer


def _seed_rngs(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # CUDA generators too


def _rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "python": random.getstate(),
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])


class Learner:
    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        settings: TrainSettings,
        *,
        ranks: Ranks | None = None,
    ) -> None:
        """``ranks``: the data-parallel group (default: the initialised default process
        group, else a single process)."""
        self.settings = settings
        self.ranks = ranks if ranks is not None else Ranks.detect()
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
        # Every rank starts from rank 0's weights (LoRA's initialisation is random); then
        # each rank reseeds the RNGs generate() samples from, so ranks roll out differently.
        self.ranks.broadcast_parameters_(self.params)
        if self.ranks.distributed:
            _seed_rngs(settings.seed + self.ranks.rank)
        self.optimizer = torch.optim.AdamW(
            self.params, lr=settings.learning_rate, weight_decay=settings.weight_decay
        )
        self.loss_config = LossConfig(
            eps_low=settings.eps_low,
            eps_high=settings.eps_high,
            aggregation=settings.aggregation,  # type: ignore[arg-type]
            kl_coef=settings.kl_coef,
            tis_cap=settings.tis_cap,
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
            logits = head(h)
            # Softmax in at least fp32 (bf16 logits lose the tail); never below the
            # model's own precision (an fp64 model stays fp64).
            logits = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature
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
        taken on the batch at once. Under data parallelism the batch is the union of
        every rank's ``samples`` (a rank may have none); raises ValueError on every
        rank when that union is empty (see :meth:`step_or_skip`).
        """
        stats = self._update(samples)
        if stats is None:
            raise ValueError("no samples to learn from")
        return stats

    def step_or_skip(self, samples: list[Sample]) -> StepStats | None:
        """:meth:`step`, except that an empty batch (empty on every rank) counts as a
        step skipped: returns None, weights unchanged, on every rank alike."""
        stats = self._update(samples)
        if stats is None:
            self.step_count += 1
        return stats

    def _update(self, samples: list[Sample]) -> StepStats | None:
        device = self.device
        length = max((len(s.input_ids) for s in samples), default=1) - 1
        masks = [torch.tensor(s.loss_mask[1:], dtype=torch.float32, device=device) for s in samples]
        batch_mask = self._pad(masks, length) if masks else torch.zeros(0, 0, device=device)
        totals = self.ranks.all_reduce_totals(BatchTotals.from_mask(batch_mask), device)
        if totals.sequences == 0:
            return None
        weights = token_weights(batch_mask, self.loss_config, totals)
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
            loss_sum = pg_sum = kl_sum = clip_sum = gap_sum = cut_sum = 0.0
            tokens = 0
            for i, sample in enumerate(samples):
                n = masks[i].shape[0]
                logprobs = self.token_logprobs(sample.input_ids).unsqueeze(0)
                old, ref = olds[i], refs[i]
                behaviour = (
                    torch.tensor(sample.behaviour_logprobs[1:], device=device).unsqueeze(0)
                    if sample.behaviour_logprobs is not None
                    else None
                )
                out = policy_loss(
                    logprobs,
                    old.unsqueeze(0) if old is not None else logprobs.detach(),
                    advantages[i : i + 1],
                    masks[i].unsqueeze(0),
                    self.loss_config,
                    ref_logprobs=ref.unsqueeze(0) if ref is not None else None,
                    weights=weights[i : i + 1, :n],
                    behaviour_logprobs=behaviour,
                )
                out.loss.backward()
                loss_sum += float(out.loss.detach())
                pg_sum += float(out.policy_loss)
                kl_sum += float(out.kl) * out.tokens
                clip_sum += float(out.clip_fraction) * out.tokens
                if out.behaviour_gap is not None and out.truncated_fraction is not None:
                    gap_sum += float(out.behaviour_gap) * out.tokens
                    cut_sum += float(out.truncated_fraction) * out.tokens
                tokens += out.tokens
            # Each rank's loss is its share of the global batch loss (global weights), so
            # the sum of the ranks' gradients is the whole batch's gradient; clipping and
            # the optimizer step then run on identical inputs on every rank. (Not DDP,
            # which would all-reduce on every per-sequence backward, or hang when ranks
            # hold different numbers of sequences: see trainer/distributed.py.)
            self.ranks.sum_gradients_(self.params)
            loss_sum, pg_sum, kl_sum, clip_sum, gap_sum, cut_sum, total_tokens = self.ranks.sum_(
                torch.tensor(
                    [loss_sum, pg_sum, kl_sum, clip_sum, gap_sum, cut_sum, float(tokens)],
                    dtype=torch.float64,
                    device=device,
                )
            ).tolist()
            tokens = round(total_tokens)
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.settings.max_grad_norm)
            self.optimizer.step()
            stats = StepStats(
                loss=loss_sum,
                policy_loss=pg_sum,
                kl=kl_sum / max(tokens, 1),
                clip_fraction=clip_sum / max(tokens, 1),
                tokens=tokens,
                grad_norm=float(grad_norm),
                behaviour_gap=gap_sum / max(tokens, 1),
                truncated_fraction=cut_sum / max(tokens, 1),
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
        """Write a checkpoint. Under data parallelism every rank must call it: rank 0
        alone writes (the ranks' weights and optimizers are identical), with every
        rank's RNG state, and the others wait for it."""
        # The ranks sample different rollouts, so each one's RNG state is kept.
        rng_states = self.ranks.all_gather_object(_rng_state())
        if self.ranks.is_main:
            directory.mkdir(parents=True, exist_ok=True)
            torch.save(self.trainable_state(), directory / "weights.pt")
            torch.save(self.optimizer.state_dict(), directory / "optimizer.pt")
            # Rank 0's state at the top level (what single-process checkpoints hold).
            torch.save({**rng_states[0], "ranks": rng_states}, directory / "rng.pt")
            (directory / "state.json").write_text(json.dumps({"step": self.step_count}))
            if self.is_lora:
                # A plain peft adapter folder too: what the registry points workers at.
                self.model.save_pretrained(directory / "adapter")
        self.ranks.barrier()
        return directory

    def load(self, directory: Path) -> None:
        """Read a checkpoint (on every rank, from a path they all see)."""
        weights = torch.load(directory / "weights.pt", map_location=self.device)
        if self.is_lora:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(self.model, weights)
        else:
            self.model.load_state_dict(weights)
        self.optimizer.load_state_dict(
            torch.load(directory / "optimizer.pt", map_location=self.device)
        )
        self.step_count = int(json.loads((directory / "state.json").read_text())["step"])
        rng = torch.load(directory / "rng.pt", weights_only=False)
        per_rank = rng.get("ranks") or [rng]
        if self.ranks.rank < len(per_rank):
            _set_rng_state(per_rank[self.ranks.rank])
        else:
            # Resumed on more ranks than saved: a new rank gets a fresh stream of its own.
            _seed_rngs(self.settings.seed + self.ranks.rank + 1_000_003 * self.step_count)
