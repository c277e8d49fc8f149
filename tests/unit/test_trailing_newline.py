"""Every check that a name from outside is one safe token refuses a trailing newline: with
``re.match`` and a pattern ending in ``$``, "name\\n" passed, since ``$`` also matches just
before a last newline; the checks use ``fullmatch``. (Branch names: test_branches.py;
environment ids: test_training.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.forges.branches import UnsafeRefError, validate_sha
from bot.hostgit import GitError, resolve_commit
from trainer.registry import RegistryError, register
from worker.sandbox.common import sandbox_env
from worker.weights import WeightsError, weights_path

SHA = "0123456789abcdef0123456789abcdef01234567"

# name -> (the check, a token it accepts, the refusal and its message)
CHECKS: dict[str, tuple[Callable[[str], Any], str, type[Exception], str]] = {
    "commit sha": (validate_sha, SHA, UnsafeRefError, "not a full commit sha"),
    "host git revision": (
        lambda rev: resolve_commit(Path("/nonexistent"), rev),
        SHA,
        GitError,
        "is not a commit sha",
    ),
    "sandbox variable": (
        lambda key: sandbox_env({key: "1"}),
        "RIBBIT_X",
        ValueError,
        "invalid environment variable",
    ),
    "model id": (
        lambda model: weights_path(Path("/models"), model),
        "org/model",
        WeightsError,
        "is not a model id",
    ),
    "version name": (
        lambda name: register(None, name, base_model="m", adapter_path=None),  # type: ignore[arg-type]
        "v1",
        RegistryError,
        "is not a valid version name",
    ),
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_a_trailing_newline_is_refused(name: str) -> None:
    check, good, error, message = CHECKS[name]
    with pytest.raises(error, match=message):
        check(good + "\n")
