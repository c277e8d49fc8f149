"""The `ribbit` command.

Subcommands that live in worker/ or trainer/ are named here as import strings
and loaded only when used (click's lazy-group pattern), so `ribbit jobs` does
not import torch and bot/ keeps no import-time dependency on worker/.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import subprocess
import sys
from typing import Any

import click

from bot.settings import Settings, SettingsError, load_settings

LAZY_COMMANDS: dict[str, str] = {
    "run": "worker.agent.cli:run",
    "sandbox": "worker.sandbox.cli:sandbox",
    "gates": "worker.gates.cli:gates_command",
    "outcomes": "worker.outcomes_cli:outcomes",
    "envs": "trainer.cli:envs",
    "train": "trainer.cli:train",
    "model": "trainer.cli:model",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module_name, attr = LAZY_COMMANDS[cmd_name].split(":")
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name and module_name.startswith(exc.name):
                    return _unavailable(cmd_name, module_name)
                raise
            command: click.Command = getattr(module, attr)
            return command
        return super().get_command(ctx, cmd_name)


def _unavailable(name: str, module: str) -> click.Command:
    @click.command(name, help=f"(not available: {module} is not installed)")
    def missing() -> None:
        raise click.ClickException(f"`ribbit {name}` is not available in this build ({module})")

    return missing


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(cls=LazyGroup)
@click.version_option(package_name="ribbit")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Ribbit: labelled issues in, draft pull requests out, reviewed by humans."""
    # Subcommands that take their defaults from settings (sandbox, gates) read ctx.obj;
    # invalid settings are reported by the commands that need them, not here.
    try:
        ctx.obj = load_settings()
    except SettingsError:
        ctx.obj = None


# -- serving -----------------------------------------------------------------------------------


@main.command()
@click.option("--host", default=None, help="Listen address (default: RIBBIT_HOST).")
@click.option("--port", type=int, default=None, help="Listen port (default: RIBBIT_PORT).")
@click.option("--threads", type=int, default=8, show_default=True, help="Web server threads.")
@click.option(
    "--worker/--no-worker",
    "with_worker",
    default=True,
    show_default=True,
    help="Also run an embedded worker (with beat) in a child process.",
)
def serve(host: str | None, port: int | None, threads: int, with_worker: bool) -> None:
    """Run the webhook app (and by default an embedded worker)."""
    from waitress import create_server

    from bot.app import create_app
    from bot.logs import configure_logging
    from bot.webhooks import MISSING_SECRET, configured_forges

    settings = settings_or_exit()
    configure_logging(settings)
    for forge, configured in configured_forges(settings).items():
        if not configured:
            click.echo(
                f"ribbit: {forge} webhooks are closed until you {MISSING_SECRET[forge]}", err=True
            )
    app = create_app(settings)
    child: subprocess.Popen[bytes] | None = None
    if with_worker:
        child = subprocess.Popen(
            [sys.executable, "-m", "bot", "worker", "--beat", "--concurrency", "2"]
        )
    server = create_server(
        app,
        host=host or settings.host,
        port=port or settings.port,
        threads=threads,
        max_request_body_size=settings.max_body_bytes,
        ident="ribbit",
    )

    def stop(_signum: int, _frame: Any) -> None:
        server.close()

    signal.signal(signal.SIGTERM, stop)
    click.echo(
        f"ribbit: listening on http://{server.effective_host}:{server.effective_port}", err=True
    )
    try:
        server.run()
    except (KeyboardInterrupt, OSError):
        pass
    finally:
        app.extensions["ribbit"].close()
        if child is not None:
            child.terminate()  # SIGTERM: Celery's warm shutdown finishes or requeues the job
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()


