"""The `ribbit` command.

Subcommands that live in worker/ or trainer/ (`ribbit worker` among them) are registered
by the package that owns them, as pyproject's ``ribbit.commands`` entry points, and loaded
only when used (click's lazy-group pattern), so `ribbit jobs` does not import torch. What
`ribbit serve` plugs into the web app from the trainer (the model registry, environment
validation) is registered the same way (``ribbit.web``): bot/ names no worker/ or trainer/
module.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sys
import textwrap
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

import click

from bot.cli_audit import actor_option, audited, cli_actor
from bot.cli_errors import DEBUG_HELP, debugging, describe_failure, known_failure
from bot.cli_options import FILTER_FORGE_HELP, filter_forge, forge_option, repo_option
from bot.console import echo_json, empty, line, styled
from bot.extras import missing_requirements
from bot.forges.base import RepoRef
from bot.github_app_cli import github_app
from bot.job_json import job_dict
from bot.runtime import Runtime, SchemaNotCurrent, upgrade_database
from bot.settings import Settings, SettingsError, build_settings
from bot.supervisor import Supervisor
from bot.web.serving import DEFAULT_DRAIN_S, DrainingServer

if TYPE_CHECKING:
    from bot.env_validation import EnvValidatorFactory
    from bot.model_versions import ModelVersionsFactory
    from bot.web.services import Services

COMMANDS_GROUP = "ribbit.commands"
# The seams `ribbit serve` hands the web app, by name: ``model_versions`` (a
# bot.model_versions.ModelVersionsFactory) and ``env_validator`` (a
# bot.env_validation.EnvValidatorFactory); the trainer registers both.
WEB_GROUP = "ribbit.web"
# The settings class every `ribbit` process builds: bot's Settings, or the subclass another
# package registers to add its sections (worker.settings.WorkerSettings adds the sandbox,
# model, agent and gates), so one environment serves web and worker and the typo warning
# knows every variable.
SETTINGS_GROUP = "ribbit.settings"


def registered_commands() -> dict[str, EntryPoint]:
    """The subcommands other packages register (pyproject's ribbit.commands entry points)."""
    return {ep.name: ep for ep in entry_points(group=COMMANDS_GROUP)}


def registered(group: str, name: str) -> Any | None:
    """What another package registers as ``name`` in the entry-point ``group``; None where
    nothing is, or where it needs a library this install lacks (a web-only install has no
    torch). A broken import inside Ribbit still raises."""
    for entry in entry_points(group=group, name=name):
        try:
            return entry.load()
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] not in OWN_PACKAGES:
                return None
            raise
    return None


class LazyGroup(click.Group):
    """Loads a registered command only when it runs, so `ribbit serve` never imports torch."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *registered_commands()])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = registered_commands().get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        try:
            command: click.Command = entry.load()
        except ModuleNotFoundError as exc:
            # Only a missing dependency of the command's own package (torch, docker, ...)
            # means "not in this build"; a broken import inside Ribbit still raises.
            if exc.name and exc.name.split(".")[0] not in OWN_PACKAGES:
                return _unavailable(cmd_name, exc.name)
            raise
        return command

    def invoke(self, ctx: click.Context) -> Any:
        # Every subcommand runs inside this call: its failure is one line saying what to
        # do (bot/cli_errors.py), the traceback only when asked for.
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if debugging(bool(ctx.params.get("debug"))):
                raise
            raise click.ClickException(_one_line(ctx, exc)) from None


def _one_line(ctx: click.Context, exc: Exception) -> str:
    settings = ctx.obj if isinstance(ctx.obj, Settings) else None
    if isinstance(exc, SchemaNotCurrent):  # any command that opens the database: a step
        return str(exc)
    known = known_failure(exc, settings)
    if known is not None:
        return known
    # Registered commands import their heavy dependencies when they run; in a build
    # without them (a web-only install has no torch) say so.
    name = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if name and name.split(".")[0] not in OWN_PACKAGES:
        return _missing_text(ctx.invoked_subcommand, name)
    return describe_failure(exc, settings)


OWN_PACKAGES = ("bot", "worker", "trainer")


def _missing_text(command: str | None, missing_module: str) -> str:
    return (
        f"`ribbit {command}` is not available in this build ({missing_module} is not "
        "installed; install ribbit[worker] or ribbit[train])"
    )


def _unavailable(name: str, missing_module: str) -> click.Command:
    @click.command(name, help=f"(not available: {missing_module} is not installed)")
    def missing() -> None:
        raise click.ClickException(_missing_text(name, missing_module))

    return missing


def process_settings_class() -> type[Settings]:
    """The most derived settings class registered in SETTINGS_GROUP (Settings if none)."""
    chosen: type[Settings] = Settings
    for entry in entry_points(group=SETTINGS_GROUP):
        found = entry.load()
        if isinstance(found, type) and issubclass(found, chosen):
            chosen = found
    return chosen


def load_process_settings() -> Settings:
    """What every `ribbit` process builds: bot's Settings plus the sections the other
    packages register (SETTINGS_GROUP). The worker's code narrows it to its own type
    (worker.settings.as_worker_settings); bot/ reads only its own sections."""
    return build_settings(process_settings_class())


def settings_or_exit() -> Settings:
    try:
        return load_process_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(cls=LazyGroup)
@click.version_option(package_name="ribbit")
@click.option("--debug", is_flag=True, help=DEBUG_HELP)
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Ribbit: labelled issues in, draft pull requests out, reviewed by humans."""
    # Subcommands that take their defaults from settings (sandbox, gates) read ctx.obj;
    # invalid settings are reported by the commands that need them, not here.
    try:
        ctx.obj = load_process_settings()
    except SettingsError:
        ctx.obj = None


