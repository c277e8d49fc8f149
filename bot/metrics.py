"""Prometheus metrics of the web app. Job counts are read from the store at scrape time,
so they are right however many web and worker processes there are."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.store.jobs import JobStore

# Label values come only from these sets: a label taken from a request header lets anyone
# create a series per request (5,000 unsigned requests made /metrics 3 MB).
EVENT_LABELS: dict[str, frozenset[str]] = {
    "github": frozenset({"ping", "issues", "issue_comment", "pull_request", "pull_request_review"}),
    "gitlab": frozenset(
        {
            "Issue Hook",
            "Note Hook",
            "Merge Request Hook",
            "Confidential Issue Hook",
            "Confidential Note Hook",
        }
    ),
}
OUTCOME_LABELS = frozenset({"accepted", "ignored", "refused", "duplicate", "error"})
UNVERIFIED = "unverified"  # answered before the signature was checked, or it failed
OTHER = "other"


def event_label(forge: str, event: str, *, verified: bool) -> str:
    if not verified:
        return UNVERIFIED
    return event if event in EVENT_LABELS.get(forge, frozenset()) else OTHER


def outcome_label(outcome: object) -> str:
    return outcome if isinstance(outcome, str) and outcome in OUTCOME_LABELS else OTHER


class JobStateCollector(Collector):
    def __init__(self, store: JobStore) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("ribbit_jobs", "Jobs by state", labels=["state"])
        counts = self.store.count_by_state()
        for state in ("queued", "running", "succeeded", "failed", "cancelled"):
            family.add_metric([state], counts.get(state, 0))
        yield family


class WebMetrics:
    """One registry per app, so several apps in one process (tests) do not collide."""

    def __init__(self, store: JobStore) -> None:
        self.registry = CollectorRegistry()
        self.events = Counter(
            "ribbit_webhook_events_total",
            "Webhook deliveries by forge, event and outcome",
            ["forge", "event", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ribbit_http_request_duration_seconds",
            "Request latency by endpoint",
            ["endpoint", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.registry.register(JobStateCollector(store))
