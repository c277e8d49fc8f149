"""Pipelines per job kind; importing this package registers them with worker.jobs."""

from worker.pipelines import commands, outcomes, replies, solve  # noqa: F401
