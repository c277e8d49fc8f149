"""Calibration with the real reward: a replayed fix always solves, a no-op never does."""

from __future__ import annotations

from pathlib import Path

from tests.plugins.trainer import CALC_FIXED, PYTEST, FixRepo, sandbox_factory
from trainer.calibrate import calibrate
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.folders import EnvironmentFolders
from trainer.rl.rollout import graded_reward
from worker.agent import ReplayPolicy, ToolCall, Trajectory, TurnRecord
from worker.settings import AgentSettings


def _replay(turns: list[TurnRecord]) -> ReplayPolicy:
    return ReplayPolicy(Trajectory(messages=[], tools=[], turns=turns, model="scripted"))


def _turn(index: int, calls: list[ToolCall]) -> TurnRecord:
    return TurnRecord(
        index=index,
        content="done" if not calls else "",
        reasoning=None,
        tool_calls=calls,
        observations=[],
        finish_reason="stop",
    )


def test_pass_at_k_and_signal(fix_with_new_test: FixRepo, tmp_path: Path) -> None:
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
    checkout = store.checkout(env, tmp_path / "co")
    limits = AgentSettings(max_turns=3)
    fixer = _replay(
        [
            _turn(0, [ToolCall("c1", "Write", {"file_path": "calc.py", "content": CALC_FIXED})]),
            _turn(1, []),
        ]
    )
    idle = _replay([_turn(0, [])])
    reward = graded_reward(sandbox_factory)

    solved = calibrate([(env, checkout)], fixer, limits, sandbox_factory, reward, k=2)
    unsolved = calibrate([(env, checkout)], idle, limits, sandbox_factory, reward, k=2)

    assert solved.calibrations[env.instance_id].solved == 2
    assert solved.pass_rate == 1.0 and unsolved.pass_rate == 0.0
    assert not solved.calibrations[env.instance_id].has_signal  # always solved
    assert not unsolved.calibrations[env.instance_id].has_signal  # never solved
