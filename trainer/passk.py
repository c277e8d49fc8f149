"""pass@1 over environments, with a 95% confidence interval.

Per environment, ``c`` of ``n`` rollouts solved it; the unbiased pass@k estimate
(Chen et al., 2021, "Evaluating Large Language Models Trained on Code") is
``1 - C(n-c, k) / C(n, k)``, which for k = 1 is ``c / n``. A model's pass@1 is the
mean of that over environments. Both are computed with exact fractions, so the
figure does not depend on the order environments were scored in.

The interval is Wilson's score interval with the environments as the trials and the
pass@1 estimate as the observed proportion. Why Wilson, and why over environments:

- The environment is the unit that was sampled (from a project's history); rollouts
  of one environment are not independent draws, so counting them as trials would
  claim k times the evidence there is. With one rollout each this is Wilson's
  interval exactly; with k > 1 each environment's score is an average of k, whose
  variance is at most a Bernoulli's, so the interval is conservative.
- Closed form and deterministic: no resampling seed, no float sums whose order could
  change a digit (a bootstrap would need both). It stays inside [0, 1] and is
  sensible at 0 of n and n of n, where the normal (Wald) interval collapses to a
  point, which matters for the small held-out sets Ribbit scores on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

Z95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054


def pass_at_k(n: int, c: int, k: int = 1) -> Fraction:
    """The unbiased estimate of pass@k from ``c`` solved of ``n`` rollouts, exactly."""
    if not 0 <= c <= n or n < 1:
        raise ValueError(f"need 0 <= solved <= rollouts and rollouts >= 1; got {c} of {n}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}]; got {k}")
    if n - c < k:
        return Fraction(1)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


@dataclass(frozen=True)
class PassAt1:
    """pass@1 over ``envs`` environments and its interval (``low`` <= ``rate`` <= ``high``)."""

    rate: float
    low: float
    high: float
    envs: int
    exact: Fraction  # the estimate as a fraction (sum of per-environment c/n over envs)

    def text(self) -> str:
        """How people read it: ``40.0% (95% CI 11.8%-76.9%, 5 envs)``."""
        return f"{self.rate:.1%} (95% CI {self.low:.1%}-{self.high:.1%}, {self.envs} envs)"


def wilson_interval(p: Fraction, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for proportion ``p`` observed over ``n`` trials."""
    if n < 1:
        raise ValueError("no trials")
    if not 0 <= p <= 1:
        raise ValueError(f"proportion out of [0, 1]: {p}")
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (float(p) + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(float(p * (1 - p)) / n + z2 / (4 * n * n))
    # At 0 of n and n of n the bound is exactly 0 (1); say so rather than leave a rounding.
    low = 0.0 if p == 0 else max(0.0, centre - half)
    high = 1.0 if p == 1 else min(1.0, centre + half)
    return low, high


def pass_at_1(outcomes: Iterable[tuple[int, int]]) -> PassAt1:
    """pass@1 and its interval from ``(solved, rollouts)`` per environment."""
    counts = list(outcomes)
    if not counts:
        raise ValueError("no environments scored")
    exact = sum((pass_at_k(n, c, 1) for c, n in counts), Fraction(0)) / len(counts)
    low, high = wilson_interval(exact, len(counts))
    return PassAt1(rate=float(exact), low=low, high=high, envs=len(counts), exact=exact)
