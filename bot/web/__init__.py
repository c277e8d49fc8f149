"""Ribbit's web app: the Flask process that takes the forges' webhooks and serves the
dashboard.

app.py's ``create_app`` builds it (imported lazily here, so that importing one of these
modules does not build the app's blueprints); serving.py serves it. webhooks.py verifies
a delivery (signatures.py) and hands it to intake.py, which normalises it (normalize.py,
into events.py's events), admits it (bot/admission.py) and asks the handlers (handlers/,
each given context.py's Context, composed by routing.py; slash_commands.py parses
``/ribbit`` comments) what to do; bot/queue.py hands the jobs to the worker fleet. admin/
is the dashboard (its templates/ and static/ beside it), review.py a job's signed page
for its reviewers (bot/joblinks.py, bot/live.py, through admin's templates); health.py
and metrics.py report on the service (/healthz, /metrics). services.py holds what one
web process builds once.

Everything here builds on the kernel in bot/; nothing in the kernel, the worker or the
trainer imports this package (pyproject's import-linter contracts check it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.web.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from bot.web.app import create_app

        return create_app
    raise AttributeError(name)
