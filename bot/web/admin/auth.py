"""Who may see /admin: the admins the settings name, and no one else.

Each admin has a token: RIBBIT_ADMIN_TOKENS names them (alice, bob), and the single
RIBBIT_ADMIN_TOKEN, kept for existing deployments, is the admin called ``admin``. A
request proves who it is with ``Authorization: Bearer <token>`` (scripts, curl) or with
the session cookie the login form sets (browsers). The cookie is a random session id
whose hash is a row in admin_sessions (bot/store/admin_sessions.py): logging out deletes
the row, so a copied cookie is refused from then on; the row expires after
``SESSION_MAX_AGE_S`` whatever the cookie says; and it holds a fingerprint of the token
its admin signed in with, so changing that token ends the admin's sessions. Every token
comparison is constant-time, and every admin's token is compared, whoever matches.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from flask import Request
from pydantic import SecretStr
from werkzeug.wrappers import Response

from bot.settings import SHARED_ADMIN
from bot.store.admin_sessions import AdminSessionStore
from bot.store.db import Database

if TYPE_CHECKING:
    from bot.settings import Settings

COOKIE_NAME = "ribbit_admin"
COOKIE_PATH = "/admin"
SESSION_MAX_AGE_S = 12 * 3600


@dataclass(frozen=True)
class Admin:
    name: str
    token: SecretStr

    def fingerprint(self) -> str:
        """What a session keeps of the token it was started with (never the token)."""
        return hashlib.sha256(
            b"ribbit-admin-session\0" + self.token.get_secret_value().encode()
        ).hexdigest()


@dataclass(frozen=True)
class Admins:
    """Everyone who may use the dashboard, by name."""

    members: tuple[Admin, ...]

    @classmethod
    def from_settings(cls, settings: Settings) -> Admins | None:
        """The configured admins; None when there are none (the dashboard is off)."""
        members = [Admin(name, token) for name, token in sorted(settings.admin_tokens.items())]
        if settings.admin_token is not None and settings.admin_token.get_secret_value():
            members.append(Admin(SHARED_ADMIN, settings.admin_token))
        return cls(tuple(members)) if members else None

    def matching(self, offered: str) -> Admin | None:
        """The admin whose token ``offered`` is. Every token is compared, so how long this
        takes says nothing of which admin, if any, was close."""
        found = None
        for admin in self.members:
            if token_matches(admin.token, offered):
                found = admin
        return found

    def named(self, name: str) -> Admin | None:
        return next((a for a in self.members if a.name == name), None)


@dataclass(frozen=True)
class Authenticated:
    """Who a request is from, and how it showed it."""

    admin: Admin
    how: Literal["bearer", "session"]


def token_matches(token: SecretStr, offered: str) -> bool:
    return hmac.compare_digest(
        token.get_secret_value().encode(), offered.encode("utf-8", "surrogateescape")
    )


def _bearer(request: Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def bearer_ok(token: SecretStr, request: Request) -> bool:
    offered = _bearer(request)
    return offered is not None and token_matches(token, offered)


def bearer_admin(admins: Admins, request: Request) -> Admin | None:
    offered = _bearer(request)
    return admins.matching(offered) if offered is not None else None


def session_admin(admins: Admins, db: Database, request: Request) -> Admin | None:
    """The admin whose live session the request's cookie names, if any."""
    raw = request.cookies.get(COOKIE_NAME)
    if not raw:
        return None
    found = AdminSessionStore(db).find(raw)
    if found is None:
        return None
    admin = admins.named(found.actor)
    if admin is None or not hmac.compare_digest(admin.fingerprint(), found.token_fingerprint):
        return None  # that admin is gone, or signed in with a token since changed
    return admin


def authenticate(admins: Admins, db: Database, request: Request) -> Authenticated | None:
    admin = bearer_admin(admins, request)
    if admin is not None:
        return Authenticated(admin, "bearer")
    admin = session_admin(admins, db, request)
    return Authenticated(admin, "session") if admin is not None else None


def start_session(admin: Admin, db: Database, response: Response, *, secure: bool) -> None:
    session_id = AdminSessionStore(db).start(
        admin.name, admin.fingerprint(), ttl=timedelta(seconds=SESSION_MAX_AGE_S)
    )
    response.set_cookie(
        COOKIE_NAME,
        session_id,
        max_age=SESSION_MAX_AGE_S,
        path=COOKIE_PATH,
        httponly=True,
        samesite="Strict",
        secure=secure,
    )


def end_session(db: Database, request: Request, response: Response, *, secure: bool) -> None:
    """Delete the request's session (so its cookie, wherever copied, is refused) and tell
    the browser to drop the cookie."""
    raw = request.cookies.get(COOKIE_NAME)
    if raw:
        AdminSessionStore(db).end(raw)
    response.delete_cookie(
        COOKIE_NAME, path=COOKIE_PATH, httponly=True, samesite="Strict", secure=secure
    )
