"""The admin dashboard through Flask's test client on a real SQLite database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import event, text

from bot.settings import load_settings
from bot.store.db import Database
from bot.web import create_app
from bot.web.admin import auth
from tests.fakes import RecordingDispatcher
from tests.plugins.admin import (
    ADMIN_TOKEN,
    HOSTILE,
    seed_job_with_trajectory,
    seed_jobs,
    seed_outcomes,
)
from tests.support import GITHUB_SECRET

BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def admin_app(tmp_path: Path, dispatcher: RecordingDispatcher) -> Iterator[Flask]:
    settings = load_settings(
        data_dir=tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        github={"webhook_secret": GITHUB_SECRET},
    )
    app = create_app(settings, dispatcher=dispatcher)
    yield app
    app.extensions["ribbit"].db.dispose()


@pytest.fixture
def admin(admin_app: Flask) -> FlaskClient:
    return admin_app.test_client()


@pytest.fixture
def db(admin_app: Flask) -> Database:
    return admin_app.extensions["ribbit"].db


def test_admin_disabled_without_token_is_404(client: Any) -> None:
    for path in ("/admin/", "/admin/login", "/admin/outcomes", "/admin/static/outcomes.js"):
        assert client.get(path).status_code == 404, path
    assert client.get("/admin/", headers={"Authorization": "Bearer x"}).status_code == 404


def test_admin_anonymous_is_refused(admin: Any) -> None:
    assert admin.get("/admin/", headers={"Accept": "application/json"}).status_code == 401
    wrong = admin.get("/admin/", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.headers["WWW-Authenticate"].startswith("Bearer")
    browser = admin.get("/admin/outcomes", headers={"Accept": "text/html"})
    assert browser.status_code == 302
    assert "/admin/login" in browser.headers["Location"]


def test_admin_bearer_token_grants_access(admin: Any) -> None:
    resp = admin.get("/admin/", headers=BEARER)
    assert resp.status_code == 200
    assert b"No jobs match" in resp.data


def test_admin_login_sets_strict_httponly_signed_cookie(admin: Any) -> None:
    bad = admin.post("/admin/login", data={"token": "wrong", "next": "/admin/"})
    assert bad.status_code == 401
    assert auth.COOKIE_NAME not in bad.headers.get("Set-Cookie", "")
    resp = admin.post("/admin/login", data={"token": ADMIN_TOKEN, "next": "/admin/outcomes"})
    assert resp.status_code == 302
    assert resp.headers["Location"].endswith("/admin/outcomes")
    cookie = resp.headers["Set-Cookie"]
    assert cookie.startswith(f"{auth.COOKIE_NAME}=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/admin" in cookie
    assert ADMIN_TOKEN not in cookie
    assert admin.get("/admin/", headers={"Accept": "text/html"}).status_code == 200
    admin.post("/admin/logout")
    assert admin.get("/admin/", headers={"Accept": "text/html"}).status_code == 302


def test_admin_forged_cookie_is_refused(admin: Any) -> None:
    admin.set_cookie(auth.COOKIE_NAME, "admin", path="/admin")
    assert admin.get("/admin/", headers={"Accept": "text/html"}).status_code == 302


def test_admin_login_never_redirects_off_site(admin: Any) -> None:
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        resp = admin.post("/admin/login", data={"token": ADMIN_TOKEN, "next": target})
        assert resp.headers["Location"].endswith("/admin/"), target


def test_admin_pages_send_csp(admin: Any) -> None:
    resp = admin.get("/admin/", headers=BEARER)
    csp = resp.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    assert resp.headers["Cache-Control"] == "no-store"
    assert admin.get("/admin/login").headers["Content-Security-Policy"] == csp


PAGE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def test_admin_pages_and_static_files_carry_the_page_headers(admin: FlaskClient) -> None:
    page = admin.get("/admin/", headers=BEARER)
    static = admin.get("/admin/static/admin.css", headers=BEARER)
    assert static.status_code == 200
    for resp in (page, static):
        assert {k: resp.headers.get(k) for k in PAGE_HEADERS} == PAGE_HEADERS
        assert resp.headers["Content-Security-Policy"] == page.headers["Content-Security-Policy"]
    assert static.headers.get("Cache-Control") != "no-store"  # only pages go uncached


def test_admin_jobs_list_filters_and_pages(admin: Any, db: Any) -> None:
    seed_jobs(db, 300)
    page = admin.get("/admin/?state=failed", headers=BEARER).get_data(as_text=True)
    assert 'id="job-total">60<' in page
    assert page.count('class="state-failed"') == 50
    assert "state-succeeded" not in page
    second = admin.get("/admin/?state=failed&page=2", headers=BEARER).get_data(as_text=True)
    assert second.count('class="state-failed"') == 10
    assert "page 2 of 2" in second
    repo = admin.get("/admin/?repo=acme/repo3&kind=solve", headers=BEARER).get_data(as_text=True)
    assert "acme/repo3" in repo and "acme/repo1<" not in repo
    # Values outside the known sets are ignored, not passed to SQL.
    odd = admin.get("/admin/?state=x'--&page=abc", headers=BEARER)
    assert odd.status_code == 200 and 'id="job-total">300<' in odd.get_data(as_text=True)


def test_admin_jobs_list_filters_command_jobs(admin: Any, db: Any) -> None:
    # The kind filter offered "reconcile" (no such job kind) and not "command", so a
    # ?kind=command request was dropped as unknown and listed every job.
    seed_jobs(db, 4)
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE jobs SET kind = 'command' WHERE issue_number = 2"))
    page = admin.get("/admin/?kind=command", headers=BEARER).get_data(as_text=True)
    assert 'id="job-total">1<' in page
    assert '<option value="command" selected>' in page
    assert '<option value="reconcile"' not in page


def test_admin_jobs_list_on_10k_jobs_uses_two_queries_and_the_index(admin: Any, db: Any) -> None:
    seed_jobs(db, 10_000)
    statements: list[tuple[str, Any]] = []

    def record(_conn: Any, _cur: Any, statement: str, params: Any, *_args: Any) -> None:
        if not statement.lstrip().upper().startswith(("PRAGMA", "SAVEPOINT", "RELEASE", "BEGIN")):
            statements.append((statement, params))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        resp = admin.get("/admin/?state=running&page=37", headers=BEARER)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert resp.status_code == 200
    body = resp.get_data(as_text=True)
    assert 'id="job-total">2000<' in body and "page 37 of 40" in body
    assert len(statements) == 2, statements
    listing, params = statements[0]
    assert "result" not in listing.split("FROM")[0]  # the big JSON column is not read
    assert tuple(params) == ("running", 50, 1800)
    with db.engine.connect() as conn:
        plan = " ".join(
            str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + listing, tuple(params))
        )
    assert "ix_jobs_state_created" in plan, plan
    # The index gives created_at order; only ties on created_at (id breaks them) may be
    # sorted ("RIGHT PART"). A full "TEMP B-TREE FOR ORDER BY" would sort every match.
    assert "TEMP B-TREE FOR ORDER BY" not in plan.upper(), plan


def test_admin_job_page_shows_trajectory_diff_and_gates_escaped(
    admin: Any, db: Any, admin_app: Any
) -> None:
    job_id = seed_job_with_trajectory(db, admin_app.extensions["ribbit"].settings.data_dir)
    page = admin.get(f"/admin/jobs/{job_id}", headers=BEARER).get_data(as_text=True)
    assert "Let me look at the failing test." in page
    assert "pytest -q" in page and "Observation: bash (exit 1)" in page
    assert page.count('<details class="turn"') == 2
    assert "+return a + b" in page
    assert "semgrep" in page and "no-eval" in page
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(" in page
    assert "tests ok, semgrep 1 error" in page
    assert "exit_reason" in page  # result keys the page has no section for, shown as JSON


def test_admin_job_page_without_result(admin: Any, db: Any) -> None:
    seed_jobs(db, 1)
    page = admin.get(f"/admin/jobs/{0:032x}", headers=BEARER).get_data(as_text=True)
    assert "no trajectory was recorded" in page and "No diff." in page
    assert admin.get("/admin/jobs/nothere", headers=BEARER).status_code == 404
    assert admin.get("/admin/jobs/..%2f..%2fetc", headers=BEARER).status_code == 404


def test_admin_trajectory_outside_data_dir_is_not_read(admin: Any, db: Any, tmp_path: Any) -> None:
    from bot.store.tables import Job

    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"turns": [{"content": "SECRET-CONTENT"}]}\n')
    with db.session() as session:
        session.add(
            Job(
                id="e" * 32,
                kind="solve",
                state="failed",
                forge="github",
                repo="a/b",
                result={"trajectory_path": str(outside)},
            )
        )
    page = admin.get(f"/admin/jobs/{'e' * 32}", headers=BEARER).get_data(as_text=True)
    assert "SECRET-CONTENT" not in page and "outside the data directory" in page


def test_admin_outcomes_page_embeds_chart_data(admin: Any, db: Any) -> None:
    assert "No data yet" in admin.get("/admin/outcomes", headers=BEARER).get_data(as_text=True)
    seed_outcomes(db, weeks=3)
    page = admin.get("/admin/outcomes", headers=BEARER).get_data(as_text=True)
    assert 'id="rates-chart"' in page and "chart.umd.min.js" in page
    assert "<script>" not in page  # no inline code (CSP): data travels as JSON
    from bot.web.admin.queries import outcome_series

    series = outcome_series(db)
    assert series.weeks == ["2026-03-02", "2026-03-09", "2026-03-16"]
    assert series.merged == [3, 4, 4] and series.closed == [2, 2, 3]
    assert series.rates()["merged"][0] == 0.6
    js = admin.get("/admin/static/chart.umd.min.js", headers=BEARER)
    assert js.status_code == 200 and b"Chart.js v4" in js.data[:200]
    js.close()


@pytest.mark.parametrize("section", ["environments", "training-runs", "model-versions"])
def test_admin_trainer_pages_show_no_data_while_empty(admin: Any, section: str) -> None:
    page = admin.get(f"/admin/{section}", headers=BEARER)
    assert page.status_code == 200
    assert 'id="no-data"' in page.get_data(as_text=True)


def test_admin_trainer_page_lists_model_versions(admin: Any, db: Any) -> None:
    # The table comes from the trainer's migration; rows are inserted as the registry does.
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO model_versions (name, base_model, heldout_envs, state, created_at) "
                "VALUES ('frognano-ft-1', 'base', 3, 'promoted', '2026-04-01'), "
                "('<b>v2</b>', 'base', 3, 'candidate', '2026-04-02')"
            )
        )
    page = admin.get("/admin/model-versions", headers=BEARER).get_data(as_text=True)
    assert "frognano-ft-1" in page and "&lt;b&gt;v2&lt;/b&gt;" in page
    assert page.index("v2") < page.index("frognano-ft-1")  # newest first


def test_admin_cookie_is_secure_off_loopback(admin: Any) -> None:
    resp = admin.post(
        "/admin/login", data={"token": ADMIN_TOKEN}, base_url="http://ribbit.example.com"
    )
    assert "Secure" in resp.headers["Set-Cookie"]
    local = admin.post(
        "/admin/login", data={"token": ADMIN_TOKEN}, base_url="http://127.0.0.1:8080"
    )
    assert "Secure" not in local.headers["Set-Cookie"]


def test_admin_reads_the_gate_report_the_gates_write_and_skips_garbage(tmp_path: Path) -> None:
    from bot.web.admin.job_view import job_detail

    result = {"name": "tests", "passed": True, "findings": [], "logs": ""}
    detail = job_detail({"gates": {"passed": True, "gates": [result, 1, None]}}, tmp_path)
    assert [g.name for g in detail.gates] == ["tests"] and detail.gates_passed is True
    assert detail.gates_verdict == "judged before evidence"  # stored before the levels
    unverified = {"passed": False, "verdict": "unverified", "gates": [result]}
    detail = job_detail({"gates": unverified}, tmp_path)
    assert detail.gates_verdict == "unverified" and detail.gates_passed is False
    for garbage in ("nonsense", {"passed": "yes", "gates": [result]}, {"gates": [result]}):
        detail = job_detail({"gates": garbage}, tmp_path)
        assert detail.gates == [] and detail.gates_passed is None, garbage
    detail = job_detail({"diff": 5, "trajectory_path": "t.jsonl"}, tmp_path)
    assert detail.diff is None and detail.trajectory is None
    (tmp_path / "t.jsonl").write_text('{"turns": [{"content": 3, "tool_calls": "x"}]}\n')
    detail = job_detail({"trajectory_path": "t.jsonl"}, tmp_path)
    assert detail.trajectory is None and "cannot be shown" in (detail.trajectory_note or "")
    assert job_detail(None, Path("/x")).trajectory is None


def test_admin_training_runs_page_draws_reward_curves(admin: Any, db: Any) -> None:
    from trainer.store import TrainingRun

    with db.session() as s:
        s.add(
            TrainingRun(
                base_model="tiny",
                output_dir="/tmp/r",
                settings={},
                state="finished",
                steps_done=3,
                reward_curve=[0.2, 0.5, 0.9],
            )
        )
    page = admin.get("/admin/training-runs", headers=BEARER).get_data(as_text=True)
    assert 'id="reward-chart"' in page and "training.js" in page
    assert '"rewards": [0.2, 0.5, 0.9]' in page or '"rewards":[0.2,0.5,0.9]' in page
