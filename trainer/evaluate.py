"""Score a model version on held-out environments, and calibrate environments.

A version's score is its mean solve rate over the held-out environments, from k
rollouts each with the real reward (:mod:`trainer.calibrate`); the registry
promotes on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy import select

from bot.settings import AgentSettings
from bot.store.db import Database
from trainer.calibrate import CalibrationReport, calibrate
from trainer.envs.schema import Environment
from trainer.registry import RegistryError
from trainer.rl.learner import load_base_model
from trainer.rl.rollout import graded_reward
from trainer.store import ModelVersion
from worker.agent import TransformersPolicy
from worker.sandbox.base import Sandbox


def version_policy(
    base_model: str, adapter_path: str | None, limits: AgentSettings
) -> TransformersPolicy:
    """The base weights, with the version's LoRA adapter on top when it has one."""
    model, tokenizer = load_base_model(base_model)
    name = base_model
    if adapter_path:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter_path)  # type: ignore[assignment]
        name = f"{base_model}+{Path(adapter_path).name}"
    model.eval()
    return TransformersPolicy.from_model(model, tokenizer, model_name=name, defaults=limits)


def evaluate_version(
    db: Database,
    name: str,
    envs: Sequence[tuple[Environment, Path]],
    sandbox_factory: Callable[[Path], Sandbox],
    limits: AgentSettings,
    *,
    k: int = 1,
    on_env: Callable[[Environment], None] | None = None,
) -> CalibrationReport:
    """Run the version on ``envs`` and store its held-out pass rate."""
    with db.session() as s:
        version = s.scalar(select(ModelVersion).where(ModelVersion.name == name))
        if version is None:
            raise RegistryError(f"no version {name!r}")
        base, adapter = version.base_model, version.adapter_path
    policy = version_policy(base, adapter, limits)
    report = calibrate(
        envs, policy, limits, sandbox_factory, graded_reward(sandbox_factory), k=k, on_env=on_env
    )
    with db.session() as s:
        row = s.scalar(select(ModelVersion).where(ModelVersion.name == name))
        assert row is not None
        row.heldout_pass_rate = report.pass_rate
        row.heldout_envs = len(envs)
    return report
