"""What the parts of a solve run share: the job's working directory and its stage clock.

The orchestration (:mod:`worker.pipelines.solve`) and the publisher
(:mod:`worker.pipelines.publish`) both work in the job's directory and both time their
stages into the one ``timings`` map the job's record keeps.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from worker.jobs import JobContext
from worker.metrics import record_stage


@dataclass
class Workdir:
    """The job's directory: the host clone (``checkout``) and the files made beside it."""

    root: Path

    @property
    def checkout(self) -> Path:
        return self.root / "repo"

    def clean(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class Stages:
    """The job's stages: each one is the job's current stage while it runs (which is also
    where a cancel is noticed), and its seconds go to ``timings`` and the metrics, even
    when it raises."""

    ctx: JobContext
    timings: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.ctx.stage(name)
        start = time.monotonic()
        try:
            yield
        finally:
            seconds = time.monotonic() - start
            self.timings[name] = round(seconds, 3)
            record_stage(self.ctx.job.kind, name, seconds)
