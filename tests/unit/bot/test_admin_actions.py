"""Dashboard actions through Flask's test client: each one changes what the CLI would
change, writes an audit row, and is refused without a session or from another site.
At the end, bot/web/admin/actions.py's functions called directly: the refusals and messages
each route shows, with fakes for the model registry and the environment validation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select

from bot.env_validation import MAX_RUNNING, AlreadyRunning, Busy
from bot.model_versions import ModelVersionError
from bot.store.audit import AdminAction, recent
from bot.store.jobs import JobSpec
from bot.store.payloads import PersonAsks
from bot.store.tables import Job
from bot.web import create_app
from bot.web.admin import actions
from bot.web.admin import overview as health_mod
from bot.web.services import Services
from tests.fakes import RecordingDispatcher
from tests.plugins.admin import ADMIN_TOKEN
from tests.support import GITHUB_SECRET, score_heldout
from trainer.registry import registry_versions
from worker.settings import load_worker_settings

BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ORIGIN = {"Origin": "http://localhost"}


@pytest.fixture
def admin_app(
    tmp_path: Path, dispatcher: RecordingDispatcher, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Flask]:
    monkeypatch.setattr(
        health_mod,
        "inspect_workers",
        lambda _svc: [health_mod.WorkerState("celery@w1", ["a" * 32])],
    )
    settings = load_worker_settings(
        data_dir=tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        github={"webhook_secret": GITHUB_SECRET},
    )
    app = create_app(settings, dispatcher=dispatcher, model_versions=registry_versions)
    yield app
    app.extensions["ribbit"].db.dispose()


@pytest.fixture
def svc(admin_app: Flask) -> Services:
    return admin_app.extensions["ribbit"]


@pytest.fixture
def browser(admin_app: Flask) -> FlaskClient:
    """A logged-in browser session (cookie), as the dashboard's forms are used."""
    client = admin_app.test_client()
    resp = client.post("/admin/login", data={"token": ADMIN_TOKEN, "next": "/admin/"})
    assert resp.status_code == 302
    return client


def csrf_of(client: Any) -> str:
    page = client.get("/admin/health", headers={"Accept": "text/html"}).get_data(as_text=True)
    match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page)
    assert match, "the health page carries no CSRF token"
    return match.group(1)


def make_job(svc: Any, state: str = "queued", issue: int = 7) -> str:
    spec = JobSpec(kind="solve", forge="github", repo="acme/app", issue_number=issue)
    with svc.db.session() as session:
        job = svc.store.create(session, spec)
        assert job is not None
        job_id: str = job.id
    if state == "failed":
        svc.store.transition(job_id, "failed", reason="tests failed")
    return job_id


def audit_rows(svc: Any) -> list[tuple[str, str, str]]:
    return [(a.action, a.target, a.outcome) for a in recent(svc.db)]


def post(client: Any, url: str, token: str, **data: str) -> Any:
    return client.post(url, data={"csrf_token": token, **data}, headers=ORIGIN)


def test_cancel_from_the_dashboard_cancels_and_audits(browser: Any, svc: Any) -> None:
    job_id = make_job(svc)
    resp = post(browser, f"/admin/jobs/{job_id}/cancel", csrf_of(browser))
    assert resp.status_code == 302
    assert svc.store.get(job_id).state == "cancelled"
    [row] = recent(svc.db)
    assert (row.action, row.target, row.outcome) == ("cancel", f"job:{job_id}", "ok")
    assert row.actor.startswith("admin (session)") and row.at is not None


def test_retry_creates_a_child_job_and_dispatches_it(
    browser: Any, svc: Any, dispatcher: Any
) -> None:
    job_id = make_job(svc, "failed")
    resp = post(browser, f"/admin/jobs/{job_id}/retry", csrf_of(browser))
    assert resp.status_code == 302
    with svc.db.session() as session:
        child = session.scalar(select(Job).where(Job.parent_id == job_id))
        assert child is not None and child.state == "queued" and child.issue_number == 7
        assert child.id in dispatcher.sent
    assert audit_rows(svc) == [("retry", f"job:{job_id}", "ok")]