@main.command()
@click.option("--concurrency", "-c", type=int, default=None, help="Parallel jobs (default: CPUs).")
@click.option(
    "--pool",
    type=click.Choice(["prefork", "threads", "solo"]),
    default="prefork",
    show_default=True,
)
@click.option(
    "--beat/--no-beat",
    default=False,
    show_default=True,
    help="Also run the periodic sweep and reconciliation (one per deployment).",
)
@click.option("--loglevel", default="INFO", show_default=True)
@click.option(
    "--rollouts/--no-rollouts",
    default=False,
    show_default=True,
    help="Also take training rollouts (queue `rollouts`; needs the trainer's model and the "
    "environment store and run folders on shared storage).",
)
@click.option(
    "--only-rollouts",
    is_flag=True,
    default=False,
    help="Take training rollouts and no bot jobs.",
)
def worker(
    concurrency: int | None,
    pool: str,
    beat: bool,
    loglevel: str,
    rollouts: bool,
    only_rollouts: bool,
) -> None:
    """Run a Celery worker for Ribbit's jobs (and, if asked, training rollouts)."""
    from bot.logs import configure_logging

    settings = settings_or_exit()
    configure_logging(settings)
    queues = ["ribbit"]
    if rollouts or only_rollouts:
        from trainer.celery_app import create_rollout_celery

        app = create_rollout_celery(settings)
        queues = ["rollouts"] if only_rollouts else ["ribbit", "rollouts"]
    else:
        from worker.celery_app import create_celery

        app = create_celery(settings)
    argv = [
        "worker",
        f"--pool={pool}",
        f"--loglevel={loglevel}",
        "-Q",
        ",".join(queues),
        "--without-gossip",
        "--without-mingle",
    ]
    if concurrency:
        argv.append(f"--concurrency={concurrency}")
    if beat:
        argv += ["--beat", f"--schedule={settings.data_dir / 'celerybeat-schedule'}"]
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    app.worker_main(argv)


# -- jobs ---------------------------------------------------------------------------------------


def _store(settings: Settings):
    from bot.store.db import Database
    from bot.store.jobs import JobStore

    db = Database(settings.effective_database_url)
    db.migrate()
    return JobStore(db)


