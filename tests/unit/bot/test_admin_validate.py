"""Re-running an environment's validation from the dashboard: POST only, CSRF-protected,
audited, done in the background (the request returns while it runs), and the trainer's
real validation (the builder's test runs on the stored environment, in host-copy
sandboxes) re-run, its result on the environment's page."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.env_validation import ValidationOutcome, history
from bot.settings import load_settings
from bot.store.audit import recent
from bot.web import create_app
from bot.web.admin import overview as health_mod
from tests.fakes import RecordingDispatcher, commit_files, make_git_repo
from tests.plugins.admin import ADMIN_TOKEN
from tests.plugins.trainer import (
    CALC_BUGGY,
    CALC_FIXED,
    TEST_ADD,
    TEST_MUL,
    FixRepo,
    calc_environment,
    sandbox_factory,
)
from tests.support import GITHUB_SECRET
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.index import sync_index
from trainer.envs.revalidate import StoredEnvValidator

BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ORIGIN = {"Origin": "http://localhost"}


class Env:
    def __init__(self, app: Any, store: EnvironmentFolders, instance_id: str) -> None:
        self.app, self.store, self.instance_id = app, store, instance_id
        self.svc = app.extensions["ribbit"]

    @property
    def url(self) -> str:
        return f"/admin/environments/{self.instance_id}"

    def finished(self) -> list[Any]:
        self.svc.env_validation.join(timeout=300)
        return history(self.svc.db, self.instance_id)


def _app(tmp_path: Path, dispatcher: Any, factory: Any) -> Any:
    settings = load_settings(
        data_dir=tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        github={"webhook_secret": GITHUB_SECRET},
    )
    return create_app(settings, dispatcher=dispatcher, env_validator=factory)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real environment (the builder's own test runs), built once for the module."""
    repo = tmp_path_factory.mktemp("calc") / "calc"
    base = make_git_repo(repo, {"calc.py": CALC_BUGGY, "tests/test_mul.py": TEST_MUL})
    fix = commit_files(repo, {"calc.py": CALC_FIXED, "tests/test_add.py": TEST_ADD}, "fix add")
    root = tmp_path_factory.mktemp("envstore")
    made = calc_environment(FixRepo(repo, base, fix))
    EnvironmentFolders(root).add(made, repo)
    return root, made.instance_id


@pytest.fixture
def env(
    tmp_path: Path,
    dispatcher: RecordingDispatcher,
    built: tuple[Path, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Env]:
    monkeypatch.setattr(health_mod, "inspect_workers", lambda _svc: [])
    root, instance_id = built
    shutil.copytree(root, tmp_path / "envstore")  # each test may change its copy
    store = EnvironmentFolders(tmp_path / "envstore")
    app = _app(
        tmp_path,
        dispatcher,
        lambda db, s: StoredEnvValidator(
            db, tmp_path / "elsewhere", lambda: sandbox_factory, reruns=1
        ),
    )
    sync_index(app.extensions["ribbit"].db, store)  # the index names the store it is in
    yield Env(app, store, instance_id)
    app.extensions["ribbit"].db.dispose()


def _session(app: Any) -> Any:
    client = app.test_client()
    assert client.post("/admin/login", data={"token": ADMIN_TOKEN}).status_code == 302
    return client


def _csrf(client: Any, url: str) -> str:
    page = client.get(url, headers={"Accept": "text/html"}).get_data(as_text=True)
    match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page)
    assert match, "the environment page carries no CSRF token"
    return match.group(1)


def test_validate_from_the_page_reruns_it_audits_and_shows_the_result(env: Env) -> None:
    client = _session(env.app)
    listing = client.get("/admin/environments").get_data(as_text=True)
    assert f'class="env-link" href="{env.url}"' in listing
    page = client.get(env.url).get_data(as_text=True)
    assert 'id="validate-env"' in page and "Not validated from the dashboard yet" in page
    resp = client.post(
        f"{env.url}/validate",
        data={"csrf_token": _csrf(client, env.url), "next": env.url},
        headers=ORIGIN,
    )
    assert resp.status_code == 302 and resp.location.startswith(f"{env.url}?msg=validation")
    [run] = env.finished()
    assert run.state == "valid", run.detail
    assert run.detail.startswith("1 FAIL_TO_PASS and 1 PASS_TO_PASS tests hold")
    assert run.requested_by.startswith("admin (session)")
    [row] = recent(env.svc.db)
    assert (row.action, row.target, row.outcome) == ("validate", f"env:{env.instance_id}", "ok")
    assert row.actor.startswith("admin (session)")
    shown = client.get(env.url).get_data(as_text=True)
    assert "validation-valid" in shown and "tests hold" in shown


