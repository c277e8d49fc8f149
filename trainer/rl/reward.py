"""The reward of a trajectory's patch on an environment.

In a fresh sandbox at the environment's base commit: apply the patch, put the
environment's test files back (the test_patch files are reset to base and the
test_patch applied, so a patch cannot pass by editing the tests), run the tests
with a JUnit report. The reward is 1.0 iff every FAIL_TO_PASS and PASS_TO_PASS
test passed and the Semgrep and hygiene gates, when the gates module is
present, add no blocking (error-severity) finding; else 0.0. Binary on
purpose: partial credit is easy to game (break a test to "fix" another).
Shaping exists, separate and off by default (:func:`shaped_reward`).

Two numbers come out: ``resolved`` is SWE-bench's verdict (tests only: every
FAIL_TO_PASS and PASS_TO_PASS test passed, a test that did not run or was skipped
counts as not passed), comparable with published resolve rates; ``reward`` is
Ribbit's (resolved, and the gates pass), what training optimises.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.store.gate_report import Finding
from trainer.envs.builder import PatchDoesNotApply, apply_patch, set_up
from trainer.envs.patches import split_by_file
from trainer.envs.schema import Environment
from worker.agent.episode import SandboxRecipe, SetupFailed
from worker.gates.base import Gate, GateContext
from worker.gates.hygiene import HygieneGate
from worker.gates.patch import PatchParseError, parse_patch
from worker.gates.semgrep import SemgrepGate
from worker.gates.testrun import TestRun, run_tests
from worker.gates.watch import TamperEvent
from worker.repo_config import RepoConfig
from worker.sandbox.base import Sandbox
from worker.settings import GateSettings


@dataclass(frozen=True)
class RewardResult:
    reward: float
    reason: str  # solved, empty_patch, setup_failed, patch_does_not_apply, tests_failed,
    # timeout, tamper, gate_findings
    failed_tests: tuple[str, ...] = ()
    fail_to_pass_passed: int = 0
    findings: tuple[Finding, ...] = ()
    gates_run: tuple[str, ...] = ()
    details: dict[str, str] = field(default_factory=dict)
    resolved: bool = False  # SWE-bench's verdict: the tests alone

    def to_json(self) -> dict[str, Any]:
        return {
            "resolved": self.resolved,
            "reward": self.reward,
            "reason": self.reason,
            "failed_tests": list(self.failed_tests),
            "fail_to_pass_passed": self.fail_to_pass_passed,
            "gates_run": list(self.gates_run),
            "findings": [
                {"gate": f.gate, "rule": f.rule, "message": f.message, "path": f.path}
                for f in self.findings
            ],
        }


def default_reward_gates() -> list[Gate]:
    """The gates that judge a patch beyond its tests: Semgrep and hygiene."""
    return [SemgrepGate(), HygieneGate()]


def reset_test_files(sandbox: Sandbox, env: Environment) -> None:
    """Undo whatever the patch did to the environment's test files, then apply its tests."""
    for section in split_by_file(env.test_patch):
        # Paths come from the environment's own test_patch, passed as argv after "--".
        exists = sandbox.exec(
            ["git", "cat-file", "-e", f"{env.base_commit}:{section.path}"], timeout=30
        )
        if exists.exit_code == 0:
            sandbox.exec(["git", "checkout", env.base_commit, "--", section.path], timeout=30)
        else:
            sandbox.exec(["rm", "-f", "--", section.path], timeout=30)
    apply_patch(sandbox, env.test_patch)


