"""GRPO with rollouts on the worker fleet: ``ribbit.rollout`` tasks on a real Celery
worker over a real Redis broker and result backend, the two-choice tiny model, the
toy environment checked out of a real environment store, bubblewrap sandboxes.

The worker runs in this process (a thread), but shares nothing with the learner
except files: it loads the base model itself and the learner's adapter from the run
folder, as a worker on another host would.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.fakes import local_sandboxes, make_git_repo
from tests.plugins.trainer import (
    in_default_line,
    seeded_learner,
    token_id,
    toy_prompt_ids,
    toy_train_settings,
)
from trainer.config import TrainSettings
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment
from trainer.rl import remote
from trainer.rl.remote import (
    CeleryRollouts,
    PolicyRef,
    RolloutRequest,
    rollout_from_dict,
    rollout_to_dict,
)
from trainer.rl.toy import FirstTokenReward, expected_first_token_reward, toy_environment
from trainer.train import METRICS_FILE, agent_limits, train
from worker.settings import load_worker_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet(
    tmp_path: Path, redis_url: str, sandbox_backend: str
) -> Iterator[tuple[Any, Path, Environment]]:
    """A rollout worker on Redis, and an environment store holding the toy environment."""
    from celery.contrib.testing.worker import start_worker

    from trainer.celery_app import create_rollout_celery

    repo = tmp_path / "toy"
    base = make_git_repo(repo, {"README.md": "toy\n"})
    env = toy_environment(base)
    store = tmp_path / "store"
    EnvironmentFolders(store).add(env, repo)
    settings = load_worker_settings(
        data_dir=tmp_path / "data",
        broker_url=redis_url,
        sandbox={"backend": sandbox_backend},
    )
    assert settings.effective_result_backend == redis_url
    app = create_rollout_celery(settings)
    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        loglevel="WARNING",
        queues=[remote.QUEUE],
        shutdown_timeout=30,
    ):
        yield app, store, env
        # Pending results unsubscribe from Redis when collected: do it while it is up.
        gc.collect()
    app.close()


def _source(app: Any, store: Path, settings: TrainSettings) -> CeleryRollouts:
    return CeleryRollouts(
        app,
        store_dir=store,
        output_dir=Path(settings.output_dir),
        limits=agent_limits(settings),
        reward="first-token:A",
        timeout_s=120,
    )


def test_training_through_worker_rollouts_raises_the_reward(
    fleet: tuple[Any, Path, Environment], two_choice_model_dir: Path, tmp_path: Path
) -> None:
    app, store, env = fleet
    settings = toy_train_settings(two_choice_model_dir, tmp_path / "run")
    learner = seeded_learner(settings)
    target = {token_id(learner.tokenizer, "A")}
    prompt = toy_prompt_ids(learner, env)
    before = expected_first_token_reward(learner, prompt, target)
    loads_before = remote.POLICIES.loads

    # The checkout passed here is never used by the workers: they check out the store.
    summary = train(
        learner,
        [(env, tmp_path / "unused")],
        local_sandboxes(),
        FirstTokenReward(target),
        settings,
        rollouts=_source(app, store, settings),
    )

    after = expected_first_token_reward(learner, prompt, target)
    assert before < 0.4 and after > before + 0.3
    rewards = summary.mean_rewards
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3
    assert all(r.failed_groups == 0 for r in summary.steps)
    assert all(len(r.rewards) == settings.group_size for r in summary.steps)
    # The worker loaded the base model once and only swapped adapters after that.
    assert remote.POLICIES.loads - loads_before <= 1
    # Only the last few policy folders stay on disk.
    kept = sorted((Path(settings.output_dir) / "policy").glob("step-*"))
    assert len(kept) == remote.KEEP_POLICIES
    metrics = (Path(settings.output_dir) / METRICS_FILE).read_text().splitlines()
    assert len(metrics) == settings.steps

    # The worker samples from the learner's current weights: the log-prob it recorded
    # for each generated token is the learner's own for that token.
    [group] = _source(app, store, settings).collect(
        learner, learner.step_count, [(env, tmp_path / "unused")], 2
    )
    assert group is not None
    for rollout in group:
        [segment] = rollout.segments
        with torch.no_grad():
            mine = learner.token_logprobs(segment.input_ids)
        for t, (m, lp) in enumerate(zip(segment.loss_mask, segment.logprobs, strict=True)):
            if m and lp is not None and t > 0:
                assert abs(float(mine[t - 1]) - lp) < 1e-3


def test_a_failing_rollout_drops_its_group_and_the_step_goes_on(
    fleet: tuple[Any, Path, Environment], two_choice_model_dir: Path, tmp_path: Path
) -> None:
    app, store, env = fleet
    settings = toy_train_settings(two_choice_model_dir, tmp_path / "run", steps=1, envs_per_step=2)
    learner = seeded_learner(settings)
    missing = env.model_copy(update={"instance_id": "nobody__nothing-0"})
    summary = train(
        learner,
        [(env, tmp_path / "unused"), (missing, tmp_path / "unused")],
        local_sandboxes(),
        FirstTokenReward(set()),
        settings,
        rollouts=_source(app, store, settings),
    )
    [record] = summary.steps
    assert record.failed_groups == 1
    assert len(record.rewards) == settings.group_size  # the good group is all there
    assert learner.step_count == 1


def test_requests_and_rollouts_survive_json(
    fleet: tuple[Any, Path, Environment], two_choice_model_dir: Path
) -> None:
    _app, store, env = fleet
    ref = PolicyRef(str(two_choice_model_dir), None, 0)
    request = RolloutRequest(str(store), env.instance_id, ref, {"max_turns": 1}, "graded", 7)
    assert RolloutRequest.from_dict(request.to_dict()) == request
    settings = load_worker_settings(sandbox={"backend": "bubblewrap"})
    limits = agent_limits(toy_train_settings(two_choice_model_dir, store / "run"))
    request = RolloutRequest(
        str(store), env.instance_id, ref, limits.model_dump(mode="json"), "first-token:A", 7
    )
    data = remote.run_rollout(request, settings)
    again = rollout_from_dict(data)
    assert rollout_to_dict(again) == data
    assert again.segments and again.segments[0].input_ids
    assert again.reward in (0.0, 1.0)
    with pytest.raises(ValueError, match="unknown reward"):
        remote.make_reward("nope", local_sandboxes(), None)


def test_train_command_sends_rollouts_to_the_fleet(
    fleet: tuple[Any, Path, Environment],
    two_choice_model_dir: Path,
    tmp_path: Path,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from click.testing import CliRunner

    from bot.cli import main

    _app, store, env = fleet
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "cli-data"))
    monkeypatch.setenv("RIBBIT_BROKER_URL", redis_url)
    # The default line trains only environments of public repositories it knows (#33).
    EnvironmentFolders(store).update(
        in_default_line(env, load_worker_settings().effective_database_url)
    )
    out = tmp_path / "cli-run"
    result = CliRunner().invoke(
        main,
        [
            "train",
            "--rollouts",
            "celery",
            "--store",
            str(store),
            "--model",
            str(two_choice_model_dir),
            "--steps",
            "1",
            "--group-size",
            "2",
            "--output-dir",
            str(out),
            "--max-turns",
            "1",
            "--max-new-tokens",
            "16",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    # The real reward: the toy model writes no patch, so both rollouts earn 0.
    assert "run 1: 1 steps, mean reward 0.000 -> 0.000" in result.output
    assert "0 failed group(s)" in result.output and "1 step(s) skipped" in result.output
    assert (out / "policy" / "step-0" / "adapter").is_dir()  # what the workers loaded
    [line] = (out / METRICS_FILE).read_text().splitlines()
    assert '"exit_reasons": {"agent": 2}' in line
