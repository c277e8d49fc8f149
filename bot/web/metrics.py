"""Prometheus metrics of the web app. Job counts are read from the store at scrape time,
so they are right however many web and worker processes there are."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.build_info import register_process_metrics
from bot.settings import Settings
from bot.store.jobs import JobStore
from bot.store.tables import utcnow
from bot.supervisor import EmbeddedStatus
from bot.web.context import OUTSIDER_ATTEMPTS

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


def repos_all_failing(store: JobStore, settings: Settings, now: datetime) -> int:
    """Repositories whose every agent job that ended within the notify window failed, at
    least ``notify.failure_threshold`` of them (a repo the bot cannot work on at all)."""
    since = now - timedelta(minutes=settings.notify.failure_window_minutes)
    return sum(
        1
        for r in store.agent_endings_by_repo(since)
        if r.ended == r.failed >= settings.notify.failure_threshold
    )


def repos_budget_spent(store: JobStore, settings: Settings, now: datetime) -> int:
    from bot.notify import _budgets_spent

    return len(_budgets_spent(store, settings, now))


class RepoHealthCollector(Collector):
    """Counts, never names: a label per repository would grow with every repository the
    bot is installed on. The notifications (bot/notify.py) and the dashboard name them."""

    def __init__(self, store: JobStore, settings: Settings) -> None:
        self.store, self.settings = store, settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = utcnow()
        failing = GaugeMetricFamily(
            "ribbit_repos_failing",
            "Repositories where every agent job in the notify window failed "
            "(at least RIBBIT_NOTIFY__FAILURE_THRESHOLD of them)",
        )
        failing.add_metric([], repos_all_failing(self.store, self.settings, now))
        yield failing
        spent = GaugeMetricFamily(
            "ribbit_repos_budget_spent",
            "Repositories whose daily job budget (RIBBIT_ADMISSION__DAILY_JOBS_PER_REPO) is spent",
        )
        spent.add_metric([], repos_budget_spent(self.store, self.settings, now))
        yield spent
        paused = self.store.paused_scopes()
        family = GaugeMetricFamily(
            "ribbit_paused_scopes",
            "Pauses in force, by scope: all (everything) or repo (count of repositories)",
            labels=["scope"],
        )
        family.add_metric(["all"], 1 if "*" in paused else 0)
        family.add_metric(["repo"], sum(1 for p in paused if p != "*"))
        yield family


class EmbeddedCollector(Collector):
    """`ribbit serve`'s embedded worker and beat, read from its supervisor at scrape time:
    the restart count is the supervisor's own, so it only grows while the process lives."""

    def __init__(self, embedded: EmbeddedStatus) -> None:
        self.embedded = embedded

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        statuses = self.embedded.status()
        up = GaugeMetricFamily(
            "ribbit_embedded_up",
            "1 while the embedded process (worker, beat) of `ribbit serve` runs",
            labels=["process"],
        )
        restarts = CounterMetricFamily(
            "ribbit_embedded_restarts",
            "Times `ribbit serve` restarted its embedded process after it died",
            labels=["process"],
        )
        for s in statuses:
            up.add_metric([s.name], 1 if s.up else 0)
            restarts.add_metric([s.name], s.restarts)
        yield up
        yield restarts


class WebMetrics:
    """One registry per app, so several apps in one process (tests) do not collide."""

    def __init__(self, store: JobStore, settings: Settings) -> None:
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
        self.outsider_attempts = Counter(
            "ribbit_outsider_attempts_total",
            "Deliveries in which someone the forge marks as no collaborator tried to steer "
            "the bot (a command, a review asking for changes), ignored at intake",
            ["forge", "attempt"],
            registry=self.registry,
        )
        for forge in EVENT_LABELS:
            for attempt in OUTSIDER_ATTEMPTS:
                self.outsider_attempts.labels(forge, attempt)
        self.registry.register(JobStateCollector(store))
        self.registry.register(RepoHealthCollector(store, settings))
        register_process_metrics(self.registry)

    def watch_embedded(self, embedded: EmbeddedStatus) -> None:
        self.registry.register(EmbeddedCollector(embedded))
