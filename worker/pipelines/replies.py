"""Short replies: help and explain."""

from __future__ import annotations

from typing import Any

from worker.jobs import JobContext, JobRefused, pipeline


@pipeline("help")
def help_reply(ctx: JobContext) -> dict[str, Any] | None:
    raise JobRefused("replies are not wired up yet")


@pipeline("explain")
def explain(ctx: JobContext) -> dict[str, Any] | None:
    raise JobRefused("replies are not wired up yet")