def test_retry_of_a_live_job_is_refused_and_still_audited(browser: Any, svc: Any) -> None:
    job_id = make_job(svc)
    post(browser, f"/admin/jobs/{job_id}/retry", csrf_of(browser))
    assert audit_rows(svc) == [("retry", f"job:{job_id}", "error")]
    with svc.db.session() as session:
        assert session.scalar(select(Job).where(Job.parent_id == job_id)) is None


def test_pause_and_resume_per_repo_and_global(browser: Any, svc: Any, dispatcher: Any) -> None:
    token = csrf_of(browser)
    post(browser, "/admin/pause", token, repo="github:acme/app")
    assert svc.store.paused_scopes() == ["github:acme/app"]
    post(browser, "/admin/pause", token)
    assert "*" in svc.store.paused_scopes()
    post(browser, "/admin/resume", token)
    post(browser, "/admin/resume", token, repo="acme/app")
    assert svc.store.paused_scopes() == []
    assert audit_rows(svc) == [
        ("resume", "github:acme/app", "ok"),
        ("resume", "*", "ok"),
        ("pause", "*", "ok"),
        ("pause", "github:acme/app", "ok"),
    ]


def test_resume_dispatches_jobs_held_while_paused(browser: Any, svc: Any, dispatcher: Any) -> None:
    token = csrf_of(browser)
    post(browser, "/admin/pause", token)
    spec = JobSpec(kind="solve", forge="github", repo="acme/app", issue_number=9)
    with svc.db.session() as session:
        held = svc.store.create(session, spec, held=True)
        assert held is not None
        held_id = held.id
    post(browser, "/admin/resume", token)
    assert held_id in dispatcher.sent


def test_promote_and_roll_back_through_the_registry(browser: Any, svc: Any) -> None:
    from trainer.registry import promoted_model, register

    register(svc.db, "ft-1", base_model="base", adapter_path=None, heldout_pass_rate=0.4)
    register(svc.db, "ft-2", base_model="base", adapter_path=None, heldout_pass_rate=0.6)
    score_heldout(svc.db, "base:base", [0] * 40)
    score_heldout(svc.db, "ft-1", [1] * 16 + [0] * 24)
    score_heldout(svc.db, "ft-2", [1] * 24 + [0] * 16)
    token = csrf_of(browser)
    post(browser, "/admin/model-versions/promote", token, version="ft-1")
    post(browser, "/admin/model-versions/promote", token, version="ft-2")
    current = promoted_model(svc.db)
    assert current is not None and current.name == "ft-2"
    page = browser.get("/admin/health", headers={"Accept": "text/html"}).get_data(as_text=True)
    assert "ft-2" in page
    post(browser, "/admin/model-versions/rollback", token)
    current = promoted_model(svc.db)
    assert current is not None and current.name == "ft-1"
    assert audit_rows(svc) == [
        ("rollback", "model", "ok"),
        ("promote", "model:ft-2", "ok"),
        ("promote", "model:ft-1", "ok"),
    ]


def test_promote_of_a_worse_version_is_refused_by_the_registry(browser: Any, svc: Any) -> None:
    from trainer.registry import promoted_model, register

    register(svc.db, "good", base_model="base", adapter_path=None, heldout_pass_rate=0.9)
    register(svc.db, "worse", base_model="base", adapter_path=None, heldout_pass_rate=0.1)
    score_heldout(svc.db, "base:base", [0] * 40)
    score_heldout(svc.db, "good", [1] * 36 + [0] * 4)
    score_heldout(svc.db, "worse", [1] * 4 + [0] * 36)
    token = csrf_of(browser)
    post(browser, "/admin/model-versions/promote", token, version="good")
    post(browser, "/admin/model-versions/promote", token, version="worse")
    current = promoted_model(svc.db)
    assert current is not None and current.name == "good"
    assert audit_rows(svc)[0] == ("promote", "model:worse", "error")


