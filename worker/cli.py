"""`ribbit worker`: a Celery worker for Ribbit's jobs (and, if asked, training rollouts).

Registered as a ``ribbit.commands`` entry point, like the worker's other commands. The
rollout task is the trainer's: it registers the Celery app that serves the ``rollouts``
queue as a ``ribbit.queues`` entry point, so this module names no trainer/ module.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

import click
from celery import Celery

from bot.cli import settings_or_exit
from bot.extras import missing_extra_message, missing_requirements
from bot.settings import Settings
from bot.supervisor import die_with_parent
from worker.settings import as_worker_settings

QUEUES_GROUP = "ribbit.queues"
ROLLOUTS = "rollouts"


def rollout_app_factory() -> Callable[[Settings], Celery]:
    """The trainer's Celery app (the worker's plus the rollout task). A missing library
    (torch) raises ModuleNotFoundError, which the CLI root words as "not in this build"."""
    for entry in entry_points(group=QUEUES_GROUP, name=ROLLOUTS):
        factory: Callable[[Settings], Celery] = entry.load()
        return factory
    raise click.ClickException(
        "no installed package serves the rollouts queue (install ribbit[train])"
    )


@click.command("worker")
@click.option("--concurrency", "-c", type=int, default=None, help="Parallel jobs (default: CPUs).")
@click.option(
    "--pool",
    type=click.Choice(["prefork", "threads", "solo"]),
    default="prefork",
    show_default=True,
    help="Celery pool: prefork (a process per job), threads, or solo (one job; GPU workers).",
)
@click.option(
    "--beat/--no-beat",
    default=False,
    show_default=True,
    help="Also run the periodic sweep and reconciliation (one per deployment).",
)
@click.option("--loglevel", default="INFO", show_default=True, help="Celery's log level.")
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
@click.option(
    "--only-beat",
    is_flag=True,
    default=False,
    help="Run only the periodic sweep and reconciliation, no jobs (one per deployment).",
)
@click.option(
    "--drain",
    type=float,
    default=None,
    help="Seconds a stop (SIGTERM) waits for the running jobs before exiting; they are "
    "retried. Default: the job time limit plus a minute.",
)
def worker(
    concurrency: int | None,
    pool: str,
    beat: bool,
    loglevel: str,
    rollouts: bool,
    only_rollouts: bool,
    only_beat: bool,
    drain: float | None,
) -> None:
    """Run a Celery worker for Ribbit's jobs (and, if asked, training rollouts)."""
    from bot.logs import configure_logging
    from bot.runtime import open_database

    missing = missing_requirements("worker")
    if missing:
        raise click.ClickException(missing_extra_message("worker", "worker", missing))
    die_with_parent()  # a child of `ribbit serve` (bot/supervisor.py): not to outlive it
    settings = as_worker_settings(settings_or_exit())
    configure_logging(settings)
    # The schema is checked (or, where allowed, upgraded) once here, before the pool starts:
    # a worker on a schema behind its code stops with the step to take, instead of failing
    # every task. Each pool process then opens its own (worker.celery_app.runtime_for).
    open_database(settings).dispose()
    # Before anything imports prometheus_client: the pool's metrics go to files.
    from worker.metrics import prepare

    prepare(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    schedule = f"--schedule={settings.data_dir / 'celerybeat-schedule'}"
    if only_beat:
        from worker.celery_app import create_celery

        create_celery(settings).start(["beat", f"--loglevel={loglevel}", schedule])
        return
    from worker.shutdown import bound_warm_shutdown

    bound_warm_shutdown(drain if drain is not None else default_drain_s(settings))
    queues = ["ribbit"]
    if rollouts or only_rollouts:
        app = rollout_app_factory()(settings)
        queues = [ROLLOUTS] if only_rollouts else ["ribbit", ROLLOUTS]
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
        argv += ["--beat", schedule]
    app.worker_main(argv)


def default_drain_s(settings: Settings) -> float:
    """A running job's time limit plus a minute to record its end: what the deploy files
    give a worker's stop (compose's stop_grace_period, Helm's grace period)."""
    return float((settings.effective_job_time_limit_s or 3600) + 60)
