"""Whether a candidate is better than what it would replace: a paired, exact test on
the same held-out environments.

A candidate is compared with its line's promoted version, or with the base model where
the line has none yet (a first version must beat the model it would stop being served
instead of). Both must have been scored on the same environments (same ids and, where
recorded, the same content hashes), with the same rollouts per environment ``k`` and by
the same judge; otherwise the comparison says which to re-score instead of comparing
numbers from different exams.

The test is the one-sided exact sign test on the per-environment results (for k = 1 it
is McNemar's exact test): an environment is a *win* where the candidate solved more of
its k rollouts than the incumbent did, a *loss* where fewer; ties carry no evidence
either way and are dropped. Under "no better" wins and losses are equally likely, so
the p-value is ``P(X >= wins)`` for ``X ~ Binomial(wins + losses, 1/2)``, computed exactly
with integers. The candidate is better when ``p <= ALPHA``. A tie (as many wins as
losses, or none at all) is never better, whatever the point estimates say.

Below ``MIN_HELDOUT_ENVS`` environments the test cannot say much (with n discordant
pairs the smallest possible p is 2^-n), so promotion then needs ``--force``, which is
audited with the checks it skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from bot.store.records.gate_report import JUDGE_VERSION as GATE_JUDGE_VERSION

# Which judge graded a held-out score: scores by different judges are not compared. The
# gates, the grader and the reward share one judge, so its version has one home, beside
# the verdict it names (bump it there); re-exported here for the trainer's readers.
JUDGE_VERSION = GATE_JUDGE_VERSION

# One-sided significance level: a candidate that is no better than the incumbent is
# promoted by chance at most 1 time in 20.
ALPHA = Fraction(1, 20)
# The fewest held-out environments a promotion is decided on without --force.
MIN_HELDOUT_ENVS = 30


@dataclass(frozen=True)
class EnvResult:
    """One model's result on one held-out environment: ``solved`` of ``k`` rollouts."""

    instance_id: str
    content_hash: str | None
    k: int
    solved: int
    judge: str


@dataclass(frozen=True)
class Scored:
    """A model's per-environment held-out results: a version's, or the base model's."""

    label: str  # a version name, or "base <model>"
    results: Mapping[str, EnvResult]  # by instance id
    rescore: str  # the command that (re-)scores it on the line's held-out set


@dataclass(frozen=True)
class SignTest:
    wins: int
    losses: int
    ties: int
    p_value: Fraction

    @property
    def better(self) -> bool:
        return self.wins > self.losses and self.p_value <= ALPHA

    def text(self) -> str:
        return (
            f"{self.wins} win(s), {self.losses} loss(es), {self.ties} tie(s) on "
            f"{self.wins + self.losses + self.ties} environments; one-sided sign test "
            f"p = {float(self.p_value):.4f} (promotes at p <= {float(ALPHA):.2f})"
        )


def sign_test_p(wins: int, losses: int) -> Fraction:
    """P(X >= wins) for X ~ Binomial(wins + losses, 1/2), exactly; 1 with no discordant
    pair (no evidence at all)."""
    if wins < 0 or losses < 0:
        raise ValueError("counts must be >= 0")
    n = wins + losses
    return Fraction(sum(math.comb(n, j) for j in range(wins, n + 1)), 2**n)


def sign_test(candidate: Mapping[str, EnvResult], incumbent: Mapping[str, EnvResult]) -> SignTest:
    """The paired test over the environments both were scored on (callers check first
    that those are the same set, with the same k)."""
    wins = losses = ties = 0
    for instance_id, mine in candidate.items():
        theirs = incumbent[instance_id]
        # Same k on both sides (checked), so solved counts compare as rates do.
        if mine.solved > theirs.solved:
            wins += 1
        elif mine.solved < theirs.solved:
            losses += 1
        else:
            ties += 1
    return SignTest(wins, losses, ties, sign_test_p(wins, losses))


class NotComparable(Exception):
    """The two were not scored on the same exam; the message says what to re-score."""


def comparable(candidate: Scored, incumbent: Scored) -> None:
    """Raise :class:`NotComparable` unless both were scored on the same environments
    (ids and content hashes), with the same k and the same judge."""
    if not candidate.results:
        raise NotComparable(
            f"{candidate.label}: no per-environment results, re-score to compare: "
            f"{candidate.rescore}"
        )
    if not incumbent.results:
        raise NotComparable(
            f"{incumbent.label} (what {candidate.label} would replace): no per-environment "
            f"results, re-score to compare: {incumbent.rescore}"
        )
    problems: list[str] = []
    mine, theirs = set(candidate.results), set(incumbent.results)
    if mine != theirs:
        problems.append(
            f"different held-out sets ({len(mine)} vs {len(theirs)} environments, "
            f"{len(mine ^ theirs)} not in both)"
        )
    else:
        changed = sorted(
            i
            for i in mine
            if candidate.results[i].content_hash != incumbent.results[i].content_hash
        )
        if changed:
            problems.append(f"environments changed between scorings: {', '.join(changed[:5])}")
    ks = {r.k for r in candidate.results.values()}, {r.k for r in incumbent.results.values()}
    if ks[0] != ks[1] or len(ks[0]) != 1:
        problems.append(f"different k ({_one(ks[0])} vs {_one(ks[1])})")
    judges = (
        {r.judge for r in candidate.results.values()},
        {r.judge for r in incumbent.results.values()},
    )
    if judges[0] != judges[1] or len(judges[0]) != 1:
        problems.append(f"different judges ({_one(judges[0])} vs {_one(judges[1])})")
    if problems:
        raise NotComparable(
            f"{candidate.label} and {incumbent.label} were not scored on the same exam: "
            f"{'; '.join(problems)}. Re-score both on the line's held-out set with the same "
            f"k: {incumbent.rescore} and {candidate.rescore}"
        )


def _one(values: set[int] | set[str]) -> str:
    return ",".join(sorted(str(v) for v in values))
