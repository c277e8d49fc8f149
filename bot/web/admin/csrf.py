"""Cross-site request protection for the dashboard's state-changing POSTs.

A browser session proves a POST is the dashboard's own by two checks, both required:
the form carries a token that is an HMAC of the session cookie (so a token leaked from
one session is useless with another, and logging out or changing the admin token voids
it), and the browser says the request came from this very site (Sec-Fetch-Site, or for
clients without it the Origin or Referer naming this host). Requests carrying
the bearer token are scripts: a browser never attaches that header cross-site, so they
need neither check.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from flask import Request
from pydantic import SecretStr

from bot.web.admin import auth

FIELD = "csrf_token"


def _key(token: SecretStr) -> bytes:
    return hashlib.sha256(b"ribbit-admin-csrf\0" + token.get_secret_value().encode()).digest()


def token_for(token: SecretStr, request: Request) -> str:
    """The CSRF token for this browser session ('' without a session cookie)."""
    cookie = request.cookies.get(auth.COOKIE_NAME, "")
    if not cookie:
        return ""
    return hmac.new(_key(token), cookie.encode(), hashlib.sha256).hexdigest()


def _same_origin(request: Request) -> bool:
    # Browsers set Sec-Fetch-Site themselves (pages cannot), and it survives the dashboard's
    # Referrer-Policy: no-referrer, under which Chromium sends "Origin: null" on form POSTs.
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        return fetch_site == "same-origin"
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if not source or source == "null":
        return False
    parts = urlsplit(source)
    return parts.scheme in ("http", "https") and parts.netloc == request.host


def refusal(token: SecretStr, request: Request) -> str | None:
    """Why this POST must be refused as possibly cross-site, or None if it may proceed."""
    if auth.bearer_ok(token, request):
        return None
    if not _same_origin(request):
        return "the request does not come from this dashboard (Sec-Fetch-Site, Origin)"
    expected = token_for(token, request)
    offered = request.form.get(FIELD, "")
    if not expected or not hmac.compare_digest(expected.encode(), offered.encode()):
        return "missing or wrong CSRF token"
    return None
