"""Prometheus metrics of the workers: job and stage durations, gate results, model tokens
and errors, sandbox failures, and (read at scrape time) queue depth and the inference
server's reachability.

Why multiprocess mode: with Celery's prefork pool the jobs run in child processes that
the parent forks (and replaces), while only one process per worker can own a listening
port that Prometheus knows. An HTTP endpoint in each child would need a port per child
and would lose its counters whenever a child is replaced; an endpoint in the parent alone
would see nothing, since the parent runs no task. So the children write their samples to
prometheus_client's per-process files in PROMETHEUS_MULTIPROC_DIR, and the parent serves
``/metrics`` from a MultiProcessCollector that sums them (``start_exporter``, on
``worker_ready``). Counters of replaced children stay counted (their files remain).

prometheus_client picks its value store when it is first imported, so ``prepare`` must run
before anything imports it: ``ribbit worker`` calls it first thing.

Labels only take values from fixed sets (a label value taken from a repository, a rule
file or a payload would let anyone grow the series without bound): job kinds, stages,
gates, Ribbit's own rule ids and the built-in Semgrep rules, model error kinds, verdict
levels and tamper mechanisms (never the file a tamper finding names).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.queue import QUEUE
from bot.settings import Settings
from bot.store.kinds import KINDS as JOB_KINDS
from worker.sandbox.egress_policy import BlockedRequest, refusal_kind
from worker.settings import WorkerSettings

if TYPE_CHECKING:
    from bot.store.records.gate_report import GateReport
    from worker.agent.policy import AssistantTurn, Policy, StopCheck

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
OTHER = "other"
KINDS = frozenset(JOB_KINDS)
OUTCOMES = frozenset({"succeeded", "failed", "cancelled", "skipped", "held", "deferred"})
# The solve pipeline's timed steps (worker/pipelines/workspace.py Stages).
STAGES = frozenset(
    {"permission", "config", "clone", "setup", "agent", "gates", "push", "pull_request"}
)
GATES = frozenset({"tests", "semgrep", "hygiene"})
POLICIES = frozenset({"transformers", "openai", "replay"})
MODEL_ERRORS = frozenset({"context_window", "policy", "crash"})
# Rules a repository or a deployment adds to the Semgrep gate are counted under this one.
REPO_RULE = "repo-rule"
# Ribbit's own rule ids are short kebab-case constants; the tests and hygiene gates make
# no other kind (a test id or a path never becomes a rule).
_OWN_RULE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+){0,6}")
_SEMGREP_OWN = frozenset(
    {
        "semgrep-missing",
        "semgrep-failed",
        "semgrep-partial-scan",
        "repo-rules-invalid",
        "repo-rules-missing",
        "gate-error",
        "gate-cancelled",
        "gate-timeout",
        "patch-does-not-apply",
    }
)
TOKEN_DIRECTIONS = ("prompt", "completion")
# The levels a judged patch can have (a report from before the levels is never judged here).
VERDICTS = frozenset({"verified", "unverified", "refused"})
# Where forge text comes from on its way to a prompt (worker/pipelines/trusted_text.py).
TEXT_SOURCES = frozenset({"issue", "comment", "review_comment", "review", "request"})


def _bounded(value: object, allowed: frozenset[str]) -> str:
    return value if isinstance(value, str) and value in allowed else OTHER


@cache
def builtin_semgrep_rules() -> frozenset[str]:
    from worker.gates.semgrep import _rule_catalogue, builtin_rule_files

    return frozenset(_rule_catalogue(builtin_rule_files()))


def rule_label(gate: str, rule: str) -> str:
    if gate not in GATES:
        return OTHER
    if gate == "semgrep":
        known = rule in _SEMGREP_OWN or rule in builtin_semgrep_rules()
        return rule if known else REPO_RULE
    return rule if len(rule) <= 48 and _OWN_RULE.fullmatch(rule) else OTHER


# -- set-up (before prometheus_client is imported) ------------------------------------------------


def prepare(settings: Settings) -> Path | None:
    """Choose (and empty) the folder the pool processes write their samples to. Returns
    None when the worker exports no metrics (``RIBBIT_METRICS__WORKER_PORT`` unset)."""
    if settings.metrics.worker_port is None:
        return None
    global _owned_folder
    given = os.environ.get(MULTIPROC_ENV)
    folder = Path(given) if given else Path(tempfile.mkdtemp(prefix="ribbit-metrics-"))
    _owned_folder = None if given else folder
    folder.mkdir(parents=True, exist_ok=True)
    # Files of an earlier run would be summed into this one's counters.
    for stale in folder.glob("*.db"):
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(folder)
    return folder


_owned_folder: Path | None = None


def cleanup() -> None:
    """At worker shutdown: remove the samples folder ``prepare`` made (never one the
    operator named)."""
    global _owned_folder
    if _owned_folder is not None:
        shutil.rmtree(_owned_folder, ignore_errors=True)
        _owned_folder = None


def multiprocess_active() -> bool:
    from prometheus_client import values

    return getattr(values.ValueClass, "__name__", "") == "MmapedValue"


# -- the metrics ------------------------------------------------------------------------------


class _Metrics:
    """Created on first use, so importing this module never fixes prometheus_client's
    value store before ``prepare`` has chosen it."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        durations = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
        self.job_duration = Histogram(
            "ribbit_job_duration_seconds",
            "Wall-clock time of one job run in a worker, by kind and how it ended",
            ["kind", "outcome"],
            buckets=durations,
        )
        self.stage_duration = Histogram(
            "ribbit_job_stage_duration_seconds",
            "Time spent in each stage of solve and revise jobs",
            ["kind", "stage"],
            buckets=(0.1, 0.5, *durations),
        )
        self._judging()
        self.model_tokens = Counter(
            "ribbit_model_tokens_total", "Tokens through the model", ["policy", "direction"]
        )
        self.model_seconds = Counter(
            "ribbit_model_generation_seconds_total",
            "Time spent waiting for model turns (tokens/s = tokens rate / this rate)",
            ["policy"],
        )
        self.model_turns = Counter("ribbit_model_turns_total", "Model turns generated", ["policy"])
        self.model_errors = Counter(
            "ribbit_model_errors_total", "Model calls that raised", ["policy", "error"]
        )
        self.sandbox_failures = Counter(
            "ribbit_sandbox_failures_total",
            "Jobs ended by a sandbox failure (the engine or the backend, not the command in "
            "it), by the stage they were in",
            ["stage"],
        )
        self.prompt_withheld = Counter(
            "ribbit_prompt_text_withheld_total",
            "Pieces of forge text kept out of a prompt because their author has no write "
            "access, by where they came from",
            ["source"],
        )
        self.outsider_refusals = Counter(
            "ribbit_outsider_jobs_refused_total",
            "Jobs refused because the person who asked has no write access, by job kind",
            ["kind"],
        )
        self._zero()

    def _judging(self) -> None:
        """What the gates said of job patches."""
        from prometheus_client import Counter

        self.gate_runs = Counter(
            "ribbit_gate_runs_total", "Gate verdicts on job patches", ["gate", "result"]
        )
        self.gate_findings = Counter(
            "ribbit_gate_findings_total",
            "Blocking gate findings on job patches, by gate and rule",
            ["gate", "rule"],
        )
        self.verdicts = Counter(
            "ribbit_verdicts_total",
            "Patches the gates judged in solve and revise jobs, by verdict level "
            "(only verified is passed)",
            ["verdict"],
        )
        self.setup_refusals = Counter(
            "ribbit_setup_requests_refused_total",
            "Requests the set-up proxy refused in a job's set-up step, by kind of refusal "
            "(the host and the request itself are in the job's record)",
            ["reason"],
        )
        self.tamper = Counter(
            "ribbit_tamper_findings_total",
            "Blocking tamper findings (a watched test run attributed a forging mechanism to "
            "the patch's code), by mechanism",
            ["mechanism"],
        )

    def _zero(self) -> None:
        # Series that exist from the start: rate() and the alert rules see a 0, not nothing.
        for gate in GATES:
            for result in ("passed", "failed"):
                self.gate_runs.labels(gate, result)
        for policy in POLICIES:
            self.model_seconds.labels(policy)
            self.model_turns.labels(policy)
            for direction in TOKEN_DIRECTIONS:
                self.model_tokens.labels(policy, direction)
            for error in MODEL_ERRORS:
                self.model_errors.labels(policy, error)
        for stage in (*STAGES, OTHER):
            self.sandbox_failures.labels(stage)
        for source in TEXT_SOURCES:
            self.prompt_withheld.labels(source)
        for kind in ("solve", "revise", "command", "explain", "help"):
            self.outsider_refusals.labels(kind)
        for level in VERDICTS:
            self.verdicts.labels(level)
        # Every mechanism from 0, so the tamper alert's increase() sees the first one.
        for mechanism in (*tamper_mechanisms(), OTHER):
            self.tamper.labels(mechanism)


