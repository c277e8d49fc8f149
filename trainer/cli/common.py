"""What the trainer's command groups share: the deployment's settings, the database, the
environment folders (``--store``) and the options that name them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bot.settings import SettingsError
from trainer.envs.schema import Environment
from worker.settings import AgentSettings, WorkerSettings, load_worker_settings

if TYPE_CHECKING:
    from bot.store.db import Database
    from trainer.envs.folders import EnvironmentFolders

F = TypeVar("F", bound=Callable[..., Any])


def settings_of(ctx: click.Context) -> WorkerSettings:
    """The root group's settings (``ctx.obj``, WorkerSettings), or loaded here when run
    without it."""
    settings = ctx.find_root().obj
    if isinstance(settings, WorkerSettings):
        return settings
    try:
        return load_worker_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


def store_dir(ctx: click.Context, store: Path | str | None) -> Path:
    return Path(store) if store is not None else settings_of(ctx).data_dir / "trainer"


def env_folders(ctx: click.Context, store: Path | None) -> EnvironmentFolders:
    """The environment store a command's ``--store`` names (default DATA_DIR/trainer):
    every command that reads or writes environments opens it here."""
    # Imported here, as each command's heavy imports are, so `ribbit --help` stays quick.
    from trainer.envs.folders import EnvironmentFolders

    return EnvironmentFolders(store_dir(ctx, store))


def open_db(ctx: click.Context) -> Database:
    from bot.runtime import open_database

    return open_database(settings_of(ctx))


def sync_store_index(ctx: click.Context, env_store: EnvironmentFolders) -> None:
    """Keep the store's table in the database in step with the files."""
    from trainer.envs.index import sync_index

    sync_index(open_db(ctx), env_store)


def selected(
    env_store: EnvironmentFolders, selector: str, *, allow_none: bool = False
) -> list[Environment]:
    """The environments ``selector`` picks; one it names that is not stored is an error,
    and so is picking none unless ``allow_none`` (an export of nothing is still a file)."""
    from trainer.checkouts import SelectionError, select

    try:
        chosen = select(env_store, selector)
    except SelectionError as exc:
        raise click.ClickException(str(exc)) from None
    if not chosen and not allow_none:
        raise click.ClickException(f"no environments match {selector!r}")
    return chosen


def line_heldout(ctx: click.Context, picked: list[Environment], line: str) -> list[Environment]:
    """What ``line`` is scored on: the ``picked`` environments that are held out and belong
    to ``line`` (bot/model_lines.py), so one team's candidate is never scored on another
    team's environments, nor on any it may train on."""
    from trainer.envs.lines import line_heldout as heldout_of

    chosen = heldout_of(open_db(ctx), settings_of(ctx).training, line, picked)
    if not chosen:
        raise click.ClickException(
            f"none of the {len(picked)} environment(s) picked is a held-out environment of "
            f"line {line!r}; `ribbit envs split --line {line}` holds some out"
        )
    return chosen


@contextlib.contextmanager
def sandbox_errors() -> Iterator[None]:
    """A sandbox that cannot start (engine down, image missing) as a message, not a
    traceback: the user fixes the deployment, not the code."""
    from worker.sandbox.base import SandboxError

    try:
        yield
    except SandboxError as exc:
        raise click.ClickException(f"sandbox: {exc}") from None


def summary(env: Environment) -> str:
    """One environment on one line, as `envs list` prints it."""
    c = env.calibration
    calib = f"pass {c.solved}/{c.k}" if c.k else "uncalibrated"
    return (
        f"{env.instance_id}\t{env.split}\tF2P={len(env.FAIL_TO_PASS)} "
        f"P2P={len(env.PASS_TO_PASS)}\t{calib}"
    )


envs_option = click.option(
    "--envs",
    "selector",
    default="all",
    show_default=True,
    help="all, split:<name>, signal, or ids a,b,c.",
)

store_option = click.option(
    "--store",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Environment store (default: DATA_DIR/trainer).",
)


def rollouts_option(default: int) -> Callable[[F], F]:
    """``--k``, rollouts per environment: a score's (model evaluate, evaluate-base: 1) or a
    calibration's (envs calibrate: 4, enough to see an environment solved only sometimes)."""
    return click.option(
        "--k",
        type=click.IntRange(min=1),  # as `ribbit eval`: no rollouts scores nothing
        default=default,
        show_default=True,
        help="Rollouts per environment.",
    )


# The agent's limits in each of those rollouts, so a score and a calibration run the agent
# alike; their defaults are the agent's own (RIBBIT_AGENT__*), so the two never drift.
_AGENT_FIELDS = AgentSettings.model_fields


def _agent_limit_option(name: str, help_text: str) -> Callable[[F], F]:
    """``--NAME`` for the AgentSettings field ``name``: its default, and its own lower
    bound (its ``ge``), so a value AgentSettings would refuse mid-run is refused on the
    command line."""
    field = _AGENT_FIELDS[name]
    [low] = [m.ge for m in field.metadata if hasattr(m, "ge")]
    return click.option(
        "--" + name.replace("_", "-"),
        type=click.IntRange(min=low),
        default=field.default,
        show_default=True,
        help=help_text,
    )


def agent_limit_options(command: F) -> F:
    """``--max-turns`` and ``--max-new-tokens`` (model evaluate, evaluate-base, envs
    calibrate)."""
    command = _agent_limit_option("max_new_tokens", "New tokens per model turn.")(command)
    return _agent_limit_option("max_turns", "Agent turns.")(command)


def validation_run_options(command: F) -> F:
    """How an environment's tests are run while it is validated (envs build, from-outcomes,
    eval)."""
    command = click.option(
        "--timeout",
        "timeout_s",
        type=float,
        default=300.0,
        show_default=True,
        help="Seconds one test run may take.",
    )(command)
    return click.option(
        "--reruns",
        type=int,
        default=3,
        show_default=True,
        help="Runs of the tests per tree, to tell flaky tests from real ones.",
    )(command)
