"""The dashboard's CSRF check on its own, on hand-built requests: the token is bound to
the session cookie and the admin token, and the browser must place the POST on this very
site. test_admin_actions.py covers the routes (403, audit, nothing changed) and the
common cross-site headers; these are the cases around them."""

from __future__ import annotations

import pytest
from flask import Request
from pydantic import SecretStr
from werkzeug.test import EnvironBuilder

from bot.web.admin import auth
from bot.web.admin.csrf import FIELD, refusal, token_for

ADMIN = SecretStr("admin-token-for-tests-0123456789")
COOKIE = "signed-session-cookie"
SAME_SITE = {"Sec-Fetch-Site": "same-origin"}


def req(
    headers: dict[str, str] | None = None,
    *,
    cookie: str | None = COOKIE,
    form: dict[str, str] | None = None,
) -> Request:
    """A POST to the dashboard as the browser (or an attacker's page) would send it."""
    all_headers = dict(headers or {})
    if cookie is not None:
        all_headers["Cookie"] = f"{auth.COOKIE_NAME}={cookie}"
    builder = EnvironBuilder(
        path="/admin/pause",
        method="POST",
        base_url="http://localhost",
        headers=list(all_headers.items()),
        data=form or {},
    )
    return Request(builder.get_environ())


def valid_token(cookie: str = COOKIE, admin: SecretStr = ADMIN) -> str:
    return token_for(admin, req(cookie=cookie))


def test_token_is_empty_without_a_session_cookie() -> None:
    assert token_for(ADMIN, req(cookie=None)) == ""


def test_token_is_stable_for_a_session_and_differs_across_sessions_and_admin_tokens() -> None:
    token = valid_token()
    assert len(token) == 64 and token == valid_token()
    assert token != valid_token(cookie="another-session")
    assert token != valid_token(admin=SecretStr("rotated-admin-token"))


def test_same_origin_post_with_the_sessions_token_may_proceed() -> None:
    assert refusal(ADMIN, req(SAME_SITE, form={FIELD: valid_token()})) is None


@pytest.mark.parametrize(
    "source",
    [
        {"Origin": "http://localhost"},
        {"Origin": "https://localhost"},  # behind a TLS-terminating proxy
        {"Referer": "http://localhost/admin/health?x=1"},
    ],
)
def test_origin_or_referer_naming_this_host_stands_in_for_sec_fetch_site(
    source: dict[str, str],
) -> None:
    assert refusal(ADMIN, req(source, form={FIELD: valid_token()})) is None


@pytest.mark.parametrize(
    "source",
    [
        # Sec-Fetch-Site is the browser's word and wins over an Origin that looks right.
        {"Sec-Fetch-Site": "none", "Origin": "http://localhost"},
        {"Sec-Fetch-Site": "", "Origin": "http://localhost"},
        # Origin is read before Referer: a cross-site Origin is not rescued by a Referer.
        {"Origin": "https://evil.example", "Referer": "http://localhost/admin/"},
        {"Origin": "null", "Referer": "http://localhost/admin/"},
        # Look-alike hosts: userinfo, another port, a suffix, another scheme.
        {"Origin": "http://localhost@evil.example"},
        {"Origin": "http://evil.example@localhost"},
        {"Origin": "http://localhost:8080"},
        {"Origin": "http://localhost.evil.example"},
        {"Referer": "javascript://localhost/%0aalert(1)"},
        {"Referer": "file://localhost/etc/passwd"},
        {"Referer": "//localhost/admin/"},
        {"Referer": "localhost"},
    ],
)
def test_a_post_not_placed_on_this_site_is_refused_even_with_the_right_token(
    source: dict[str, str],
) -> None:
    reason = refusal(ADMIN, req(source, form={FIELD: valid_token()}))
    assert reason is not None and "does not come from this dashboard" in reason


@pytest.mark.parametrize(
    ("cookie", "offered"),
    [
        (COOKIE, None),  # no token field
        (COOKIE, ""),
        (COOKIE, "0" * 64),
        (COOKIE, "upper"),
        # No session cookie: the expected token is '' and an empty offer must not equal it.
        (None, ""),
        (None, None),
    ],
)
def test_a_missing_or_wrong_token_is_refused(cookie: str | None, offered: str | None) -> None:
    right = valid_token()
    if offered == "upper":
        offered = right.upper()
    form = {} if offered is None else {FIELD: offered}
    assert refusal(ADMIN, req(SAME_SITE, cookie=cookie, form=form)) == (
        "missing or wrong CSRF token"
    )


def test_a_token_minted_under_the_previous_admin_token_is_refused() -> None:
    stale = valid_token(admin=SecretStr("the-old-admin-token"))
    assert refusal(ADMIN, req(SAME_SITE, form={FIELD: stale})) is not None


def test_a_non_ascii_token_is_refused_without_an_error() -> None:
    form = {FIELD: "\u00e9" * 64}
    assert refusal(ADMIN, req(SAME_SITE, form=form)) == "missing or wrong CSRF token"


def test_a_bearer_script_needs_neither_origin_nor_token() -> None:
    headers = {"Authorization": f"Bearer {ADMIN.get_secret_value()}"}
    assert refusal(ADMIN, req(headers, cookie=None)) is None


def test_a_wrong_bearer_token_gets_the_browser_checks() -> None:
    headers = {"Authorization": "Bearer not-the-admin-token", "Origin": "https://evil.example"}
    assert refusal(ADMIN, req(headers, cookie=None)) is not None