_metrics: _Metrics | None = None


def metrics() -> _Metrics:
    global _metrics
    if _metrics is None:
        _metrics = _Metrics()
    return _metrics


def record_job(kind: str, outcome: str, seconds: float) -> None:
    metrics().job_duration.labels(_bounded(kind, KINDS), _bounded(outcome, OUTCOMES)).observe(
        seconds
    )


def record_stage(kind: str, stage: str, seconds: float) -> None:
    metrics().stage_duration.labels(_bounded(kind, KINDS), _bounded(stage, STAGES)).observe(seconds)


def tamper_mechanisms() -> frozenset[str]:
    from worker.gates.tamper import MECHANISMS

    return MECHANISMS


def record_gates(report: GateReport) -> None:
    """One judged patch: each gate's result and blocking findings, the tamper findings
    by mechanism, and the patch's verdict level."""
    from worker.gates.tamper import mechanism_of

    m = metrics()
    for result in report.results:
        gate = _bounded(result.name, GATES)
        m.gate_runs.labels(gate, "passed" if result.passed else "failed").inc()
        for finding in result.findings:
            if finding.severity == "error":
                m.gate_findings.labels(gate, rule_label(gate, finding.rule)).inc()
            mechanism = mechanism_of(finding)
            if mechanism is not None:
                m.tamper.labels(_bounded(mechanism, tamper_mechanisms())).inc()
    # A report from before the levels has none to count; every new one has one.
    if report.verdict.value in VERDICTS:
        m.verdicts.labels(report.verdict.value).inc()


