"""Rollouts: the production episode, unchanged, G times per environment.

Each rollout is one :func:`rollout_episode`, which is the solve job's episode
(:func:`worker.agent.episode.run_episode`): a fresh sandbox of the environment's
checkout, set up by the production setup step with the repository's ``.ribbit.yml``
setup command recorded in the environment (the virtualenv, the registry proxy; a
failed setup ends it before the agent, raising :class:`SetupFailed` here), then the
agent loop with a :class:`~worker.agent.TransformersPolicy` wrapping the learner's own
weights. The trajectory's token ids, sampling log-probs and loss mask are kept
(:meth:`Trajectory.training_segments`). Local and fleet rollouts
(:mod:`trainer.rl.remote`) both go through :func:`rollout_episode`.
The reward function decides what the rollout earned: the real one is
:func:`trainer.rl.reward.compute_reward` on the rollout's diff.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.store.records.trajectory import TokenSegment
from trainer.envs.schema import Environment
from worker.agent import AgentResult, AgentTask, IssueComment, Policy
from worker.agent.episode import SandboxRecipe, SetupFailed, run_episode
from worker.agent.repo_task import repo_instructions
from worker.repo_config import RepoConfig, RepoConfigError, read_repo_config
from worker.settings import AgentSettings

if TYPE_CHECKING:
    from trainer.rl.reward import RewardResult

# A number, or the grader's whole result (its reason says whether the episode tampered).
RewardFn = Callable[[Environment, AgentResult, Path], "float | RewardResult"]
UNFINISHED = frozenset(
    {"max_tokens_per_turn", "max_context_len", "max_time", "max_turns", "cancelled"}
)


@dataclass(frozen=True)
class Rollout:
    env_id: str
    result: AgentResult
    reward: float
    segments: list[TokenSegment]
    reason: str = ""  # the grader's (RewardResult.reason); "" from a reward that gives a number
    tamper: str = ""  # with reason "tamper": what the watched run attributed to the patch

    @classmethod
    def graded(cls, env_id: str, result: AgentResult, value: float | RewardResult) -> Rollout:
        """The rollout with what the reward function gave. A tampering episode earns 0
        whatever number came with it: the forged run is the one thing never rewarded."""
        from trainer.rl.tamper import TAMPER

        segments = result.trajectory.training_segments()
        if isinstance(value, int | float):
            return cls(env_id, result, float(value), segments)
        tampered = value.reason == TAMPER
        return cls(
            env_id,
            result,
            0.0 if tampered else float(value.reward),
            segments,
            reason=value.reason,
            tamper=value.details.get("tamper", "") if tampered else "",
        )

    @property
    def unfinished(self) -> bool:
        """Cut off by a limit rather than ended by the model (or a model error)."""
        return self.result.exit_reason in UNFINISHED or self.result.exit_reason in (
            "llm_query_error",
            "tool_error",
        )


def _repo_config(checkout: Path, commit: str) -> RepoConfig:
    """The ``.ribbit.yml`` committed at the environment's base, as a job on that commit
    would read it; an invalid or unreadable one gives the defaults (no repository
    context), as the job would have stopped before any prompt."""
    try:
        return read_repo_config(checkout, commit)
    except RepoConfigError:
        return RepoConfig()


def task_for(env: Environment, checkout: Path | None = None) -> AgentTask:
    """The environment's task as the solve job gave it. Built from a job that kept its
    first message: that text, replayed byte for byte (:attr:`Environment.task_text`).
    Otherwise (a merged fix with no job, an older job) the task is laid out as the solve
    job lays out an issue and rendered by the same function
    (:func:`worker.agent.prompt.render_user_message`): the problem statement's first line
    is the title, the rest the body (a job's record keeps a blank line between them; an
    empty body stays empty); the footer its repository, version, base commit and issue.
    The repository's instructions come from its checkout (``.ribbit.yml`` at the base
    commit, AGENTS.md) when it opted in, as for the job; the issue's comments are the ones
    the builder kept with the job's selection (:attr:`Environment.issue_comments`). The
    setup command is told to the model by the episode, once it ran and worked."""
    title, _, body = env.problem_statement.partition("\n")
    replayed = env.task_text is not None
    config = (
        RepoConfig() if checkout is None or replayed else _repo_config(checkout, env.base_commit)
    )
    return AgentTask(
        title=title if title.strip() else env.instance_id,
        body=body.removeprefix("\n"),
        comments=tuple(IssueComment(c.author, c.body) for c in env.issue_comments),
        repo=env.repo,
        number=env.provenance.issue_number,
        base_commit=env.base_commit,
        version=env.version or None,
        test_command=env.test_command,
        hints=(env.hints_text,) if env.hints_text else (),
        metadata={"instance_id": env.instance_id},
        include_repo_context=config.prompt.include_repo_context,
        repo_instructions=repo_instructions(config, checkout) if checkout is not None else None,
        first_message=env.task_text,
    )


def rollout_episode(
    env: Environment,
    checkout: Path,
    policy: Policy,
    limits: AgentSettings,
    sandboxes: SandboxRecipe,
) -> AgentResult:
    """One training episode: the production episode on the environment's task, with its
    recorded setup command. Raises :class:`SetupFailed` when the setup step failed (the
    builder kept only environments whose setup worked, so this is the infrastructure's
    fault, e.g. a registry down, and worth a retry, not a reward)."""
    episode = run_episode(
        task_for(env, checkout),
        checkout,
        policy,
        limits,
        sandboxes.for_image(env.image),
        setup_command=env.setup_command,
    )
    if episode.agent is None:
        raise SetupFailed(episode.setup)
    return episode.agent


def graded_reward(sandbox_factory: SandboxRecipe) -> RewardFn:
    """The real reward: tests + gates on the rollout's diff (the whole result, so a
    tampering episode is known as one)."""
    from trainer.rl.reward import compute_reward

    def reward(env: Environment, result: AgentResult, checkout: Path) -> RewardResult:
        return compute_reward(env, result.diff, checkout, sandbox_factory)

    return reward


def collect_group(
    env: Environment,
    checkout: Path,
    policy: Policy,
    limits: AgentSettings,
    sandbox_factory: SandboxRecipe,
    reward_fn: RewardFn,
    group_size: int,
) -> list[Rollout]:
    rollouts = []
    for _ in range(group_size):
        result = rollout_episode(env, checkout, policy, limits, sandbox_factory)
        rollouts.append(Rollout.graded(env.instance_id, result, reward_fn(env, result, checkout)))
    return rollouts
