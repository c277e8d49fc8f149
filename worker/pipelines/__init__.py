"""Pipelines per job kind; importing this package registers them with worker.jobs."""

from worker.pipelines import outcomes, replies, slash_commands, solve  # noqa: F401
