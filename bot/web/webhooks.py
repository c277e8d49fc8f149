"""POST /webhooks/github and /webhooks/gitlab: verify, parse, hand to intake, answer.

Answers: 401 bad or missing signature; 413 body over the limit (decided from
Content-Length or by reading at most limit+1 bytes); 400 malformed JSON or a
payload of the wrong shape; 202 ignored with a reason; 202 accepted with the
job id; 200 duplicate delivery; 503 when the forge has no secret configured or
the store is down. Bad input never gets a 500.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from flask import Blueprint, Response, jsonify, request
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.exceptions import RequestEntityTooLarge

from bot.settings import Settings
from bot.web.intake import IntakeResult
from bot.web.metrics import event_label, outcome_label
from bot.web.normalize import PayloadError
from bot.web.services import Services, services
from bot.web.signatures import verify_github_signature, verify_gitlab_token

log = logging.getLogger(__name__)
bp = Blueprint("webhooks", __name__, url_prefix="/webhooks")

MISSING_SECRET = {
    "github": "set RIBBIT_GITHUB__WEBHOOK_SECRET to the webhook secret of the GitHub App/repo",
    "gitlab": "set RIBBIT_GITLAB__WEBHOOK_TOKEN to the secret token of the GitLab webhook",
}


def configured_forges(settings: Settings) -> dict[str, bool]:
    return {
        "github": settings.github.webhook_secret is not None,
        "gitlab": settings.gitlab.webhook_token is not None,
    }


def _answer(
    forge: str, event: str, status: int, body: dict[str, Any], *, verified: bool = True
) -> tuple[Response, int]:
    labels = (
        forge,
        event_label(forge, event, verified=verified),
        outcome_label(body.get("status", "error")),
    )
    services().metrics.events.labels(*labels).inc()
    return jsonify(body), status


def _read_body(limit: int) -> bytes | None:
    """The raw body, or None if it is over ``limit``, never reading past limit+1 bytes
    (Content-Length decides up front; a chunked body is cut off while streaming)."""
    length = request.content_length
    if length is not None and length > limit:
        return None
    buf = bytearray()
    try:
        while len(buf) <= limit:
            chunk = request.stream.read(min(65536, limit + 1 - len(buf)))
            if not chunk:
                break
            buf.extend(chunk)
    except RequestEntityTooLarge:
        return None
    return None if len(buf) > limit else bytes(buf)


def _receive(
    forge: str, event: str | None, delivery: str | None, verify: Any
) -> tuple[Response, int]:
    svc = services()
    event = event or ""
    if not configured_forges(svc.settings)[forge]:
        return _answer(
            forge,
            event,
            503,
            {
                "status": "error",
                "reason": f"{forge} webhooks are not configured: {MISSING_SECRET[forge]}",
            },
            verified=False,
        )
    body = _read_body(svc.settings.max_body_bytes)
    if body is None:
        return _answer(
            forge,
            event,
            413,
            {"status": "error", "reason": f"body over {svc.settings.max_body_bytes} bytes"},
            verified=False,
        )
    if not verify(body):
        return _answer(
            forge,
            event,
            401,
            {"status": "error", "reason": "bad or missing signature"},
            verified=False,
        )
    if delivery is None and forge == "gitlab" and body:
        # GitLab before 15.x sends no X-Gitlab-Event-UUID; the signed body stands in (a
        # redelivery sends the same body, and a replay of it is recognised either way).
        delivery = f"sha256:{hashlib.sha256(body).hexdigest()}"
    if not event or not delivery:
        return _answer(
            forge, event, 400, {"status": "error", "reason": "missing event or delivery id header"}
        )
    if len(delivery) > 128:
        return _answer(forge, event, 400, {"status": "error", "reason": "delivery id too long"})
    payload, malformed = _load_json(body)
    if malformed is not None:
        return _answer(forge, event, 400, {"status": "error", "reason": malformed})
    digest = hashlib.sha256(body).hexdigest()
    try:
        result = svc.intake.handle(forge, event, delivery, payload, body_sha256=digest)
    except PayloadError as exc:
        return _answer(forge, event, 400, {"status": "error", "reason": str(exc)})
    except SQLAlchemyError:
        log.exception("store unavailable for delivery %s", delivery)
        return _answer(forge, event, 503, {"status": "error", "reason": "store unavailable"})
    except Exception:
        # A bug, not bad input. Intake is one transaction, so nothing of this delivery was
        # kept and the forge's redelivery is processed afresh.
        log.exception("intake failed for delivery %s", delivery)
        return _answer(forge, event, 500, {"status": "error", "reason": "internal error"})
    return _accepted(svc, forge, event, delivery, result)


def _load_json(body: bytes) -> tuple[Any, str | None]:
    """The payload, or why it is not JSON."""
    try:
        return json.loads(body), None
    except RecursionError:
        return None, "malformed JSON: nested too deeply"
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, an integer of 4,300+ digits
        return None, f"malformed JSON: {str(exc)[:200]}"


def _accepted(
    svc: Services, forge: str, event: str, delivery: str, result: IntakeResult
) -> tuple[Response, int]:
    log.info(
        "delivery %s %s -> %s",
        delivery,
        result.key or event,
        result.status,
        extra={"delivery_id": delivery, "job_id": result.job_ids[0] if result.job_ids else None},
    )
    for attempt in result.outsiders:
        svc.metrics.outsider_attempts.labels(forge, attempt).inc()
    code = 200 if result.status == "duplicate" else 202
    return _answer(forge, event, code, result.to_json())


@bp.post("/github")
def github() -> tuple[Response, int]:
    settings = services().settings

    def verify(body: bytes) -> bool:
        secret = settings.github.webhook_secret
        assert secret is not None
        return verify_github_signature(
            secret.get_secret_value(), body, request.headers.get("X-Hub-Signature-256")
        )

    # A ping is answered like any event, after its signature is checked: it becomes a Ping
    # event that handlers ignore, so GitHub sees 202 {"status": "ignored", "reason": "pong"}.
    return _receive(
        "github",
        request.headers.get("X-GitHub-Event"),
        request.headers.get("X-GitHub-Delivery"),
        verify,
    )


@bp.post("/gitlab")
def gitlab() -> tuple[Response, int]:
    settings = services().settings

    def verify(_body: bytes) -> bool:
        secret = settings.gitlab.webhook_token
        assert secret is not None
        return verify_gitlab_token(secret.get_secret_value(), request.headers.get("X-Gitlab-Token"))

    # Older GitLab versions send no X-Gitlab-Event-UUID; X-Gitlab-Webhook-UUID is per hook,
    # not per delivery, so it cannot stand in: _receive uses the body's hash instead.
    delivery = request.headers.get("X-Gitlab-Event-UUID")
    return _receive("gitlab", request.headers.get("X-Gitlab-Event"), delivery, verify)
