"""Workers use the promoted model version, and a rollback, without a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def test_jobs_follow_promotion_and_rollback(tiny_model_dir: Path, tmp_path: Path) -> None:
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from bot.store.db import Database
    from trainer import registry
    from worker.agent import TransformersPolicy, load_policy
    from worker.model_choice import model_for_jobs
    from worker.settings import AgentSettings, ModelSettings

    adapter = tmp_path / "adapter-v1"
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    peft_model: Any = get_peft_model(base, LoraConfig(r=2, target_modules="all-linear"))
    peft_model.save_pretrained(adapter)

    db = Database(f"sqlite:///{tmp_path / 'ribbit.db'}")
    db.migrate()
    configured = ModelSettings(model=str(tiny_model_dir))
    assert model_for_jobs(db, configured) == configured  # nothing promoted yet

    registry.register(
        db,
        "v1",
        base_model=str(tiny_model_dir),
        adapter_path=str(adapter),
        heldout_pass_rate=0.5,
        heldout_envs=2,
    )
    registry.promote(db, "v1", force=True)  # serving is what this tests, not the rule
    chosen = model_for_jobs(db, configured)
    assert chosen.adapter_path == adapter
    policy = load_policy(chosen, AgentSettings())
    assert isinstance(policy, TransformersPolicy) and isinstance(policy.model, PeftModel)

    registry.rollback(db)
    back = model_for_jobs(db, configured)
    assert back.adapter_path is None
    plain = load_policy(back, AgentSettings())
    assert not isinstance(plain.model, PeftModel)  # type: ignore[attr-defined]
    # Nothing promoted any more: a served model is asked for by its configured name
    # (tests/integration/test_served_versions.py covers promotion on that path).
    served = ModelSettings(policy="openai", model="frognano")
    assert model_for_jobs(db, served) == served
    db.dispose()
