"""The reviewer's job page through Flask's test client: signed, expiring, per-job links
(bot.joblinks), the admin page's rendering, and the live turns of a running job."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from bot import joblinks, live
from bot.settings import ReviewerSettings, load_settings
from bot.store.records.trajectory import ToolCall, TurnRecord
from bot.store.tables import Job
from bot.web import create_app
from bot.web.admin import CSP
from tests.fakes import RecordingDispatcher
from tests.plugins.admin import HOSTILE, seed_job_with_trajectory
from tests.support import GITHUB_SECRET, LINK_SECRET, OTHER_SECRET

SECRET = LINK_SECRET
DONE = "f" * 32
RUNNING = "e" * 32
LINKS = ReviewerSettings(link_secret=SECRET, public_url="http://ribbit.test")  # type: ignore[arg-type]


@pytest.fixture
def review_app(tmp_path: Path, dispatcher: RecordingDispatcher) -> Iterator[Flask]:
    settings = load_settings(
        data_dir=tmp_path / "data",
        github={"webhook_secret": GITHUB_SECRET},
        reviewer={"link_secret": SECRET, "public_url": "http://ribbit.test"},
    )
    app = create_app(settings, dispatcher=dispatcher)
    db = app.extensions["ribbit"].db
    seed_job_with_trajectory(db, settings.data_dir, DONE)
    now = datetime.now(UTC)
    with db.session() as session:
        session.add(
            Job(
                id=RUNNING,
                kind="solve",
                state="running",
                stage="agent",
                forge="github",
                repo="acme/calc",
                issue_number=9,
                created_at=now,
                updated_at=now,
            )
        )
    yield app
    db.dispose()


def _url(job_id: str, sig: str | None = None, suffix: str = "") -> str:
    sig = joblinks.sign(LINKS, job_id, now=time.time()) if sig is None else sig
    return f"/review/jobs/{job_id}{suffix}?sig={sig}"


def test_signature_binds_job_and_expiry() -> None:
    sig = joblinks.sign(LINKS, DONE, now=1000.0)
    assert sig is not None
    assert joblinks.check(LINKS, DONE, sig, now=1000.0).ok
    expires = 1000 + 30 * 86400
    assert joblinks.check(LINKS, DONE, sig, now=expires - 1).ok
    assert joblinks.check(LINKS, DONE, sig, now=expires).refusal == "expired"
    assert joblinks.check(LINKS, RUNNING, sig, now=1000.0).refusal == "invalid"  # other job
    assert joblinks.check(LINKS, DONE, None, now=1000.0).refusal == "missing"
    # Edit the payload (a later expiry, say) and keep the MAC: refused.
    mac = sig.rsplit(".", 1)[1]
    forged = joblinks.URLSafeSerializer("another-key", salt="ribbit-job-link").dumps(
        {"job": DONE, "exp": 2**40}
    )
    assert joblinks.check(LINKS, DONE, forged, now=1000.0).refusal == "invalid"
    assert joblinks.check(LINKS, DONE, forged.rsplit(".", 1)[0] + "." + mac, now=1000).refusal == (
        "invalid"
    )
    assert joblinks.check(LINKS, DONE, sig[:-1], now=1000.0).refusal == "invalid"
    other_key = ReviewerSettings(link_secret=OTHER_SECRET)  # type: ignore[arg-type]
    assert joblinks.check(other_key, DONE, sig, now=1000.0).refusal == "invalid"
    assert joblinks.check(ReviewerSettings(), DONE, sig, now=1000.0).refusal == "disabled"


def test_review_pages_are_404_without_a_link_secret(client: Any) -> None:
    for path in (f"/review/jobs/{DONE}", f"/review/jobs/{DONE}?sig=x", "/review/static/live.js"):
        assert client.get(path).status_code == 404, path


@pytest.mark.parametrize(
    ("sig", "reason"),
    [("", "missing"), ("garbage", "invalid"), ("other-job", "invalid")],
)
def test_review_page_refuses_without_a_valid_signature(
    review_app: Any, sig: str, reason: str
) -> None:
    client = review_app.test_client()
    if sig == "other-job":
        sig = joblinks.sign(LINKS, RUNNING, now=time.time()) or ""
    for suffix in ("", "/progress", "/detail"):
        resp = client.get(_url(DONE, sig, suffix))
        assert resp.status_code == 403, suffix
        assert f'data-reason="{reason}"' in resp.text
        assert "acme/calc" not in resp.text and "return a + b" not in resp.text
    assert client.get(f"/review/jobs/{DONE}").status_code == 403


def test_review_page_refuses_an_expired_link(review_app: Any) -> None:
    old = joblinks.sign(LINKS, DONE, now=time.time() - 31 * 86400)
    resp = review_app.test_client().get(_url(DONE, old))
    assert resp.status_code == 403 and "expired" in resp.text


def test_review_page_shows_gates_diff_and_turns_like_the_admin_page(review_app: Any) -> None:
    resp = review_app.test_client().get(_url(DONE))
    assert resp.status_code == 200
    page = resp.text
    assert '<dd id="turn-count">2</dd>' in page
    assert "finished (succeeded)" in page
    assert "+return a + b" in page and "no-eval" in page and "1 passed" in page
    assert "The issue says add() is wrong." in page  # reasoning, folded
    assert HOSTILE not in page and "&lt;script&gt;" in page
    assert "retry" not in page.lower() and "/admin/" not in page  # no admin actions or links
    assert resp.headers["Referrer-Policy"] == "no-referrer"
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
    assert resp.headers["Cache-Control"] == "no-store"
    assert review_app.test_client().get("/review/static/live.js").status_code == 200


def test_review_pages_carry_the_dashboards_headers(review_app: Flask) -> None:
    client = review_app.test_client()
    page = client.get(_url(DONE))
    static = client.get("/review/static/live.js")
    for resp in (page, static):
        assert resp.headers["Content-Security-Policy"] == CSP
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        assert resp.headers["X-Frame-Options"] == "DENY"
        assert resp.headers["Referrer-Policy"] == "no-referrer"
    assert page.headers["Cache-Control"] == "no-store"
    assert static.headers.get("Cache-Control") != "no-store"


def test_running_job_shows_live_turns_and_progress(review_app: Any) -> None:
    data_dir = review_app.extensions["ribbit"].settings.data_dir
    client = review_app.test_client()
    first = client.get(_url(RUNNING, suffix="/progress")).get_json()
    assert first["turns"] == 0 and first["done"] is False
    path = live.live_path(data_dir, RUNNING)
    turn = TurnRecord(0, "", None, [ToolCall("c1", "Read", {"path": "a.py"})], [], "stop")
    live.append_turn(path, turn.to_dict())  # as worker.status.LiveTurns records it
    second = client.get(_url(RUNNING, suffix="/progress")).get_json()
    assert second["turns"] == 1 and second["version"] != first["version"]
    assert second["step"] == "the agent is working (last ran Read)"
    fragment = client.get(_url(RUNNING, suffix="/detail")).text
    assert 'id="turn-0"' in fragment and "<html" not in fragment
    page = client.get(_url(RUNNING)).text
    assert 'data-done="false"' in page and "live.js" in page


def test_unknown_job_with_a_valid_signature_is_404(review_app: Any) -> None:
    assert review_app.test_client().get(_url("a" * 32)).status_code == 404


@pytest.mark.parametrize(
    "reviewer",
    [
        {"link_secret": "short"},
        {"public_url": "javascript:alert(1)"},
        {"public_url": "https://x.example/) [click](https://evil.example"},
    ],
)
def test_reviewer_settings_refuse_a_weak_secret_or_an_odd_url(
    tmp_path: Path, reviewer: dict[str, str]
) -> None:
    from bot.settings import SettingsError

    with pytest.raises(SettingsError):
        load_settings(data_dir=tmp_path, reviewer=reviewer)
