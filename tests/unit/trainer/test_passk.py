"""pass@1 and its interval: exact known values, and no dependence on scoring order."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from trainer.calibrate import CalibrationReport
from trainer.envs.schema import Calibration
from trainer.passk import Z95, pass_at_1, pass_at_k, wilson_interval


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 3, 1, Fraction(3, 10)),
        (4, 0, 1, Fraction(0)),
        (4, 4, 1, Fraction(1)),
        # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
        (5, 2, 2, Fraction(7, 10)),
        # fewer failures than k: every draw of k holds a success
        (4, 3, 2, Fraction(1)),
        # 1 - C(6, 3) / C(8, 3) = 1 - 20/56
        (8, 2, 3, Fraction(9, 14)),
    ],
)
def test_pass_at_k_is_the_unbiased_estimate(n: int, c: int, k: int, expected: Fraction) -> None:
    assert pass_at_k(n, c, k) == expected


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_refuses_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # Published Wilson 95% intervals (z = 1.96), to four places.
        (5, 10, 0.2366, 0.7634),
        (1, 10, 0.0179, 0.4042),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (0, 1, 0.0, 0.7935),
    ],
)
def test_wilson_interval_known_values(successes: int, n: int, low: float, high: float) -> None:
    got = wilson_interval(Fraction(successes, n), n)
    assert (round(got[0], 4), round(got[1], 4)) == (low, high)


def test_wilson_bounds_are_exact_at_none_and_all() -> None:
    assert wilson_interval(Fraction(0), 7)[0] == 0.0
    assert wilson_interval(Fraction(1), 7)[1] == 1.0
    assert round(Z95, 6) == 1.959964


def test_pass_at_1_averages_environments_exactly() -> None:
    score = pass_at_1([(1, 2), (0, 2), (2, 2)])  # (1/2 + 0 + 1) / 3
    assert score.exact == Fraction(1, 2) and score.rate == 0.5 and score.envs == 3
    assert (score.low, score.high) == wilson_interval(Fraction(1, 2), 3)
    assert score.low < score.rate < score.high
    assert score.text() == f"50.0% (95% CI {score.low:.1%}-{score.high:.1%}, 3 envs)"


def test_pass_at_1_is_the_same_in_any_scoring_order() -> None:
    # Thirds and sevenths: float sums of these depend on their order; fractions do not.
    outcomes = [(1, 3), (2, 7), (1, 1), (0, 5), (3, 7), (2, 3)]
    scores = {pass_at_1(p) for p in itertools.permutations(outcomes)}
    assert len(scores) == 1
    [score] = scores
    assert (
        score.exact
        == (Fraction(1, 3) + Fraction(2, 7) + 1 + 0 + Fraction(3, 7) + Fraction(2, 3)) / 6
    )


def test_pass_at_1_needs_an_environment() -> None:
    with pytest.raises(ValueError):
        pass_at_1([])


def test_calibration_report_gives_pass_at_1_with_its_interval() -> None:
    report = CalibrationReport(
        {
            "a": Calibration(k=4, solved=1),
            "b": Calibration(k=4, solved=4),
            "c": Calibration(k=4, solved=0),
            "d": Calibration(k=4, solved=3),
        }
    )
    score = report.pass_at_1
    assert score.exact == Fraction(1, 2) and report.pass_rate == 0.5
    assert (round(score.low, 4), round(score.high, 4)) == (0.15, 0.85)
    assert CalibrationReport({}).pass_rate == 0.0
