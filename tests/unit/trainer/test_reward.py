"""Rewards of good, bad, test-tampering and insecure patches on a real environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records.gate_report import Finding, GateResult, Verdict
from tests.fakes import LocalDirSandbox
from tests.plugins.trainer import PYTEST, TEST_MUL, FixRepo, sandbox_factory
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment
from trainer.rl.reward import compute_reward, default_reward_gates, shaped_reward
from worker.gates.base import GateContext
from worker.gates.trees import PatchTrees


@pytest.fixture
def env_and_checkout(fix_with_new_test: FixRepo, tmp_path: Path) -> tuple[Environment, Path]:
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=60)
    env = builder.build(
        BuildSpec(
            fix_with_new_test.path,
            fix_with_new_test.base,
            fix_with_new_test.fix,
            "add is wrong",
            repo="acme/calc",
            test_command=PYTEST,
        )
    )
    store = EnvironmentFolders(tmp_path / "store")
    store.add(env, fix_with_new_test.path)
    return env, store.checkout(env, tmp_path / "checkout")


def _diff(checkout: Path, files: dict[str, str]) -> str:
    """A patch made the way the agent makes one: edit a sandbox copy, take its diff."""
    with LocalDirSandbox(checkout) as sandbox:
        for rel, text in files.items():
            sandbox.write_file(rel, text.encode())
        return sandbox.diff()


class ForbiddenCallGate:
    """A gate over the patch text: flags added lines calling eval()."""

    name = "forbidden-call"

    def run(self, ctx: GateContext) -> GateResult:
        hits = [line for line in ctx.patch.splitlines() if line.startswith("+") and "eval(" in line]
        findings = tuple(Finding(self.name, "no-eval", f"eval in: {h}") for h in hits)
        return GateResult(self.name, not findings, findings)


GOOD = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"


def test_the_reference_patch_earns_one(env_and_checkout: tuple[Environment, Path]) -> None:
    env, checkout = env_and_checkout
    result = compute_reward(env, env.patch, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.reason) == (1.0, "solved")


def test_only_a_verified_patch_earns_one(env_and_checkout: tuple[Environment, Path]) -> None:
    # Issue #31: the reward is the gates' verdict, its evidence the environment's
    # FAIL_TO_PASS (proved by the builder, not rerun per rollout). Without one, nothing
    # shows the fix: unverified, reward 0, however green the run.
    env, checkout = env_and_checkout
    verified = compute_reward(env, env.patch, checkout, sandbox_factory, gates=[])
    assert verified.verdict is Verdict.VERIFIED and verified.to_json()["verdict"] == "verified"
    no_evidence = env.model_copy(update={"FAIL_TO_PASS": []})
    result = compute_reward(no_evidence, env.patch, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.reason, result.verdict) == (
        0.0,
        "unverified",
        Verdict.UNVERIFIED,
    )


def test_a_good_agent_patch_earns_one(env_and_checkout: tuple[Environment, Path]) -> None:
    env, checkout = env_and_checkout
    diff = _diff(checkout, {"calc.py": GOOD})
    result = compute_reward(env, diff, checkout, sandbox_factory, gates=[ForbiddenCallGate()])
    assert result.reward == 1.0 and result.gates_run == ("forbidden-call",)
    assert not (checkout / "tests/test_add.py").exists()  # the host checkout is untouched


def test_a_wrong_patch_earns_zero(env_and_checkout: tuple[Environment, Path]) -> None:
    env, checkout = env_and_checkout
    diff = _diff(checkout, {"calc.py": GOOD.replace("a + b", "a * b + 1")})
    result = compute_reward(env, diff, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.reason) == (0.0, "tests_failed")
    assert result.failed_tests == ("tests/test_add.py::test_add",)
    assert shaped_reward(result, env) == 0.0


def test_breaking_a_pass_to_pass_test_earns_zero(
    env_and_checkout: tuple[Environment, Path],
) -> None:
    env, checkout = env_and_checkout
    diff = _diff(checkout, {"calc.py": GOOD.replace("a * b", "a + b + 0 * a")})
    result = compute_reward(env, diff, checkout, sandbox_factory, gates=[])
    assert result.reward == 0.0 and result.failed_tests == ("tests/test_mul.py::test_mul",)
    assert result.fail_to_pass_passed == 1
    assert shaped_reward(result, env, weight=0.1) == pytest.approx(0.1)


def test_editing_the_tests_does_not_help(env_and_checkout: tuple[Environment, Path]) -> None:
    env, checkout = env_and_checkout
    # Leave the bug, and write a test_add.py that always passes.
    diff = _diff(checkout, {"tests/test_add.py": "def test_add():\n    assert True\n"})
    result = compute_reward(env, diff, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.reason) == (0.0, "tests_failed")


def test_rewriting_a_pinning_test_to_match_broken_code_earns_zero(
    env_and_checkout: tuple[Environment, Path],
) -> None:
    # Issue #38: fix add, break mul, and rewrite test_mul's expected value to match (same
    # name, same number of asserts). The base version of test_mul runs, and fails.
    env, checkout = env_and_checkout
    broken = GOOD.replace("return a * b", "return a * b - 1")
    cheat = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 5\n"
    diff = _diff(checkout, {"calc.py": broken, "tests/test_mul.py": cheat})
    result = compute_reward(env, diff, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.reason) == (0.0, "tests_failed")
    assert result.failed_tests == ("tests/test_mul.py::test_mul",)
    # Deleting the pinning test does not help either.
    gone = _diff(checkout, {"calc.py": broken})
    gone += "diff --git a/tests/test_mul.py b/tests/test_mul.py\ndeleted file mode 100644\n"
    gone += "--- a/tests/test_mul.py\n+++ /dev/null\n@@ -1,5 +0,0 @@\n"
    gone += "".join("-" + line + "\n" for line in TEST_MUL.splitlines())
    result = compute_reward(env, gone, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.failed_tests) == (0.0, ("tests/test_mul.py::test_mul",))


def test_empty_and_broken_patches_earn_zero(env_and_checkout: tuple[Environment, Path]) -> None:
    env, checkout = env_and_checkout
    assert compute_reward(env, "", checkout, sandbox_factory, gates=[]).reason == "empty_patch"
    broken = "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    result = compute_reward(env, broken, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.reason) == (0.0, "patch_does_not_apply")


def test_an_insecure_patch_that_passes_tests_earns_zero(
    env_and_checkout: tuple[Environment, Path],
) -> None:
    env, checkout = env_and_checkout
    insecure = GOOD.replace("return a + b", "return eval(f'{a} + {b}')")
    diff = _diff(checkout, {"calc.py": insecure})
    result = compute_reward(env, diff, checkout, sandbox_factory, gates=[ForbiddenCallGate()])
    assert (result.reward, result.reason) == (0.0, "gate_findings")
    assert result.findings[0].rule == "no-eval"


def test_the_default_reward_gates_are_semgrep_and_hygiene() -> None:
    assert [type(g).__name__ for g in default_reward_gates()] == ["SemgrepGate", "HygieneGate"]


def test_insecure_patch_with_the_real_default_gates(
    env_and_checkout: tuple[Environment, Path],
) -> None:
    env, checkout = env_and_checkout
    insecure = GOOD.replace("return a + b", "return eval(f'{a} + {b}')")
    result = compute_reward(env, _diff(checkout, {"calc.py": insecure}), checkout, sandbox_factory)
    assert result.reward == 0.0 and result.reason == "gate_findings"
    assert "semgrep" in {f.gate for f in result.findings}


def test_good_patch_with_the_real_default_gates(
    env_and_checkout: tuple[Environment, Path],
) -> None:
    env, checkout = env_and_checkout
    result = compute_reward(env, _diff(checkout, {"calc.py": GOOD}), checkout, sandbox_factory)
    assert (result.reward, result.reason) == (1.0, "solved")
    assert result.gates_run == ("semgrep", "hygiene")


class CrashingGate:
    name = "crashing"

    def run(self, ctx: GateContext) -> GateResult:
        raise RuntimeError("boom")


class TreeCountingGate:
    """A tree gate that records the trees it was handed."""

    name = "trees"

    def __init__(self) -> None:
        self.seen: list[Path] = []

    def run(self, ctx: GateContext) -> GateResult:
        raise AssertionError("a tree gate is handed the shared trees")

    def run_on_trees(self, ctx: GateContext, trees: PatchTrees) -> GateResult:
        self.seen.append(trees.after)
        return GateResult(self.name, True)

    def run_unapplied(self, ctx: GateContext, reason: str) -> GateResult:
        return GateResult(self.name, False)


def test_the_gates_share_one_pair_of_trees_and_a_crash_costs_the_reward(
    env_and_checkout: tuple[Environment, Path],
) -> None:
    # The grader runs its gates through run_gates (issue #33: the trees built once, not
    # once per gate); a gate that crashes is a blocking finding, never a reward.
    env, checkout = env_and_checkout
    first, second = TreeCountingGate(), TreeCountingGate()
    result = compute_reward(env, env.patch, checkout, sandbox_factory, gates=[first, second])
    assert result.reward == 1.0 and result.gates_run == ("trees", "trees")
    assert len(first.seen) == 1 and first.seen == second.seen
    crashed = compute_reward(env, env.patch, checkout, sandbox_factory, gates=[CrashingGate()])
    assert (crashed.reward, crashed.reason) == (0.0, "gate_findings")
    assert [(f.gate, f.rule) for f in crashed.findings] == [("crashing", "gate-error")]


def test_swebench_rule_reads_only_the_test_patchs_files_and_keeps_skips() -> None:
    # SWE-bench's harness (swebench/harness/grading.py): FAIL_TO_PASS must pass;
    # PASS_TO_PASS counts only from the files its evaluation runs (the test patch's),
    # where a skipped test is maintained. Ribbit's own verdict reads the whole suite.
    from trainer.rl.reward import swebench_resolved
    from trainer.rl.toy import toy_environment

    env = toy_environment("0" * 40).model_copy(
        update={
            "test_patch": "diff --git a/tests/test_add.py b/tests/test_add.py\n",
            "FAIL_TO_PASS": ["tests/test_add.py::test_add"],
            "PASS_TO_PASS": ["tests/test_add.py::test_zero", "tests/test_mul.py::test_mul"],
        }
    )
    fixed = {"tests/test_add.py::test_add": "passed", "tests/test_add.py::test_zero": "passed"}
    assert swebench_resolved(env, fixed)  # test_mul.py is not run by the harness
    assert swebench_resolved(env, {**fixed, "tests/test_add.py::test_zero": "skipped"})
    assert not swebench_resolved(env, {**fixed, "tests/test_add.py::test_zero": "failed"})
    assert not swebench_resolved(env, {"tests/test_add.py::test_zero": "passed"})
    assert not swebench_resolved(env, {**fixed, "tests/test_add.py::test_add": "skipped"})
