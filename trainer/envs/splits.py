"""Held-out splits that are made and kept.

A line's held-out environments are the newest fixes of each of its repositories (by
when the fix was made, ``provenance.fixed_at``, else when it was built, ``created_at``),
so a backtest never trains on its own future and every repository is scored on its
latest work. Splitting is one-way: an environment held out stays held out (its scores
would otherwise stop being comparable, and a version may already have been promoted on
it), and one that a recorded version of the line trained on is never held out (it would
score that version on its own training data).

Training never reads a held-out (or test) environment, whatever selector asked for it:
:func:`for_training` is the only way the trainer picks what to train on.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from trainer.envs.schema import Environment


class HeldOutForTraining(ValueError):
    """A selector named a held-out environment for training."""


def for_training(envs: Iterable[Environment], *, named: bool) -> list[Environment]:
    """The environments among ``envs`` that training may use: split ``train`` only. Where
    the selector ``named`` environments by id, naming a held-out one is an error (the
    operator asked for something that would leak), not a silent drop."""
    chosen = list(envs)
    barred = [e.instance_id for e in chosen if e.split != "train"]
    if barred and named:
        raise HeldOutForTraining(
            f"held-out environments are never trained on: {', '.join(barred[:10])}"
        )
    return [e for e in chosen if e.split == "train"]


def _newest_first(env: Environment) -> tuple[str, str]:
    return (env.provenance.fixed_at or env.created_at, env.instance_id)


@dataclass(frozen=True)
class SplitPlan:
    heldout: tuple[str, ...]  # held out after the split (kept and new)
    newly: tuple[str, ...]  # moved from train to held out now
    trained_on: tuple[str, ...]  # newest, but a version trained on them: left in train


def plan_split(
    envs: Iterable[Environment],
    *,
    fraction: float | None = None,
    count: int | None = None,
    trained: Collection[str] = (),
) -> SplitPlan:
    """Per repository, the newest ``count`` environments (or ``ceil(fraction * n)``)
    held out, on top of those already held out; environments in ``trained`` stay train."""
    if (fraction is None) == (count is None):
        raise ValueError("give a fraction or a count")
    if fraction is not None and not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1); got {fraction}")
    if count is not None and count < 1:
        raise ValueError(f"count must be >= 1; got {count}")
    by_repo: dict[str, list[Environment]] = defaultdict(list)
    for env in envs:
        if env.split != "test":
            by_repo[env.repo].append(env)
    heldout: list[str] = []
    newly: list[str] = []
    skipped: list[str] = []
    for repo in sorted(by_repo):
        # Newest first; the instance id breaks ties so the split never depends on order read.
        ordered = sorted(by_repo[repo], key=_newest_first, reverse=True)
        wanted = count if count is not None else math.ceil(len(ordered) * (fraction or 0))
        kept = [e.instance_id for e in ordered if e.split == "heldout"]
        heldout += kept
        for env in ordered:
            if len(kept) >= wanted:
                break
            if env.split == "heldout":
                continue
            if env.instance_id in trained:
                skipped.append(env.instance_id)
                continue
            kept.append(env.instance_id)
            heldout.append(env.instance_id)
            newly.append(env.instance_id)
    return SplitPlan(tuple(sorted(heldout)), tuple(sorted(newly)), tuple(sorted(skipped)))