ACTIONS = [
    ("/admin/jobs/{job}/cancel", {}),
    ("/admin/jobs/{job}/retry", {}),
    ("/admin/pause", {}),
    ("/admin/resume", {"repo": "acme/app"}),
    ("/admin/model-versions/promote", {"version": "ft-1"}),
    ("/admin/model-versions/rollback", {}),
]


@pytest.mark.parametrize(("url", "data"), ACTIONS)
def test_action_without_csrf_token_is_refused_and_audited(
    browser: Any, svc: Any, url: str, data: dict[str, str]
) -> None:
    job_id = make_job(svc)
    target = url.format(job=job_id)
    resp = browser.post(target, data=data, headers=ORIGIN)
    assert resp.status_code == 403
    assert svc.store.get(job_id).state == "queued"
    assert svc.store.paused_scopes() == []
    [(_action, _target, outcome)] = audit_rows(svc)
    assert outcome == "refused"


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Referer": "http://localhost.evil.example/admin/health"},
        {"Sec-Fetch-Site": "cross-site", "Origin": "http://localhost"},
        {"Sec-Fetch-Site": "same-site"},
        {},  # neither Origin nor Referer: a POST we cannot place is not trusted
    ],
)
def test_action_from_another_origin_is_refused_even_with_a_token(
    browser: Any, svc: Any, headers: dict[str, str]
) -> None:
    token = csrf_of(browser)
    resp = browser.post("/admin/pause", data={"csrf_token": token}, headers=headers)
    assert resp.status_code == 403
    assert svc.store.paused_scopes() == []


def test_csrf_token_of_another_session_is_refused(
    admin_app: Any, svc: Any, monkeypatch: Any
) -> None:
    from itsdangerous.timed import TimestampSigner

    one = admin_app.test_client()
    real = TimestampSigner.get_timestamp
    # Back-date the first session by a minute so the two session cookies surely differ.
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: real(self) - 60)
    one.post("/admin/login", data={"token": ADMIN_TOKEN})
    monkeypatch.setattr(TimestampSigner, "get_timestamp", real)
    stolen = csrf_of(one)
    other = admin_app.test_client()
    other.post("/admin/login", data={"token": ADMIN_TOKEN})
    assert csrf_of(other) != stolen
    resp = other.post("/admin/pause", data={"csrf_token": stolen}, headers=ORIGIN)
    assert resp.status_code == 403
    assert svc.store.paused_scopes() == []
    assert one.post("/admin/pause", data={"csrf_token": stolen}, headers=ORIGIN).status_code == 302


@pytest.mark.parametrize(("url", "data"), ACTIONS)
def test_action_without_login_is_refused_and_changes_nothing(
    admin_app: Any, svc: Any, url: str, data: dict[str, str]
) -> None:
    job_id = make_job(svc)
    resp = admin_app.test_client().post(url.format(job=job_id), data=data, headers=ORIGIN)
    assert resp.status_code in (302, 401)
    assert svc.store.get(job_id).state == "queued"
    assert svc.store.paused_scopes() == []
    with svc.db.session() as session:
        assert session.scalars(select(AdminAction)).all() == []


def test_bearer_scripts_need_no_csrf_token_and_get_json(admin_app: Any, svc: Any) -> None:
    job_id = make_job(svc)
    resp = admin_app.test_client().post(f"/admin/jobs/{job_id}/cancel", headers=BEARER)
    assert resp.status_code == 200 and resp.get_json()["ok"] is True
    assert audit_rows(svc)[0][2] == "ok"
    assert recent(svc.db)[0].actor.startswith("admin (bearer)")


def test_health_page_shows_queue_workers_and_model(browser: Any, svc: Any) -> None:
    make_job(svc)
    make_job(svc, issue=8)
    svc.store.pause(forge="github", repo="acme/held")
    page = browser.get("/admin/health", headers={"Accept": "text/html"}).get_data(as_text=True)
    assert '<dd id="queue-depth">2</dd>' in page
    assert "celery@w1" in page and "a" * 12 in page
    assert "github:acme/held" in page
    assert "microsoft/FrogNano-4B-2609 (base)" in page