# -- serving -----------------------------------------------------------------------------------

SERVE_THREADS = 8


@main.command()
@click.option("--host", default=None, help="Listen address (default: RIBBIT_HOST).")
@click.option("--port", type=int, default=None, help="Listen port (default: RIBBIT_PORT).")
@click.option(
    "--threads", type=int, default=SERVE_THREADS, show_default=True, help="Web server threads."
)
@click.option(
    "--worker/--no-worker",
    "with_worker",
    default=True,
    show_default=True,
    help="Also run an embedded worker (with beat) in a child process.",
)
@click.option(
    "--drain",
    type=float,
    default=DEFAULT_DRAIN_S,
    show_default=True,
    help="Seconds a stop (SIGTERM) waits for requests in flight before closing them.",
)
def serve(
    host: str | None, port: int | None, threads: int, with_worker: bool, drain: float
) -> None:
    """Run the webhook app (and by default an embedded worker)."""
    from bot.logs import configure_logging
    from bot.notify import start_watch
    from bot.web.app import create_app
    from bot.web.webhooks import MISSING_SECRET, configured_forges

    settings = settings_or_exit()
    configure_logging(settings)
    for forge, configured in configured_forges(settings).items():
        if not configured:
            click.echo(
                f"ribbit: {forge} webhooks are closed until you {MISSING_SECRET[forge]}", err=True
            )
    app = create_app(settings, model_versions=_model_versions(), env_validator=_env_validator())
    svc = app.extensions["ribbit"]
    # What start-up built (some 126,000 objects: Flask, SQLAlchemy, Celery, the trainer's
    # registry) lives as long as the process. Frozen, the collector no longer walks it: a
    # full collection, which came every few thousand webhooks, paused every web thread for
    # ~100 ms, and now walks only what requests left behind.
    gc.freeze()
    # The web process outlives the workers: it is what notices when they all die.
    stop_watch = start_watch(svc.db, svc.store, settings, svc.model_versions)
    embedded = _start_embedded(svc) if with_worker else None
    server = DrainingServer.create(
        app,
        drain_s=drain,
        host=host or settings.host,
        port=port or settings.port,
        threads=threads,
        max_request_body_size=settings.max_body_bytes,
        ident="ribbit",
    )
    signal.signal(signal.SIGTERM, lambda _signum, _frame: server.stop())
    click.echo(f"ribbit: listening on {server.url}", err=True)
    try:
        server.run()
    except KeyboardInterrupt:  # Ctrl-C: what is in flight is dropped, the rest as below
        pass
    finally:
        if stop_watch is not None:
            stop_watch()
        svc.close()
        if embedded is not None:
            embedded.stop(grace_s=EMBEDDED_STOP_S)


# The embedded worker's warm shutdown gets EMBEDDED_DRAIN_S to finish or give back its
# jobs (they are redelivered); `ribbit serve` kills what is left after EMBEDDED_STOP_S.
EMBEDDED_DRAIN_S = 45
EMBEDDED_STOP_S = 60


def _start_embedded(svc: Services) -> Supervisor | None:
    """The embedded worker and beat, each a supervised child (bot/supervisor.py); none
    where this install has no worker extra (it would fail every job)."""
    missing = missing_requirements("worker")
    if missing:
        click.echo(
            f"ribbit: no embedded worker ({', '.join(missing)} not installed; "
            "pip install 'ribbit[worker]' for one); serving webhooks only",
            err=True,
        )
        return None
    ribbit = [sys.executable, "-m", "bot", "worker"]
    supervisor = Supervisor(
        {
            "worker": [*ribbit, "--concurrency", "2", "--drain", str(EMBEDDED_DRAIN_S)],
            "beat": [*ribbit, "--only-beat"],
        }
    )
    svc.watch_embedded(supervisor)
    supervisor.start()
    return supervisor