def record_withheld(source: str) -> None:
    metrics().prompt_withheld.labels(_bounded(source, TEXT_SOURCES)).inc()


def record_setup_refusals(blocked: Iterable[BlockedRequest]) -> None:
    for request in blocked:
        metrics().setup_refusals.labels(refusal_kind(request.reason)).inc()


def record_outsider_refusal(kind: str) -> None:
    metrics().outsider_refusals.labels(_bounded(kind, KINDS)).inc()


def record_sandbox_failure(stage: str | None) -> None:
    metrics().sandbox_failures.labels(_bounded(stage, STAGES)).inc()


class InstrumentedPolicy:
    """A Policy that counts what passes through the one it wraps: turns, tokens, time
    spent generating, and errors by kind."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.model_name = inner.model_name
        self.label = _bounded(inner.name, POLICIES)

    def generate(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        limits: Any = None,
        should_stop: StopCheck | None = None,
    ) -> AssistantTurn:
        from worker.agent.policy import ContextWindowExceeded, PolicyError

        m = metrics()
        start = time.monotonic()
        try:
            turn = self.inner.generate(messages, tools, limits=limits, should_stop=should_stop)
        except ContextWindowExceeded:
            m.model_errors.labels(self.label, "context_window").inc()
            raise
        except PolicyError:
            m.model_errors.labels(self.label, "policy").inc()
            raise
        except Exception:
            m.model_errors.labels(self.label, "crash").inc()
            raise
        finally:
            m.model_seconds.labels(self.label).inc(time.monotonic() - start)
        m.model_turns.labels(self.label).inc()
        for direction, n in (
            ("prompt", turn.prompt_tokens),
            ("completion", turn.completion_tokens),
        ):
            if n:
                m.model_tokens.labels(self.label, direction).inc(n)
        return turn


# -- the exporter (in the worker's main process) --------------------------------------------------

PROBE_TIMEOUT_S = 3.0


class LiveCollector:
    """Facts read when Prometheus scrapes, in the parent: the broker's queue depth and
    whether the inference server answers (openai policy only)."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        depth = GaugeMetricFamily(
            "ribbit_queue_messages", "Messages waiting in the broker's queue", labels=["queue"]
        )
        broker_up = GaugeMetricFamily("ribbit_broker_up", "1 if the broker answered the scrape")
        try:
            depth.add_metric([QUEUE], queue_depth(self.settings))
            broker_up.add_metric([], 1)
        except Exception as exc:
            log.warning("metrics: broker did not answer: %s", type(exc).__name__)
            broker_up.add_metric([], 0)
        yield depth
        yield broker_up
        if self.settings.model.policy == "openai":
            up = GaugeMetricFamily(
                "ribbit_inference_up", "1 if the worker's inference server lists its models"
            )
            up.add_metric([], 1 if inference_answers(self.settings) else 0)
            yield up


def queue_depth(settings: Settings) -> int:
    from kombu import Connection

    from bot.queue import broker_transport_options

    with Connection(
        settings.effective_broker_url,
        connect_timeout=PROBE_TIMEOUT_S,
        transport_options=broker_transport_options(settings),
    ) as conn:
        conn.ensure_connection(max_retries=1, timeout=PROBE_TIMEOUT_S)
        # Declared as Celery declares it (durable): a passive declare fails on Redis while
        # the queue is empty, because an empty list does not exist there.
        ok = conn.default_channel.queue_declare(queue=QUEUE, durable=True, auto_delete=False)
        return int(ok.message_count)


def inference_answers(settings: WorkerSettings) -> bool:
    import requests

    url = settings.model.openai_base_url.rstrip("/") + "/models"
    key = settings.model.openai_api_key
    headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
    try:
        return requests.get(url, headers=headers, timeout=PROBE_TIMEOUT_S).ok
    except requests.RequestException:
        return False


def start_exporter(settings: WorkerSettings) -> Callable[[], None] | None:
    """Serve /metrics from the worker's main process; returns how to stop it."""
    port = settings.metrics.worker_port
    if port is None:
        return None
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    registry = CollectorRegistry()
    if multiprocess_active():
        multiprocess.MultiProcessCollector(registry)
    else:
        # Something imported prometheus_client before `prepare`: the pool's samples are
        # then invisible here. Say so loudly rather than export zeros that look real.
        log.error(
            "worker metrics: %s was not set before prometheus_client was imported; "
            "job metrics from pool processes are missing",
            MULTIPROC_ENV,
        )
    registry.register(LiveCollector(settings))
    from bot.build_info import register_process_metrics

    register_process_metrics(registry)
    server, thread = start_http_server(port, addr=settings.metrics.worker_host, registry=registry)
    log.info("worker metrics on http://%s:%d/metrics", settings.metrics.worker_host, port)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop


def process_exited(pid: int) -> None:
    """A pool process ended: its live gauges go (counters stay summed)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)
