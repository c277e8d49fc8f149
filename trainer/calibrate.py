"""Calibration: k rollouts of the current policy per environment, pass@k stored.

An environment the policy always solves, or never does, gives GRPO groups with
no reward variance: no learning signal. Calibration finds them before training
spends rollouts there (``Calibration.has_signal``; select ``--envs signal``), and
the same numbers on held-out environments are a model version's score.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainer.envs.schema import Calibration, Environment
from trainer.passk import PassAt1, pass_at_1
from trainer.rl.rollout import RewardFn, collect_group
from worker.agent import Policy
from worker.agent.episode import SandboxRecipe
from worker.settings import AgentSettings


@dataclass(frozen=True)
class CalibrationReport:
    calibrations: dict[str, Calibration]

    @property
    def pass_rate(self) -> float:
        """Mean per-environment solve rate (pass@1 estimated from k samples)."""
        if not self.calibrations:
            return 0.0
        return self.pass_at_1.rate

    @property
    def pass_at_1(self) -> PassAt1:
        """pass@1 with its 95% interval over the environments (:mod:`trainer.passk`)."""
        return pass_at_1((c.solved, c.k) for c in self.calibrations.values())


def calibrate(
    envs: Sequence[tuple[Environment, Path]],
    policy: Policy,
    limits: AgentSettings,
    sandbox_factory: SandboxRecipe,
    reward_fn: RewardFn,
    *,
    k: int = 4,
    on_env: Callable[[Environment], None] | None = None,
) -> CalibrationReport:
    """``on_env`` hears each environment once its k rollouts are graded (the CLI's
    progress)."""
    if k < 1:
        raise ValueError("k must be >= 1")
    out: dict[str, Calibration] = {}
    for env, checkout in envs:
        group = collect_group(env, checkout, policy, limits, sandbox_factory, reward_fn, k)
        solved = sum(1 for r in group if r.reward >= 1.0)
        out[env.instance_id] = Calibration(k=k, solved=solved, model=policy.model_name)
        if on_env is not None:
            on_env(env)
    return CalibrationReport(out)
