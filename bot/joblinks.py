"""Signed, expiring links to one job's reviewer page.

The worker posts the link where only people who can read the repository see it (the
issue's status comment, the PR body); the web app serves the page only to a request
that carries a valid signature for that job. The signature is an HMAC (itsdangerous)
over the job id and an expiry time, keyed with Settings.reviewer.link_secret, so a link
for one job never opens another, and a link cannot be extended by editing it.

No Flask here: the worker imports this to build links.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from itsdangerous import BadSignature, URLSafeSerializer

from bot.settings import ReviewerSettings

_SALT = "ribbit-job-link"
SIGNATURE_PARAM = "sig"

Refusal = Literal["missing", "invalid", "expired", "disabled"]


@dataclass(frozen=True)
class LinkCheck:
    ok: bool
    refusal: Refusal | None = None
    expires_at: int | None = None  # unix seconds, when ok


def _serializer(settings: ReviewerSettings) -> URLSafeSerializer | None:
    secret = settings.link_secret
    if secret is None or not secret.get_secret_value():
        return None
    return URLSafeSerializer(secret.get_secret_value(), salt=_SALT)


def links_enabled(settings: ReviewerSettings) -> bool:
    return _serializer(settings) is not None


def sign(settings: ReviewerSettings, job_id: str, *, now: float) -> str | None:
    """The signature for ``job_id``, valid for link_ttl_days from ``now``."""
    serializer = _serializer(settings)
    if serializer is None:
        return None
    expires = int(now) + settings.link_ttl_days * 86400
    return serializer.dumps({"job": job_id, "exp": expires})


def job_url(settings: ReviewerSettings, job_id: str, *, now: float) -> str | None:
    """The full link reviewers follow, or None when links are not configured."""
    signature = sign(settings, job_id, now=now)
    if signature is None or not settings.public_url:
        return None
    base = settings.public_url.rstrip("/")
    return f"{base}/review/jobs/{quote(job_id, safe='')}?{SIGNATURE_PARAM}={signature}"


def check(
    settings: ReviewerSettings, job_id: str, signature: str | None, *, now: float
) -> LinkCheck:
    serializer = _serializer(settings)
    if serializer is None:
        return LinkCheck(False, "disabled")
    if not signature:
        return LinkCheck(False, "missing")
    try:
        payload = serializer.loads(signature)
    except BadSignature:
        return LinkCheck(False, "invalid")
    if not isinstance(payload, dict) or payload.get("job") != job_id:
        return LinkCheck(False, "invalid")  # a valid link for another job
    expires = payload.get("exp")
    if not isinstance(expires, int) or isinstance(expires, bool):
        return LinkCheck(False, "invalid")
    if now >= expires:
        return LinkCheck(False, "expired")
    return LinkCheck(True, expires_at=expires)
