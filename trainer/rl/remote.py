"""Rollouts as Celery tasks on the worker fleet.

The learner (:class:`CeleryRollouts`) saves its current weights to the run's
folder (``<output_dir>/policy/step-N``: a peft adapter folder with LoRA, the full
model otherwise) and sends one ``ribbit.rollout`` task per rollout to the
``rollouts`` queue. A task names its environment by store folder and instance id
and its policy by a :class:`PolicyRef` (paths on storage the workers share, never
weights in a message). The worker checks the environment out of the store's git
bundle once per process, keeps the base model loaded once per process and only
swaps the adapter's weights when the step changes, runs the same agent loop, sandbox
and reward as local training, and returns the rollout as JSON (the trajectory in
full, so the learner rebuilds the exact token ids, masks and log-probs).

Failures are explicit: a rollout that raises is retried (``MAX_RETRIES``); a
worker killed mid-rollout has its message redelivered (late ack); one that still
fails or does not answer in time drops its whole group from the step, counted in
``StepRecord.failed_groups``, never scored as reward 0.

Rollout workers: ``ribbit worker --rollouts`` (or ``celery -A trainer.celery_app
worker -Q rollouts``) on hosts that can load the model, with the environment folders
and the run folder on shared storage at the same paths. A process runs one rollout
at a time on its model (the lock below); scale with more worker processes or hosts.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.envs.schema import Environment
from trainer.rl.rollout import RewardFn, Rollout, graded_reward, rollout_episode
from trainer.rl.sources import Group
from worker.agent.episode import SandboxRecipe
from worker.settings import AgentSettings, WorkerSettings

if TYPE_CHECKING:
    from celery import Celery, Task

    from trainer.checkouts import CheckedOut
    from trainer.rl.learner import Learner

log = logging.getLogger(__name__)

TASK_NAME = "ribbit.rollout"
QUEUE = "rollouts"
MAX_RETRIES = 2
KEEP_POLICIES = 3  # policy folders kept on disk (a slow worker may still read the last)
# Beyond the agent's own wall clock: sandbox start, checkout, reward (tests + gates).
REWARD_MARGIN_S = 600


@dataclass(frozen=True)
class PolicyRef:
    """Which weights a rollout samples from: a base model plus, with LoRA, an adapter."""

    base_model: str
    adapter_dir: str | None
    step: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyRef:
        return cls(str(data["base_model"]), data.get("adapter_dir"), int(data["step"]))


@dataclass(frozen=True)
class RolloutRequest:
    store_dir: str
    instance_id: str
    policy: PolicyRef
    limits: dict[str, Any]  # AgentSettings, as JSON
    reward: str  # a name in REWARDS
    seed: int

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["policy"] = self.policy.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutRequest:
        return cls(
            store_dir=str(data["store_dir"]),
            instance_id=str(data["instance_id"]),
            policy=PolicyRef.from_dict(data["policy"]),
            limits=dict(data["limits"]),
            reward=str(data["reward"]),
            seed=int(data["seed"]),
        )


def rollout_to_dict(rollout: Rollout) -> dict[str, Any]:
    result = rollout.result
    return {
        "env_id": rollout.env_id,
        "reward": rollout.reward,
        "exit_reason": result.exit_reason,
        "diff": result.diff,
        "error": result.error,
        "trajectory": result.trajectory.to_dict(),
        "reason": rollout.reason,
        "tamper": rollout.tamper,
    }


def rollout_from_dict(data: dict[str, Any]) -> Rollout:
    from bot.store.records.trajectory import Trajectory
    from worker.agent import AgentResult

    trajectory = Trajectory.from_dict(data["trajectory"])
    result = AgentResult(
        exit_reason=data["exit_reason"],
        diff=data["diff"],
        trajectory=trajectory,
        error=data.get("error"),
    )
    return Rollout(
        env_id=data["env_id"],
        result=result,
        reward=float(data["reward"]),
        segments=trajectory.training_segments(),
        # Absent from a worker older than the tamper signal.
        reason=str(data.get("reason") or ""),
        tamper=str(data.get("tamper") or ""),
    )


# -- rewards by name ---------------------------------------------------------------------
# A task carries the reward's name; the worker builds it with its own sandbox factory
# and tokenizer. "first-token:A" is the toy reward (trainer/rl/toy.py) for tests.
def make_reward(name: str, sandbox_factory: SandboxRecipe, tokenizer: Any) -> RewardFn:
    if name == "graded":
        return graded_reward(sandbox_factory)
    if name.startswith("first-token:"):
        from trainer.rl.toy import FirstTokenReward

        tid = tokenizer.convert_tokens_to_ids(name.split(":", 1)[1])
        return FirstTokenReward({int(tid)})
    raise ValueError(f"unknown reward {name!r} (graded, first-token:<token>)")


# -- the worker side -----------------------------------------------------------------------
class WorkerPolicyCache:
    """One process's model: the base loaded once, adapters swapped in place."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one rollout at a time on this process's model
        self._base: str | None = None
        self._adapter: str | None = None
        self.model: Any = None
        self.tokenizer: Any = None
        self.loads = 0  # base model loads (a test checks it stays at one per base)

    def policy_model(self, ref: PolicyRef) -> tuple[Any, Any]:
        from trainer.rl.learner import load_base_model

        if ref.base_model != self._base:
            self.model, self.tokenizer = load_base_model(ref.base_model)
            self.loads += 1
            self._base, self._adapter = ref.base_model, None
        if ref.adapter_dir != self._adapter:
            self._swap_adapter(ref.adapter_dir)
        return self.model, self.tokenizer

    def _swap_adapter(self, adapter_dir: str | None) -> None:
        from peft import PeftModel, set_peft_model_state_dict
        from peft.utils import load_peft_weights

        if adapter_dir is None:
            if isinstance(self.model, PeftModel):
                self.model = self.model.unload()  # lossless: the adapter was never merged
        elif isinstance(self.model, PeftModel):
            weights = load_peft_weights(adapter_dir, device=str(self.model.device))
            set_peft_model_state_dict(self.model, weights)
        else:
            self.model = PeftModel.from_pretrained(self.model, adapter_dir, is_trainable=False)
        self.model.eval()
        self._adapter = adapter_dir


