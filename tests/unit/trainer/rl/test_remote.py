"""trainer/rl/remote.py without a broker: what goes into a ``ribbit.rollout`` message,
what the learner does with each answer (a failed or silent rollout drops its whole group),
where the policy's weights are saved and pruned, and when a worker reloads or swaps them.
The real worker over Redis is tests/integration/test_trainer_rollouts.py."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.exceptions import TimeoutError as CeleryTimeout

from bot.store.records.trajectory import Trajectory, TurnRecord
from trainer.envs.schema import Environment
from trainer.rl import remote
from trainer.rl.remote import (
    CeleryRollouts,
    PolicyRef,
    RolloutRequest,
    WorkerPolicyCache,
    make_reward,
    register_rollout_task,
    rollout_from_dict,
    rollout_to_dict,
    save_policy,
)
from trainer.rl.rollout import Rollout
from trainer.rl.toy import FirstTokenReward, toy_environment
from worker.agent import AgentResult
from worker.settings import AgentSettings

BASE = "0" * 40


# -- fakes ---------------------------------------------------------------------------------
@dataclass
class FakeRanks:
    is_main: bool = True
    barriers: int = 0

    def barrier(self) -> None:
        self.barriers += 1


@dataclass
class FakeLearner:
    """What save_policy touches: the ranks, LoRA or not, the base model's name, export."""

    is_lora: bool = True
    ranks: FakeRanks = field(default_factory=FakeRanks)
    settings: Any = field(default_factory=lambda: types.SimpleNamespace(model="org/base"))
    exported: list[Path] = field(default_factory=list)

    def export(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "weights.bin").write_text("w")
        self.exported.append(path)


class FakeResult:
    """An AsyncResult whose get() answers with ``value``, or times out."""

    def __init__(self, value: Any = None, *, failed: bool = False, silent: bool = False) -> None:
        self.value, self._failed, self.silent = value, failed, silent
        self.timeouts: list[float] = []
        self.forgotten = self.revoked = False

    def get(self, *, timeout: float, propagate: bool, disable_sync_subtasks: bool) -> Any:
        assert propagate is False  # a failure is a value to inspect, not an exception here
        self.timeouts.append(timeout)
        if self.silent:
            raise CeleryTimeout("no answer")
        return self.value

    def failed(self) -> bool:
        return self._failed

    def forget(self) -> None:
        self.forgotten = True

    def revoke(self) -> None:
        self.revoked = True


class FakeApp:
    """send_task records each message and hands back the next scripted result for its
    environment (a good rollout where nothing is scripted)."""

    def __init__(self, script: dict[str, list[FakeResult]] | None = None) -> None:
        self.script = script or {}
        self.sent: list[dict[str, Any]] = []
        self.results: list[FakeResult] = []

    def send_task(self, name: str, *, args: list[Any], **options: Any) -> FakeResult:
        request = RolloutRequest.from_dict(json.loads(json.dumps(args[0])))
        self.sent.append({"name": name, "request": request, **options})
        queue = self.script.get(request.instance_id)
        result = queue.pop(0) if queue else FakeResult(_rollout_dict(request.instance_id))
        self.results.append(result)
        return result


def _trajectory(first_token: int = 7) -> Trajectory:
    turn = TurnRecord(
        index=0,
        content="hi",
        reasoning=None,
        tool_calls=[],
        observations=[],
        finish_reason="stop",
        prompt_token_ids=[1, 2, 3],
        completion_token_ids=[first_token, 9],
        completion_logprobs=[-0.25, -1.5],
    )
    return Trajectory(messages=[{"role": "user", "content": "fix"}], tools=[], turns=[turn])


def _rollout(env_id: str = "toy__toy-0", reward: float = 1.0) -> Rollout:
    trajectory = _trajectory()
    result = AgentResult(exit_reason="agent", diff="diff --git a/x b/x\n", trajectory=trajectory)
    return Rollout(env_id, result, reward, trajectory.training_segments())


def _rollout_dict(env_id: str, reward: float = 1.0) -> dict[str, Any]:
    # Through JSON, as Celery's result backend hands it over.
    value: dict[str, Any] = json.loads(json.dumps(rollout_to_dict(_rollout(env_id, reward))))
    return value


def _envs(*ids: str) -> list[tuple[Environment, Path]]:
    return [(toy_environment(BASE, instance_id=i), Path("/unused")) for i in ids]