def _model_versions() -> ModelVersionsFactory | None:
    """The trainer's model registry, where this install has it (not a web-only one)."""
    factory: ModelVersionsFactory | None = registered(WEB_GROUP, "model_versions")
    return factory


def _env_validator() -> EnvValidatorFactory | None:
    """The trainer's environment validation, where this install has it."""
    factory: EnvValidatorFactory | None = registered(WEB_GROUP, "env_validator")
    return factory


# -- jobs ---------------------------------------------------------------------------------------


def _store(settings: Settings):
    return Runtime.open(settings).store


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
@click.option(
    "--state",
    type=click.Choice(["queued", "running", "succeeded", "failed", "cancelled"]),
    default=None,
    help="Only jobs in this state.",
)
@repo_option("Only this repository's jobs")
@forge_option(FILTER_FORGE_HELP, default=None)
@click.option("--limit", type=int, default=50, show_default=True, help="At most this many jobs.")
@click.pass_context
def jobs(
    ctx: click.Context,
    as_json: bool,
    state: str | None,
    repo: RepoRef | None,
    forge: str | None,
    limit: int,
) -> None:
    """List jobs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    store = _store(settings_or_exit())
    rows = store.list(
        state=state,
        forge=filter_forge(repo, forge),
        repo=None if repo is None else repo.full_name,
        limit=limit,
    )
    paused = store.paused_scopes()
    if as_json:
        echo_json([job_dict(j) for j in rows])
        return
    if paused:
        # A pause is invisible in the jobs themselves until a worker meets them: say it.
        scopes = "everything" if "*" in paused else ", ".join(paused)
        click.echo(f"PAUSED: {scopes} (new and queued jobs are held; `ribbit resume`)")
    if not rows:
        empty(
            "no jobs"
            + (" matching these filters" if state or repo or forge else " yet")
            + "; label an issue to ask for one"
        )
        return
    click.echo(f"{'ID':12} {'KIND':8} {'STATE':10} {'FORGE':7} {'REPO':30} {'ISSUE':>6}  REASON")
    for j in rows:
        issue = "" if j.issue_number is None else str(j.issue_number)
        shown_state = "held" if j.state == "queued" and j.held else j.state
        reason = "paused; `ribbit resume` releases it" if shown_state == "held" else ""
        line(
            f"{j.id[:12]:12} {j.kind:8} ",
            styled(f"{shown_state:10}", shown_state),
            f" {j.forge:7} {j.repo[:30]:30} {issue:>6}  {(j.failure_reason or reason)[:60]}",
        )
        if j.state == "failed" and j.failure is not None:
            click.echo(textwrap.indent(j.failure.to_text(), "    "))


@jobs.command("show")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="The job and its result as JSON.")
def jobs_show(job_id: str, as_json: bool) -> None:
    """Show one job (an id prefix is enough)."""
    from bot.store.jobs import JobNotFound

    try:
        job = _store(settings_or_exit()).find(job_id)
    except JobNotFound:
        raise click.ClickException(f"no job {job_id!r} (or the prefix is ambiguous)") from None
    data = job_dict(job)
    data["result"] = job.result
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    for key, value in data.items():
        if key not in ("result", "failure"):
            click.echo(f"{key:15} {'' if value is None else value}")
    if job.failure is not None:
        click.echo("failure:\n" + textwrap.indent(job.failure.to_text(), "  "))
    if job.result:
        click.echo("result:")
        click.echo(json.dumps(job.result, indent=2, default=str))


# -- kill switch ------------------------------------------------------------------------------


@main.command()
@repo_option("Pause this repository only")
@forge_option()
@actor_option
@click.option("--json", "as_json", is_flag=True, help="What was paused as a JSON object.")
def pause(repo: RepoRef | None, forge: str, actor: str | None, as_json: bool) -> None:
    """Stop starting jobs at once (events are still received and kept)."""
    ref = repo
    rt = Runtime.open(settings_or_exit())
    target = "*" if ref is None else str(ref)

    def run() -> str:
        if ref is None:
            rt.store.pause()
        else:
            rt.store.pause(forge=ref.forge, repo=ref.full_name)
        return f"paused {'everything' if ref is None else target}"

    message = audited(rt.db, cli_actor(actor), "pause", target, run)
    if as_json:
        echo_json({"paused": target, "message": message})
    else:
        click.echo(message)


@main.command()
@repo_option("Resume this repository only")
@forge_option()
@actor_option
@click.option(
    "--json", "as_json", is_flag=True, help="What was resumed and the jobs released, as JSON."
)
def resume(repo: RepoRef | None, forge: str, actor: str | None, as_json: bool) -> None:
    """Lift a pause and dispatch the jobs held meanwhile."""
    from bot.queue import JobQueue

    ref = repo
    settings = settings_or_exit()
    rt = Runtime.open(settings)
    target = "*" if ref is None else str(ref)
    released: list[str] = []

    def run() -> str:
        if ref is None:
            released.extend(rt.store.resume())
        else:
            released.extend(rt.store.resume(forge=ref.forge, repo=ref.full_name))
        JobQueue.to_celery(settings, rt.store).dispatch(released)
        return (
            f"resumed {'everything' if ref is None else target}; "
            f"{len(released)} held job(s) dispatched"
        )

    message = audited(rt.db, cli_actor(actor), "resume", target, run)
    if as_json:
        echo_json({"resumed": target, "dispatched": released, "message": message})
    else:
        click.echo(message)


# -- notifications ------------------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was sent as JSON.")
def notify(as_json: bool) -> None:
    """Post each new alert condition (failures, spent budget, silent worker, promotion) to
    RIBBIT_NOTIFY__WEBHOOK_URL once. `ribbit serve` checks by itself every
    RIBBIT_NOTIFY__CHECK_INTERVAL_S; this command is for deployments without it."""
    from bot.notify import check_and_notify

    settings = settings_or_exit()
    if settings.notify.webhook_url is None:
        raise click.ClickException("RIBBIT_NOTIFY__WEBHOOK_URL is not set; nothing to send to")
    rt = Runtime.open(settings)
    factory = _model_versions()
    sent = check_and_notify(
        rt.db, rt.store, settings, factory(rt.db, settings) if factory else None
    )
    if as_json:
        echo_json([{"key": n.key, "text": n.text} for n in sent])
    elif not sent:
        empty("nothing new to notify")
    for notice in [] if as_json else sent:
        click.echo(f"sent: {notice.text}")


# -- doctor -------------------------------------------------------------------------------------


@main.group()
def db() -> None:
    """The database schema."""


@db.command("upgrade")
@actor_option
@click.option("--json", "as_json", is_flag=True, help="The revision as a JSON object.")
def db_upgrade(actor: str | None, as_json: bool) -> None:
    """Bring the schema to the newest revision (safe to run from several processes at
    once: migrations wait on a lock). The one step that migrates: run it before starting
    upgraded web and worker processes, which refuse a schema behind theirs (unless
    RIBBIT_DATABASE_AUTO_UPGRADE, on by default for SQLite)."""
    from bot.runtime import open_database

    settings = settings_or_exit()
    revision = upgrade_database(settings)
    # Audited once the schema has the audit table; a failed upgrade has no table to tell.
    db = open_database(settings)
    try:
        message = audited(
            db, cli_actor(actor), "db-upgrade", "schema", lambda: f"at revision {revision}"
        )
    finally:
        db.dispose()
    if as_json:
        # db check --json's shape: after an upgrade the schema is at head.
        echo_json({"revision": revision, "at_head": True})
    else:
        click.echo(f"database {message}")


@db.command("check")
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="Seconds to wait for the schema to reach the newest revision (an upgrade running "
    "elsewhere).",
)
@click.option("--json", "as_json", is_flag=True, help="The revision as a JSON object.")
def db_check(wait_s: float, as_json: bool) -> None:
    """Exit 0 if the schema is at the newest revision, else 1 saying what to run. Never
    upgrades: a deployment's pods run it first, while the one upgrade Job migrates."""
    from bot.runtime import wait_for_schema

    revision = wait_for_schema(settings_or_exit(), wait_s)
    if as_json:
        echo_json({"revision": revision, "at_head": True})
    else:
        click.echo(f"database at revision {revision}")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="The checks as a JSON array.")
@repo_option(
    "A repository to check the forge credentials' permission on; repeat for several",
    multiple=True,
)
@forge_option()
def doctor(as_json: bool, repo: tuple[RepoRef, ...], forge: str) -> None:
    """Check settings, database, broker, forges (credentials asked of the forge), sandbox
    backends and the model."""
    from bot.doctor import run_checks

    checks = run_checks(load=load_process_settings, repos=list(repo))
    if as_json:
        echo_json([c.__dict__ for c in checks])
    else:
        for c in checks:
            mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[c.status]
            colour = {"ok": "green", "warn": "yellow", "fail": "red"}[c.status]
            line("[", styled(mark, style=colour), f"] {c.name}: {c.detail}")
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


main.add_command(github_app)

if __name__ == "__main__":  # pragma: no cover
    logging.basicConfig()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
