import math

import pytest
import torch
from torch.testing import assert_close

from trainer.rl.advantages import group_advantages, informative_groups, mask_unfinished


def test_group_mean_baseline_scaled_by_sample_std() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    # mean 0.5; sample std = sqrt((4 * 0.25) / 3) = 0.57735
    expected = torch.tensor([[0.5, -0.5, -0.5, 0.5]]) / math.sqrt(1 / 3)
    assert_close(group_advantages(rewards, eps=0.0), expected)


def test_group_mean_baseline_without_std() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.2, 0.4, 0.6, 0.8]])
    expected = torch.tensor([[0.75, -0.25, -0.25, -0.25], [-0.3, -0.1, 0.1, 0.3]])
    assert_close(group_advantages(rewards, scale_by_std=False), expected)


def test_leave_one_out_baseline() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0]])
    # r0 - (0+0)/2, r1 - (1+0)/2, r2 - (1+0)/2
    expected = torch.tensor([[1.0, -0.5, -0.5]])
    assert_close(group_advantages(rewards, baseline="leave_one_out", scale_by_std=False), expected)


def test_leave_one_out_is_mean_baseline_times_g_over_g_minus_1() -> None:
    rewards = torch.tensor([[0.3, 0.9, 0.1, 0.5, 0.7]])
    loo = group_advantages(rewards, baseline="leave_one_out", scale_by_std=False)
    mean = group_advantages(rewards, baseline="mean", scale_by_std=False)
    assert_close(loo, mean * 5 / 4)


def test_zero_variance_group_gives_zero_advantage_and_is_filtered() -> None:
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    adv = group_advantages(rewards)
    assert_close(adv[0], torch.zeros(3))
    assert_close(adv[2], torch.zeros(3))
    assert informative_groups(rewards).tolist() == [False, True, False]


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="groups, G"):
        group_advantages(torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="at least 2"):
        group_advantages(torch.tensor([[1.0]]), baseline="leave_one_out")
    with pytest.raises(ValueError, match="baseline must be one of"):
        group_advantages(torch.tensor([[1.0, 0.0]]), baseline="median")  # type: ignore[arg-type]


def test_unfinished_rollouts_lose_their_loss_mask() -> None:
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    out = mask_unfinished(mask, torch.tensor([True, False]))
    assert_close(out, torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))