class CheckoutCache:
    """Environment checkouts, one per environment per process (the agent's sandbox
    copies from it and never writes back)."""

    def __init__(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="ribbit-rollout-checkouts-"))
        self._paths: dict[tuple[str, str], tuple[Environment, Path]] = {}
        self._lock = threading.Lock()

    def get(self, store_dir: str, instance_id: str) -> tuple[Environment, Path]:
        from trainer.envs.folders import EnvironmentFolders

        key = (store_dir, instance_id)
        with self._lock:
            if key not in self._paths:
                store = EnvironmentFolders(Path(store_dir))
                env = store.get(instance_id)
                slot = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
                dest = self._root / slot
                shutil.rmtree(dest, ignore_errors=True)
                self._paths[key] = (env, store.checkout(env, dest))
            return self._paths[key]


POLICIES = WorkerPolicyCache()
CHECKOUTS = CheckoutCache()


def run_rollout(request: RolloutRequest, settings: WorkerSettings) -> dict[str, Any]:
    """One rollout on this worker: what the ``ribbit.rollout`` task does."""
    import torch

    from worker.agent import TransformersPolicy

    env, checkout = CHECKOUTS.get(request.store_dir, request.instance_id)
    limits = AgentSettings.model_validate(request.limits)
    factory = SandboxRecipe.production(settings.sandbox)
    with POLICIES.lock:
        model, tokenizer = POLICIES.policy_model(request.policy)
        policy = TransformersPolicy.from_model(
            model, tokenizer, model_name=f"{request.policy.base_model}@{request.policy.step}"
        )
        torch.manual_seed(request.seed)
        result = rollout_episode(env, checkout, policy, limits, factory)
        reward_fn = make_reward(request.reward, factory, tokenizer)
    # Not collect_group: graded after the model's lock is released, so grading (tests and
    # gates in a sandbox, no model) never keeps another rollout from the model.
    rollout = Rollout.graded(env.instance_id, result, reward_fn(env, result, checkout))
    return rollout_to_dict(rollout)


def register_rollout_task(app: Celery) -> Task:
    """Add ``ribbit.rollout`` to ``app`` (the worker's app, see trainer/celery_app.py)."""

    @app.task(
        name=TASK_NAME,
        bind=True,
        acks_late=True,
        reject_on_worker_lost=True,
        ignore_result=False,
        max_retries=MAX_RETRIES,
        shared=False,  # registered on this app only, not on every app made after it
    )
    def rollout(self: Task, request: dict[str, Any]) -> dict[str, Any]:
        settings: WorkerSettings = app.ribbit_settings
        try:
            return run_rollout(RolloutRequest.from_dict(request), settings)
        except Exception as exc:
            log.warning("rollout %s failed: %s", request.get("instance_id"), exc)
            raise self.retry(exc=exc, countdown=1) from exc

    return rollout


