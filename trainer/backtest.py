"""`ribbit eval`: what the bot would have done on a repository's own last N fixes.

A *fix* is a commit on the branch's first-parent history (a merged pull request's
merge or squash commit, or a commit pushed directly) whose change touches both test
files and other files (:func:`trainer.envs.patches.is_test_path`). Each becomes an
environment through the one builder (:class:`trainer.envs.builder.EnvironmentBuilder`:
base = its first parent, the repository's ``.ribbit.yml`` at that commit, runnable
FAIL_TO_PASS/PASS_TO_PASS ids, or a rejection with its reason). The model then runs
on each through the production episode (:func:`trainer.rl.rollout.rollout_episode`)
and its patch is graded as training grades it (:func:`trainer.rl.reward.compute_reward`:
the SWE-bench verdict from the tests, and Ribbit's reward, which also needs the gates).

The problem statement is the fix's commit message: a clone has no issue text. For a
merge commit whose subject is git's or a forge's ("Merge pull request #12 from ..."),
the body (the pull request's title and description) is used instead. The builder
strips any part of it that quotes the fix's code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.hostgit import git_ok
from trainer.envs.builder import BuildRejected, BuildSpec, EnvironmentBuilder
from trainer.envs.patches import is_test_path
from trainer.envs.schema import Environment, Provenance
from trainer.passk import PassAt1, pass_at_1
from trainer.rl.reward import compute_reward
from trainer.rl.rollout import rollout_episode
from worker.agent import Policy
from worker.agent.episode import SandboxRecipe, SetupFailed
from worker.agent.repo_task import agent_limits
from worker.repo_config import RepoConfig, RepoConfigError, read_repo_config
from worker.sandbox.setupcmd import commit_files, with_detected_setup
from worker.settings import AgentSettings, GateSettings

# How much of a diff an example shows (the whole one is in --json).
EXAMPLE_LINES = 12
_MERGE_SUBJECT = re.compile(r"^Merge (pull request|branch|remote-tracking branch) ")


@dataclass(frozen=True)
class Fix:
    commit: str
    parent: str
    title: str
    message: str  # the problem statement: title, a blank line, the rest


@dataclass(frozen=True)
class FixResult:
    """One fix: its environment (or why there is none) and what the model did there."""

    fix: Fix
    instance_id: str | None = None
    rejected: str | None = None  # the builder's reason and detail, when not built
    rollouts: int = 0
    resolved: int = 0  # rollouts whose patch passes every required test (the whole suite)
    swebench: int = 0  # rollouts SWE-bench's harness rule counts resolved (reward.py)
    rewarded: int = 0  # rollouts with Ribbit's full reward (resolved and gates pass)
    reason: str = ""  # the first rollout's grading reason (solved, tests_failed, ...)
    exit_reason: str = ""  # how the first rollout's agent stopped
    model_diff: str = ""  # the first rollout's patch
    real_diff: str = ""  # the fix's code change (its tests left out)

    def to_json(self) -> dict[str, object]:
        return {
            "commit": self.fix.commit,
            "title": self.fix.title,
            "instance_id": self.instance_id,
            "built": self.rejected is None,
            "rejected": self.rejected,
            "rollouts": self.rollouts,
            "resolved": self.resolved,
            "swebench_resolved": self.swebench,
            "rewarded": self.rewarded,
            "reason": self.reason,
            "exit_reason": self.exit_reason,
            "model_diff": self.model_diff,
            "real_diff": self.real_diff,
        }


def _rate_json(score: PassAt1 | None) -> dict[str, object] | None:
    if score is None:
        return None
    return {"rate": score.rate, "ci_low": score.low, "ci_high": score.high, "envs": score.envs}


@dataclass
class BacktestReport:
    repo: str
    model: str
    k: int
    fixes: list[FixResult] = field(default_factory=list)

    @property
    def scored(self) -> list[FixResult]:
        return [f for f in self.fixes if f.rejected is None and f.rollouts]

    @property
    def resolve_rate(self) -> PassAt1 | None:
        """The tests' resolve rate, strictly (every FAIL_TO_PASS and every PASS_TO_PASS
        of the whole suite passed), as pass@1 over the built fixes."""
        scored = self.scored
        return pass_at_1((f.resolved, f.rollouts) for f in scored) if scored else None

    @property
    def swebench_rate(self) -> PassAt1 | None:
        """The resolve rate by SWE-bench's harness rule (PASS_TO_PASS of the test
        patch's files only, skipped maintained): the figure published rates are."""
        scored = self.scored
        return pass_at_1((f.swebench, f.rollouts) for f in scored) if scored else None

    @property
    def reward_rate(self) -> PassAt1 | None:
        """The share that also passes the production gates (what training optimises)."""
        scored = self.scored
        return pass_at_1((f.rewarded, f.rollouts) for f in scored) if scored else None

    def to_json(self) -> dict[str, object]:
        return {
            "repo": self.repo,
            "model": self.model,
            "k": self.k,
            "fixes_found": len(self.fixes),
            "fixes_scored": len(self.scored),
            "resolve_rate": _rate_json(self.resolve_rate),
            "swebench_rate": _rate_json(self.swebench_rate),
            "reward_rate": _rate_json(self.reward_rate),
            "fixes": [f.to_json() for f in self.fixes],
        }


