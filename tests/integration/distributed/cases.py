"""The fixed batch and the ways it is split across two ranks, shared by the torchrun
script (learner_step.py) and the test that checks it against one process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from trainer.config import TrainSettings
from trainer.rl.learner import Sample

# Both sides of the comparison run in float64. The ranks sum their gradients in another
# order than one process does; in float32 that rounding (~1e-8) is the size of Adam's eps,
# and Adam's first step, lr * g / (|g| + eps), turns it into weight differences up to lr
# for the elements whose gradient nearly cancels: the comparison then failed now and then
# (thread count, machine load). In float64 the same rounding is ~1e-16, far below eps, so
# the step differs by ~1e-11 at most and a tight tolerance still catches any real error.
EXACTNESS_DTYPE = torch.float64
ATOL = 1e-9
RTOL = 1e-7


def _sample(length: int, prompt: int, advantage: float, offset: int) -> Sample:
    ids = [(offset + 37 * i) % 500 + 1 for i in range(length)]
    return Sample(ids, [0] * prompt + [1] * (length - prompt), advantage)


# Different lengths and advantages; the last one is fully masked (a truncated rollout),
# so sequence_mean's count of sequences with tokens differs from the number of rows.
SAMPLES: list[Sample] = [
    _sample(9, 4, 1.0, 0),
    _sample(14, 5, -0.5, 3),
    _sample(6, 2, 0.75, 11),
    _sample(11, 7, -1.25, 29),
    Sample([5, 6, 7, 8, 9], [0, 0, 0, 0, 0], 0.5),
]


@dataclass(frozen=True)
class Case:
    name: str
    split: tuple[int, int]  # samples on rank 0, rank 1 (in SAMPLES order)
    aggregation: str = "token_mean"
    finetune: str = "lora"
    kl_coef: float = 0.0
    updates_per_batch: int = 1
    resume: bool = False  # also save a sharded checkpoint, resumed in one process

    def share(self, rank: int) -> list[Sample]:
        start = 0 if rank == 0 else self.split[0]
        return SAMPLES[start : start + self.split[rank]]

    @property
    def samples(self) -> list[Sample]:
        return self.share(0) + self.share(1)

    def settings(self, model_dir: Path, out: Path) -> TrainSettings:
        return TrainSettings(
            model=str(model_dir),
            output_dir=str(out / self.name),
            learning_rate=1e-2,
            lora_r=4,
            lora_alpha=8,
            lora_target_modules="all-linear",
            aggregation=self.aggregation,
            finetune="full" if self.finetune == "full" else "lora",
            kl_coef=self.kl_coef,
            updates_per_batch=self.updates_per_batch,
            seed=0,
        )


CASES = [
    Case("token-mean-kl-2-updates", (4, 1), kl_coef=0.1, updates_per_batch=2, resume=True),
    Case("sequence-mean", (2, 3), aggregation="sequence_mean"),
    Case("dr-grpo", (1, 4), aggregation="dr_grpo"),
    Case("sequence-mean-rank0-empty", (0, 5), aggregation="sequence_mean"),
    Case("token-mean-rank1-empty", (5, 0)),
    Case("full-finetune", (3, 2), finetune="full", resume=True),
    Case("all-empty", (0, 0)),
]