def test_the_validation_really_runs_the_tests_again(env: Env) -> None:
    # The stored record claims a test the tree does not have, and the reference patch is
    # the one to apply: only running the tests can tell that the claim no longer holds.
    stored = env.store.get(env.instance_id)
    env.store.update(
        stored.model_copy(
            update={"FAIL_TO_PASS": [*stored.FAIL_TO_PASS, "tests/test_add.py::test_gone"]}
        )
    )
    client = env.app.test_client()
    assert client.post(f"{env.url}/validate", headers=BEARER).status_code == 200
    [run] = env.finished()
    assert run.state == "changed"
    assert run.detail == "no longer fail-to-pass: tests/test_add.py::test_gone"

    # A reference patch that no longer applies to the stored base: the builder rejects it.
    assert "return a - b" in stored.patch
    env.store.update(
        stored.model_copy(update={"patch": stored.patch.replace("return a - b", "return a // b")})
    )
    assert client.post(f"{env.url}/validate", headers=BEARER).status_code == 200
    latest = env.finished()[0]
    assert latest.state == "invalid" and latest.detail.startswith("patch_does_not_apply")


def test_a_cross_site_post_is_refused_audited_and_runs_nothing(env: Env) -> None:
    client = _session(env.app)
    token = _csrf(client, env.url)
    no_token = client.post(f"{env.url}/validate", data={}, headers=ORIGIN)
    other_site = client.post(
        f"{env.url}/validate",
        data={"csrf_token": token},
        headers={"Origin": "https://evil.example"},
    )
    assert no_token.status_code == 403 and other_site.status_code == 403
    assert client.get(f"{env.url}/validate").status_code == 405  # POST only
    assert [(a.action, a.outcome) for a in recent(env.svc.db)] == [
        ("validate", "refused"),
        ("validate", "refused"),
    ]
    assert history(env.svc.db, env.instance_id) == []


def test_unknown_or_malformed_environments(env: Env) -> None:
    client = env.app.test_client()
    resp = client.post("/admin/environments/acme__nope-123/validate", headers=BEARER)
    assert resp.status_code == 409 and resp.get_json()["message"] == "no environment acme__nope-123"
    assert (
        client.post("/admin/environments/..%2F..%2Fetc/validate", headers=BEARER).status_code == 404
    )
    assert client.get("/admin/environments/a%20b", headers=BEARER).status_code == 404


class Blocking:
    """A validator that holds until released: the request must not wait for it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()

    def known(self, instance_id: str) -> bool:
        return instance_id.startswith("acme__calc-")

    def validate(self, instance_id: str) -> ValidationOutcome:
        self.started.set()
        assert self.release.wait(300)
        return ValidationOutcome("valid", "held")


def test_the_request_returns_while_the_validation_runs(tmp_path: Path, dispatcher: Any) -> None:
    blocking = Blocking()
    app = _app(tmp_path, dispatcher, lambda db, s: blocking)
    svc = app.extensions["ribbit"]
    client = app.test_client()
    try:
        first = client.post("/admin/environments/acme__calc-1/validate", headers=BEARER)
        assert first.status_code == 200 and first.get_json()["ok"] is True
        assert blocking.started.wait(60)
        [running] = history(svc.db, "acme__calc-1")
        assert running.state == "running" and running.finished_at is None
        live = client.get("/admin/live/environments/acme__calc-1", headers=BEARER).get_json()
        again = client.post("/admin/environments/acme__calc-1/validate", headers=BEARER)
        assert again.status_code == 409 and "already running" in again.get_json()["message"]
        # Others may start beside it, up to the process's limit.
        assert client.post("/admin/environments/acme__calc-2/validate", headers=BEARER).json["ok"]
        third = client.post("/admin/environments/acme__calc-3/validate", headers=BEARER)
        assert third.status_code == 409 and "validations are running" in third.json["message"]
        assert history(svc.db, "acme__calc-3") == []
    finally:
        blocking.release.set()
    svc.env_validation.join(timeout=60)
    [done] = history(svc.db, "acme__calc-1")
    assert done.state == "valid" and done.detail == "held"
    after = client.get("/admin/live/environments/acme__calc-1", headers=BEARER).get_json()
    assert after["version"] != live["version"]
    fragment = client.get("/admin/environments/acme__calc-1/validations", headers=BEARER)
    assert "validation-valid" in fragment.get_data(as_text=True)
    svc.db.dispose()


def test_without_the_trainer_the_action_says_so(tmp_path: Path, dispatcher: Any) -> None:
    app = _app(tmp_path, dispatcher, None)
    client = app.test_client()
    resp = client.post("/admin/environments/acme__calc-1/validate", headers=BEARER)
    assert resp.status_code == 409 and "not available" in resp.get_json()["message"]
    page = client.get("/admin/environments/acme__calc-1", headers=BEARER).get_data(as_text=True)
    assert "validate-env" not in page
    app.extensions["ribbit"].db.dispose()


def test_the_seam_ribbit_serve_wires_needs_no_sandbox_to_start(tmp_path: Path) -> None:
    from bot.store.db import Database
    from trainer.envs.revalidate import env_validator

    settings = load_settings(data_dir=tmp_path / "data")
    db = Database(settings.effective_database_url)
    db.migrate()
    validator = env_validator(db, settings)
    assert validator.known("acme__calc-1") is False  # an empty store; nothing resolved yet
    db.dispose()