def _log(repo_dir: Path, rev: str, limit: int) -> list[tuple[str, str]]:
    """(commit, first parent) along ``rev``'s first-parent history, newest first."""
    out = git_ok(
        repo_dir,
        "log",
        "--first-parent",
        f"--max-count={limit}",
        "--format=%H %P",
        "--end-of-options",
        rev,
        "--",
        any_owner=False,
    ).decode()
    pairs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:  # a root commit has no parent to be a fix against
            pairs.append((parts[0], parts[1]))
    return pairs


def _message(repo_dir: Path, commit: str) -> tuple[str, str]:
    """(title, problem statement) from the commit message."""
    text = git_ok(repo_dir, "show", "-s", "--format=%B", commit, any_owner=False).decode(
        errors="replace"
    )
    subject, _, body = text.strip().partition("\n")
    body = body.strip()
    if _MERGE_SUBJECT.match(subject) and body:
        subject, _, body = body.partition("\n")
        body = body.strip()
    subject = subject.strip()
    return subject, f"{subject}\n\n{body}" if body else subject


def find_fixes(repo_dir: Path, last: int, *, rev: str = "HEAD", scan: int = 1000) -> list[Fix]:
    """The newest ``last`` commits of ``rev`` (its first ``scan`` first-parent commits)
    whose change touches tests and code, newest first."""
    if rev.startswith("-"):
        raise ValueError(f"{rev!r} is not a revision")
    fixes: list[Fix] = []
    for commit, parent in _log(repo_dir, rev, scan):
        if len(fixes) >= last:
            break
        names = git_ok(
            repo_dir, "diff", "--name-only", "-z", parent, commit, "--", any_owner=False
        ).decode(errors="replace")
        paths = [p for p in names.split("\0") if p]
        if not any(is_test_path(p) for p in paths) or all(is_test_path(p) for p in paths):
            continue
        title, message = _message(repo_dir, commit)
        fixes.append(Fix(commit, parent, title, message))
    return fixes


def backtest(
    repo_dir: Path,
    repo: str,
    fixes: Sequence[Fix],
    builder: EnvironmentBuilder,
    policy: Policy,
    limits: AgentSettings,
    sandboxes: SandboxRecipe,
    checkout_for: Callable[[Environment], Path],
    *,
    model: str | None = None,
    k: int = 1,
    gate_settings: GateSettings | None = None,
    on_fix: Callable[[FixResult], None] | None = None,
) -> BacktestReport:
    """Build each fix's environment and run ``policy`` on it ``k`` times.
    ``checkout_for`` gives a host clone of the repository at the environment's base;
    ``model`` names the model version for the report (default: the policy's name)."""
    if k < 1:
        raise ValueError("k must be >= 1")
    report = BacktestReport(repo=repo, model=model or policy.model_name, k=k)
    for fix in fixes:
        result = _one(
            repo_dir, repo, fix, builder, policy, limits, sandboxes, checkout_for, k, gate_settings
        )
        report.fixes.append(result)
        if on_fix is not None:
            on_fix(result)
    return report


def _spec(repo_dir: Path, repo: str, fix: Fix, config: RepoConfig) -> BuildSpec:
    """The fix as an environment to build, set up and tested as its ``.ribbit.yml`` says."""
    return BuildSpec(
        repo_dir,
        fix.parent,
        fix.commit,
        fix.message,
        repo=repo,
        test_command=config.test,
        setup_commands=(config.setup,) if config.setup else (),
        image=config.image,
        provenance=Provenance(source="backtest"),
    )


def _one(
    repo_dir: Path,
    repo: str,
    fix: Fix,
    builder: EnvironmentBuilder,
    policy: Policy,
    limits: AgentSettings,
    sandboxes: SandboxRecipe,
    checkout_for: Callable[[Environment], Path],
    k: int,
    gate_settings: GateSettings | None,
) -> FixResult:
    try:
        # As a solve job on that commit would have read them.
        config = read_repo_config(repo_dir, fix.parent)
    except RepoConfigError as exc:
        return FixResult(fix, rejected=f"bad_repo_config: {exc}")
    config = with_detected_setup(config, commit_files(repo_dir, fix.parent))
    try:
        env = builder.build(_spec(repo_dir, repo, fix, config))
    except BuildRejected as exc:
        return FixResult(fix, rejected=str(exc))
    checkout = checkout_for(env)
    limits = agent_limits(limits, config)  # the repository's .ribbit.yml limits, as for a job
    resolved = swebench = rewarded = 0
    first: tuple[str, str, str] | None = None
    for _ in range(k):
        try:
            agent = rollout_episode(env, checkout, policy, limits, sandboxes)
        except SetupFailed as exc:
            return FixResult(fix, env.instance_id, rejected=f"setup_failed: {exc}")
        grade = compute_reward(env, agent.diff, checkout, sandboxes, gate_settings=gate_settings)
        resolved += grade.resolved
        swebench += grade.swebench_resolved
        rewarded += grade.reward >= 1.0
        if first is None:
            first = (grade.reason, agent.exit_reason, agent.diff)
    assert first is not None
    return FixResult(
        fix,
        env.instance_id,
        rollouts=k,
        resolved=resolved,
        swebench=swebench,
        rewarded=rewarded,
        reason=first[0],
        exit_reason=first[1],
        model_diff=first[2],
        real_diff=env.patch,
    )


def short_diff(diff: str, lines: int = EXAMPLE_LINES) -> str:
    """The first ``lines`` lines of ``diff`` less its blob ids (``index`` lines), which
    no reader compares."""
    kept = [line for line in diff.splitlines() if not line.startswith("index ")]
    more = len(kept) - lines
    return "\n".join(kept[:lines] + ([f"... ({more} more lines)"] if more > 0 else []))
