"""The training loop: rollouts, rewards, group advantages, one learner step, repeat.

Each step takes ``envs_per_step`` environments in a fixed round-robin order (so
a resumed run continues with the same ones), collects a group of
``group_size`` rollouts per environment with the learner's current weights,
turns rewards into group-relative advantages, drops groups with no reward
variance and rollouts cut off by a limit, and hands the rest to the learner.

Under ``torchrun`` (see :mod:`trainer.distributed`) each rank collects the groups
``chosen[rank::world_size]`` of a step and the learner combines the ranks'
samples into one update; every rank returns the same :class:`StepRecord` (the
rewards of all ranks, in the order the environments were chosen), but ``on_step``
runs on rank 0 only.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bot.settings import AgentSettings
from trainer.config import TrainSettings
from trainer.distributed import Ranks
from trainer.envs.schema import Environment
from trainer.rl.advantages import group_advantages, informative_groups
from trainer.rl.learner import Learner, Sample, StepStats
from trainer.rl.rollout import RewardFn, Rollout, collect_group
from worker.agent import TransformersPolicy
from worker.sandbox.base import Sandbox


@dataclass(frozen=True)
class StepRecord:
    step: int
    mean_reward: float
    rewards: list[float]
    groups_used: int
    samples: int
    learner: StepStats | None  # None: every group was filtered out


@dataclass
class TrainSummary:
    steps: list[StepRecord] = field(default_factory=list)
    checkpoints: list[Path] = field(default_factory=list)

    @property
    def mean_rewards(self) -> list[float]:
        return [s.mean_reward for s in self.steps]


def agent_limits(settings: TrainSettings) -> AgentSettings:
    return AgentSettings(
        max_turns=settings.max_turns,
        max_new_tokens=settings.max_new_tokens,
        max_minutes=settings.max_minutes,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k,
        min_p=0.0,
    )


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def samples_from(groups: list[list[Rollout]], settings: TrainSettings) -> tuple[list[Sample], int]:
    rewards = torch.tensor([[r.reward for r in g] for g in groups])
    advantages = group_advantages(
        rewards,
        baseline=settings.baseline,  # type: ignore[arg-type]
        scale_by_std=settings.scale_by_std,
    )
    keep = (
        informative_groups(rewards)
        if settings.filter_zero_variance
        else torch.ones(len(groups), dtype=torch.bool)
    )
    samples: list[Sample] = []
    for gi, group in enumerate(groups):
        if not keep[gi]:
            continue
        for ri, rollout in enumerate(group):
            if settings.mask_truncated and rollout.unfinished:
                continue
            for seg in rollout.segments:
                samples.append(Sample(seg.input_ids, seg.loss_mask, float(advantages[gi, ri])))
    return samples, int(keep.sum())


def _gather_step(
    ranks: Ranks, groups: list[list[Rollout]], used: int, n_samples: int
) -> tuple[list[float], int, int]:
    """Every rank's rewards (in the order the environments were chosen: rank r held
    groups r, r + world, ...), groups used and samples, summed over ranks."""
    parts = ranks.all_gather_object(([[r.reward for r in g] for g in groups], used, n_samples))
    by_rank = [part[0] for part in parts]
    ordered = [
        by_rank[i % ranks.world_size][i // ranks.world_size]
        for i in range(sum(len(g) for g in by_rank))
    ]
    return (
        [reward for group in ordered for reward in group],
        sum(part[1] for part in parts),
        sum(part[2] for part in parts),
    )


def train(
    learner: Learner,
    envs: Sequence[tuple[Environment, Path]],
    sandbox_factory: Callable[[Path], Sandbox],
    reward_fn: RewardFn,
    settings: TrainSettings,
    *,
    steps: int | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> TrainSummary:
    """Run ``steps`` more steps (default: up to ``settings.steps`` in all) from the
    learner's current step; ``envs`` pairs each environment with its checkout."""
    if not envs:
        raise ValueError("no environments to train on")
    summary = TrainSummary()
    limits = agent_limits(settings)
    policy = TransformersPolicy.from_model(
        learner.model, learner.tokenizer, model_name=f"{settings.model}+train", defaults=limits
    )
    end = learner.step_count + steps if steps is not None else settings.steps
    output = Path(settings.output_dir)
    ranks = learner.ranks
    while learner.step_count < end:
        step = learner.step_count
        chosen = [
            envs[(step * settings.envs_per_step + i) % len(envs)]
            for i in range(settings.envs_per_step)
        ]
        learner.model.eval()
        groups = [
            collect_group(
                env, checkout, policy, limits, sandbox_factory, reward_fn, settings.group_size
            )
            for env, checkout in chosen[ranks.rank :: ranks.world_size]
        ]
        samples, used = samples_from(groups, settings) if groups else ([], 0)
        stats = learner.step_or_skip(samples)
        rewards, used, n_samples = _gather_step(ranks, groups, used, len(samples))
        record = StepRecord(step, sum(rewards) / len(rewards), rewards, used, n_samples, stats)
        summary.steps.append(record)
        if on_step is not None and ranks.is_main:
            on_step(record)
        done = learner.step_count
        if (settings.save_every and done % settings.save_every == 0) or done == end:
            summary.checkpoints.append(learner.save(output / f"step-{done}"))
    return summary
