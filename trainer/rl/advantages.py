"""Group-relative advantages (GRPO family), as pure tensor functions.

Rewards come as a ``(groups, G)`` tensor: G rollouts of the same environment per
row. Each rollout's advantage is its reward minus a baseline from its own group,
optionally divided by the group's reward standard deviation:

- ``mean``: the group mean, as in GRPO (DeepSeekMath, Shao et al. 2024);
- ``leave_one_out``: the mean of the *other* G-1 rewards (RLOO, Ahmadian et al.
  2024), an unbiased baseline since it does not depend on the rollout itself.

Dividing by the std (GRPO's default) is optional because Dr. GRPO (Liu et al.
2025) shows it overweights groups that are nearly all solved or all failed. The
std is the sample std (``unbiased=True``, as TRL computes it).

A group whose rewards are all equal carries no signal (every advantage is zero);
:func:`informative_groups` finds the others so they can be dropped before the
learner spends compute on them (DAPO's dynamic sampling filter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

import torch
from torch import Tensor

Baseline = Literal["mean", "leave_one_out"]
BASELINES: tuple[str, ...] = get_args(Baseline)


def _mean_baseline(rewards: Tensor) -> Tensor:
    return rewards.mean(dim=1, keepdim=True).expand_as(rewards)


def _leave_one_out_baseline(rewards: Tensor) -> Tensor:
    g = rewards.shape[1]
    if g < 2:
        raise ValueError("a leave-one-out baseline needs at least 2 rollouts per group")
    total = rewards.sum(dim=1, keepdim=True)
    return (total - rewards) / (g - 1)


_BASELINE_FNS: dict[str, Callable[[Tensor], Tensor]] = {
    "mean": _mean_baseline,
    "leave_one_out": _leave_one_out_baseline,
}


def group_advantages(
    rewards: Tensor,
    *,
    baseline: Baseline = "mean",
    scale_by_std: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """Advantages, shape ``(groups, G)``, for rewards of the same shape."""
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (groups, G); got shape {tuple(rewards.shape)}")
    if baseline not in _BASELINE_FNS:
        raise ValueError(f"baseline must be one of {BASELINES}; got {baseline!r}")
    rewards = rewards.float()
    advantages = rewards - _BASELINE_FNS[baseline](rewards)
    if scale_by_std:
        std = (
            rewards.std(dim=1, keepdim=True)
            if rewards.shape[1] > 1
            else torch.zeros_like(rewards[:, :1])
        )
        advantages = advantages / (std + eps)
    return advantages


def informative_groups(rewards: Tensor, *, atol: float = 1e-8) -> Tensor:
    """Bool ``(groups,)``: True where the group's rewards are not all equal."""
    spread = rewards.max(dim=1).values - rewards.min(dim=1).values
    return spread > atol


def mask_unfinished(loss_mask: Tensor, unfinished: Tensor) -> Tensor:
    """Zero the loss mask of rollouts that were cut off (out of tokens, turns or time).

    A truncated rollout's reward says little about its actions (it might have
    succeeded given room), so training on it teaches the length limit, not the task
    (DAPO's overlong filtering). ``loss_mask`` is ``(B, T)``, ``unfinished`` ``(B,)``.
    """
    keep = (~unfinished.bool()).to(loss_mask.dtype).unsqueeze(1)
    return loss_mask * keep
