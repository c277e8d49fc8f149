"""Named admins and server-side dashboard sessions (issue #32, item 6): the audit log names
who acted, logging out ends the session for every copy of its cookie, a session expires
on the server whatever the cookie says, and a changed or removed token ends its sessions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr
from sqlalchemy import inspect

from bot.settings import SHARED_ADMIN
from bot.store.admin_sessions import AdminSessionRow, AdminSessionStore
from bot.store.audit import recent
from bot.store.db import Database
from bot.store.tables import utcnow
from bot.web import create_app
from bot.web.admin import auth
from tests.fakes import RecordingDispatcher
from tests.support import GITHUB_SECRET, GITLAB_TOKEN, LINK_SECRET, OTHER_SECRET
from worker.settings import load_worker_settings

ALICE, BOB, SHARED = GITLAB_TOKEN, LINK_SECRET, OTHER_SECRET
HTML = {"Accept": "text/html"}
ORIGIN = {"Origin": "http://localhost"}


def make_app(data_dir: Path, **admins: Any) -> Flask:
    settings = load_worker_settings(
        data_dir=data_dir, github={"webhook_secret": GITHUB_SECRET}, **admins
    )
    return create_app(settings, dispatcher=RecordingDispatcher())


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    flask_app = make_app(
        tmp_path / "data", admin_token=SHARED, admin_tokens={"alice": ALICE, "bob": BOB}
    )
    yield flask_app
    flask_app.extensions["ribbit"].db.dispose()


@pytest.fixture
def db(app: Flask) -> Database:
    database: Database = app.extensions["ribbit"].db
    return database


def login(client: FlaskClient, token: str) -> str:
    resp = client.post("/admin/login", data={"token": token, "next": "/admin/"})
    assert resp.status_code == 302, resp.status_code
    cookie = client.get_cookie(auth.COOKIE_NAME, path="/admin")
    assert cookie is not None
    return cookie.value


def signed_in(client: FlaskClient) -> bool:
    status = client.get("/admin/", headers=HTML).status_code
    assert status in (200, 302)
    return status == 200


def with_cookie(app: Flask, value: str) -> FlaskClient:
    """Another browser holding a copy of that cookie (as a thief would)."""
    other = app.test_client()
    other.set_cookie(auth.COOKIE_NAME, value, path="/admin")
    return other


def csrf_of(client: FlaskClient) -> str:
    page = client.get("/admin/health", headers=HTML).get_data(as_text=True)
    match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page)
    assert match
    return match.group(1)


# -- sessions ---------------------------------------------------------------------------------


def test_a_copied_cookie_is_refused_once_its_session_logged_out(app: Flask, db: Database) -> None:
    browser = app.test_client()
    cookie = login(browser, ALICE)
    thief = with_cookie(app, cookie)
    assert signed_in(thief)  # the copy works while the session lives...
    assert browser.post("/admin/logout").status_code == 302
    assert not signed_in(thief)  # ...and not after it ended
    assert not signed_in(browser)
    assert AdminSessionStore(db).find(cookie) is None
    # Its CSRF token died with it: a POST with both is refused before any action.
    assert thief.post(
        "/admin/pause", data={"csrf_token": "0" * 64}, headers=ORIGIN
    ).status_code in (
        302,
        401,
    )
    assert recent(db) == []


def test_a_cookie_planted_before_login_is_never_the_session(app: Flask) -> None:
    """Session fixation: login makes a new id whatever cookie the browser came with."""
    browser = app.test_client()
    browser.set_cookie(auth.COOKIE_NAME, "attacker-chosen-session-id", path="/admin")
    cookie = login(browser, ALICE)
    assert cookie != "attacker-chosen-session-id"
    assert not signed_in(with_cookie(app, "attacker-chosen-session-id"))


def test_logging_out_ends_only_that_session(app: Flask) -> None:
    one, two = app.test_client(), app.test_client()
    login(one, ALICE)
    login(two, ALICE)
    one.post("/admin/logout")
    assert not signed_in(one) and signed_in(two)


def test_a_session_expires_on_the_server_whatever_the_cookie_says(app: Flask, db: Database) -> None:
    admin = auth.Admin("alice", SecretStr(ALICE))
    ttl = timedelta(seconds=auth.SESSION_MAX_AGE_S)
    store = AdminSessionStore(db)
    fresh = store.start("alice", admin.fingerprint(), ttl=ttl)
    # Started (and so sweeping) in the past: the row stays, its expiry one second ago.
    old = store.start(
        "alice", admin.fingerprint(), ttl=ttl, now=utcnow() - ttl - timedelta(seconds=1)
    )
    with db.session() as session:
        assert session.get(AdminSessionRow, auth_hash(old)) is not None
    assert not signed_in(with_cookie(app, old))
    assert signed_in(with_cookie(app, fresh))


def test_a_session_started_swept_the_expired_ones(db: Database) -> None:
    store = AdminSessionStore(db)
    now = utcnow()
    expired = store.start("alice", "f" * 64, ttl=timedelta(hours=1), now=now - timedelta(hours=2))
    store.start("alice", "f" * 64, ttl=timedelta(hours=1), now=now)
    with db.session() as session:
        assert session.get(AdminSessionRow, auth_hash(expired)) is None


def auth_hash(session_id: str) -> str:
    import hashlib

    return hashlib.sha256(session_id.encode()).hexdigest()


def test_the_database_keeps_no_usable_cookie(app: Flask, db: Database) -> None:
    cookie = login(app.test_client(), ALICE)
    with db.session() as session:
        row = session.get(AdminSessionRow, auth_hash(cookie))
        assert row is not None and row.actor == "alice"
        assert cookie not in (row.id_hash, row.token_fingerprint)
        assert ALICE not in row.token_fingerprint
    assert not signed_in(with_cookie(app, auth_hash(cookie)))


@pytest.mark.parametrize("cookie", ["", "admin", "alice", "x" * 43, "\u00e9" * 10])
def test_a_made_up_cookie_is_refused(app: Flask, cookie: str) -> None:
    assert not signed_in(with_cookie(app, cookie))


def test_a_changed_or_removed_token_ends_its_sessions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = make_app(data, admin_token=SHARED, admin_tokens={"alice": ALICE, "bob": BOB})
    alice = login(first.test_client(), ALICE)
    bob = login(first.test_client(), BOB)
    shared = login(first.test_client(), SHARED)
    first.extensions["ribbit"].db.dispose()
    # The same database; alice's token rotated, bob removed, the shared token kept.
    second = make_app(data, admin_token=SHARED, admin_tokens={"alice": GITHUB_SECRET[::-1]})
    try:
        assert not signed_in(with_cookie(second, alice))
        assert not signed_in(with_cookie(second, bob))
        assert signed_in(with_cookie(second, shared))
    finally:
        second.extensions["ribbit"].db.dispose()


def test_end_all_signs_an_admin_out_everywhere(app: Flask, db: Database) -> None:
    cookies = [login(app.test_client(), ALICE) for _ in range(2)]
    bobs = login(app.test_client(), BOB)
    assert AdminSessionStore(db).end_all("alice") == 2
    assert not any(signed_in(with_cookie(app, c)) for c in cookies)
    assert signed_in(with_cookie(app, bobs))


def test_the_migrated_table_is_the_mapped_one(db: Database) -> None:
    columns = {c["name"]: c for c in inspect(db.engine).get_columns("admin_sessions")}
    assert set(columns) == set(AdminSessionRow.__table__.columns.keys())
    assert not any(c["nullable"] for c in columns.values())
    indexes = {i["name"] for i in inspect(db.engine).get_indexes("admin_sessions")}
    assert indexes == {"ix_admin_sessions_expires_at"}


# -- named admins -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "actor"), [(ALICE, "alice"), (BOB, "bob"), (SHARED, SHARED_ADMIN)]
)
def test_the_audit_log_names_the_admin_who_acted_from_a_session(
    app: Flask, db: Database, token: str, actor: str
) -> None:
    browser = app.test_client()
    login(browser, token)
    resp = browser.post("/admin/pause", data={"csrf_token": csrf_of(browser)}, headers=ORIGIN)
    assert resp.status_code == 302
    [row] = recent(db)
    assert (row.action, row.outcome) == ("pause", "ok")
    assert row.actor.startswith(f"{actor} (session) from ")


def test_the_audit_log_names_the_admin_who_acted_with_a_bearer_token(
    app: Flask, db: Database
) -> None:
    client = app.test_client()
    resp = client.post("/admin/resume", headers={"Authorization": f"Bearer {BOB}"})
    assert resp.status_code == 200
    [row] = recent(db)
    assert row.actor.startswith("bob (bearer) from ")


def test_a_refused_post_is_audited_with_its_admin(app: Flask, db: Database) -> None:
    browser = app.test_client()
    login(browser, ALICE)
    resp = browser.post("/admin/pause", data={"csrf_token": "0" * 64}, headers=ORIGIN)
    assert resp.status_code == 403
    [row] = recent(db)
    assert row.outcome == "refused" and row.actor.startswith("alice (session)")


def test_one_admins_csrf_token_is_no_good_in_anothers_session(app: Flask, db: Database) -> None:
    alice, bob = app.test_client(), app.test_client()
    login(alice, ALICE)
    login(bob, BOB)
    resp = bob.post("/admin/pause", data={"csrf_token": csrf_of(alice)}, headers=ORIGIN)
    assert resp.status_code == 403


def test_no_admin_token_no_dashboard_and_a_wrong_one_signs_no_one_in(
    tmp_path: Path, app: Flask
) -> None:
    bare = make_app(tmp_path / "bare")
    try:
        assert bare.test_client().get("/admin/login").status_code == 404
    finally:
        bare.extensions["ribbit"].db.dispose()
    named_only = make_app(tmp_path / "named", admin_tokens={"alice": ALICE})
    try:
        client = named_only.test_client()
        assert client.post("/admin/login", data={"token": SHARED}).status_code == 401
        login(client, ALICE)
        assert signed_in(client)
    finally:
        named_only.extensions["ribbit"].db.dispose()


def test_every_admins_token_is_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which admin matched must not show in how many comparisons ran."""
    calls: list[str] = []
    admins = auth.Admins(tuple(auth.Admin(n, SecretStr(t)) for n, t in [("a", ALICE), ("b", BOB)]))
    real = auth.token_matches

    def counting(token: SecretStr, offered: str) -> bool:
        calls.append(token.get_secret_value())
        return real(token, offered)

    monkeypatch.setattr(auth, "token_matches", counting)
    assert admins.matching(ALICE) == admins.members[0]
    assert admins.matching("nobody") is None
    assert calls == [ALICE, BOB, ALICE, BOB]


@pytest.mark.parametrize(
    ("admins", "status", "detail"),
    [
        ({}, "ok", "dashboard off"),
        ({"admin_token": SHARED}, "warn", "the audit log cannot say who acted"),
        ({"admin_tokens": {"bob": BOB, "alice": ALICE}}, "ok", "named admins: alice, bob"),
        (
            {"admin_token": SHARED, "admin_tokens": {"alice": ALICE}},
            "ok",
            "alice and the shared token",
        ),
    ],
)
def test_doctor_says_whether_the_audit_log_can_name_admins(
    tmp_path: Path, admins: dict[str, Any], status: str, detail: str
) -> None:
    from bot.doctor import run_checks

    settings = load_worker_settings(data_dir=tmp_path, **admins)
    [check] = [c for c in run_checks(settings) if c.name == "admins"]
    assert check.status == status and detail in check.detail