def _source(app: FakeApp, tmp_path: Path, **kwargs: Any) -> CeleryRollouts:
    return CeleryRollouts(
        app,
        store_dir=tmp_path / "store",
        output_dir=tmp_path / "run",
        limits=AgentSettings(max_turns=3, max_minutes=10),
        **kwargs,
    )


# -- the message ---------------------------------------------------------------------------
def test_remote_request_survives_json_with_its_policy() -> None:
    request = RolloutRequest(
        store_dir="/s",
        instance_id="a__b-1",
        policy=PolicyRef("org/base", "/run/policy/step-3/adapter", 3),
        limits=AgentSettings(max_turns=4).model_dump(mode="json"),
        reward="graded",
        seed=12345,
    )
    again = RolloutRequest.from_dict(json.loads(json.dumps(request.to_dict())))
    assert again == request
    assert AgentSettings.model_validate(again.limits).max_turns == 4
    # Full fine-tuning: no adapter, and it stays None (not the string "None").
    full = PolicyRef("/run/policy/step-3/model", None, 3)
    assert PolicyRef.from_dict(json.loads(json.dumps(full.to_dict()))) == full


def test_remote_rollout_round_trips_with_its_training_tokens() -> None:
    rollout = _rollout(reward=0.5)
    again = rollout_from_dict(_rollout_dict("toy__toy-0", 0.5))
    assert (again.env_id, again.reward) == ("toy__toy-0", 0.5)
    assert (again.result.exit_reason, again.result.diff) == ("agent", rollout.result.diff)
    # The learner rebuilds the exact ids, mask and sampling log-probs the worker saw.
    assert again.segments == rollout.segments
    assert again.segments[0].input_ids == [1, 2, 3, 7, 9]
    assert again.segments[0].loss_mask == [0, 0, 0, 1, 1]


def test_remote_reward_by_name() -> None:
    tokenizer = types.SimpleNamespace(convert_tokens_to_ids=lambda token: {"A": 7}[token])
    reward = make_reward("first-token:A", None, tokenizer)  # type: ignore[arg-type]
    assert isinstance(reward, FirstTokenReward) and reward.target == {7}
    with pytest.raises(ValueError, match="unknown reward 'nope'"):
        make_reward("nope", None, tokenizer)  # type: ignore[arg-type]


# -- the learner side: sending and gathering ------------------------------------------------
def test_remote_collect_sends_one_task_per_rollout_with_time_limits(tmp_path: Path) -> None:
    app = FakeApp()
    groups = _source(app, tmp_path).collect(FakeLearner(), 3, _envs("a__a-1", "b__b-1"), 2)  # type: ignore[arg-type]
    assert [[r.env_id for r in g or []] for g in groups] == [["a__a-1"] * 2, ["b__b-1"] * 2]
    assert [m["request"].instance_id for m in app.sent] == ["a__a-1"] * 2 + ["b__b-1"] * 2
    soft = 10 * 60 + remote.REWARD_MARGIN_S  # the agent's wall clock plus the reward's
    for message in app.sent:
        assert (message["name"], message["queue"]) == ("ribbit.rollout", "rollouts")
        assert (message["soft_time_limit"], message["time_limit"]) == (soft, soft + 60)
        request = message["request"]
        assert request.store_dir == str((tmp_path / "store").resolve())
        assert request.policy.step == 3 and request.policy.adapter_dir is not None
        assert request.reward == "graded" and request.limits["max_turns"] == 3
    # Every rollout samples with its own seed; the same step asks for the same seeds again.
    seeds = [m["request"].seed for m in app.sent]
    assert len(set(seeds)) == 4
    again = FakeApp()
    _source(again, tmp_path).collect(FakeLearner(), 3, _envs("a__a-1", "b__b-1"), 2)  # type: ignore[arg-type]
    assert [m["request"].seed for m in again.sent] == seeds
    assert all(r.forgotten for r in app.results)  # results do not pile up in the backend


def test_remote_collect_waits_for_every_retry_by_default(tmp_path: Path) -> None:
    source = _source(FakeApp(), tmp_path)
    assert source.timeout_s == source.soft_limit_s * (remote.MAX_RETRIES + 2)
    assert _source(FakeApp(), tmp_path, timeout_s=5).timeout_s == 5


