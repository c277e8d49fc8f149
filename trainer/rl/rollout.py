"""Rollouts: the worker's agent loop, unchanged, G times per environment.

Each rollout is one :func:`run_episode`: a fresh sandbox of the environment's
checkout, the environment's setup commands run in it (the repository's
``.ribbit.yml`` setup, as production runs it before the agent, and the model is
told so the same way), then :func:`worker.agent.run_agent` with a
:class:`~worker.agent.TransformersPolicy` wrapping the learner's own weights. The
trajectory's token ids, sampling log-probs and loss mask are kept
(:meth:`Trajectory.training_segments`). Local and fleet rollouts
(:mod:`trainer.rl.remote`) both go through :func:`run_episode`.
The reward function decides what the rollout earned: the real one is
:func:`trainer.rl.reward.compute_reward` on the rollout's diff.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.settings import AgentSettings
from trainer.envs.builder import run_setup
from trainer.envs.schema import Environment
from worker.agent import AgentResult, AgentTask, Policy, run_agent
from worker.agent.trajectory import TokenSegment
from worker.sandbox.base import Sandbox

RewardFn = Callable[[Environment, AgentResult, Path], float]
UNFINISHED = frozenset(
    {"max_tokens_per_turn", "max_context_len", "max_time", "max_turns", "cancelled"}
)


@dataclass(frozen=True)
class Rollout:
    env_id: str
    result: AgentResult
    reward: float
    segments: list[TokenSegment]

    @property
    def unfinished(self) -> bool:
        """Cut off by a limit rather than ended by the model (or a model error)."""
        return self.result.exit_reason in UNFINISHED or self.result.exit_reason in (
            "llm_query_error",
            "tool_error",
        )


def task_for(env: Environment) -> AgentTask:
    title, _, body = env.problem_statement.strip().partition("\n")
    return AgentTask(
        title=title.strip() or env.instance_id,
        body=body.strip() or title.strip(),
        repo=env.repo,
        test_command=env.test_command,
        setup_command=" && ".join(env.setup_commands) or None,
        hints=(env.hints_text,) if env.hints_text else (),
        metadata={"instance_id": env.instance_id},
    )


def run_episode(
    env: Environment,
    checkout: Path,
    policy: Policy,
    limits: AgentSettings,
    sandbox_factory: Callable[[Path], Sandbox],
) -> AgentResult:
    """One training episode: setup, then the agent, in a fresh sandbox."""
    with sandbox_factory(checkout) as sandbox:
        run_setup(sandbox, env.setup_commands, env.test_timeout_s)
        return run_agent(task_for(env), sandbox, policy, limits)


def graded_reward(sandbox_factory: Callable[[Path], Sandbox]) -> RewardFn:
    """The real reward: tests + gates on the rollout's diff."""
    from trainer.rl.reward import compute_reward

    def reward(env: Environment, result: AgentResult, checkout: Path) -> float:
        return compute_reward(env, result.diff, checkout, sandbox_factory).reward

    return reward


def collect_group(
    env: Environment,
    checkout: Path,
    policy: Policy,
    limits: AgentSettings,
    sandbox_factory: Callable[[Path], Sandbox],
    reward_fn: RewardFn,
    group_size: int,
) -> list[Rollout]:
    rollouts = []
    for _ in range(group_size):
        result = run_episode(env, checkout, policy, limits, sandbox_factory)
        rollouts.append(
            Rollout(
                env_id=env.instance_id,
                result=result,
                reward=float(reward_fn(env, result, checkout)),
                segments=result.trajectory.training_segments(),
            )
        )
    return rollouts
