"""Stored environments checked out at their base commits for as long as a task needs
them (training, calibration, evaluation), then removed."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from trainer.envs.schema import Environment
from trainer.envs.storage import EnvironmentStore


@contextlib.contextmanager
def checked_out(
    env_store: EnvironmentStore, chosen: Sequence[Environment], purpose: str
) -> Iterator[list[tuple[Environment, Path]]]:
    """Each environment checked out of the store at its base commit, removed after."""
    root = Path(tempfile.mkdtemp(prefix=f"ribbit-{purpose}-"))
    try:
        yield [(e, env_store.checkout(e, root / e.instance_id)) for e in chosen]
    finally:
        shutil.rmtree(root, ignore_errors=True)
