"""GET /healthz (database and broker, and `ribbit serve`'s embedded worker and beat) and
GET /metrics (Prometheus text format).

A dead embedded process makes /healthz "degraded", not 503: the web still takes and
queues webhooks, the supervisor (bot/supervisor.py) is already restarting the process, and
the probes that read /healthz (compose's healthcheck, Helm's readiness and liveness) would
answer a 503 by taking the web out of service or restarting it, supervisor and all. The
database and the broker, without which the web cannot queue anything, stay 503.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.web.services import services

bp = Blueprint("health", __name__)


def check_broker(url: str, timeout: float = 3.0) -> None:
    from kombu import Connection

    with Connection(url, connect_timeout=timeout) as conn:
        conn.ensure_connection(max_retries=1, timeout=timeout)


def health_report() -> tuple[bool, dict[str, Any]]:
    svc = services()
    checks: dict[str, Any] = {}
    try:
        svc.db.ping()
        checks["database"] = {"ok": True}
    except Exception as exc:
        checks["database"] = {"ok": False, "error": type(exc).__name__}
    try:
        check_broker(svc.settings.effective_broker_url)
        checks["broker"] = {"ok": True}
    except Exception as exc:
        checks["broker"] = {"ok": False, "error": type(exc).__name__}
    return all(c["ok"] for c in checks.values()), checks


def embedded_report() -> dict[str, dict[str, Any]] | None:
    """Each embedded process by name; None where this web process runs none."""
    embedded = services().embedded
    if embedded is None:
        return None
    return {s.name: {**asdict(s), "up": s.up} for s in embedded.status()}


@bp.get("/healthz")
def healthz() -> tuple[Response, int]:
    ok, checks = health_report()
    body: dict[str, Any] = {"ok": ok, "checks": checks}
    status = "ok" if ok else "down"
    embedded = embedded_report()
    if embedded is not None:
        body["embedded"] = embedded
        if ok and not all(p["up"] for p in embedded.values()):
            status = "degraded"
    body["status"] = status
    return jsonify(body), 200 if ok else 503


@bp.get("/metrics")
def metrics() -> Response:
    body = generate_latest(services().metrics.registry)
    # content_type, not mimetype: Werkzeug appends "; charset=utf-8" to a text/* mimetype,
    # and CONTENT_TYPE_LATEST already names its charset (a duplicate parameter makes
    # Prometheus 3 refuse the scrape).
    return Response(body, content_type=CONTENT_TYPE_LATEST)
