"""Who may see /admin: the holder of Settings.admin_token, and no one else.

A request proves it with ``Authorization: Bearer <token>`` (scripts, curl) or
with the session cookie the login form sets (browsers). The cookie holds no
secret: it is a timestamp signed with a key derived from the token, so
changing the token logs every browser out, and it expires after
``SESSION_MAX_AGE_S``. Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac

from flask import Request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from pydantic import SecretStr
from werkzeug.wrappers import Response

COOKIE_NAME = "ribbit_admin"
COOKIE_PATH = "/admin"
SESSION_MAX_AGE_S = 12 * 3600
_SALT = "ribbit-admin-session"


def _serializer(token: SecretStr) -> URLSafeTimedSerializer:
    # A derived key, not the token itself, so the cookie's MAC never doubles as the token.
    key = hashlib.sha256(b"ribbit-admin-cookie\0" + token.get_secret_value().encode()).digest()
    return URLSafeTimedSerializer(key, salt=_SALT)


def token_matches(token: SecretStr, offered: str) -> bool:
    return hmac.compare_digest(token.get_secret_value().encode(), offered.encode())


def bearer_ok(token: SecretStr, request: Request) -> bool:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and bool(value) and token_matches(token, value.strip())


def cookie_ok(token: SecretStr, request: Request) -> bool:
    raw = request.cookies.get(COOKIE_NAME)
    if not raw:
        return False
    try:
        payload = _serializer(token).loads(raw, max_age=SESSION_MAX_AGE_S)
    except BadSignature:  # SignatureExpired is a BadSignature
        return False
    return payload == "admin"


def is_authenticated(token: SecretStr, request: Request) -> bool:
    return bearer_ok(token, request) or cookie_ok(token, request)


def set_session_cookie(token: SecretStr, response: Response, *, secure: bool) -> None:
    response.set_cookie(
        COOKIE_NAME,
        _serializer(token).dumps("admin"),
        max_age=SESSION_MAX_AGE_S,
        path=COOKIE_PATH,
        httponly=True,
        samesite="Strict",
        secure=secure,
    )


def clear_session_cookie(response: Response, *, secure: bool) -> None:
    response.delete_cookie(
        COOKIE_NAME, path=COOKIE_PATH, httponly=True, samesite="Strict", secure=secure
    )
