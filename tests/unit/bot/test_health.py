"""GET /healthz and GET /metrics with the database and broker checks replaced by fakes:
what a load balancer or a monitoring scraper sees when either is down, and that a
failure names only its type (a driver's message may carry the database URL and its
password). test_webhooks.py checks the healthy answer and a real dead broker."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import OperationalError

from bot.supervisor import ChildStatus
from bot.web import health

LEAKY = "postgresql://ribbit:s3cret-password@db.internal/ribbit"


@pytest.fixture
def broker_urls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The broker URLs /healthz asked about; the broker answers."""
    asked: list[str] = []
    monkeypatch.setattr(health, "check_broker", asked.append)
    return asked


def test_healthz_is_200_when_database_and_broker_answer(
    app: Flask, client: FlaskClient, broker_urls: list[str]
) -> None:
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.get_json() == {
        "ok": True,
        "status": "ok",
        "checks": {"database": {"ok": True}, "broker": {"ok": True}},
    }
    assert broker_urls == [app.extensions["ribbit"].settings.effective_broker_url]


def test_healthz_is_503_with_only_the_error_type_when_the_database_is_down(
    app: Flask, client: FlaskClient, broker_urls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def dead() -> None:
        raise OperationalError("SELECT 1", {}, Exception(f"could not connect to {LEAKY}"))

    monkeypatch.setattr(app.extensions["ribbit"].db, "ping", dead)
    resp = client.get("/healthz")
    assert resp.status_code == 503
    assert resp.get_json() == {
        "ok": False,
        "status": "down",
        "checks": {
            "database": {"ok": False, "error": "OperationalError"},
            "broker": {"ok": True},  # still asked: the answer says which one is down
        },
    }
    assert "s3cret" not in resp.get_data(as_text=True)


def test_healthz_is_503_with_only_the_error_type_when_the_broker_is_down(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def dead(url: str) -> None:
        raise ConnectionRefusedError(f"cannot reach {LEAKY}")

    monkeypatch.setattr(health, "check_broker", dead)
    resp = client.get("/healthz")
    assert resp.status_code == 503
    assert resp.get_json()["checks"] == {
        "database": {"ok": True},
        "broker": {"ok": False, "error": "ConnectionRefusedError"},
    }
    assert "s3cret" not in resp.get_data(as_text=True)


def test_check_broker_returns_for_a_broker_that_answers() -> None:
    health.check_broker("memory://", timeout=1.0)


def test_metrics_are_the_services_registry_in_prometheus_text(client: FlaskClient) -> None:
    resp = client.get("/metrics")
    assert resp.status_code == 200
    # Exactly prometheus_client's value: Prometheus 3 fails a scrape whose Content-Type does
    # not parse, and a parameter given twice (a second "charset=utf-8") does not.
    assert resp.headers["Content-Type"] == CONTENT_TYPE_LATEST
    assert resp.headers["Content-Type"].count("charset") == 1
    assert "# TYPE ribbit_jobs gauge" in resp.get_data(as_text=True)


class FakeEmbedded:
    """What a supervisor reports: the worker restarting after a SIGKILL, beat running."""

    def __init__(self) -> None:
        self.worker = ChildStatus("worker", "restarting", None, 2, -9)

    def status(self) -> list[ChildStatus]:
        return [self.worker, ChildStatus("beat", "running", 4242, 0, None)]


def test_healthz_says_degraded_but_stays_200_while_an_embedded_process_is_down(
    app: Flask, client: FlaskClient, broker_urls: list[str]
) -> None:
    embedded = FakeEmbedded()
    app.extensions["ribbit"].watch_embedded(embedded)
    resp = client.get("/healthz")
    body = resp.get_json()
    assert (resp.status_code, body["ok"], body["status"]) == (200, True, "degraded")
    assert body["embedded"]["worker"] == {
        "name": "worker",
        "state": "restarting",
        "pid": None,
        "restarts": 2,
        "last_exit": -9,
        "up": False,
    }
    assert body["embedded"]["beat"]["up"] is True
    embedded.worker = ChildStatus("worker", "running", 4343, 2, -9)
    assert client.get("/healthz").get_json()["status"] == "ok"


def test_metrics_show_the_embedded_processes(app: Flask, client: FlaskClient) -> None:
    app.extensions["ribbit"].watch_embedded(FakeEmbedded())
    text = client.get("/metrics").get_data(as_text=True)
    assert 'ribbit_embedded_restarts_total{process="worker"} 2.0' in text
    assert 'ribbit_embedded_up{process="worker"} 0.0' in text
    assert 'ribbit_embedded_up{process="beat"} 1.0' in text


def test_healthz_and_metrics_name_no_embedded_process_where_none_runs(
    client: FlaskClient, broker_urls: list[str]
) -> None:
    assert "embedded" not in client.get("/healthz").get_json()
    assert "ribbit_embedded" not in client.get("/metrics").get_data(as_text=True)
