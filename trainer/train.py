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

import json
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from bot.store.records.trajectory import TokenSegment
from trainer.config import TrainSettings
from trainer.distributed import Ranks
from trainer.envs.schema import Environment
from trainer.rl.advantages import group_advantages, informative_groups
from trainer.rl.learner import Learner, Sample, StepStats
from trainer.rl.rollout import RewardFn, Rollout
from trainer.rl.sources import Group, LocalRollouts, RolloutSource
from trainer.rl.tamper import TAMPER, TamperedEpisode, TamperLog, tamper_rate
from worker.agent import TransformersPolicy
from worker.agent.episode import SandboxRecipe
from worker.settings import AgentSettings

METRICS_FILE = "metrics.jsonl"


@dataclass(frozen=True)
class StepRecord:
    """One step, over every rank. Rollout figures cover the groups that completed."""

    step: int
    mean_reward: float  # 0.0 when no group completed (see failed_groups)
    rewards: list[float]
    groups_used: int  # groups with reward variance, which the learner saw
    samples: int
    learner: StepStats | None  # None: every group was filtered out
    failed_groups: int = 0  # a rollout failed for good: the whole group was dropped
    pass_rate: float = 0.0  # share of rollouts with full reward (solved)
    mean_generated_tokens: float = 0.0  # model tokens per rollout
    max_generated_tokens: int = 0
    exit_reasons: dict[str, int] = field(default_factory=dict)
    # Episodes the grader found forging their test run, and their share of the step's
    # (the reward-hacking signal; trainer/rl/tamper.py).
    tampered: int = 0
    tamper_rate: float = 0.0
    rollout_s: float = 0.0  # wall clock of the step's rollouts (rank 0)
    learner_s: float = 0.0  # wall clock of the learner step (rank 0)

    @property
    def learner_tokens_per_s(self) -> float:
        if self.learner is None or self.learner_s <= 0:
            return 0.0
        return self.learner.tokens / self.learner_s

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["learner_tokens_per_s"] = self.learner_tokens_per_s
        return data


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
                samples.append(
                    Sample(
                        seg.input_ids,
                        seg.loss_mask,
                        float(advantages[gi, ri]),
                        behaviour_logprobs=behaviour_logprobs(seg),
                    )
                )
    return samples, int(keep.sum())


def behaviour_logprobs(seg: TokenSegment) -> list[float] | None:
    """The sampler's log-probs for the loss's importance weight, where the policy recorded
    them for every generated token (positions outside the mask are never read)."""
    if any(lp is None for lp, m in zip(seg.logprobs, seg.loss_mask, strict=True) if m):
        return None
    return [lp if lp is not None else 0.0 for lp in seg.logprobs]


def _generated_tokens(rollout: Rollout) -> int:
    return sum(sum(seg.loss_mask) for seg in rollout.segments)


@dataclass(frozen=True)
class RolloutFacts:
    """What a step's record needs of one rollout, small enough to gather from every rank
    (the patch only for a tampering episode, to keep for inspection)."""

    reward: float
    tokens: int  # generated
    exit_reason: str
    reason: str = ""  # the grader's
    tampered: TamperedEpisode | None = None

    @classmethod
    def of(cls, step: int, rollout: Rollout) -> RolloutFacts:
        kept = None
        if rollout.reason == TAMPER:
            kept = TamperedEpisode.of(step, rollout.env_id, rollout.tamper, rollout.result.diff)
        facts = rollout.reward, _generated_tokens(rollout), rollout.result.exit_reason
        return cls(*facts, reason=rollout.reason, tampered=kept)