def job_dict(job: Any) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "state": job.state,
        "stage": job.stage,
        "forge": job.forge,
        "repo": job.repo,
        "issue": job.issue_number,
        "pr": job.pr_number,
        "actor": job.actor,
        "held": job.held,
        "attempts": job.attempts,
        "failure_reason": job.failure_reason,
        "superseded_by": job.superseded_by,
        "branch": job.branch,
        "pr_url": job.pr_url,
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
@click.option(
    "--state",
    type=click.Choice(["queued", "running", "succeeded", "failed", "cancelled"]),
    default=None,
)
@click.option("--repo", default=None, help="Only this repository (owner/name).")
@click.option("--limit", type=int, default=50, show_default=True)
@click.pass_context
def jobs(
    ctx: click.Context, as_json: bool, state: str | None, repo: str | None, limit: int
) -> None:
    """List jobs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    store = _store(settings_or_exit())
    rows = store.list(state=state, repo=repo, limit=limit)
    paused = store.paused_scopes()
    if as_json:
        click.echo(json.dumps([job_dict(j) for j in rows], indent=2))
        return
    if paused:
        # A pause is invisible in the jobs themselves until a worker meets them: say it.
        scopes = "everything" if "*" in paused else ", ".join(paused)
        click.echo(f"PAUSED: {scopes} (new and queued jobs are held; `ribbit resume`)")
    if not rows:
        click.echo("no jobs")
        return
    click.echo(f"{'ID':12} {'KIND':8} {'STATE':10} {'FORGE':7} {'REPO':30} {'ISSUE':>6}  REASON")
    for j in rows:
        issue = "" if j.issue_number is None else str(j.issue_number)
        shown_state = "held" if j.state == "queued" and j.held else j.state
        reason = "paused; `ribbit resume` releases it" if shown_state == "held" else ""
        click.echo(
            f"{j.id[:12]:12} {j.kind:8} {shown_state:10} {j.forge:7} {j.repo[:30]:30} "
            f"{issue:>6}  {(j.failure_reason or reason)[:60]}"
        )


@jobs.command("show")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
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
        if key != "result":
            click.echo(f"{key:15} {'' if value is None else value}")
    if job.result:
        click.echo("result:")
        click.echo(json.dumps(job.result, indent=2, default=str))


# -- kill switch ------------------------------------------------------------------------------


def _split_repo(repo: str | None, forge: str | None) -> tuple[str | None, str | None]:
    if repo and ":" in repo:
        forge, repo = repo.split(":", 1)
    return forge, repo


@main.command()
@click.option("--repo", default=None, help="Pause one repository ([forge:]owner/name).")
@click.option(
    "--forge", type=click.Choice(["github", "gitlab"]), default="github", show_default=True
)
def pause(repo: str | None, forge: str) -> None:
    """Stop starting jobs at once (events are still received and kept)."""
    forge_, repo_ = _split_repo(repo, forge)
    _store(settings_or_exit()).pause(forge=forge_, repo=repo_)
    click.echo(f"paused {'everything' if repo_ is None else f'{forge_}:{repo_}'}")


@main.command()
@click.option("--repo", default=None, help="Resume one repository ([forge:]owner/name).")
@click.option(
    "--forge", type=click.Choice(["github", "gitlab"]), default="github", show_default=True
)
def resume(repo: str | None, forge: str) -> None:
    """Lift a pause and dispatch the jobs held meanwhile."""
    from bot.intake import Intake
    from bot.queue import CeleryDispatcher, client_celery

    settings = settings_or_exit()
    store = _store(settings)
    forge_, repo_ = _split_repo(repo, forge)
    released = store.resume(forge=forge_, repo=repo_)
    Intake(settings, store, CeleryDispatcher(client_celery(settings))).dispatch(released)
    click.echo(
        f"resumed {'everything' if repo_ is None else f'{forge_}:{repo_}'}; "
        f"{len(released)} held job(s) dispatched"
    )


# -- notifications ------------------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was sent as JSON.")
def notify(as_json: bool) -> None:
    """Post each new alert condition (failures, spent budget, silent worker, promotion) to
    RIBBIT_NOTIFY__WEBHOOK_URL once; run it from cron or a scheduler every few minutes."""
    from bot.notify import check_and_notify
    from bot.store.db import Database
    from bot.store.jobs import JobStore

    settings = settings_or_exit()
    if settings.notify.webhook_url is None:
        raise click.ClickException("RIBBIT_NOTIFY__WEBHOOK_URL is not set; nothing to send to")
    db = Database(settings.effective_database_url)
    db.migrate()
    sent = check_and_notify(db, JobStore(db), settings)
    if as_json:
        click.echo(json.dumps([{"key": n.key, "text": n.text} for n in sent], indent=2))
    elif not sent:
        click.echo("nothing new to notify")
    for notice in [] if as_json else sent:
        click.echo(f"sent: {notice.text}")


# -- doctor -------------------------------------------------------------------------------------


@main.group()
def db() -> None:
    """The database schema."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Bring the schema to the newest revision (safe to run from several processes at
    once: migrations wait on a lock). Run it before starting upgraded web and worker
    processes."""
    from alembic.runtime.migration import MigrationContext

    from bot.store.db import Database

    database = Database(settings_or_exit().effective_database_url)
    try:
        database.migrate()
        with database.engine.connect() as conn:
            revision = MigrationContext.configure(conn).get_current_revision()
    finally:
        database.dispose()
    click.echo(f"database at revision {revision}")


@main.command()
@click.option("--json", "as_json", is_flag=True)
def doctor(as_json: bool) -> None:
    """Check settings, database, broker, forges, sandbox backends and the model."""
    from bot.doctor import run_checks

    checks = run_checks()
    if as_json:
        click.echo(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        for c in checks:
            mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[c.status]
            click.echo(f"[{mark}] {c.name}: {c.detail}")
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    logging.basicConfig()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
