"""deploy/prometheus and deploy/grafana against the real thing.

- ``promtool`` (Debian's prometheus package) checks the Prometheus config and the alert
  rules, and runs the rules' unit tests (alerts.test.yml); a rule changed on purpose
  makes those tests fail.
- Every ribbit_* metric the rules and the dashboard use is in a real scrape: the web
  app's /metrics, and the /metrics of a real ``ribbit worker`` (prefork, on real Redis)
  after a job ran in its pool process, so the samples crossed from the pool child to the
  main process that serves them.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bot.queue import CeleryDispatcher, client_celery
from bot.store.db import Database
from bot.store.jobs import JobSpec, JobStore
from tests.plugins.services import free_port
from tests.support import local_http, require_service
from worker.settings import load_worker_settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "ribbit.json"
PROMETHEUS = REPO / "deploy" / "prometheus"
_METRIC = re.compile(r"\bribbit_[a-z_]+\b")
REDIS_DB = 12

# The stand-in job touches every worker metric the way the solve pipeline does, in the
# pool process, then fails the way a dead sandbox engine fails a job.
WORKER = """
import worker.pipelines
from worker.jobs import PIPELINES

def probe(ctx):
    from worker.agent.policy import AssistantTurn
    from bot.store.records.gate_report import Finding, GateResult
    from bot.store.records.gate_report import GateReport
    from worker.metrics import InstrumentedPolicy, record_gates, record_stage
    from worker.sandbox.base import SandboxError

    class Served:
        name, model_name = "openai", "m"
        def generate(self, messages, tools, *, limits=None, should_stop=None):
            return AssistantTurn("ok", None, [], "stop", prompt_tokens=70, completion_tokens=30)

    InstrumentedPolicy(Served()).generate([], [])
    record_stage(ctx.job.kind, "agent", 2.5)
    record_gates(GateReport.from_results([
        GateResult("tests", True),
        GateResult("hygiene", False, findings=(Finding("hygiene", "ci-config", "ci"),)),
    ], 1.0))
    record_gates(GateReport.from_results([
        GateResult("tests", False, findings=(
            Finding("tests", "tamper", "tamper: frame access at calc.py:3 [sys._getframe]"),
        )),
    ], 1.0))
    ctx.stage("agent")
    raise SandboxError("the sandbox engine went away")

