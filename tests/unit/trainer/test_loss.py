"""The GRPO-family loss against numbers worked out by hand.

Batch: rollout 0 has advantage +1 and token ratios 1.5 and 0.9; rollout 1 has
advantage -1, ratio 0.5 on its only unmasked token. eps_low 0.2, eps_high 0.28:

- r=1.5, A=+1: min(1.5, clip->1.28) = 1.28, loss -1.28 (clipped)
- r=0.9, A=+1: min(0.9, 0.9) = 0.9, loss -0.9
- r=0.5, A=-1: min(-0.5, clip->0.8 * -1 = -0.8) = -0.8, loss +0.8 (clipped)
"""

import math

import pytest
import torch
from torch.testing import assert_close

from trainer.rl.loss import BatchTotals, LossConfig, k3_kl, policy_loss, token_weights


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    old = torch.tensor([[-1.0, -2.0], [-0.5, -3.0]])
    ratios = torch.tensor([[1.5, 0.9], [0.5, 7.0]])  # 7.0 sits under the mask
    new = old + torch.log(ratios)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    return new, old, adv, mask


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [
        ("token_mean", (-1.28 - 0.9 + 0.8) / 3),
        ("sequence_mean", ((-1.28 - 0.9) / 2 + 0.8) / 2),
        ("dr_grpo", (-1.28 - 0.9 + 0.8) / (2 * 2)),
    ],
)
def test_clipped_loss_per_aggregation(aggregation: str, expected: float) -> None:
    new, old, adv, mask = _batch()
    out = policy_loss(new, old, adv, mask, LossConfig(aggregation=aggregation))  # type: ignore[arg-type]
    assert_close(out.loss, torch.tensor(expected))
    assert_close(out.clip_fraction, torch.tensor(2 / 3))
    assert out.tokens == 3


def test_dr_grpo_uses_the_given_constant() -> None:
    new, old, adv, mask = _batch()
    out = policy_loss(new, old, adv, mask, LossConfig(aggregation="dr_grpo", dr_grpo_max_tokens=10))
    assert_close(out.loss, torch.tensor((-1.28 - 0.9 + 0.8) / (2 * 10)))


def test_symmetric_clip_changes_the_high_side_only() -> None:
    new, old, adv, mask = _batch()
    out = policy_loss(new, old, adv, mask, LossConfig(eps_low=0.2, eps_high=0.2))
    assert_close(out.loss, torch.tensor((-1.2 - 0.9 + 0.8) / 3))


def test_gradient_at_ratio_one_is_minus_advantage_over_tokens() -> None:
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]], requires_grad=True)
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    out = policy_loss(logprobs, logprobs.detach().clone(), adv, mask, LossConfig())
    out.loss.backward()
    assert logprobs.grad is not None
    assert_close(logprobs.grad, torch.tensor([[-2 / 3, -2 / 3], [1 / 3, 0.0]]))


def test_clipped_tokens_get_no_gradient() -> None:
    old = torch.tensor([[0.0]])
    logprobs = (old + math.log(1.5)).clone().requires_grad_(True)
    out = policy_loss(logprobs, old, torch.tensor([1.0]), torch.ones(1, 1), LossConfig())
    out.loss.backward()
    assert logprobs.grad is not None
    assert_close(logprobs.grad, torch.zeros(1, 1))


def test_k3_kl_by_hand() -> None:
    # q = log 2: e^q - q - 1 = 2 - 0.693147 - 1
    kl = k3_kl(torch.tensor([0.0, -1.0]), torch.tensor([math.log(2.0), -1.0]))
    assert_close(kl, torch.tensor([1.0 - math.log(2.0), 0.0]))


def test_kl_term_is_added_with_its_coefficient() -> None:
    logprobs = torch.tensor([[0.0, 0.0]])
    ref = torch.tensor([[math.log(2.0), 0.0]])
    mask = torch.tensor([[1.0, 1.0]])
    out = policy_loss(
        logprobs, logprobs, torch.tensor([0.0]), mask, LossConfig(kl_coef=0.5), ref_logprobs=ref
    )
    kl_mean = (1.0 - math.log(2.0)) / 2
    assert_close(out.kl, torch.tensor(kl_mean))
    assert_close(out.loss, torch.tensor(0.5 * kl_mean))


def test_fully_masked_batch_is_zero_and_differentiable() -> None:
    logprobs = torch.zeros(2, 3, requires_grad=True)
    for aggregation in ("token_mean", "sequence_mean", "dr_grpo"):
        out = policy_loss(
            logprobs,
            torch.zeros(2, 3),
            torch.tensor([1.0, -1.0]),
            torch.zeros(2, 3),
            LossConfig(aggregation=aggregation),
        )
        assert_close(out.loss, torch.tensor(0.0))
        out.loss.backward()


