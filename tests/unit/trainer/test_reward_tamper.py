"""A forged run earns nothing (issue #31): the reward of a patch that leaves the bug in
place and forges the test run from inside the test process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import LocalDirSandbox
from tests.plugins.trainer import CALC_BUGGY, CALC_FIXED, PYTEST, FixRepo, sandbox_factory
from tests.watch_attacks import GC_HOOK
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment
from trainer.rl.reward import _patch_tamper, compute_reward
from worker.gates.testrun import TestRun
from worker.gates.watch import TamperEvent
from worker.sandbox.base import ExecResult

WATCHED = "python3 -m pytest -q -p no:cacheprovider"


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
    # Graded through the plain pytest form, the one Ribbit watches.
    return env.model_copy(update={"test_command": WATCHED}), store.checkout(
        env, tmp_path / "checkout"
    )


def _diff(checkout: Path, files: dict[str, str]) -> str:
    with LocalDirSandbox(checkout) as sandbox:
        for rel, text in files.items():
            sandbox.write_file(rel, text.encode())
        return sandbox.diff()


def test_a_forged_run_with_no_fix_earns_zero(env_and_checkout: tuple[Environment, Path]) -> None:
    env, checkout = env_and_checkout
    diff = _diff(checkout, {"calc.py": GC_HOOK + "\n\n" + CALC_BUGGY})
    result = compute_reward(env, diff, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.reason) == (0.0, "tamper")
    assert "gc.get_objects" in result.details["tamper"]
    assert "calc.py:" in result.details["tamper"]
    # The same forgery, unwatched, is what used to earn 1.0.
    unwatched = env.model_copy(update={"test_command": PYTEST})
    forged = compute_reward(unwatched, diff, checkout, sandbox_factory, gates=[])
    assert (forged.reward, forged.reason) == (1.0, "solved")


def test_the_real_fix_still_earns_one_watched(env_and_checkout: tuple[Environment, Path]) -> None:
    env, checkout = env_and_checkout
    diff = _diff(checkout, {"calc.py": CALC_FIXED})
    result = compute_reward(env, diff, checkout, sandbox_factory, gates=[])
    assert (result.reward, result.reason) == (1.0, "solved"), result.details


def test_only_tamper_on_lines_the_patch_adds_costs_the_reward() -> None:
    # calc.py line 3 is the patch's; line 1 is the repository's own (a logging helper
    # walking frames, say), which an honest fix may sit beside.
    diff = (
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n"
        "@@ -1,2 +1,3 @@\n import sys\n x = sys._getframe(0)\n+y = sys._getframe(0)\n"
    )
    result = ExecResult(exit_code=0, stdout="", stderr="", duration_s=0.0)

    def run(*events: TamperEvent) -> TestRun:
        return TestRun("pytest", result, (), True, watched=True, tamper=events)

    theirs = TamperEvent("sys._getframe", "frame access", "calc.py", 2)
    ours = TamperEvent("sys._getframe", "frame access", "calc.py", 3)
    assert _patch_tamper(run(theirs), diff) == ""
    assert _patch_tamper(run(theirs, ours), diff) == ours.describe()
    nowhere = TamperEvent("runner-monkeypatch", "runner code replaced", None, 0)
    assert _patch_tamper(run(nowhere), diff) == nowhere.describe()
    broken = TestRun("pytest", result, (), False, "a forged record", watched=True)
    assert _patch_tamper(broken, diff) == "a forged record"
