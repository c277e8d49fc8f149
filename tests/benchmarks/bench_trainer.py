"""Trainer benchmark: ``python -m tests.benchmarks.bench_trainer``.

Prints numbers, asserts nothing, on CPU with the tiny qwen3_5 test model (random
weights, reference linear-attention kernels: absolute figures say little about
a GPU with the real kernels; ratios between settings are what to look at):

- learner throughput: rollout tokens/s through one GRPO step (forward with
  chunked, checkpointed log-probs, backward, AdamW), LoRA (default targets) vs full;
- log-prob chunk size: tokens/s of the no-grad scoring pass per chunk size;
- rollout throughput: rollouts/s and generated tokens/s through run_agent with
  TransformersPolicy over the learner's weights, in a LocalDirSandbox.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from tests.fakes import local_sandboxes, make_git_repo
from tests.plugins.models import build_tiny_model
from trainer.config import TrainSettings
from trainer.rl.learner import Learner, Sample, load_base_model
from trainer.rl.rollout import collect_group
from trainer.rl.toy import toy_environment
from trainer.train import agent_limits, seed_everything
from worker.agent import TransformersPolicy


def _learner(model_dir: Path, **overrides: object) -> Learner:
    seed_everything(0)
    values: dict[str, object] = dict(
        model=str(model_dir), max_new_tokens=32, max_turns=1, group_size=4, learning_rate=1e-4
    )
    values.update(overrides)
    model, tokenizer = load_base_model(str(model_dir))
    return Learner(model, tokenizer, TrainSettings(**values))  # type: ignore[arg-type]


def bench(model_dir: Path, repo: Path, base: str) -> None:
    env = toy_environment(base)
    learner = _learner(model_dir)
    limits = agent_limits(learner.settings)
    policy = TransformersPolicy.from_model(learner.model, learner.tokenizer, defaults=limits)
    start = time.perf_counter()
    group = collect_group(env, repo, policy, limits, local_sandboxes(), lambda e, r, c: 0.0, 4)
    elapsed = time.perf_counter() - start
    generated = sum(t.completion_tokens or 0 for r in group for t in r.result.trajectory.turns)
    print(
        f"rollouts: {len(group) / elapsed:.2f} rollouts/s, {generated / elapsed:.1f} "
        f"generated tokens/s ({len(group)} rollouts of <= 32 new tokens, "
        f"prompt {len(group[0].segments[0].input_ids) - 32} tokens)"
    )

    samples = [
        Sample(s.input_ids, s.loss_mask, adv)
        for r, adv in zip(group, (1.0, -1.0, 0.5, -0.5), strict=True)
        for s in r.segments
    ]
    tokens = sum(len(s.input_ids) for s in samples)
    for label, overrides in (("lora default", {}), ("full fine-tune", {"finetune": "full"})):
        lrn = _learner(model_dir, **overrides)  # fresh: the same starting point for both
        lrn.step(samples)  # warm-up
        start = time.perf_counter()
        for _ in range(2):
            lrn.step(samples)
        elapsed = (time.perf_counter() - start) / 2
        print(
            f"learner ({label}): {tokens / elapsed:.0f} tokens/s "
            f"({len(samples)} sequences, {tokens} tokens, {elapsed:.2f} s/step)"
        )

    for chunk in (64, 256, 4096):
        learner.settings.logprob_chunk_tokens = chunk
        with torch.no_grad():
            start = time.perf_counter()
            for s in samples:
                learner.token_logprobs(s.input_ids)
            elapsed = time.perf_counter() - start
        print(f"scoring, chunk {chunk}: {tokens / elapsed:.0f} tokens/s")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="ribbit-bench-trainer-") as tmp:
        root = Path(tmp)
        model_dir = build_tiny_model(root / "model")
        base = make_git_repo(root / "repo", {"README.md": "toy\n"})
        bench(model_dir, root / "repo", base)


if __name__ == "__main__":
    main()
