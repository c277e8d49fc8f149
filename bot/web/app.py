"""The Flask app factory."""

from __future__ import annotations

import logging
import time

from flask import Flask, Response, g, request

from bot.env_validation import EnvValidatorFactory
from bot.model_versions import ModelVersionsFactory
from bot.queue import Dispatcher
from bot.settings import Settings, load_settings
from bot.web import admin, health, review, webhooks
from bot.web.services import Services

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    dispatcher: Dispatcher | None = None,
    model_versions: ModelVersionsFactory | None = None,
    env_validator: EnvValidatorFactory | None = None,
) -> Flask:
    """Build the web app. ``settings`` defaults to the environment's; ``dispatcher`` lets
    tests and the benchmark swap the broker hand-off (the default sends to Celery);
    ``model_versions`` gives the dashboard the model registry (`ribbit serve` passes the
    trainer's; without one, promotion is unavailable); ``env_validator`` likewise gives
    it the trainer's environment validation."""
    settings = settings or load_settings()
    app = Flask(__name__)
    # Werkzeug enforces this on every body read as a second line behind our own check;
    # one byte more than the limit, so that reading limit+1 bytes tells "over" from "equal".
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes + 1
    svc = Services.build(settings, dispatcher, model_versions, env_validator)
    svc.init_app(app)
    for forge, configured in webhooks.configured_forges(settings).items():
        if not configured:
            log.error("%s webhooks are disabled: %s", forge, webhooks.MISSING_SECRET[forge])
    app.register_blueprint(webhooks.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(admin.bp)
    app.register_blueprint(review.bp)

    @app.before_request
    def _start_timer() -> None:
        g.started = time.perf_counter()

    @app.after_request
    def _observe(response: Response) -> Response:
        started = g.get("started")
        if started is not None:
            svc.metrics.latency.labels(
                request.endpoint or "unknown", str(response.status_code)
            ).observe(time.perf_counter() - started)
        return response

    return app
