"""Run by torchrun (2 ranks, on one node or two): for each case, a Learner takes one
step on this rank's share of the batch; the state, gradients and stats go to
OUT/<case>-rank<r>.pt, and for some cases a sharded checkpoint to OUT/<case>/step-1.

Usage: torchrun ... -m tests.integration.distributed.learner_step MODEL_DIR OUT
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import torch

from tests.integration.distributed.cases import CASES, EXACTNESS_DTYPE
from trainer.distributed import full_tensor, process_group
from trainer.rl.learner import Learner, load_base_model


def main(model_dir: Path, out: Path) -> None:
    with process_group() as ranks:
        assert ranks.world_size == 2, ranks
        for case in CASES:
            settings = case.settings(model_dir, out)
            # A different seed per rank: the LoRA initialisations differ until the
            # learner broadcasts rank 0's (rank 0 matches the single-process reference).
            torch.manual_seed(settings.seed + 17 * ranks.rank)
            model, tokenizer = load_base_model(str(model_dir), dtype=EXACTNESS_DTYPE)
            learner = Learner(model, tokenizer, settings)  # finds the process group itself
            stats = learner.step_or_skip(case.share(ranks.rank))
            # Each rank holds a shard of every gradient: gathered whole, in the same
            # order on both ranks (each gather is a collective).
            grads = {
                name: full_tensor(p.grad.detach()).clone()
                for name, p in learner.model.named_parameters()
                if p.requires_grad and p.grad is not None
            }
            shard_shapes = {
                name: tuple(p.to_local().shape) if hasattr(p, "to_local") else None
                for name, p in learner.model.named_parameters()
                if p.requires_grad
            }
            if case.resume:
                learner.save(out / case.name / "step-1")
            torch.save(
                {
                    "state": learner.trainable_state(),
                    "grads": grads,
                    "shard_shapes": shard_shapes,
                    "stats": dataclasses.asdict(stats) if stats is not None else None,
                    "step_count": learner.step_count,
                },
                out / f"{case.name}-rank{ranks.rank}.pt",
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