def test_config_validation_messages() -> None:
    with pytest.raises(ValueError, match="eps_low"):
        LossConfig(eps_low=1.5)
    with pytest.raises(ValueError, match="aggregation must be one of"):
        LossConfig(aggregation="sum")  # type: ignore[arg-type]
    new, old, adv, mask = _batch()
    with pytest.raises(ValueError, match="needs ref_logprobs"):
        policy_loss(new, old, adv, mask, LossConfig(kl_coef=0.1))
    with pytest.raises(ValueError, match="same shape"):
        policy_loss(new, old[:, :1], adv, mask, LossConfig())


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean", "dr_grpo"])
def test_per_sequence_slices_with_batch_weights_add_up_to_the_batch_loss(
    aggregation: str,
) -> None:
    config = LossConfig(aggregation=aggregation, kl_coef=0.1)  # type: ignore[arg-type]
    new, old, adv, mask = _batch()
    ref = old - 0.3
    full = policy_loss(new, old, adv, mask, config, ref_logprobs=ref)
    weights = token_weights(mask, config)
    parts = [
        policy_loss(
            new[i : i + 1],
            old[i : i + 1],
            adv[i : i + 1],
            mask[i : i + 1],
            config,
            ref_logprobs=ref[i : i + 1],
            weights=weights[i : i + 1],
        ).loss
        for i in range(2)
    ]
    assert_close(sum(parts), full.loss)


def _ragged_mask() -> torch.Tensor:
    # Four rollouts of different lengths (padding as zeros), one fully masked out.
    return torch.tensor(
        [
            [1.0, 1.0, 1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [1.0, 1.0, 1.0, 1.0, 1.0],
        ]
    )


def test_batch_totals_of_a_mask() -> None:
    totals = BatchTotals.from_mask(_ragged_mask())
    assert totals == BatchTotals(tokens=9.0, sequences=4, sequences_with_tokens=3, padded_length=5)
    assert BatchTotals.from_mask(torch.zeros(0, 0)) == BatchTotals(0.0, 0, 0, 0)


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean", "dr_grpo"])
@pytest.mark.parametrize("rows", [slice(0, 1), slice(1, 3), slice(3, 4), slice(0, 0)])
def test_a_slice_weighted_with_the_whole_batch_totals_gets_its_rows_of_the_weights(
    aggregation: str, rows: slice
) -> None:
    """What a data-parallel rank does: weights of its own rows from the global totals."""
    config = LossConfig(aggregation=aggregation)  # type: ignore[arg-type]
    mask = _ragged_mask()
    whole = token_weights(mask, config)
    part = token_weights(mask[rows], config, BatchTotals.from_mask(mask))
    assert torch.equal(part, whole[rows])
    if rows.stop - rows.start == 1 and mask[rows].sum() > 0:
        # Without the whole batch's totals a slice is weighted as a batch of its own.
        assert not torch.equal(token_weights(mask[rows], config), whole[rows])


# -- truncated importance weights for rollouts sampled by another engine -------------------


def test_behaviour_equal_to_old_changes_nothing() -> None:
    new, old, adv, mask = _batch()
    plain = policy_loss(new, old, adv, mask, LossConfig())
    same = policy_loss(new, old, adv, mask, LossConfig(), behaviour_logprobs=old.clone())
    assert torch.equal(plain.loss, same.loss)
    assert same.behaviour_gap == 0 and same.truncated_fraction == 0
    assert plain.behaviour_gap is None


def test_importance_weights_by_hand_with_the_cap() -> None:
    """Weights exp(old - behaviour): 1.5 on the first token, 3 capped at 2 on the second,
    and a wild value under the mask that must not matter."""
    new, old, adv, mask = _batch()
    behaviour = old - torch.log(torch.tensor([[1.5, 3.0], [1.0, 1.0]]))
    behaviour[1, 1] = 1e6  # masked out
    out = policy_loss(new, old, adv, mask, LossConfig(tis_cap=2.0), behaviour_logprobs=behaviour)
    assert_close(out.loss, torch.tensor((1.5 * -1.28 + 2.0 * -0.9 + 1.0 * 0.8) / 3))
    gap = (math.log(1.5) + math.log(3.0) + 0.0) / 3
    assert_close(out.behaviour_gap, torch.tensor(gap))
    assert_close(out.truncated_fraction, torch.tensor(1 / 3))


def test_importance_weights_are_not_differentiated() -> None:
    new, old, adv, mask = _batch()
    new = new.clone().requires_grad_(True)
    behaviour = (old - 0.3).requires_grad_(True)
    policy_loss(new, old, adv, mask, LossConfig(), behaviour_logprobs=behaviour).loss.backward()
    assert behaviour.grad is None and new.grad is not None


def test_behaviour_shape_and_cap_are_checked() -> None:
    new, old, adv, mask = _batch()
    with pytest.raises(ValueError, match="behaviour_logprobs"):
        policy_loss(new, old, adv, mask, LossConfig(), behaviour_logprobs=old[:, :1])
    with pytest.raises(ValueError, match="tis_cap"):
        LossConfig(tis_cap=0.5)
