"""GET /healthz (database and broker) and GET /metrics (Prometheus text format)."""

from __future__ import annotations

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


@bp.get("/healthz")
def healthz() -> tuple[Response, int]:
    ok, checks = health_report()
    return jsonify({"ok": ok, "checks": checks}), 200 if ok else 503


@bp.get("/metrics")
def metrics() -> Response:
    body = generate_latest(services().metrics.registry)
    # content_type, not mimetype: Werkzeug appends "; charset=utf-8" to a text/* mimetype,
    # and CONTENT_TYPE_LATEST already names its charset (a duplicate parameter makes
    # Prometheus 3 refuse the scrape).
    return Response(body, content_type=CONTENT_TYPE_LATEST)
