"""Ribbit's web side, and what every Ribbit process shares.

- The web app (app.py's ``create_app``, imported lazily here so that ``import bot.forges``
  does not pull in Flask; serving.py serves it): webhooks.py verifies a delivery
  (signatures.py) and hands it to intake.py, which normalises it (normalize.py, into
  events.py's events), admits it (admission.py) and asks the handlers (handlers/, each
  given context.py's Context, composed by routing.py; slash_commands.py parses ``/ribbit``
  comments) what to do; queue.py hands the jobs to the worker fleet by task name. admin/
  is the dashboard, review.py a job's signed page for its reviewers (joblinks.py,
  live.py); health.py and metrics.py report on the service (/healthz, /metrics), notify.py
  posts alerts. services.py holds what one web process builds once.
- Shared with the worker and the trainer: settings.py (the worker adds its sections in
  worker/settings.py; secret_strength.py judges the shared secrets it is given,
  settings_variables.py says which RIBBIT_* variables are settings),
  runtime.py (the database and the job store, built once per process), store/ (every
  table and every query over it, and the records both sides read), forges/ (the GitHub
  and GitLab clients), hostgit.py (host git), retrying.py (the retry loop),
  model_lines.py (which model a repository trains and is served by),
  worker_heartbeats.py, logs.py and console.py.
- cli.py: the ``ribbit`` command. The worker's and the trainer's subcommands, their doctor
  checks (doctor.py), the settings class every process builds and the trainer's parts the
  web app offers (model_versions.py, env_validation.py) come in through pyproject's entry
  points.

bot/ imports neither worker/ nor trainer/ (pyproject's import-linter contracts check it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from bot.app import create_app

        return create_app
    raise AttributeError(name)
