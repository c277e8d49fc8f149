"""``--backend``: the one sandbox-backend flag every ``ribbit`` command that opens a
sandbox takes (issue #36): the choices of RIBBIT_SANDBOX__BACKEND with its meaning, the
settings' value where it is not given."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, get_args

import click

from worker.settings import SandboxBackend

F = TypeVar("F", bound=Callable[..., Any])

BACKENDS: tuple[str, ...] = get_args(SandboxBackend)
# The spelling `ribbit gates` had for auto (and `ribbit run` passed on to bubblewrap):
# no command ever ran unisolated, so it is not a mode of its own; read as auto, warned
# about, for one release (docs/CHANGELOG.md).
DEPRECATED_AUTO = "local"


class BackendChoice(click.Choice[str]):
    """BACKENDS, plus the hidden deprecated ``local`` read as ``auto``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == DEPRECATED_AUTO:
            click.echo(
                "warning: --backend local is deprecated and goes in the next release; "
                "it means auto (no command runs without a sandbox)",
                err=True,
            )
            return "auto"
        return super().convert(value, param, ctx)


BACKEND_CHOICE = BackendChoice(BACKENDS)


def backend_option(command: F) -> F:
    """``--backend``; the command receives None where the settings' backend applies."""
    return click.option(
        "--backend",
        type=BACKEND_CHOICE,
        default=None,
        help="Sandbox backend (default: RIBBIT_SANDBOX__BACKEND, normally auto). auto: "
        "docker if an engine answers and has the image, else bubblewrap.",
    )(command)
