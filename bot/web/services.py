"""The long-lived objects one web process shares, built once from Settings: the process
runtime every Ribbit process has (bot/runtime.py) plus the intake and the dashboard's
parts."""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, current_app

from bot.env_validation import EnvValidatorFactory, ValidationRunner
from bot.model_versions import ModelVersions, ModelVersionsFactory
from bot.queue import CeleryDispatcher, Dispatcher, JobQueue, client_celery
from bot.runtime import Runtime
from bot.settings import Settings
from bot.supervisor import EmbeddedStatus
from bot.web.intake import Intake
from bot.web.metrics import WebMetrics


@dataclass
class Services(Runtime[Settings]):
    """The web process's Runtime: one object, so the web app, the worker and the CLI
    open the database, check its schema and build the store the same way; what only the
    web serves (intake, metrics, the trainer's registry) is added here."""

    intake: Intake
    queue: JobQueue  # the intake's own: one send path for webhooks and dashboard actions
    metrics: WebMetrics
    # None where the registry (trainer/) is not installed: promotion is then unavailable.
    model_versions: ModelVersions | None = None
    # None where the trainer is not installed: re-validating environments is unavailable.
    env_validation: ValidationRunner | None = None
    # `ribbit serve`'s embedded worker and beat; None where this process runs none.
    embedded: EmbeddedStatus | None = None

    @classmethod
    def build(
        cls,
        settings: Settings,
        dispatcher: Dispatcher | None = None,
        model_versions: ModelVersionsFactory | None = None,
        env_validator: EnvValidatorFactory | None = None,
    ) -> Services:
        # The webhook path runs in Database.transaction, which re-runs a transaction whose
        # connection was lost, so it need not pay a ping before each one; a dashboard or
        # health read that meets a dead connection fails once, and the pool renews.
        base = Runtime.open(settings, pre_ping=False)
        db, store = base.db, base.store
        dispatcher = dispatcher or CeleryDispatcher(client_celery(settings))
        intake = Intake(settings, store, dispatcher)
        return cls(
            settings=settings,
            db=db,
            store=store,
            forges=base.forges,
            intake=intake,
            queue=intake.queue,
            metrics=WebMetrics(store, settings),
            model_versions=model_versions(db, settings) if model_versions else None,
            env_validation=ValidationRunner(db, env_validator(db, settings))
            if env_validator
            else None,
        )

    def watch_embedded(self, embedded: EmbeddedStatus) -> None:
        """Report these embedded processes on /healthz, the dashboard and /metrics."""
        self.embedded = embedded
        self.metrics.watch_embedded(embedded)

    def init_app(self, app: Flask) -> None:
        app.extensions["ribbit"] = self

    def close(self) -> None:
        """Hand the jobs still waiting to the broker, then release the store."""
        self.intake.close()
        super().close()


def services() -> Services:
    svc: Services = current_app.extensions["ribbit"]
    return svc
