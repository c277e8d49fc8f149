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
- Checkpoints (torch.distributed.checkpoint) hold the trainable weights, the
  optimizer, the step and every RNG state, so a resumed run takes exactly the step
  the original would have; each rank writes its own shards, and a checkpoint can be
  resumed on another number of ranks. The exported model (LoRA adapter folder, or
  the whole model for a full fine-tune) is gathered and written by rank 0.
- Data parallel (``torchrun``, see :mod:`trainer.distributed`): the model is
  sharded with FSDP2; each rank steps on its own samples with loss weights from the
  global batch totals, FSDP sums the ranks' gradients into each shard, and the
  update is the one a single process would take on the whole batch.
"""

from __future__ import annotations

import contextlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed.checkpoint as dcp
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from torch.utils.checkpoint import checkpoint

from trainer.config import TrainSettings, lora_target_modules
from trainer.distributed import Ranks, full_tensor, gathered, is_sharded, shard
from trainer.rl.loss import BatchTotals, LossConfig, policy_loss, token_weights

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


# The folder of a checkpoint that torch.distributed.checkpoint writes.
CHECKPOINT = "checkpoint"
# What a rank with fewer sequences than another runs through forward and backward (with a
# zero loss) so that both take part in the same collectives.
FILLER_IDS = [0, 0]


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


def backbone_and_head(model: Any) -> tuple[Any, Any]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.model, base.get_output_embeddings()


def _token_logprobs(model: Any, ids: Tensor, temperature: float, chunk_tokens: int) -> Tensor:
    """``(T-1,)`` log-prob of each token of ``ids`` (``(1, T)``) given those before it."""
    backbone, head = backbone_and_head(model)
    hidden = backbone(input_ids=ids).last_hidden_state[0, :-1]
    targets = ids[0, 1:]

    def chunk_logprobs(h: Tensor, t: Tensor) -> Tensor:
        logits = head(h)
        # Softmax in at least fp32 (bf16 logits lose the tail); never below the
        # model's own precision (an fp64 model stays fp64).
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature
        return torch.log_softmax(logits, dim=-1).gather(1, t.unsqueeze(1)).squeeze(1)

    parts = []
    for start in range(0, hidden.shape[0], chunk_tokens):
        h, t = hidden[start : start + chunk_tokens], targets[start : start + chunk_tokens]
        if torch.is_grad_enabled():
            parts.append(checkpoint(chunk_logprobs, h, t, use_reentrant=False))
        else:
            parts.append(chunk_logprobs(h, t))
    return torch.cat(parts)


class _Scorer(nn.Module):
    """The module the learner calls for log-probs, and the root of the FSDP tree: the
    backbone and the head are used apart (the head in chunks), so the sharded root
    must be a module whose forward covers both."""

    def __init__(self, model: nn.Module, temperature: float, chunk_tokens: int) -> None:
        super().__init__()
        self.model = model
        self.temperature = temperature
        self.chunk_tokens = chunk_tokens

    def forward(self, ids: Tensor) -> Tensor:
        return _token_logprobs(self.model, ids, self.temperature, self.chunk_tokens)


def _decoder_layers(model: Any) -> list[nn.Module]:
    """The model's repeated blocks (transformers names their classes in
    ``_no_split_modules``): FSDP's units, each gathered only while it runs."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    no_split: Any = getattr(base, "_no_split_modules", None)
    names = set(no_split or [])
    return [m for m in model.modules() if type(m).__name__ in names]


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

            target = lora_target_modules(settings.lora_target_modules, model.config.model_type)
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
                if torch.cuda.is_available():  # fp32 masters when sharded: the ref needs no more
                    self.ref_model.to(torch.bfloat16)
        # Every rank starts from rank 0's weights (LoRA's initialisation is random); then
        # each rank reseeds the RNGs generate() samples from, so ranks roll out differently.
        self.ranks.broadcast_parameters_([p for p in self.model.parameters() if p.requires_grad])
        self.scorer = _Scorer(self.model, settings.temperature, settings.logprob_chunk_tokens)
        shard(self.scorer, _decoder_layers(self.model), self.ranks)
        if is_sharded(self.scorer):
            # FSDP picks its root at the first forward: make that the scorer, on every
            # rank alike, before anything calls an inner module (generation does). Inside
            # gathered(), which reshards everything after: the root would otherwise keep
            # its whole weights registered, and the optimizer below must get the shards.
            with torch.no_grad(), self.gathered():
                self.scorer(torch.tensor([FILLER_IDS], device=self.device))
        # After sharding: the optimizer holds (and AdamW keeps its state for) the shards.
        self.params = [p for p in self.model.parameters() if p.requires_grad]
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

    def gathered(self) -> contextlib.AbstractContextManager[None]:
        """The whole model on every rank, with no collective in a forward, for the
        duration: for generation and no-grad scoring, where ranks run different numbers
        of forward passes. Every rank must enter it; a no-op in one process."""
        return gathered(self.scorer)

    # -- log-probs -------------------------------------------------------------
    def token_logprobs(self, input_ids: list[int], *, model: Any = None) -> Tensor:
        """``(T-1,)`` log-prob of each token given those before it (position t scores
        ``input_ids[t+1]``). Sharded: a collective unless inside :meth:`gathered`."""
        ids = torch.tensor([input_ids], dtype=torch.long, device=self.device)
        if model is not None:  # the full fine-tune's reference copy (never sharded)
            return _token_logprobs(
                model, ids, self.settings.temperature, self.settings.logprob_chunk_tokens
            )
        out: Tensor = self.scorer(ids)
        return out

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
        olds: list[Tensor | None] = [None] * len(samples)
        self.model.eval()
        with self.gathered():  # each rank scores its own number of sequences
            refs: list[Tensor | None] = [
                self._ref_logprobs(s.input_ids) if self.settings.kl_coef > 0 else None
                for s in samples
            ]
            if self.settings.updates_per_batch > 1:
                with torch.no_grad():
                    olds = [self.token_logprobs(s.input_ids) for s in samples]
        # Sharded, every forward and backward is a collective (gather the layer, then
        # reduce-scatter its gradients), so every rank makes as many passes as the rank
        # with the most sequences; the extra ones carry a zero loss and add nothing.
        passes = self.ranks.max_int(len(samples), device)
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
            for _ in range(passes - len(samples)):
                (self.token_logprobs(FILLER_IDS).sum() * 0.0).backward()
            # Each rank's loss is its share of the global batch loss (global weights), and
            # FSDP sums (not averages) the ranks' gradients into each shard: the sum is the
            # whole batch's gradient, which clipping and the optimizer step then use.
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
                grad_norm=float(full_tensor(grad_norm)),
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
        """The trainable parameters, whole, by name (a collective when sharded)."""
        return {
            name: full_tensor(p.detach()).clone()
            for name, p in self.model.named_parameters()
            if p.requires_grad
        }

    def _state_options(self, *, whole: bool = False, strict: bool = True) -> StateDictOptions:
        # LoRA checkpoints hold the adapter only: the frozen base is the model's files.
        return StateDictOptions(
            full_state_dict=whole,
            cpu_offload=whole,
            ignore_frozen_params=self.is_lora,
            strict=strict,
        )

    def export(self, directory: Path) -> Path:
        """The current weights as workers and the registry load them: a peft adapter
        folder (LoRA), or a transformers model folder with its tokenizer (full
        fine-tune). Every rank must call it: the weights are gathered to rank 0, which
        alone writes."""
        state: dict[str, Any] | None = None
        if is_sharded(self.scorer):
            state = get_model_state_dict(self.model, options=self._state_options(whole=True))
        if self.ranks.is_main:
            self.model.save_pretrained(directory, state_dict=state)
            if not self.is_lora:
                self.tokenizer.save_pretrained(directory)
        self.ranks.barrier()
        return directory

    def save(self, directory: Path) -> Path:
        """Write a checkpoint: ``checkpoint/`` (torch.distributed.checkpoint: weights and
        optimizer, each rank its own shards), ``rng.pt`` (every rank's RNG state),
        ``state.json``, and the exported model (:meth:`export`: ``adapter/`` for LoRA,
        ``model/`` for a full fine-tune). Every rank must call it, with ``directory`` on a
        filesystem all of them see."""
        # The ranks sample different rollouts, so each one's RNG state is kept.
        rng_states = self.ranks.all_gather_object(_rng_state())
        model_state, optim_state = get_state_dict(
            self.model, self.optimizer, options=self._state_options()
        )
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=directory / CHECKPOINT)
        if self.ranks.is_main:
            # Rank 0's state at the top level (what single-process checkpoints hold).
            torch.save({**rng_states[0], "ranks": rng_states}, directory / "rng.pt")
            (directory / "state.json").write_text(json.dumps({"step": self.step_count}))
        self.export(directory / ("adapter" if self.is_lora else "model"))
        return directory

    def load(self, directory: Path) -> None:
        """Read a checkpoint (on every rank, from a path they all see; it may have been
        written by another number of ranks)."""
        model_state, optim_state = get_state_dict(
            self.model, self.optimizer, options=self._state_options()
        )
        state: dict[str, Any] = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=directory / CHECKPOINT)
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
            # LoRA: the checkpoint has no frozen weights to load (they stay as loaded).
            options=self._state_options(strict=not self.is_lora),
        )
        self.step_count = int(json.loads((directory / "state.json").read_text())["step"])
        rng = torch.load(directory / "rng.pt", weights_only=False)
        per_rank = rng.get("ranks") or [rng]
        if self.ranks.rank < len(per_rank):
            _set_rng_state(per_rank[self.ranks.rank])
        else:
            # Resumed on more ranks than saved: a new rank gets a fresh stream of its own.
            _seed_rngs(self.settings.seed + self.ranks.rank + 1_000_003 * self.step_count)
