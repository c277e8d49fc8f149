"""Where a training step's rollouts come from.

:class:`LocalRollouts` runs them in this process with the learner's own weights
(the default). :class:`trainer.rl.remote.CeleryRollouts` sends them as Celery tasks
to the worker fleet. Either way a step asks for one group of ``group_size``
rollouts per chosen environment and gets back, in the same order, each group or
``None`` where the group could not be completed (a failed rollout makes its whole
group useless: group-relative advantages need every member).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from trainer.rl.rollout import RewardFn, Rollout, collect_group
from worker.agent.episode import SandboxRecipe
from worker.settings import AgentSettings

if TYPE_CHECKING:
    from trainer.checkouts import CheckedOut
    from trainer.rl.learner import Learner
    from worker.agent import Policy

Group = list[Rollout] | None


class RolloutSource(Protocol):
    def collect(
        self, learner: Learner, step: int, chosen: Sequence[CheckedOut], group_size: int
    ) -> list[Group]: ...


class LocalRollouts:
    """Rollouts in this process, through the policy that wraps the learner's weights."""

    def __init__(
        self,
        policy: Policy,
        limits: AgentSettings,
        sandbox_factory: SandboxRecipe,
        reward_fn: RewardFn,
    ) -> None:
        self.policy = policy
        self.limits = limits
        self.sandbox_factory = sandbox_factory
        self.reward_fn = reward_fn

    def collect(
        self, learner: Learner, step: int, chosen: Sequence[CheckedOut], group_size: int
    ) -> list[Group]:
        # Each rank generates its own rollouts (their lengths differ): with the weights
        # gathered, no forward pass waits on another rank.
        with learner.gathered():
            return [
                collect_group(
                    env,
                    checkout,
                    self.policy,
                    self.limits,
                    self.sandbox_factory,
                    self.reward_fn,
                    group_size,
                )
                for env, checkout in chosen
            ]
