"""Run by torchrun (2 ranks): the training loop on two toy environments (one group per
rank per step), the model sharded, then a resume from a mid-run sharded checkpoint.
Each rank writes what it saw to OUT/rank<r>.json and its final weights to
OUT/rank<r>-final.pt.

Usage: torchrun ... -m tests.integration.distributed.train_toy MODEL_DIR REPO BASE OUT
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from tests.fakes import local_sandboxes
from tests.plugins.trainer import seeded_learner, token_id, toy_prompt_ids
from trainer.config import TrainSettings
from trainer.distributed import process_group
from trainer.rl.toy import FirstTokenReward, expected_first_token_reward, toy_environment
from trainer.train import StepRecord, train

STEPS, RESUME_FROM = 6, 4


def main(model_dir: Path, repo: Path, base: str, out: Path) -> None:
    settings = TrainSettings(
        model=str(model_dir),
        output_dir=str(out / "run"),
        steps=STEPS,
        group_size=4,
        envs_per_step=2,
        learning_rate=0.05,
        max_new_tokens=16,
        max_turns=1,
        lora_r=8,
        lora_alpha=16,
        save_every=2,
        seed=0,
        lora_target_modules="lm_head",
    )
    envs = [(toy_environment(base, f"toy__toy-{i}"), repo) for i in range(2)]
    saved: list[str] = []
    real_save = torch.save

    def counting_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(f, str | os.PathLike):  # not the buffers collectives pickle into
            saved.append(str(f))
        real_save(obj, f, *args, **kwargs)

    with process_group() as ranks:
        learner = seeded_learner(settings)
        target = {token_id(learner.tokenizer, "A")}
        reward = FirstTokenReward(target)
        prompt = toy_prompt_ids(learner, toy_environment(base))
        before = expected_first_token_reward(learner, prompt, target)
        records: list[StepRecord] = []
        torch.save = counting_save
        try:
            summary = train(
                learner, envs, local_sandboxes(), reward, settings, on_step=records.append
            )
            resumed_learner = seeded_learner(settings)
            resumed_learner.load(Path(settings.output_dir) / f"step-{RESUME_FROM}")
            resumed = train(
                resumed_learner,
                envs,
                local_sandboxes(),
                reward,
                settings,
                steps=STEPS - RESUME_FROM,
            )
        finally:
            torch.save = real_save
        result = {
            "rank": ranks.rank,
            "world_size": ranks.world_size,
            "expected_reward_before": before,
            "expected_reward_after": expected_first_token_reward(learner, prompt, target),
            "rewards": [s.rewards for s in summary.steps],
            "mean_rewards": summary.mean_rewards,
            "losses": [s.learner.loss if s.learner else None for s in summary.steps],
            "on_step_calls": len(records),
            "checkpoints": [str(c) for c in summary.checkpoints],
            "torch_saves": saved,
            "resumed_rewards": [s.rewards for s in resumed.steps],
            "resumed_losses": [s.learner.loss if s.learner else None for s in resumed.steps],
        }
        (out / f"rank{ranks.rank}.json").write_text(json.dumps(result, indent=1))
        torch.save(
            {"final": learner.trainable_state(), "resumed": resumed_learner.trainable_state()},
            out / f"rank{ranks.rank}-final.pt",
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