def test_remote_a_failed_rollout_drops_its_whole_group(tmp_path: Path) -> None:
    failure = FakeResult(RuntimeError("sandbox died"), failed=True)
    ok = FakeResult(_rollout_dict("a__a-1"))
    app = FakeApp({"a__a-1": [ok, failure]})
    groups = _source(app, tmp_path).collect(FakeLearner(), 1, _envs("a__a-1", "b__b-1"), 2)  # type: ignore[arg-type]
    # Dropped, never scored as reward 0; the other group is untouched and in its place.
    assert groups[0] is None
    assert groups[1] is not None and [r.env_id for r in groups[1]] == ["b__b-1"] * 2
    assert ok.forgotten and failure.forgotten


def test_remote_an_answer_that_is_not_a_rollout_drops_its_group(tmp_path: Path) -> None:
    app = FakeApp({"a__a-1": [FakeResult("a string")]})
    groups = _source(app, tmp_path).collect(FakeLearner(), 1, _envs("a__a-1"), 2)  # type: ignore[arg-type]
    assert groups == [None]


def test_remote_a_silent_rollout_is_revoked_and_drops_its_group(tmp_path: Path) -> None:
    silent = FakeResult(silent=True)
    app = FakeApp({"b__b-1": [silent]})
    source = _source(app, tmp_path, timeout_s=30)
    groups = source.collect(FakeLearner(), 1, _envs("a__a-1", "b__b-1"), 2)  # type: ignore[arg-type]
    assert groups[0] is not None and groups[1] is None
    assert silent.revoked and not any(r.revoked for r in app.results if r is not silent)
    # One deadline for the whole step, not timeout_s per result.
    waits = [t for r in app.results for t in r.timeouts]
    assert all(0.1 <= t <= 30 for t in waits)


def test_remote_collect_with_nothing_chosen_still_saves_the_policy(tmp_path: Path) -> None:
    # Every rank takes part in the export (it gathers the shards), even with no work.
    learner, app = FakeLearner(), FakeApp()
    assert _source(app, tmp_path).collect(learner, 5, [], 4) == []  # type: ignore[arg-type]
    assert app.sent == [] and learner.exported == [tmp_path / "run/policy/step-5/adapter"]


# -- the learner side: saving the policy -----------------------------------------------------
def test_remote_save_policy_lora_ships_the_adapter_on_the_base(tmp_path: Path) -> None:
    learner = FakeLearner(is_lora=True)
    stale = tmp_path / "policy" / "step-2" / "stale.bin"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier run")
    ref = save_policy(learner, tmp_path, 2)  # type: ignore[arg-type]
    adapter = (tmp_path / "policy" / "step-2" / "adapter").resolve()
    assert ref == PolicyRef("org/base", str(adapter), 2)
    assert not stale.exists()  # a worker never loads a mix of two runs' files
    assert learner.ranks.barriers == 1


def test_remote_save_policy_full_ships_the_whole_model(tmp_path: Path) -> None:
    ref = save_policy(FakeLearner(is_lora=False), tmp_path, 4)  # type: ignore[arg-type]
    assert ref == PolicyRef(str((tmp_path / "policy/step-4/model").resolve()), None, 4)


def test_remote_save_policy_keeps_the_newest_steps_by_number(tmp_path: Path) -> None:
    (tmp_path / "policy" / "step-notes").mkdir(parents=True)
    learner = FakeLearner()
    for step in (8, 9, 10, 11):
        save_policy(learner, tmp_path, step)  # type: ignore[arg-type]
    kept = sorted(p.name for p in (tmp_path / "policy").iterdir())
    # step-10 is newer than step-9 (not a string sort); a folder not named by a step stays.
    assert kept == ["step-10", "step-11", "step-9", "step-notes"]
    assert remote.KEEP_POLICIES == 3


def test_remote_save_policy_on_another_rank_removes_nothing(tmp_path: Path) -> None:
    stale = tmp_path / "policy" / "step-1" / "adapter" / "old.bin"
    stale.parent.mkdir(parents=True)
    stale.write_text("x")
    for step in (2, 3, 4):
        (tmp_path / "policy" / f"step-{step}").mkdir()
    save_policy(FakeLearner(ranks=FakeRanks(is_main=False)), tmp_path, 1)  # type: ignore[arg-type]
    assert stale.exists()
    assert len(list((tmp_path / "policy").iterdir())) == 4


