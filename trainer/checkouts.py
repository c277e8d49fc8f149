"""Stored environments picked for a task (training, calibration, evaluation, export) by a
selector, and checked out at their base commits for as long as the task needs them."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment

# An environment and the folder it is checked out in, at its base commit: what a task
# that runs the agent on environments (training, calibration, evaluation) is handed.
CheckedOut = tuple[Environment, Path]


class SelectionError(Exception):
    """A selector naming an environment the store does not hold (or no valid id)."""


def select(env_store: EnvironmentFolders, selector: str) -> list[Environment]:
    """The environments ``selector`` picks (EnvironmentFolders.select); an id it names that
    is not stored is a :class:`SelectionError` saying which."""
    try:
        return env_store.select(selector)
    except KeyError as exc:
        raise SelectionError(f"no environment {exc.args[0]!r} in {env_store.root}") from None
    except ValueError as exc:
        raise SelectionError(str(exc)) from None


def select_for_training(env_store: EnvironmentFolders, selector: str) -> list[Environment]:
    """What ``selector`` picks for training: never a held-out or test environment
    (trainer/envs/splits.py), whichever selector it is; ids naming one are refused."""
    from trainer.envs.splits import HeldOutForTraining, for_training

    named = selector not in {"all", "signal"} and not selector.startswith("split:")
    try:
        return for_training(select(env_store, selector), named=named)
    except HeldOutForTraining as exc:
        raise SelectionError(str(exc)) from None


@contextlib.contextmanager
def checked_out(
    env_store: EnvironmentFolders, chosen: Sequence[Environment], purpose: str
) -> Iterator[list[CheckedOut]]:
    """Each environment checked out of the store at its base commit, removed after."""
    root = Path(tempfile.mkdtemp(prefix=f"ribbit-{purpose}-"))
    try:
        yield [(e, env_store.checkout(e, root / e.instance_id)) for e in chosen]
    finally:
        shutil.rmtree(root, ignore_errors=True)
