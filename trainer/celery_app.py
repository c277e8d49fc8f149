"""The worker's Celery app with the trainer's ``ribbit.rollout`` task added.

``celery -A trainer.celery_app worker -Q rollouts`` (or ``ribbit worker --rollouts``)
runs training rollouts; the bot's app (worker/celery_app.py) stays free of trainer
imports, so a fleet that never trains never loads this module.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from trainer.rl.remote import register_rollout_task
from worker.celery_app import create_celery
from worker.settings import WorkerSettings, load_worker_settings


def create_rollout_celery(settings: WorkerSettings | None = None) -> Celery:
    app = create_celery(settings or load_worker_settings())
    register_rollout_task(app)
    return app


def __getattr__(name: str) -> Any:
    # `celery -A trainer.celery_app` looks up `app`/`celery`; build it lazily from the env.
    if name in {"app", "celery"}:
        app = create_rollout_celery()
        globals()[name] = app
        return app
    raise AttributeError(name)
