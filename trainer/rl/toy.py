"""A toy environment whose reward a tiny random model can learn to earn in seconds.

Why: the real reward (tests pass) is never earned by a randomly initialised
model, so a CPU test of "training raises the reward" needs a task where the
reward depends directly on what the policy emits. Everything except the reward
function is the real path: ``run_agent`` with a ``TransformersPolicy`` over the
learner's weights in a sandbox of a real git checkout, tokens and loss mask from
``Trajectory.training_segments()``, group advantages, the clipped loss, LoRA.

The reward of a rollout is 1 iff its first generated token is in a target set.
The first token always follows the same context (the end of the generation
prompt), so the policy's chance of earning it is one softmax entry that a test
can read exactly, without sampling noise (:func:`expected_first_token_reward`).

A randomly initialised model spreads its first token over the whole vocabulary,
and moving mass onto a set of hundreds of tokens one sampled token at a time is
slow; so the tests pair this reward with a "two-choice" tiny model (all layers
zeroed, lm_head set so that after the prompt it says "A" or "B" with equal odds,
then ends the turn). Rewarding "A" then gives groups with real variance at every
step, two-token completed turns (fast, and not truncated, so the default masking
stays on), and a gradient LoRA on the lm_head follows in a few steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainer.envs.schema import Environment
from worker.agent import AgentResult

TOY_ISSUE = "Say something.\nAnswer in a few words."


def toy_environment(base_commit: str, instance_id: str = "toy__toy-0") -> Environment:
    return Environment(
        instance_id=instance_id,
        repo="toy/toy",
        base_commit=base_commit,
        problem_statement=TOY_ISSUE,
        patch="",
        test_patch="",
        FAIL_TO_PASS=["toy"],
        PASS_TO_PASS=[],
        split="train",
    )


class FirstTokenReward:
    """Reward 1.0 iff the rollout's first generated token is in ``target``, else 0.0
    (binary, like the real reward)."""

    def __init__(self, target: set[int]) -> None:
        self.target = frozenset(target)

    def __call__(self, env: Environment, result: AgentResult, checkout: Path) -> float:
        for turn in result.trajectory.turns:
            if turn.completion_token_ids:
                return 1.0 if turn.completion_token_ids[0] in self.target else 0.0
        return 0.0


def expected_first_token_reward(learner: Any, prompt_ids: list[int], target: set[int]) -> float:
    """The policy's exact chance of earning :class:`FirstTokenReward` after
    ``prompt_ids``, at the learner's sampling temperature."""
    from trainer.rl.learner import backbone_and_head

    backbone, head = backbone_and_head(learner.model)
    # Gathered: the backbone and head are called apart from the sharded root.
    with torch.no_grad(), learner.gathered():
        x = torch.tensor([prompt_ids], device=learner.device)
        logits = head(backbone(input_ids=x).last_hidden_state[0, -1]).float()
    probs = torch.softmax(logits / learner.settings.temperature, dim=-1)
    return float(probs[sorted(target)].sum())
