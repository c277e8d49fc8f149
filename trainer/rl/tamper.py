"""Tamper as a training signal (issue #31): the model is trained on the verdict of a
test run, and a policy that learns to forge that run is reward hacking. The grader
gives a tampering episode reward 0 with the reason ``tamper``
(:mod:`trainer.rl.reward`); here is what a run does with it:

- :func:`tamper_rate`: the share of a step's episodes that tampered, exact (a
  :class:`~fractions.Fraction` of two counts, so no float summation order decides it),
  logged per step in ``metrics.jsonl`` and the run's summary. A rising rate is the
  reward-hacking signal, whatever the mean reward does.
- :class:`TamperLog`: the tampering episodes themselves, kept for a person to read
  (``<output_dir>/tampered.jsonl``: the step, the environment, what the watched run
  attributed to the patch, and the patch), at most :data:`MAX_KEPT` per run and
  :data:`MAX_PATCH_CHARS` of each patch, so a policy that tampers every time cannot
  fill the disk.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

TAMPER = "tamper"  # RewardResult.reason of a forged run
TAMPERED_FILE = "tampered.jsonl"
MAX_KEPT = 50
MAX_PATCH_CHARS = 100_000


def tamper_rate(reasons: Sequence[str]) -> Fraction:
    """Episodes whose reward reason is ``tamper`` over all episodes (0 with none)."""
    if not reasons:
        return Fraction(0)
    return Fraction(sum(1 for r in reasons if r == TAMPER), len(reasons))


@dataclass(frozen=True)
class TamperedEpisode:
    """One episode the grader found tampering, as kept for inspection."""

    step: int
    env_id: str
    tamper: str  # what the watched run attributed to the patch, with file and line
    patch: str
    reward: float = 0.0
    patch_truncated: bool = False

    @classmethod
    def of(cls, step: int, env_id: str, tamper: str, patch: str) -> TamperedEpisode:
        cut = len(patch) > MAX_PATCH_CHARS
        return cls(step, env_id, tamper, patch[:MAX_PATCH_CHARS], 0.0, cut)


class TamperLog:
    """``tampered.jsonl`` of a run's output folder, appended to by rank 0. A resumed run
    counts what is there already against the bound."""

    def __init__(self, output_dir: Path, limit: int = MAX_KEPT) -> None:
        self.path = output_dir / TAMPERED_FILE
        self.limit = limit

    def kept(self) -> int:
        if not self.path.is_file():
            return 0
        with self.path.open("rb") as fh:
            return sum(1 for _ in fh)

    def keep(self, episodes: Iterable[TamperedEpisode]) -> int:
        """Append as many as the bound allows; how many were written."""
        room = self.limit - self.kept()
        chosen = [e for _, e in zip(range(max(room, 0)), episodes, strict=False)]
        if not chosen:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            for episode in chosen:
                fh.write(json.dumps(asdict(episode)) + "\n")
        return len(chosen)
