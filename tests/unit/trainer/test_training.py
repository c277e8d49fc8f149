"""GRPO on CPU with tiny real models, through the worker's agent loop unchanged.

See trainer/rl/toy.py for why the toy task is built this way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.testing import assert_close

from tests.fakes import LocalDirSandbox, make_git_repo
from tests.plugins.trainer import seeded_learner, token_id, toy_prompt_ids, toy_train_settings
from trainer.config import TrainSettings
from trainer.rl.rollout import collect_group
from trainer.rl.toy import FirstTokenReward, expected_first_token_reward, toy_environment
from trainer.train import agent_limits, train
from worker.agent import TransformersPolicy


@pytest.fixture
def toy_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "toy"
    return repo, make_git_repo(repo, {"README.md": "toy\n"})


def test_mean_reward_rises_and_adapter_changes(
    two_choice_model_dir: Path, toy_repo: tuple[Path, str], tmp_path: Path
) -> None:
    repo, base = toy_repo
    settings = toy_train_settings(two_choice_model_dir, tmp_path / "run")
    learner = seeded_learner(settings)
    target = {token_id(learner.tokenizer, "A")}
    prompt = toy_prompt_ids(learner, toy_environment(base))
    before_reward = expected_first_token_reward(learner, prompt, target)
    before_weights = learner.trainable_state()

    summary = train(
        learner,
        [(toy_environment(base), repo)],
        LocalDirSandbox,
        FirstTokenReward(target),
        settings,
    )

    after_reward = expected_first_token_reward(learner, prompt, target)
    assert before_reward < 0.4  # the model starts out preferring "B"
    assert after_reward > before_reward + 0.3
    rewards = summary.mean_rewards
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3
    after_weights = learner.trainable_state()
    changed = [k for k in before_weights if not torch.equal(before_weights[k], after_weights[k])]
    assert any("lora_B" in k for k in changed)
    assert summary.checkpoints and (summary.checkpoints[-1] / "adapter").is_dir()


@pytest.mark.parametrize("finetune", ["lora", "full"])
def test_checkpoint_and_resume_take_the_same_next_step(
    two_choice_model_dir: Path, toy_repo: tuple[Path, str], tmp_path: Path, finetune: str
) -> None:
    repo, base = toy_repo
    envs = [(toy_environment(base), repo)]
    settings = toy_train_settings(
        two_choice_model_dir,
        tmp_path / "run",
        finetune=finetune,
        steps=4,
        save_every=2,
        filter_zero_variance=False,
        learning_rate=0.01,
    )
    learner = seeded_learner(settings)
    target = {token_id(learner.tokenizer, "A")}
    reward = FirstTokenReward(target)
    original = train(learner, envs, LocalDirSandbox, reward, settings)
    checkpoint = Path(settings.output_dir) / "step-2"
    assert checkpoint in original.checkpoints

    resumed_learner = seeded_learner(settings)
    resumed_learner.load(checkpoint)
    assert resumed_learner.step_count == 2
    resumed = train(resumed_learner, envs, LocalDirSandbox, reward, settings, steps=2)
    # Step 3 checks weights and RNG were restored; step 4 also checks the optimizer state
    # (its update at step 3 shapes the weights step 4 starts from).
    for first, again in zip(original.steps[2:], resumed.steps, strict=True):
        assert first.rewards == again.rewards
        assert first.learner is not None and again.learner is not None
        assert again.learner.loss == pytest.approx(first.learner.loss, abs=1e-6)
        assert again.learner.grad_norm == pytest.approx(first.learner.grad_norm, rel=1e-4)
    final, resumed_final = learner.trainable_state(), resumed_learner.trainable_state()
    for key, value in final.items():
        assert_close(resumed_final[key], value, atol=1e-6, rtol=1e-5)


def test_learner_scores_rollout_tokens_as_they_were_sampled(
    tiny_model_dir: Path, toy_repo: tuple[Path, str], tmp_path: Path
) -> None:
    """The token path end to end: the learner's log-probs of a rollout's generated
    tokens equal the sampling log-probs the policy recorded (temperature 1, no
    top-k/top-p), and one GRPO step with the default all-linear LoRA moves the adapter."""
    repo, base = toy_repo
    settings = toy_train_settings(
        tiny_model_dir, tmp_path / "run", lora_target_modules="all-linear", learning_rate=1e-3
    )
    learner = seeded_learner(settings)
    policy = TransformersPolicy.from_model(
        learner.model, learner.tokenizer, defaults=agent_limits(settings)
    )
    group = collect_group(
        toy_environment(base),
        repo,
        policy,
        agent_limits(settings),
        LocalDirSandbox,
        lambda env, result, checkout: 0.0,
        2,
    )
    for rollout in group:
        assert rollout.unfinished  # a random model rambles to max_new_tokens
        (segment,) = rollout.segments
        with torch.no_grad():
            scored = learner.token_logprobs(segment.input_ids)
        picked = [i - 1 for i, m in enumerate(segment.loss_mask) if m]
        sampled = torch.tensor([lp for lp in segment.logprobs if lp is not None])
        assert len(picked) == 16
        assert_close(scored[picked], sampled, atol=1e-4, rtol=1e-4)

    from trainer.rl.learner import Sample

    before = learner.trainable_state()
    seg = group[0].segments[0]
    stats = learner.step(
        [
            Sample(seg.input_ids, seg.loss_mask, 1.0),
            Sample(group[1].segments[0].input_ids, group[1].segments[0].loss_mask, -1.0),
        ]
    )
    assert stats.tokens == 32 and stats.grad_norm > 0
    after = learner.trainable_state()
    assert any(not torch.equal(before[k], after[k]) for k in before if "lora_B" in k)


def test_train_settings_validation() -> None:
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        TrainSettings(group_size=1)
    with pytest.raises(ValueError, match="aggregation must be one of"):
        TrainSettings(aggregation="sum")
    from transformers import HfArgumentParser

    parser = HfArgumentParser(TrainSettings)  # type: ignore[arg-type]
    (parsed,) = parser.parse_args_into_dataclasses(
        ["--steps", "3", "--finetune", "full", "--scale_by_std", "false"]
    )
    assert (parsed.steps, parsed.finetune, parsed.scale_by_std) == (3, "full", False)


def test_kl_to_the_adapter_free_base_and_several_updates_per_batch(
    two_choice_model_dir: Path, toy_repo: tuple[Path, str], tmp_path: Path
) -> None:
    repo, base = toy_repo
    settings = toy_train_settings(
        two_choice_model_dir, tmp_path / "run", kl_coef=0.1, updates_per_batch=3, learning_rate=0.05
    )
    learner = seeded_learner(settings)
    policy = TransformersPolicy.from_model(
        learner.model, learner.tokenizer, defaults=agent_limits(settings)
    )
    group = collect_group(
        toy_environment(base),
        repo,
        policy,
        agent_limits(settings),
        LocalDirSandbox,
        lambda env, result, checkout: 0.0,
        2,
    )
    from trainer.rl.learner import Sample

    samples = [
        Sample(r.segments[0].input_ids, r.segments[0].loss_mask, adv)
        for r, adv in zip(group, (1.0, -1.0), strict=True)
    ]
    stats = learner.step(samples)
    # By the last update the adapter has moved the policy away from the base (KL > 0)
    # and away from the rollout policy (ratios != 1, some clipped or not).
    assert stats.kl > 0
    assert 0.0 <= stats.clip_fraction <= 1.0
    assert stats.tokens == sum(sum(s.loss_mask) for s in samples)


def test_rollouts_sampled_by_another_engine_are_importance_weighted(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """An inference server samples with other numerics than the learner (here: the same
    weights in bfloat16). Its log-probs give each token a truncated importance weight;
    the sampler's own log-probs give weight 1, the same update as none at all."""
    import copy

    from trainer.rl.learner import Sample

    settings = toy_train_settings(
        tiny_model_dir,
        tmp_path / "run",
        lora_target_modules="all-linear",
        lora_dropout=0.0,
        learning_rate=1e-3,
    )

    def learner_and_sample() -> tuple[Any, list[int], list[int]]:
        learner = seeded_learner(settings)
        vocab = learner.model.get_output_embeddings().weight.shape[0]
        ids = torch.randint(0, vocab, (40,), generator=torch.Generator().manual_seed(0))
        return learner, ids.tolist(), [0] * 8 + [1] * 32

    def step(behaviour: str) -> tuple[Any, dict[str, torch.Tensor]]:
        learner, ids, mask = learner_and_sample()
        scores = None
        with torch.no_grad():
            if behaviour == "own":
                scores = learner.token_logprobs(ids)
            elif behaviour == "bf16":
                server = copy.deepcopy(learner.model).to(torch.bfloat16)
                scores = learner.token_logprobs(ids, model=server)
        lps = None if scores is None else [0.0, *scores.tolist()]
        stats = learner.step([Sample(ids, mask, 1.0, behaviour_logprobs=lps)])
        return stats, learner.trainable_state()

    plain_stats, plain = step("none")
    own_stats, own = step("own")
    bf16_stats, bf16 = step("bf16")
    assert plain_stats.behaviour_gap == 0
    assert own_stats.behaviour_gap < 1e-5 and own_stats.truncated_fraction == 0
    for key in plain:
        assert_close(own[key], plain[key], atol=1e-7, rtol=1e-6)
    # bfloat16 keeps 8 bits of mantissa: log-probs move by about 1e-2 per token.
    print(f"bf16 sampler vs fp32 learner: mean |gap| {bf16_stats.behaviour_gap:.2e}")
    assert 1e-4 < bf16_stats.behaviour_gap < 0.5
    assert any(not torch.equal(bf16[k], plain[k]) for k in plain if "lora_B" in k)
