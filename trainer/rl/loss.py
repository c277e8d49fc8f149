"""The clipped policy-gradient loss of the GRPO family, as a pure function.

Per token t of rollout i, with ratio r = exp(logp - logp_old) and advantage A_i::

    loss_t = -min(r * A_i, clip(r, 1 - eps_low, 1 + eps_high) * A_i) + beta * KL_t

Separate low/high clip bounds are DAPO's "clip-higher" (Yu et al. 2025): a larger
``eps_high`` leaves room for unlikely tokens to gain probability, which keeps
entropy from collapsing. ``KL_t`` is the k3 estimator of KL(pi || pi_ref)
(Schulman, "Approximating KL divergence"), ``exp(q) - q - 1`` with
``q = logp_ref - logp``: unbiased, always >= 0, low variance.

How per-token losses become one number is a choice with real consequences, so it
is named (:data:`Aggregation`) and each option is a small function:

- ``token_mean``: mean over every unmasked token in the batch (DAPO). Long
  rollouts count in proportion to their length.
- ``sequence_mean``: mean over tokens within a rollout, then over rollouts (the
  original GRPO). Each rollout counts once, so tokens of short ones weigh more.
- ``dr_grpo``: sum over tokens divided by a constant, ``batch * max_tokens``
  (Dr. GRPO, Liu et al. 2025), so no length bias enters through the normaliser.

Rollouts sampled by another engine (an inference server: other kernels, other precision)
come from a slightly different policy than the learner's, even with the same weights.
Given that engine's per-token log-probs, each token's term is multiplied by the truncated
importance weight ``min(exp(logp_old - logp_behaviour), tis_cap)`` (truncated importance
sampling, Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL
training"), detached: tokens the learner finds likelier than the sampler did count more,
and no single token more than ``tis_cap`` times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

Aggregation = Literal["token_mean", "sequence_mean", "dr_grpo"]
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)


@dataclass(frozen=True)
class LossConfig:
    eps_low: float = 0.2
    eps_high: float = 0.28
    aggregation: Aggregation = "token_mean"
    kl_coef: float = 0.0
    dr_grpo_max_tokens: int | None = None  # the constant; None: the batch's padded length
    tis_cap: float = 2.0  # the truncated importance weight's ceiling (with behaviour log-probs)

    def __post_init__(self) -> None:
        if not 0 <= self.eps_low < 1:
            raise ValueError(f"eps_low must be in [0, 1); got {self.eps_low}")
        if self.eps_high < 0:
            raise ValueError(f"eps_high must be >= 0; got {self.eps_high}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}; got {self.aggregation!r}")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef must be >= 0; got {self.kl_coef}")
        if not self.tis_cap >= 1:
            raise ValueError(f"tis_cap must be >= 1; got {self.tis_cap}")


@dataclass(frozen=True)
class LossOutput:
    loss: Tensor  # the scalar to backpropagate
    policy_loss: Tensor  # the clipped term alone, aggregated the same way (detached)
    kl: Tensor  # mean k3 KL over unmasked tokens (detached; 0 without a reference)
    clip_fraction: Tensor  # share of unmasked tokens where the clipped term was chosen
    tokens: int
    # With behaviour log-probs (else 0): mean |logp_old - logp_behaviour| over unmasked
    # tokens, and the share of them whose importance weight hit the cap (both detached).
    behaviour_gap: Tensor | None = None
    truncated_fraction: Tensor | None = None


@dataclass(frozen=True)
class BatchTotals:
    """What the loss weights need to know about the whole batch (the mask only).

    A slice of the batch weighted with the whole batch's totals gets exactly its
    rows of the whole batch's weights, so the totals are what data-parallel ranks
    all-reduce (:meth:`trainer.distributed.Ranks.all_reduce_totals`) to take a
    batch spread over several processes as one.
    """

    tokens: float  # sum of the mask: the unmasked-token count (token_mean)
    sequences: int  # rows, padding rows included (dr_grpo)
    sequences_with_tokens: int  # rows with at least one unmasked token (sequence_mean)
    padded_length: int  # the longest row's length (dr_grpo's default constant)

    @classmethod
    def from_mask(cls, mask: Tensor) -> BatchTotals:
        """The totals of a ``(B, T)`` mask (``B`` may be 0: a rank with no samples)."""
        if mask.dim() != 2:
            raise ValueError(f"mask must be (B, T); got shape {tuple(mask.shape)}")
        mask = mask.float()
        return cls(
            tokens=float(mask.sum()),
            sequences=int(mask.shape[0]),
            sequences_with_tokens=int((mask.sum(dim=1) > 0).sum()),
            padded_length=int(mask.shape[1]),
        )


# Every aggregation is a weighted sum of per-token values whose weights depend on the
# mask only. Computing the weights once for the whole batch lets the learner take the
# loss one sequence at a time (bounded memory) and still get the batch's exact value.
# The batch-wide quantities come from ``totals`` as 0-dim tensors of the mask's dtype,
# so a slice weighted with the whole batch's totals gets bit-identical weights.
def _scalar(value: float, mask: Tensor) -> Tensor:
    return torch.tensor(value, dtype=mask.dtype, device=mask.device)


def _token_mean_weights(mask: Tensor, config: LossConfig, totals: BatchTotals) -> Tensor:
    return mask / _scalar(totals.tokens, mask).clamp(min=1.0)


def _sequence_mean_weights(mask: Tensor, config: LossConfig, totals: BatchTotals) -> Tensor:
    per_seq_tokens = mask.sum(dim=1, keepdim=True)
    # A rollout with no token left (masked out as truncated) must not dilute the mean.
    present = _scalar(totals.sequences_with_tokens, mask).clamp(min=1.0)
    return mask / per_seq_tokens.clamp(min=1.0) / present


def _dr_grpo_weights(mask: Tensor, config: LossConfig, totals: BatchTotals) -> Tensor:
    max_tokens = config.dr_grpo_max_tokens or totals.padded_length
    return mask / (totals.sequences * max_tokens)


AGGREGATORS: dict[str, Callable[[Tensor, LossConfig, BatchTotals], Tensor]] = {
    "token_mean": _token_mean_weights,
    "sequence_mean": _sequence_mean_weights,
    "dr_grpo": _dr_grpo_weights,
}


def token_weights(mask: Tensor, config: LossConfig, totals: BatchTotals | None = None) -> Tensor:
    """``(B, T)`` weights such that the aggregated loss is ``(weights * loss_t).sum()``.

    ``totals`` (default: those of ``mask``) describe the whole batch when ``mask`` is
    only part of it: rows of a part get their share of the whole batch's loss."""
    mask = mask.float()
    return AGGREGATORS[config.aggregation](
        mask, config, totals if totals is not None else BatchTotals.from_mask(mask)
    )