def test_health_page_survives_a_dead_broker(browser: Any, monkeypatch: Any) -> None:
    def boom(_svc: Any) -> list[Any]:
        raise ConnectionError("broker down")

    monkeypatch.setattr(health_mod, "inspect_workers", boom)
    resp = browser.get("/admin/health", headers={"Accept": "text/html"})
    assert resp.status_code == 200
    assert "could not ask the workers" in resp.get_data(as_text=True)


# -- the actions called directly: the refusals and messages behind each route -------------------


def test_cancel_of_an_unknown_job_says_so(svc: Any) -> None:
    assert actions.cancel_job(svc, "f" * 32) == actions.ActionResult(False, f"no job {'f' * 32}")


@pytest.mark.parametrize("final", ["failed", "cancelled"])
def test_cancel_of_a_finished_job_is_refused_and_leaves_it(svc: Any, final: str) -> None:
    job_id = make_job(svc)
    svc.store.transition(job_id, final, reason="done before the click")
    result = actions.cancel_job(svc, job_id)
    assert result == actions.ActionResult(
        False, f"job {job_id} is {final}; only active jobs cancel"
    )
    assert svc.store.get(job_id).state == final


def test_retry_of_an_unknown_job_says_so(svc: Any, dispatcher: Any) -> None:
    assert not actions.retry_job(svc, "e" * 32).ok
    assert dispatcher.sent == []


def test_retry_copies_the_request_and_points_at_its_parent(svc: Any, dispatcher: Any) -> None:
    spec = JobSpec(
        kind="revise",
        forge="gitlab",
        repo="acme/app",
        issue_number=7,
        pr_number=12,
        actor="maintainer",
        installation_id=99,
        payload=PersonAsks("use the builtin sum"),
    )
    with svc.db.session() as session:
        old = svc.store.create(session, spec)
        assert old is not None
        old_id = old.id
    svc.store.transition(old_id, "cancelled", reason="stopped")
    result = actions.retry_job(svc, old_id)
    assert result.ok, result.message
    new = svc.store.get(dispatcher.sent[0])
    assert result.message == f"job {old_id} retried as {new.id}"
    assert (new.kind, new.forge, new.repo, new.issue_number, new.pr_number) == (
        "revise",
        "gitlab",
        "acme/app",
        7,
        12,
    )
    assert (new.actor, new.installation_id, new.payload, new.parent_id) == (
        "maintainer",
        99,
        PersonAsks("use the builtin sum"),
        old_id,
    )


def test_retry_while_paused_makes_a_held_job_and_sends_nothing(svc: Any, dispatcher: Any) -> None:
    job_id = make_job(svc, "failed")
    svc.store.pause(forge="github", repo="acme/app")
    result = actions.retry_job(svc, job_id)
    assert result.ok and result.message.endswith("(held: the bot is paused)")
    assert dispatcher.sent == []
    with svc.db.session() as session:
        child = session.scalar(select(Job).where(Job.parent_id == job_id))
        assert child is not None and child.held


def test_retry_while_another_job_works_on_the_issue_is_refused(svc: Any, dispatcher: Any) -> None:
    failed = make_job(svc, "failed")
    make_job(svc)  # a newer job for the same issue, still queued
    result = actions.retry_job(svc, failed)
    assert result == actions.ActionResult(False, "another job is already active for that issue")
    assert dispatcher.sent == []


@pytest.mark.parametrize(
    ("forge", "repo", "scope"),
    [
        (None, None, "everything"),
        (None, "acme/app", "github:acme/app"),  # a bare repository is GitHub's
        ("gitlab", "acme/app", "gitlab:acme/app"),
    ],
)
def test_pause_names_its_scope(svc: Any, forge: str | None, repo: str | None, scope: str) -> None:
    assert actions.pause(svc, forge, repo) == actions.ActionResult(True, f"paused {scope}")


