"""Training rollouts through an inference server (#16 item 4): a local OpenAI-compatible
server that really runs the tiny model in bfloat16 and answers in vLLM's or SGLang's
shape (tests/plugins/served_model.py); the episodes run through the worker's own
OpenAIPolicy and agent loop, many at once, and the learner trains on the server's token
ids with its log-probs as behaviour log-probs."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import LocalDirSandbox, host_setup, local_sandboxes, make_git_repo
from tests.plugins.served_model import BASE
from tests.plugins.trainer import seeded_learner, toy_train_settings
from trainer.rl.learner import Sample
from trainer.rl.served import ServerRollouts, adapter_name
from trainer.rl.toy import FirstTokenReward, toy_environment
from trainer.train import agent_limits, behaviour_logprobs
from worker.agent import served_tokens
from worker.sandbox.recipe import SandboxRecipe
from worker.settings import ModelSettings

pytestmark = pytest.mark.integration


@pytest.fixture
def toy_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "toy"
    return repo, make_git_repo(repo, {"README.md": "toy\n"})


def _source(
    server: Any, settings: Any, out: Path, *, in_flight: int, kind: str = "vllm"
) -> ServerRollouts:
    model = ModelSettings(
        policy="openai",
        model=BASE,
        openai_base_url=server.url,
        openai_server=kind,  # type: ignore[arg-type]
        openai_max_retries=0,
    )
    return ServerRollouts(
        model,
        agent_limits(settings),
        local_sandboxes(),
        FirstTokenReward({0}),
        output_dir=out,
        in_flight=in_flight,
    )


# Each answer costs the bf16 model a few CPU seconds: two episodes on vLLM's shape, one
# on SGLang's; concurrency is proven with canned answers below.
@pytest.mark.parametrize(("kind", "group"), [("vllm", 2), ("sglang", 1)])
def test_server_rollouts_train_with_importance_weights(
    kind: str,
    group: int,
    served_model: Any,
    tiny_model_dir: Path,
    toy_repo: tuple[Path, str],
    tmp_path: Path,
) -> None:
    repo, base = toy_repo
    out = tmp_path / "run"
    settings = toy_train_settings(tiny_model_dir, out, max_new_tokens=16)
    learner = seeded_learner(settings)
    server = served_model(kind)
    source = _source(server, settings, out, in_flight=group, kind=kind)

    groups = source.collect(learner, 0, [(toy_environment(base), repo)], group)

    assert groups[0] is not None and len(groups[0]) == group
    name = adapter_name(out, 0)
    expected = name if kind == "vllm" else f"{BASE}:{name}"
    assert server.asked_for == [expected] * group  # the step's adapter, by its served name
    assert set(server.adapters) == {name}
    served_ids = sorted(a["choices"][0]["token_ids"] for a in server.answers)
    samples = []
    generated = []
    for rollout in groups[0]:
        [turn] = rollout.result.trajectory.turns
        assert turn.completion_token_ids and turn.completion_logprobs and turn.prompt_token_ids
        generated.append(turn.completion_token_ids)
        [segment] = rollout.segments
        assert segment.input_ids == turn.prompt_token_ids + turn.completion_token_ids
        lps = behaviour_logprobs(segment)
        assert lps is not None
        samples.append(Sample(segment.input_ids, segment.loss_mask, 1.0, behaviour_logprobs=lps))
    assert sorted(generated) == served_ids

    stats = learner.step(samples)

    # The server's bfloat16 log-probs against the learner's fp32 ones (trainer/README.md).
    print(f"{kind} server (bf16) vs fp32 learner: mean |gap| {stats.behaviour_gap:.2e}")
    assert 0 < stats.behaviour_gap < 0.5
    assert stats.tokens == sum(len(g) for g in generated)

    # The next step's adapter replaces this one on the server; the run's end unloads it.
    assert source.collect(learner, 1, [], group) == []  # nothing chosen: no adapter churn
    assert set(server.adapters) == {name}
    source.publish(learner, 1)
    assert set(server.adapters) == {adapter_name(out, 1)}
    source.close()
    assert server.adapters == {}


@pytest.mark.parametrize("in_flight", [4, 6])
def test_episodes_run_in_flight_together(
    in_flight: int,
    served_model: Any,
    tiny_model_dir: Path,
    toy_repo: tuple[Path, str],
    tmp_path: Path,
) -> None:
    """Every request waits at the gate until four are in flight: a pool that ran the
    episodes one after another (or fewer than four at once) would break it and fail
    the groups."""
    repo, base = toy_repo
    out = tmp_path / "run"
    settings = toy_train_settings(tiny_model_dir, out, max_new_tokens=16)
    learner = seeded_learner(settings)
    server = served_model("vllm", run_model=False, gate=threading.Barrier(4))
    source = _source(server, settings, out, in_flight=in_flight)
    env = toy_environment(base)

    # Two groups of two: the gate needs episodes of both groups at once.
    groups = source.collect(learner, 0, [(env, repo), (env, repo)], 2)

    assert [len(g) if g is not None else None for g in groups] == [2, 2]
    assert len(server.asked_for) == 4


def test_a_server_without_token_ids_gives_untrainable_turns(
    served_model: Any,
    tiny_model_dir: Path,
    toy_repo: tuple[Path, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, base = toy_repo
    out = tmp_path / "run"
    monkeypatch.setattr(served_tokens, "_warned", threading.Event())
    settings = toy_train_settings(tiny_model_dir, out, max_new_tokens=16)
    learner = seeded_learner(settings)
    server = served_model("vllm", token_ids=False)  # the real model, without the ids
    source = _source(server, settings, out, in_flight=2)

    with caplog.at_level(logging.WARNING, logger=served_tokens.__name__):
        groups = source.collect(learner, 0, [(toy_environment(base), repo)], 1)

    assert groups[0] is not None and len(groups[0]) == 1
    for rollout in groups[0]:
        [turn] = rollout.result.trajectory.turns
        assert turn.raw_text is not None  # served all the same
        assert turn.completion_token_ids is None and turn.prompt_token_ids is None
        assert rollout.segments == []
    warnings = [r for r in caplog.records if "cannot be trained on" in r.getMessage()]
    assert len(warnings) == 1


def test_a_failed_episode_drops_its_group(
    served_model: Any, tiny_model_dir: Path, toy_repo: tuple[Path, str], tmp_path: Path
) -> None:
    """An episode that raises (here: its sandbox cannot start) drops its whole group,
    never scored 0; the other groups of the step are kept."""
    repo, base = toy_repo
    out = tmp_path / "run"
    settings = toy_train_settings(tiny_model_dir, out, max_new_tokens=16)
    learner = seeded_learner(settings)
    server = served_model("vllm", run_model=False)
    source = _source(server, settings, out, in_flight=2)
    broken = tmp_path / "broken"
    broken.mkdir()

    def factory(checkout: Path) -> LocalDirSandbox:
        if checkout == broken:
            raise RuntimeError("sandbox failed to start")
        return LocalDirSandbox(checkout)

    source.sandbox_factory = SandboxRecipe(factory, host_setup)
    env = toy_environment(base)
    groups = source.collect(learner, 0, [(env, broken), (env, repo)], 1)
    assert groups[0] is None
    assert groups[1] is not None and len(groups[1]) == 1
