"""The reward of a trajectory's patch on an environment.

In a fresh sandbox at the environment's base commit: apply the patch, put the
environment's test files back (the test_patch files are reset to base and the
test_patch applied, so a patch cannot pass by editing the tests; every other test file
the patch changed or deleted is reset to base, so the repository's own tests judge the
behaviour they pin), run the tests
with a JUnit report. The reward is 1.0 iff every FAIL_TO_PASS and PASS_TO_PASS
test passed and the Semgrep and hygiene gates, when the gates module is
present, add no blocking (error-severity) finding; else 0.0. Binary on
purpose: partial credit is easy to game (break a test to "fix" another).
Shaping exists, separate and off by default (:func:`shaped_reward`).

The reward is the gates' verdict (:class:`bot.store.records.gate_report.Verdict`) with the
environment's FAIL_TO_PASS as its evidence: the builder proved, with the gate's own
judge (worker/gates/evidence.py), that each fails without the fix and passes with it, so
no rollout reruns the base. 1.0 only for *verified*; an environment with no FAIL_TO_PASS
shows no fix (*unverified*) and rewards nothing.

Three numbers come out. ``resolved`` is the tests' verdict, Ribbit's strict reading of
SWE-bench's: every FAIL_TO_PASS and PASS_TO_PASS test passed, PASS_TO_PASS being the
whole suite, and a test that did not run or was skipped counts as not passed.
``swebench_resolved`` is SWE-bench's harness rule itself (swebench/harness/grading.py):
PASS_TO_PASS only from the test patch's files (the ones its evaluation script runs),
where a skipped test is maintained; the number to set beside published resolve rates.
``reward`` is Ribbit's (resolved, and the gates pass), what training optimises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.store.records.gate_report import Finding, Verdict
from trainer.envs.builder import PatchDoesNotApply, apply_patch, set_up
from trainer.envs.patches import is_test_path, split_by_file
from trainer.envs.schema import Environment
from worker.agent.episode import SandboxRecipe, SetupFailed
from worker.gates.base import Gate, GateContext
from worker.gates.basesetup import BaseSetup
from worker.gates.hygiene import HygieneGate
from worker.gates.patch import PatchParseError, parse_patch
from worker.gates.runner import run_gates
from worker.gates.semgrep import SemgrepGate
from worker.gates.tamper import written_by_patch
from worker.gates.testrun import TestRun, run_tests
from worker.repo_config import RepoConfig
from worker.sandbox.base import Sandbox
from worker.settings import GateSettings


@dataclass(frozen=True)
class RewardResult:
    reward: float
    reason: str  # solved, empty_patch, setup_failed, patch_does_not_apply, tests_failed,
    # timeout, tamper, gate_findings, unverified (no FAIL_TO_PASS test to show the fix)
    failed_tests: tuple[str, ...] = ()
    fail_to_pass_passed: int = 0
    findings: tuple[Finding, ...] = ()
    gates_run: tuple[str, ...] = ()
    details: dict[str, str] = field(default_factory=dict)
    resolved: bool = False  # the tests alone, strictly (the whole suite; skipped fails)
    verdict: Verdict = Verdict.REFUSED  # the gates' level; the reward is 1.0 only if verified
    swebench_resolved: bool = False  # SWE-bench's harness rule (see the module docstring)

    def to_json(self) -> dict[str, Any]:
        return {
            "resolved": self.resolved,
            "swebench_resolved": self.swebench_resolved,
            "verdict": self.verdict.value,
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


def reset_test_files(sandbox: Sandbox, env: Environment, diff: str = "") -> None:
    """Undo whatever the patch did to the environment's test files, then apply its tests.
    Every other test file the patch (``diff``) changes or deletes is put back as the base
    has it too (issue #38): the repository's own tests are its specification, so a patch
    that breaks a pinned behaviour and edits the pinning test fails that test here."""
    gold = [section.path for section in split_by_file(env.test_patch)]
    touched = [
        section.path
        for section in split_by_file(diff)
        if is_test_path(section.path) and section.path not in gold
    ]
    for path in [*gold, *touched]:
        # Paths come from the environment's test_patch and the patch's diff headers,
        # passed as argv after "--".
        exists = sandbox.exec(["git", "cat-file", "-e", f"{env.base_commit}:{path}"], timeout=30)
        if exists.exit_code == 0:
            sandbox.exec(["git", "checkout", env.base_commit, "--", path], timeout=30)
        elif path in gold:
            sandbox.exec(["rm", "-f", "--", path], timeout=30)
        # A test file the patch adds stays: none of its tests is a required id.
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
    # A patch changing manifests gets them installed, scripts off (worker/gates/basesetup.py).
    with BaseSetup(sandbox_factory, env.setup_command, checkout, patch=diff) as base:
        return _graded(env, diff, checkout, base, sandbox_factory, gates, gate_settings)


def _graded(
    env: Environment,
    diff: str,
    checkout: Path,
    base: BaseSetup,
    sandbox_factory: SandboxRecipe,
    gates: Sequence[Gate] | None,
    gate_settings: GateSettings | None,
) -> RewardResult:
    with sandbox_factory(checkout) as sandbox:
        try:
            # Set up as the solve job's sandboxes are (venv, setup command, proxy), and
            # snapshotted before the patch: the gates' test runs start from it.
            setup = base.adopt(sandbox, set_up(sandbox, sandbox_factory, env.setup_commands))
        except SetupFailed as exc:
            return RewardResult(0.0, "setup_failed", details={"setup": str(exc)})
        if not setup.ok:  # its snapshot held a copy of the setup's credentials
            return RewardResult(0.0, "setup_failed", details={"setup": setup.output})
        try:
            apply_patch(sandbox, diff)
        except PatchDoesNotApply as exc:
            return RewardResult(0.0, "patch_does_not_apply", details={"error": str(exc)})
        try:
            reset_test_files(sandbox, env, diff)
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
        return RewardResult(
            0.0,
            "tests_failed",
            failed,
            f2p_passed,
            details={"log": run.log()},
            swebench_resolved=swebench_resolved(env, run.outcomes),
        )

    return _gated(env, diff, checkout, base, f2p_passed, gates, gate_settings)


def _gated(
    env: Environment,
    diff: str,
    checkout: Path,
    base: BaseSetup,
    f2p_passed: int,
    gates: Sequence[Gate] | None,
    gate_settings: GateSettings | None,
) -> RewardResult:
    """The result of a patch whose every required test passed: the gates decide."""
    gate_list = list(default_reward_gates() if gates is None else gates)
    findings = _blocking_findings(env, diff, checkout, base, gate_list, gate_settings)
    names = tuple(g.name for g in gate_list)
    verdict = Verdict.of(blocked=bool(findings), evidence=f2p_passed > 0)
    reward, reason = {
        Verdict.VERIFIED: (1.0, "solved"),
        Verdict.UNVERIFIED: (0.0, "unverified"),
    }.get(verdict, (0.0, "gate_findings"))
    # Every required test passed strictly, so SWE-bench's looser rule passes too.
    return RewardResult(
        reward,
        reason,
        (),
        f2p_passed,
        tuple(findings),
        names,
        resolved=True,
        verdict=verdict,
        swebench_resolved=True,
    )


def swebench_resolved(env: Environment, outcomes: Mapping[str, str]) -> bool:
    """SWE-bench's harness verdict on these outcomes: every FAIL_TO_PASS test passed,
    and every PASS_TO_PASS test of the test patch's files passed or was skipped (its
    evaluation runs only those files; a test id names its file before ``::``). Runners
    whose ids name no file (``go test``) leave only FAIL_TO_PASS to decide."""
    if not all(outcomes.get(t) == "passed" for t in env.FAIL_TO_PASS):
        return False
    files = {section.path for section in split_by_file(env.test_patch)}
    run_by_harness = [t for t in env.PASS_TO_PASS if t.split("::", 1)[0] in files]
    return all(outcomes.get(t) in ("passed", "skipped") for t in run_by_harness)


def _blocking_findings(
    env: Environment,
    diff: str,
    checkout: Path,
    base: BaseSetup,
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
        # No network for the patched tree: its test runs restore the base's snapshot.
        sandbox_factory=base.sandboxes,
        issue_text=env.problem_statement,
        setup_step=base.step,
    )
    if not gate_list:
        return []
    # One pair of before/after trees for every gate (run_gates builds them once), where
    # each gate's own run built its own; a gate that crashes fails with a finding.
    findings: list[Finding] = []
    for result in run_gates(ctx, gate_list).results:
        # Warnings and notes inform a reviewer; only blocking findings cost the reward.
        findings.extend(f for f in result.findings if f.severity == "error")
        if not result.passed and not result.findings:
            findings.append(Finding(result.name, "gate-failed", result.logs[:300] or "failed"))
    return findings


def _patch_tamper(run: TestRun, diff: str) -> str:
    """Why the run is forged by the patch ("" when it is not): a channel that is not the
    bootstrap's, or a tamper event on a line the patch adds (or from code in no file).
    Events elsewhere are the repository's own habits (a logging library that walks
    frames), which would otherwise zero every rollout that touches such a file."""
    if run.not_own:
        return run.not_own
    try:
        files = parse_patch(diff).files
    except PatchParseError:
        files = ()
    added = {(f.new.path, line) for f in files if f.new is not None for line, _ in f.added}
    new_paths = [f.new.path for f in files if f.new is not None]

    def wrote(path: str, line: int) -> bool:
        return (path, line) in added

    def created(path: str) -> bool:
        # The file itself is new when the patch added its line 1; a package, by its files.
        return any(p.startswith(path + "/") for p in new_paths)

    by_patch = [e for e in run.tamper if written_by_patch(e, wrote, created)]
    return "; ".join(e.describe() for e in by_patch)


def shaped_reward(result: RewardResult, env: Environment, *, weight: float = 0.1) -> float:
    """Optional partial credit: ``weight`` times the share of FAIL_TO_PASS now passing,
    for unsolved patches whose gates were not the problem. Off unless asked for."""
    if result.reward >= 1.0 or result.reason not in ("tests_failed",) or not env.FAIL_TO_PASS:
        return result.reward
    return weight * result.fail_to_pass_passed / len(env.FAIL_TO_PASS)