# -- the worker side: one model per process ----------------------------------------------------
@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """load_base_model replaced (no torch): each call recorded, a fresh object returned."""
    calls: list[str] = []

    def load_base_model(name: str) -> tuple[Any, Any]:
        calls.append(name)
        return object(), f"tokenizer of {name}"

    fake = types.ModuleType("trainer.rl.learner")
    fake.load_base_model = load_base_model  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trainer.rl.learner", fake)
    return calls


def _cache(swaps: list[str | None]) -> WorkerPolicyCache:
    cache = WorkerPolicyCache()

    def swap(adapter_dir: str | None) -> None:
        swaps.append(adapter_dir)
        cache._adapter = adapter_dir

    cache._swap_adapter = swap  # type: ignore[method-assign]
    return cache


def test_remote_worker_loads_the_base_once_and_swaps_adapters(loads: list[str]) -> None:
    swaps: list[str | None] = []
    cache = _cache(swaps)
    model, tokenizer = cache.policy_model(PolicyRef("org/base", "/run/step-1", 1))
    assert tokenizer == "tokenizer of org/base"
    cache.policy_model(PolicyRef("org/base", "/run/step-1", 1))  # same step: nothing to do
    again, _ = cache.policy_model(PolicyRef("org/base", "/run/step-2", 2))
    assert again is model and loads == ["org/base"] and cache.loads == 1
    assert swaps == ["/run/step-1", "/run/step-2"]
    cache.policy_model(PolicyRef("org/base", None, 0))  # the base alone: adapter taken off
    assert swaps[-1] is None


def test_remote_worker_reloads_for_another_base(loads: list[str]) -> None:
    swaps: list[str | None] = []
    cache = _cache(swaps)
    cache.policy_model(PolicyRef("org/base", "/run/step-1", 1))
    # Full fine-tuning: each step is a new base and no adapter; nothing to swap on it.
    cache.policy_model(PolicyRef("/run/step-2/model", None, 2))
    assert loads == ["org/base", "/run/step-2/model"] and cache.loads == 2
    assert swaps == ["/run/step-1"]
    # Back to a LoRA base: the adapter goes onto the freshly loaded model, even the same one.
    cache.policy_model(PolicyRef("org/base", "/run/step-1", 1))
    assert swaps == ["/run/step-1", "/run/step-1"] and cache.loads == 3


# -- the task ----------------------------------------------------------------------------------
@pytest.fixture
def celery_app() -> Celery:
    app = Celery("test-remote", set_as_current=False)
    app.conf.update(broker_url="memory://", result_backend="cache+memory://")
    app.ribbit_settings = "settings"
    return app


def test_remote_task_is_declared_for_redelivery(celery_app: Celery) -> None:
    task = register_rollout_task(celery_app)
    assert task.name == "ribbit.rollout" and "ribbit.rollout" in celery_app.tasks
    # A worker killed mid-rollout: the message goes back to the queue, not lost.
    assert task.acks_late and task.reject_on_worker_lost
    assert task.max_retries == remote.MAX_RETRIES and not task.ignore_result
    assert "ribbit.rollout" not in Celery("other", set_as_current=False).tasks


def test_remote_task_retries_then_fails(
    celery_app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, Any]] = []

    def run_rollout(request: RolloutRequest, settings: Any) -> dict[str, Any]:
        seen.append((request.instance_id, settings))
        raise RuntimeError("sandbox died")

    monkeypatch.setattr(remote, "run_rollout", run_rollout)
    task = register_rollout_task(celery_app)
    request = RolloutRequest("/s", "a__a-1", PolicyRef("b", None, 1), {}, "graded", 1)
    result = task.apply(args=[request.to_dict()])
    assert result.failed() and isinstance(result.result, RuntimeError)
    assert seen == [("a__a-1", "settings")] * (1 + remote.MAX_RETRIES)


def test_remote_task_returns_the_rollout(
    celery_app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "run_rollout", lambda request, settings: {"env_id": "x"})
    task = register_rollout_task(celery_app)
    request = RolloutRequest("/s", "a__a-1", PolicyRef("b", None, 1), {}, "graded", 1)
    assert task.apply(args=[request.to_dict()]).get() == {"env_id": "x"}