def compute_reward(
    env: Environment,
    diff: str,
    checkout: Path,
    sandbox_factory: SandboxRecipe,
    *,
    gates: Sequence[Gate] | None = None,
    gate_settings: GateSettings | None = None,
) -> RewardResult:
    """``checkout`` is a host clone at ``env.base_commit`` (never modified here)."""
    if not diff.strip():
        return RewardResult(0.0, "empty_patch")
    sandbox_factory = sandbox_factory.for_image(env.image)
    with sandbox_factory(checkout) as sandbox:
        try:
            # Set up as the solve job's sandboxes are (venv, setup command, proxy).
            set_up(sandbox, sandbox_factory, env.setup_commands)
        except SetupFailed as exc:
            return RewardResult(0.0, "setup_failed", details={"setup": str(exc)})
        try:
            apply_patch(sandbox, diff)
        except PatchDoesNotApply as exc:
            return RewardResult(0.0, "patch_does_not_apply", details={"error": str(exc)})
        try:
            reset_test_files(sandbox, env)
        except PatchDoesNotApply as exc:
            return RewardResult(0.0, "patch_does_not_apply", details={"error": f"tests: {exc}"})
        run = run_tests(sandbox, env.test_command, timeout=env.test_timeout_s)
    if run.timed_out:
        return RewardResult(0.0, "timeout")
    tamper = _patch_tamper(run, diff)
    if tamper:
        # A forged run earns nothing, whatever its tests say (issue #31); the reason is
        # kept, so reward hacking shows in the logs rather than in the reward.
        return RewardResult(0.0, "tamper", details={"tamper": tamper, "log": run.log()})
    required = [*env.FAIL_TO_PASS, *env.PASS_TO_PASS]
    failed = tuple(t for t in required if run.outcomes.get(t) != "passed")
    f2p_passed = sum(1 for t in env.FAIL_TO_PASS if run.outcomes.get(t) == "passed")
    if failed:
        return RewardResult(0.0, "tests_failed", failed, f2p_passed, details={"log": run.log()})

    gate_list = list(default_reward_gates() if gates is None else gates)
    findings = _blocking_findings(env, diff, checkout, sandbox_factory, gate_list, gate_settings)
    names = tuple(g.name for g in gate_list)
    if findings:
        return RewardResult(
            0.0, "gate_findings", (), f2p_passed, tuple(findings), names, resolved=True
        )
    return RewardResult(1.0, "solved", (), f2p_passed, (), names, resolved=True)


def _blocking_findings(
    env: Environment,
    diff: str,
    checkout: Path,
    sandbox_factory: SandboxRecipe,
    gate_list: Sequence[Gate],
    gate_settings: GateSettings | None,
) -> list[Finding]:
    """The gates' blocking findings on a patch whose tests pass (a gate that fails with
    no finding counts as one)."""
    ctx = GateContext(
        repo_dir=checkout,
        base_commit=env.base_commit,
        patch=diff,
        repo_config=RepoConfig(test=env.test_command, setup=env.setup_command),
        gate_settings=gate_settings or GateSettings(),
        sandbox_factory=sandbox_factory,
        issue_text=env.problem_statement,
        setup_step=sandbox_factory.step(env.setup_command),
    )
    findings: list[Finding] = []
    for gate in gate_list:
        result = gate.run(ctx)
        # Warnings and notes inform a reviewer; only blocking findings cost the reward.
        findings.extend(f for f in result.findings if f.severity == "error")
        if not result.passed and not result.findings:
            findings.append(Finding(gate.name, "gate-failed", result.logs[:300] or "failed"))
    return findings


def _patch_tamper(run: TestRun, diff: str) -> str:
    """Why the run is forged by the patch ("" when it is not): a channel that is not the
    bootstrap's, or a tamper event on a line the patch adds (or from code in no file).
    Events elsewhere are the repository's own habits (a logging library that walks
    frames), which would otherwise zero every rollout that touches such a file."""
    if run.tampered:
        return run.tampered
    try:
        files = parse_patch(diff).files
    except PatchParseError:
        files = ()
    added = {(f.new.path, line) for f in files if f.new is not None for line, _ in f.added}
    new_paths = [f.new.path for f in files if f.new is not None]

    def by_patch(event: TamperEvent) -> bool:
        if event.path is None or (event.path, event.line) in added:
            return True
        # A module named like the standard library's: the patch added the file (line 1)
        # or a package of that name.
        return event.mechanism == "module-shadow" and any(
            p.startswith(event.path + "/") for p in new_paths
        )

    return "; ".join(e.describe() for e in run.tamper if by_patch(e))


def shaped_reward(result: RewardResult, env: Environment, *, weight: float = 0.1) -> float:
    """Optional partial credit: ``weight`` times the share of FAIL_TO_PASS now passing,
    for unsolved patches whose gates were not the problem. Off unless asked for."""
    if result.reward >= 1.0 or result.reason not in ("tests_failed",) or not env.FAIL_TO_PASS:
        return result.reward
    return weight * result.fail_to_pass_passed / len(env.FAIL_TO_PASS)