PIPELINES["explain"] = probe
from bot.cli import main
main(["worker", "--pool", "prefork", "--concurrency", "1", "--loglevel", "INFO"])
"""


def _names(text: str) -> set[str]:
    families = list(text_string_to_metric_families(text))
    return {s.name for fam in families for s in fam.samples} | {fam.name for fam in families}


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _used_by_dashboard() -> set[str]:
    dash = json.loads(DASHBOARD.read_text())
    panels = dash["panels"]
    assert dash["uid"] and len(panels) >= 6
    assert len({p["id"] for p in panels}) == len(panels)
    used: set[str] = set()
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(_METRIC.findall(target["expr"]))
            # up and prometheus_client's process series are not Ribbit's own.
            assert names or re.search(r"\b(up|process_[a-z_]+)\{", target["expr"]), target["expr"]
            used |= names
    return used


def _used_by_rules() -> set[str]:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert len(exprs) >= 5
    return {name for e in exprs for name in _METRIC.findall(e)}


def _web_scrape(client: Any, post_github: Any) -> str:
    # One delivery and one request, so the labelled counter and histogram have samples.
    post_github({"zen": "Keep it logically awesome.", "hook_id": 1}, "ping", "grafana-1")
    client.get("/healthz")
    return str(client.get("/metrics").get_data(as_text=True))


# -- promtool ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> str:
    binary = shutil.which("promtool")
    require_service(binary is not None, "promtool (apt-get install prometheus)")
    assert binary is not None
    return binary


def test_deploy_alert_rules_pass_promtool(promtool: str) -> None:
    for args in (
        ["check", "config", "prometheus.yml"],
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts.test.yml"],
    ):
        proc = subprocess.run(
            [promtool, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, f"promtool {' '.join(args)}:\n{proc.stdout}{proc.stderr}"


def test_deploy_alert_rule_tests_fail_on_a_changed_rule(promtool: str, tmp_path: Path) -> None:
    """The rule tests can fail: a worker-down alert that waits 10 minutes breaks them."""
    rules = (PROMETHEUS / "alerts.yml").read_text()
    slow = rules.replace(
        'up{job="ribbit-worker"} == 0\n        for: 2m',
        'up{job="ribbit-worker"} == 0\n        for: 10m',
    )
    assert slow != rules
    (tmp_path / "alerts.yml").write_text(slow)
    shutil.copy(PROMETHEUS / "alerts.test.yml", tmp_path)
    proc = subprocess.run(
        [promtool, "test", "rules", "alerts.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "RibbitWorkerDown" in proc.stdout + proc.stderr


def test_deploy_web_down_rule_tests_fail_on_a_changed_rule(promtool: str, tmp_path: Path) -> None:
    """The web-down alert's promtool test can fail: one that watches the wrong job, or
    waits 10 minutes, breaks it."""
    rules = (PROMETHEUS / "alerts.yml").read_text()
    for changed in (
        rules.replace('up{job="ribbit-web"} == 0', 'up{job="web"} == 0'),
        rules.replace(
            'up{job="ribbit-web"} == 0\n        for: 2m',
            'up{job="ribbit-web"} == 0\n        for: 10m',
        ),
    ):
        assert changed != rules
        (tmp_path / "alerts.yml").write_text(changed)
        shutil.copy(PROMETHEUS / "alerts.test.yml", tmp_path)
        proc = subprocess.run(
            [promtool, "test", "rules", "alerts.test.yml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0
        assert "RibbitWebDown" in proc.stdout + proc.stderr


def test_deploy_any_tamper_alerts_at_once_by_mechanism() -> None:
    """Tamper is a signal (issue #31): one tamper finding anywhere is enough, the alert
    says which mechanism, and the dashboard shows the same counter."""
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    by_name = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    rule = by_name["RibbitTamperDetected"]
    expr = " ".join(rule["expr"].split())
    assert expr == "sum by (mechanism) (increase(ribbit_tamper_findings_total[15m])) > 0"
    assert "for" not in rule  # no waiting: a single finding fires
    assert rule["labels"] == {"severity": "critical"}
    assert "{{ $labels.mechanism }}" in rule["annotations"]["summary"]
    dash = json.loads(DASHBOARD.read_text())
    exprs = {t["expr"] for p in dash["panels"] for t in p["targets"]}
    assert any("ribbit_tamper_findings_total" in e for e in exprs)
    assert any("ribbit_verdicts_total" in e for e in exprs)


def test_deploy_tamper_alert_rule_tests_fail_on_a_slower_rule(
    promtool: str, tmp_path: Path
) -> None:
    """The tamper alert's promtool test can fail: an alert that waits for a second
    finding misses the one that matters."""
    rules = (PROMETHEUS / "alerts.yml").read_text()
    lax = rules.replace(
        "(ribbit_tamper_findings_total[15m])) > 0", "(ribbit_tamper_findings_total[15m])) > 1"
    )
    assert lax != rules
    (tmp_path / "alerts.yml").write_text(lax)
    shutil.copy(PROMETHEUS / "alerts.test.yml", tmp_path)
    proc = subprocess.run(
        [promtool, "test", "rules", "alerts.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "RibbitTamperDetected" in proc.stdout + proc.stderr


# -- a real worker's /metrics ----------------------------------------------------------------------


class _Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        ok = self.path == "/v1/models"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"object": "list", "data": [{"id": "m"}]}' if ok else b"{}")

    def log_message(self, *args: Any) -> None:
        pass


class WorkerUnderTest:
    def __init__(self, tmp: Path, redis_url: str) -> None:
        # An ExitStack, so a test can take the server away before the worker stops.
        self._inference = ExitStack()
        inference_url = self._inference.enter_context(local_http(_Models))
        self.port = free_port()
        broker = f"{redis_url.rsplit('/', 1)[0]}/{REDIS_DB}"
        import redis

        redis.Redis.from_url(broker).flushdb()
        self.env = {
            "RIBBIT_DATA_DIR": str(tmp / "data"),
            "RIBBIT_BROKER_URL": broker,
            "RIBBIT_LOG_FORMAT": "text",
            "RIBBIT_METRICS__WORKER_PORT": str(self.port),
            "RIBBIT_MODEL__POLICY": "openai",
            "RIBBIT_MODEL__OPENAI_BASE_URL": f"{inference_url}/v1",
        }
        self.settings = load_worker_settings(data_dir=tmp / "data", broker_url=broker)
        self.db = Database(self.settings.effective_database_url)
        self.db.migrate()
        self.store = JobStore(self.db)
        self.log = tmp / "worker.log"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RIBBIT_", "PROMETHEUS"))},
            **self.env,
            "PYTHONPATH": str(REPO),
        }
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", WORKER],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_for(self, what: str, check: Any, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"timed out waiting for {what}; worker log:\n{self.log.read_text()[-4000:]}")

    def listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def scrape(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as resp:
            return str(resp.read().decode())

    def submit_explain(self) -> str:
        with self.db.session() as session:
            job = self.store.create(
                session,
                JobSpec(
                    kind="explain", forge="github", repo="acme/calc", issue_number=1, pr_number=2
                ),
            )
            assert job is not None
        CeleryDispatcher(client_celery(self.settings)).dispatch(job)
        self.store.mark_dispatched([(job.id, job.dispatch_seq)])
        return job.id

    def stop_inference(self) -> None:
        """The inference server goes away (closing it again is a no-op)."""
        self._inference.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.stop_inference()
        self.db.dispose()


@pytest.fixture
def running_worker(tmp_path: Path, redis_url: str) -> Iterator[WorkerUnderTest]:
    worker = WorkerUnderTest(tmp_path, redis_url)
    try:
        yield worker
    finally:
        worker.close()


def test_deploy_worker_metrics_cross_from_the_pool_to_the_served_endpoint(
    running_worker: WorkerUnderTest, client: Any, post_github: Any
) -> None:
    worker = running_worker
    worker.wait_for("the worker's /metrics", worker.listening)
    job_id = worker.submit_explain()
    worker.wait_for(
        "the job to fail", lambda: worker.store.get(job_id).state == "failed", timeout=90
    )
    # The job's end is recorded right after its state; wait for the sample, not a time.
    worker.wait_for(
        "the job's metrics",
        lambda: "ribbit_job_duration_seconds_count{" in worker.scrape(),
    )
    text = worker.scrape()
    samples = _samples(text)

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    assert value("ribbit_job_duration_seconds_count", kind="explain", outcome="failed") == 1
    assert value("ribbit_job_stage_duration_seconds_count", kind="explain", stage="agent") == 1
    assert value("ribbit_sandbox_failures_total", stage="agent") == 1
    assert value("ribbit_model_tokens_total", policy="openai", direction="completion") == 30
    assert value("ribbit_model_tokens_total", policy="openai", direction="prompt") == 70
    assert value("ribbit_gate_runs_total", gate="tests", result="passed") == 1
    assert value("ribbit_gate_findings_total", gate="hygiene", rule="ci-config") == 1
    assert value("ribbit_tamper_findings_total", mechanism="sys._getframe") == 1
    assert value("ribbit_tamper_findings_total", mechanism="gc.get_objects") == 0
    assert value("ribbit_verdicts_total", verdict="refused") == 2
    assert value("ribbit_verdicts_total", verdict="verified") == 0
    assert value("ribbit_queue_messages", queue="ribbit") == 0
    assert value("ribbit_broker_up") == 1
    assert value("ribbit_inference_up") == 1
    # The main process's own series, beside the pool's summed ones (bot/build_info.py).
    [build] = [labels for name, labels in samples if name == "ribbit_build_info"]
    assert dict(build)["version"] == version("ribbit")
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total"} <= _names(text)

    # Every metric the alert rules and the dashboard use is in a real scrape.
    exported = _names(text) | _names(_web_scrape(client, post_github))
    used = _used_by_rules() | _used_by_dashboard()
    missing = used - exported
    assert not missing, f"rules or dashboard use metrics nobody exports: {missing}"
    assert {
        "ribbit_webhook_events_total",
        "ribbit_jobs",
        "ribbit_http_request_duration_seconds_bucket",
        "ribbit_job_stage_duration_seconds_bucket",
        "ribbit_gate_runs_total",
        "ribbit_model_errors_total",
        "ribbit_sandbox_failures_total",
        "ribbit_tamper_findings_total",
        "ribbit_verdicts_total",
    } <= used

    # The inference server goes away: the next scrape says so.
    worker.stop_inference()
    assert _samples(worker.scrape())[("ribbit_inference_up", frozenset())] == 0
