"""A training rollout is set up like a production job: the environment's setup
commands (the repository's .ribbit.yml setup) run in the sandbox before the agent,
and the model is told so in the same words."""

from __future__ import annotations

from dataclasses import replace

from bot.settings import AgentSettings
from tests.fakes import ScriptedPolicy
from tests.plugins.trainer import FixRepo, sandbox_factory
from trainer.envs.schema import Environment
from trainer.rl.rollout import collect_group, task_for
from worker.agent.prompt import render_user_message

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
    )
    task = task_for(_env(fix_with_new_test, [SETUP]))
    shown = render_user_message(replace(task, include_repo_context=True))
    assert f"Dependencies were installed with: {SETUP}" in shown
    observation = rollout.result.trajectory.turns[0].observations[0].content
    assert "ready" in observation


def test_an_environment_without_setup_says_nothing_about_it(fix_with_new_test: FixRepo) -> None:
    assert task_for(_env(fix_with_new_test, [])).setup_command is None
