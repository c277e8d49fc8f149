"""A training rollout is the production episode: the environment's setup commands (the
repository's .ribbit.yml setup) run in the sandbox before the agent, the model is told
so in the same words when they worked, and a failed setup ends the rollout before the
agent starts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.fakes import ScriptedPolicy
from tests.plugins.trainer import FixRepo, sandbox_factory
from trainer.envs.schema import Environment
from trainer.rl.rollout import Rollout, collect_group
from worker.agent import AgentTask
from worker.agent.episode import SetupFailed
from worker.agent.prompt import render_user_message
from worker.settings import AgentSettings

SETUP = "echo ready > .setup-ran"
SCRIPT = [
    "<tool_call>\n<function=Bash>\n<parameter=command>\ncat .setup-ran\n</parameter>\n"
    "</function>\n</tool_call>",
    "Checked the setup.",
]


def _env(fix: FixRepo, setup: list[str]) -> Environment:
    return Environment(
        instance_id="acme__calc-1",
        repo="acme/calc",
        base_commit=fix.base,
        problem_statement="add is wrong\n\nadd(2, 3) returns -1",
        patch="",
        test_patch="",
        FAIL_TO_PASS=["tests/test_add.py::test_add"],
        PASS_TO_PASS=[],
        setup_commands=setup,
        test_command="python -m pytest -q",
    )


def test_rollouts_run_the_setup_and_show_the_task_text_alone(fix_with_new_test: FixRepo) -> None:
    policy = ScriptedPolicy(SCRIPT)
    (rollout,) = collect_group(
        _env(fix_with_new_test, [SETUP]),
        fix_with_new_test.path,
        policy,
        AgentSettings(),
        sandbox_factory,
        lambda env, result, checkout: 0.0,
        1,
    )
    user = str(policy.calls[0][1]["content"])
    # As in the harness the model was trained in, the user turn is the task text alone;
    # the setup line appears only when repo context is asked for.
    assert user == (
        "# Task\n\nadd is wrong\nadd(2, 3) returns -1\n\n---\n\n**Repo:** `acme/calc`\n"
        f"**Base commit:** `{fix_with_new_test.base}`\n"
    )
    told = AgentTask(**rollout.result.trajectory.task)
    assert told.setup_command == SETUP
    shown = render_user_message(replace(told, include_repo_context=True))
    assert f"Dependencies were installed with: {SETUP}" in shown
    observation = rollout.result.trajectory.turns[0].observations[0].content
    assert "ready" in observation


def _rollout(env: Environment, policy: ScriptedPolicy, fix: FixRepo) -> Rollout:
    (rollout,) = collect_group(
        env, fix.path, policy, AgentSettings(), sandbox_factory, lambda e, r, c: 0.0, 1
    )
    return rollout


def test_an_environment_without_setup_says_nothing_about_it(fix_with_new_test: FixRepo) -> None:
    rollout = _rollout(_env(fix_with_new_test, []), ScriptedPolicy(["Done."]), fix_with_new_test)
    assert rollout.result.trajectory.task["setup_command"] is None


def test_a_failed_setup_ends_the_rollout_before_the_agent(fix_with_new_test: FixRepo) -> None:
    policy = ScriptedPolicy(["Done."])
    env = _env(fix_with_new_test, ["true", "exit 3", "touch never"])
    with pytest.raises(SetupFailed, match="exited 3") as failed:
        _rollout(env, policy, fix_with_new_test)
    assert failed.value.setup.command == "true && exit 3 && touch never"
    assert policy.calls == []  # the agent never started