# -- the learner side ----------------------------------------------------------------------
def save_policy(learner: Learner, output_dir: Path, step: int) -> PolicyRef:
    """The learner's current weights where rollout workers can load them."""
    target = output_dir / "policy" / f"step-{step}"
    if learner.ranks.is_main and target.exists():
        shutil.rmtree(target)
    learner.ranks.barrier()
    if learner.is_lora:
        learner.export(target / "adapter")
        ref = PolicyRef(learner.settings.model, str((target / "adapter").resolve()), step)
    else:
        # Full fine-tuning ships the whole model each step (a 4B model in bf16 is ~8 GB).
        learner.export(target / "model")
        ref = PolicyRef(str((target / "model").resolve()), None, step)
    if learner.ranks.is_main:
        _prune_policies(output_dir / "policy")
    return ref


def _prune_policies(root: Path) -> None:
    folders = sorted(
        (p for p in root.glob("step-*") if p.name[5:].isdigit()), key=lambda p: int(p.name[5:])
    )
    for old in folders[:-KEEP_POLICIES]:
        shutil.rmtree(old, ignore_errors=True)


class CeleryRollouts:
    """A step's rollouts as ``ribbit.rollout`` tasks; groups in the order asked for."""

    def __init__(
        self,
        app: Celery,
        *,
        store_dir: Path,
        output_dir: Path,
        limits: AgentSettings,
        reward: str = "graded",
        seed: int = 0,
        timeout_s: float | None = None,
    ) -> None:
        self.app = app
        self.store_dir = str(Path(store_dir).resolve())
        self.output_dir = Path(output_dir)
        self.limits = limits
        self.reward = reward
        self.seed = seed
        self.soft_limit_s = limits.max_minutes * 60 + REWARD_MARGIN_S
        # Waiting covers every retry and a queue shared with other runs.
        self.timeout_s = timeout_s or self.soft_limit_s * (MAX_RETRIES + 2)

    def collect(
        self, learner: Learner, step: int, chosen: Sequence[CheckedOut], group_size: int
    ) -> list[Group]:
        # Every rank, even one with nothing to collect: the export gathers the shards.
        ref = save_policy(learner, self.output_dir, step)
        if not chosen:
            return []
        limits = self.limits.model_dump(mode="json")
        pending = []
        for gi, (env, _checkout) in enumerate(chosen):
            results = []
            for i in range(group_size):
                request = RolloutRequest(
                    store_dir=self.store_dir,
                    instance_id=env.instance_id,
                    policy=ref,
                    limits=limits,
                    reward=self.reward,
                    seed=_seed(self.seed, step, env.instance_id, gi, i),
                )
                results.append(
                    self.app.send_task(
                        TASK_NAME,
                        args=[request.to_dict()],
                        queue=QUEUE,
                        soft_time_limit=self.soft_limit_s,
                        time_limit=self.soft_limit_s + 60,
                    )
                )
            pending.append((env, results))
        deadline = time.monotonic() + self.timeout_s
        groups: list[Group] = []
        for env, results in pending:
            groups.append(self._gather(env, results, deadline))
        return groups

    def _gather(self, env: Environment, results: list[Any], deadline: float) -> Group:
        from celery.exceptions import TimeoutError as CeleryTimeout

        rollouts: list[Rollout] = []
        failed = None
        for result in results:
            try:
                value = result.get(
                    timeout=max(deadline - time.monotonic(), 0.1),
                    propagate=False,
                    disable_sync_subtasks=False,
                )
            except CeleryTimeout:
                failed = "no answer in time"
                result.revoke()
                continue
            if result.failed() or not isinstance(value, dict):
                failed = f"{type(value).__name__}: {value}"
                continue
            rollouts.append(rollout_from_dict(value))
            result.forget()
        if failed is not None:
            log.warning("dropping the group of %s: a rollout failed (%s)", env.instance_id, failed)
            for result in results:
                result.forget()
            return None
        return rollouts


def _seed(base: int, step: int, instance_id: str, group: int, index: int) -> int:
    digest = hashlib.sha256(f"{base}:{step}:{instance_id}:{group}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")