def test_resume_counts_the_held_jobs_it_sends(svc: Any, dispatcher: Any) -> None:
    svc.store.pause(forge="gitlab", repo="acme/app")
    held_ids = []
    for issue in (1, 2):
        spec = JobSpec(kind="solve", forge="gitlab", repo="acme/app", issue_number=issue)
        with svc.db.session() as session:
            held = svc.store.create(session, spec, held=True)
            assert held is not None
            held_ids.append(held.id)
    result = actions.resume(svc, "gitlab", "acme/app")
    assert result == actions.ActionResult(True, "resumed gitlab:acme/app; 2 held job(s) sent")
    assert sorted(dispatcher.sent) == sorted(held_ids)


class FakeVersions:
    """A model registry that refuses or answers as told."""

    def __init__(self, refuse: str | None = None, previous: str | None = None) -> None:
        self.refuse, self.previous = refuse, previous
        self.promoted: list[str] = []

    def promote(self, name: str, *, force: bool = False) -> list[str]:
        if self.refuse:
            raise ModelVersionError(self.refuse)
        self.promoted.append(name)
        return []

    def rollback(self, line: str = "default") -> str | None:
        if self.refuse:
            raise ModelVersionError(self.refuse)
        return self.previous


def test_promote_and_rollback_without_a_registry_are_refused(svc: Any) -> None:
    bare = replace(svc, model_versions=None)
    assert actions.promote(bare, "ft-1") == actions.NO_REGISTRY
    assert actions.rollback(bare) == actions.NO_REGISTRY


def test_a_refusal_by_the_registry_is_its_message(svc: Any) -> None:
    refusing = replace(svc, model_versions=FakeVersions(refuse="ft-1 is worse than ft-0"))
    assert actions.promote(refusing, "ft-1") == actions.ActionResult(
        False, "ft-1 is worse than ft-0"
    )
    assert actions.rollback(refusing) == actions.ActionResult(False, "ft-1 is worse than ft-0")


def test_rollback_past_the_first_version_serves_the_base_model(svc: Any) -> None:
    result = actions.rollback(replace(svc, model_versions=FakeVersions(previous=None)))
    assert result == actions.ActionResult(True, "now serving the base model")
    result = actions.rollback(replace(svc, model_versions=FakeVersions(previous="ft-1")))
    assert result == actions.ActionResult(True, "now serving ft-1")


class FakeRunner:
    """ValidationRunner.start as told: a run id, or one of its refusals."""

    def __init__(self, raises: Exception | None = None) -> None:
        self.raises = raises
        self.started: list[tuple[str, str]] = []

    def start(self, instance_id: str, requested_by: str) -> int:
        if self.raises is not None:
            raise self.raises
        self.started.append((instance_id, requested_by))
        return 41


def test_validate_env_starts_a_run_for_the_admin(svc: Any) -> None:
    runner = FakeRunner()
    result = actions.validate_env(replace(svc, env_validation=runner), "calc-1", "admin")
    assert result == actions.ActionResult(True, "validation 41 of calc-1 started")
    assert runner.started == [("calc-1", "admin")]


@pytest.mark.parametrize(
    ("raises", "message"),
    [
        (KeyError("calc-9"), "no environment calc-9"),
        (AlreadyRunning("calc-9"), "a validation of calc-9 is already running"),
        (Busy("calc-9"), f"{MAX_RUNNING} validations are running; try again later"),
    ],
)
def test_validate_env_refusals_say_why(svc: Any, raises: Exception, message: str) -> None:
    runner = FakeRunner(raises)
    result = actions.validate_env(replace(svc, env_validation=runner), "calc-9", "admin")
    assert result == actions.ActionResult(False, message)


def test_validate_env_without_the_trainer_is_refused(svc: Any) -> None:
    result = actions.validate_env(replace(svc, env_validation=None), "calc-1", "admin")
    assert not result.ok and "not available" in result.message