def _gather_step(
    ranks: Ranks, step: int, groups: list[Group], used: int, n_samples: int
) -> tuple[list[list[RolloutFacts] | None], int, int]:
    """Every rank's groups (as the facts the record needs), in the order the
    environments were chosen (rank r held groups r, r + world, ...), and groups used
    and samples summed over ranks."""
    mine: list[list[RolloutFacts] | None] = [
        None if g is None else [RolloutFacts.of(step, r) for r in g] for g in groups
    ]
    parts = ranks.all_gather_object((mine, used, n_samples))
    by_rank = [part[0] for part in parts]
    ordered: list[list[RolloutFacts] | None] = [
        by_rank[i % ranks.world_size][i // ranks.world_size]
        for i in range(sum(len(g) for g in by_rank))
    ]
    return ordered, sum(part[1] for part in parts), sum(part[2] for part in parts)


def step_record(
    step: int,
    ordered: list[list[RolloutFacts] | None],
    used: int,
    n_samples: int,
    stats: StepStats | None,
    *,
    rollout_s: float = 0.0,
    learner_s: float = 0.0,
) -> StepRecord:
    facts = [f for g in ordered if g is not None for f in g]
    rewards = [f.reward for f in facts]
    lengths = [f.tokens for f in facts]
    reasons = [f.reason for f in facts]
    n = len(facts)
    return StepRecord(
        step=step,
        mean_reward=sum(rewards) / n if n else 0.0,
        rewards=rewards,
        groups_used=used,
        samples=n_samples,
        learner=stats,
        failed_groups=sum(1 for g in ordered if g is None),
        pass_rate=sum(1 for r in rewards if r >= 1.0) / n if n else 0.0,
        mean_generated_tokens=sum(lengths) / n if n else 0.0,
        max_generated_tokens=max(lengths, default=0),
        exit_reasons=dict(Counter(f.exit_reason for f in facts)),
        tampered=reasons.count(TAMPER),
        tamper_rate=float(tamper_rate(reasons)),
        rollout_s=rollout_s,
        learner_s=learner_s,
    )


def append_metrics(path: Path, record: StepRecord) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record.to_dict()) + "\n")


def train(
    learner: Learner,
    envs: Sequence[tuple[Environment, Path]],
    sandbox_factory: SandboxRecipe,
    reward_fn: RewardFn,
    settings: TrainSettings,
    *,
    steps: int | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    rollouts: RolloutSource | None = None,
) -> TrainSummary:
    """Run ``steps`` more steps (default: up to ``settings.steps`` in all) from the
    learner's current step; ``envs`` pairs each environment with its checkout.
    ``rollouts`` defaults to :class:`LocalRollouts` over the learner's weights with
    ``sandbox_factory`` and ``reward_fn``. Rank 0 appends each step's record to
    ``output_dir/metrics.jsonl`` and its tampering episodes to ``tampered.jsonl``."""
    if not envs:
        raise ValueError("no environments to train on")
    summary = TrainSummary()
    limits = agent_limits(settings)
    if rollouts is None:
        policy = TransformersPolicy.from_model(
            learner.model, learner.tokenizer, model_name=f"{settings.model}+train", defaults=limits
        )
        rollouts = LocalRollouts(policy, limits, sandbox_factory, reward_fn)
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
        started = time.perf_counter()
        groups = rollouts.collect(
            learner, step, chosen[ranks.rank :: ranks.world_size], settings.group_size
        )
        complete = [g for g in groups if g is not None]
        rollout_s = time.perf_counter() - started
        samples, used = samples_from(complete, settings) if complete else ([], 0)
        started = time.perf_counter()
        stats = learner.step_or_skip(samples)
        learner_s = time.perf_counter() - started
        ordered, used, n_samples = _gather_step(ranks, step, groups, used, len(samples))
        record = step_record(
            step, ordered, used, n_samples, stats, rollout_s=rollout_s, learner_s=learner_s
        )
        summary.steps.append(record)
        if ranks.is_main:
            append_metrics(output / METRICS_FILE, record)
            TamperLog(output).keep(f.tampered for g in ordered if g for f in g if f.tampered)
            if on_step is not None:
                on_step(record)
        done = learner.step_count
        if (settings.save_every and done % settings.save_every == 0) or done == end:
            summary.checkpoints.append(learner.save(output / f"step-{done}"))
    return summary
