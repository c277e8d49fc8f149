"""``ribbit sandbox``: run a command in a sandbox by hand, to try a backend or debug a
repository's test command the way the gates will run it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bot.cli_options import checkout_option
from bot.console import echo_json
from worker.sandbox import SandboxError, check_backends, open_sandbox
from worker.sandbox.backend_option import backend_option
from worker.sandbox.setup import exec_with_egress
from worker.settings import SandboxSettings, WorkerSettings


def _settings(**overrides: object) -> SandboxSettings:
    """The sandbox section of the settings the top-level group put in ``ctx.obj`` (when it
    could build them), with the command line's overrides on top."""
    obj = click.get_current_context().obj
    base = obj.sandbox if isinstance(obj, WorkerSettings) else SandboxSettings()
    given = {k: v for k, v in overrides.items() if v is not None}
    return SandboxSettings.model_validate({**base.model_dump(), **given})


@click.group("sandbox")
def sandbox() -> None:
    """Run commands in Ribbit's sandbox."""


@sandbox.command("run", context_settings={"ignore_unknown_options": True})
@backend_option
@checkout_option("Copied into /workspace; it is not modified", deprecated_alias="--workspace")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=600.0,
    show_default=True,
    help="Seconds before the command is killed (exit status 124).",
)
@click.option(
    "--memory",
    "memory_mb",
    type=click.IntRange(min=64),
    default=None,
    help="Memory limit in MB (default: the sandbox settings').",
)
@click.option(
    "--network",
    is_flag=True,
    help="Let the command reach the package registries through the setup proxy.",
)
@click.option("--docker-url", default=None, help="Docker Engine API URL (docker backend).")
@click.option("--image", default=None, help="Sandbox image (docker backend).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    backend: str | None,
    checkout: Path,
    timeout: float,
    memory_mb: int | None,
    network: bool,
    docker_url: str | None,
    image: str | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND in a sandbox over a copy of --checkout; print its output and exit
    with its status."""
    settings = _settings(
        backend=backend,
        setup_network=network or None,
        memory_mb=memory_mb,
        docker_url=docker_url,
        image=image,
    )
    try:
        with open_sandbox(settings, checkout, network=network) as sb:
            done = exec_with_egress(sb, list(command), settings, timeout=timeout)
            result = done.result
    except SandboxError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.stdout.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.write(result.stderr)
    for blocked in done.blocked:
        click.echo(f"ribbit: the setup proxy refused {blocked.describe()}", err=True)
    if result.truncated:
        click.echo("ribbit: output was cut at the output cap", err=True)
    if result.timed_out:
        click.echo(f"ribbit: killed after {timeout:g} s", err=True)
    sys.exit(result.exit_code)


@sandbox.command("check")
@click.option("--docker-url", default=None, help="Docker Engine API URL.")
@click.option("--image", default=None, help="Sandbox image.")
@click.option("--json", "as_json", is_flag=True, help="The backends' checks as a JSON object.")
def check(docker_url: str | None, image: str | None, as_json: bool) -> None:
    """Say which sandbox backends work on this host (exit 1 if none does)."""
    checks = check_backends(_settings(docker_url=docker_url, image=image))
    usable = any(c.ok for c in checks)
    if as_json:
        backends = [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks]
        echo_json({"usable": usable, "backends": backends})
    for c in [] if as_json else checks:
        click.echo(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
    sys.exit(0 if usable else 1)


if __name__ == "__main__":  # python -m worker.sandbox.cli
    sandbox()
