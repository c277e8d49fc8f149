"""The solve and revise pipelines (filled in as the forge, sandbox, agent and gates land)."""

from __future__ import annotations

from typing import Any

from worker.jobs import JobContext, JobRefused, pipeline


@pipeline("solve")
def solve(ctx: JobContext) -> dict[str, Any] | None:
    raise JobRefused("the solve pipeline is not wired up yet")


@pipeline("revise")
def revise(ctx: JobContext) -> dict[str, Any] | None:
    raise JobRefused("the revise pipeline is not wired up yet")