def k3_kl(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref), from samples drawn from pi."""
    q = ref_logprobs - logprobs
    return torch.exp(q) - q - 1.0


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    config: LossConfig,
    *,
    ref_logprobs: Tensor | None = None,
    weights: Tensor | None = None,
    behaviour_logprobs: Tensor | None = None,
) -> LossOutput:
    """The GRPO-family loss. ``logprobs``, ``old_logprobs``, ``mask`` (and
    ``ref_logprobs``) are ``(B, T)``; ``advantages`` is ``(B,)`` (one per rollout,
    broadcast to its tokens) or ``(B, T)``. ``weights`` (from :func:`token_weights` over
    the whole batch) lets a caller pass a slice of the batch and get its exact share of
    the batch loss; by default they come from ``mask``. ``behaviour_logprobs`` ``(B, T)``:
    the sampling engine's log-probs of the same tokens, for the truncated importance
    weight (see the module docstring)."""
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(
            f"logprobs {tuple(logprobs.shape)}, old_logprobs {tuple(old_logprobs.shape)} and "
            f"mask {tuple(mask.shape)} must have the same shape"
        )
    if config.kl_coef > 0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs")
    mask = mask.to(logprobs.dtype)
    adv = advantages.to(logprobs.dtype)
    if adv.dim() == 1:
        adv = adv.unsqueeze(1)
    # Masked positions may hold anything (padding): keep them out of exp().
    log_ratio = torch.where(mask > 0, logprobs - old_logprobs.detach(), torch.zeros_like(logprobs))
    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - config.eps_low, 1.0 + config.eps_high) * adv
    pg = -torch.minimum(unclipped, clipped)
    gap = truncated = None
    if behaviour_logprobs is not None:
        if behaviour_logprobs.shape != logprobs.shape:
            raise ValueError(
                f"behaviour_logprobs {tuple(behaviour_logprobs.shape)} must have the shape of "
                f"logprobs {tuple(logprobs.shape)}"
            )
        cap = torch.tensor(config.tis_cap, dtype=logprobs.dtype, device=logprobs.device).log()
        behaviour_gap = torch.where(
            mask > 0,
            old_logprobs.detach() - behaviour_logprobs.detach().to(logprobs.dtype),
            torch.zeros_like(logprobs),
        )
        # exp(min(gap, log cap)) == min(exp(gap), cap) without overflowing on a large gap.
        pg = pg * torch.exp(torch.minimum(behaviour_gap, cap))
        n = mask.sum().clamp(min=1.0)
        gap = ((behaviour_gap.abs() * mask).sum() / n).detach()
        truncated = (((behaviour_gap > cap).to(mask.dtype) * mask).sum() / n).detach()
    w = (weights if weights is not None else token_weights(mask, config)).to(logprobs.dtype)
    pg_loss = (pg * w).sum()
    loss = pg_loss
    n_tokens = mask.sum().clamp(min=1.0)
    kl_mean = torch.zeros((), dtype=logprobs.dtype, device=logprobs.device)
    if ref_logprobs is not None:
        kl = k3_kl(logprobs, torch.where(mask > 0, ref_logprobs.detach(), logprobs.detach()))
        kl_mean = ((kl * mask).sum() / n_tokens).detach()
        if config.kl_coef > 0:
            loss = loss + config.kl_coef * (kl * w).sum()
    clip_fraction = (((clipped < unclipped).to(mask.dtype) * mask).sum() / n_tokens).detach()
    return LossOutput(
        loss=loss,
        policy_loss=pg_loss.detach(),
        kl=kl_mean,
        clip_fraction=clip_fraction,
        tokens=int(mask.sum().item()),
        behaviour_gap=gap,
        truncated_fraction=truncated,
    )
