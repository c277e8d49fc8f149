"""One episode for serving and training, proven shared: a solve job served through the
local forge (real Celery worker, bubblewrap) and a training rollout of the environment
built from that job's own record, with the same scripted policy and the same sandbox
settings, produce the same transcript: the same messages, tool calls and observations,
the same setup step (the repository's ``.ribbit.yml`` setup, run in the venv with the
registry proxy), the same patch. The environment build and the reward set up the same
way (a setup that does not run there fails every test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.hostgit import clone_at
from bot.store.records.trajectory import Trajectory
from tests.plugins.e2e import GOOD_SCRIPT, ISSUE, REPO_FILES, wait_for, xml_call
from tests.plugins.forge import BOT_LOGIN
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.schema import Provenance
from trainer.rl.rollout import collect_group, graded_reward
from worker.agent import load_policy, read_jsonl
from worker.agent.episode import SandboxRecipe

pytestmark = pytest.mark.integration

# Runs only in the set-up environment (the venv) with the setup network's proxy set.
SETUP = 'test -n "$HTTPS_PROXY" && echo "set-up in $VIRTUAL_ENV" > "$VIRTUAL_ENV/marker"'
TEST = "python -m pytest -q -p no:cacheprovider"
# The tests need what the setup made: wherever it did not run, every test fails.
CONFTEST = (
    "import os\n\n\ndef pytest_configure(config):\n"
    "    assert os.path.exists(os.environ['VIRTUAL_ENV'] + '/marker')\n"
)
LOOK = xml_call("Bash", command='cat "$VIRTUAL_ENV/marker"; command -v python')
SCRIPT = [LOOK, *GOOD_SCRIPT]


def _transcript(trajectory: Trajectory) -> list[Any]:
    """What the model saw and did, turn by turn (timings left out)."""
    return [
        (
            turn.content,
            turn.reasoning,
            [(c.id, c.name, c.arguments) for c in turn.tool_calls],
            [(o.call_id, o.name, o.content, o.is_error, o.exit_code) for o in turn.observations],
            turn.finish_reason,
        )
        for turn in trajectory.turns
    ]


def test_a_served_job_and_a_training_rollout_run_the_same_episode(
    forge_world: Any, deployment_for: Any, tmp_path: Path
) -> None:
    dep = deployment_for(SCRIPT)
    repo = "acme/calc"
    files = {**REPO_FILES, "conftest.py": CONFTEST}
    files[".ribbit.yml"] = f"setup: '{SETUP}'\ntest: {TEST}\nlabels: [bot]\n"
    forge_world.forge.create_repo("github", repo, files=files)
    forge_world.forge.add_collaborator("github", repo, BOT_LOGIN, "write")
    forge_world.forge.add_collaborator("github", repo, "maya", "maintain")
    issue = forge_world.forge.create_issue(
        "github", repo, title=ISSUE[0], body=ISSUE[1], author="maya"
    )
    forge_world.forge.add_label("github", repo, issue.number, "ribbit", actor="maya")
    [job] = dep.store.list()
    job = wait_for(
        lambda: (j := dep.store.get(job.id)).state in {"succeeded", "failed"} and j,
        timeout=300,
        what="job end",
    )
    assert job.state == "succeeded", job.failure_reason
    assert job.result["setup"]["ok"] and job.result["setup"]["network"]
    served = read_jsonl(job.result["trajectory_path"])[0]

    # Training: the environment from the job's record (on any host), its rollout with
    # the same policy, limits and sandbox settings the worker had.
    record = job.solve_record.task
    assert record is not None and record.setup_command == SETUP
    bare = forge_world.forge.repo("github", repo).bare
    sandboxes = SandboxRecipe.production(dep.settings.sandbox)
    env = EnvironmentBuilder(sandboxes, reruns=1, test_timeout_s=120).build(
        BuildSpec(
            bare,
            record.base_sha,
            "",
            record.problem_statement,
            repo=repo,
            test_command=record.test_command,
            setup_commands=(record.setup_command,),
            fix_diff=job.result["diff"],
            provenance=Provenance(source="outcome", issue_number=issue.number),
        )
    )
    assert env.FAIL_TO_PASS == ["tests/test_add.py::test_add_two_numbers"]
    assert env.PASS_TO_PASS == ["tests/test_calc.py::test_add_zero"]
    checkout = clone_at(bare, tmp_path / "checkout", env.base_commit)
    policy = load_policy(dep.settings.model, dep.settings.agent)
    [rollout] = collect_group(
        env, checkout, policy, dep.settings.agent, sandboxes, graded_reward(sandboxes), 1
    )
    trained = rollout.result.trajectory

    assert trained.messages == served.messages
    assert _transcript(trained) == _transcript(served)
    assert trained.task["setup_command"] == served.task["setup_command"] == SETUP
    marker = served.turns[0].observations[0].content
    assert "set-up in /opt/ribbit/venv" in marker and "/opt/ribbit/venv/bin/python" in marker
    assert rollout.result.exit_reason == job.result["exit_reason"] == "agent"
    assert rollout.result.diff == job.result["diff"]
    assert rollout.reward == 1.0  # graded in a sandbox set up the same way
