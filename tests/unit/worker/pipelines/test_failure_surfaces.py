"""One stored failure reason, shown the same on every surface: a job whose set-up meets
a TLS-inspecting gateway, run through run_job with fake parts, then read back by the
status comment, ``ribbit jobs`` and the admin job page."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from markupsafe import escape

from bot.cli import main
from bot.runtime import Runtime
from bot.settings import load_settings
from bot.web import create_app
from tests.plugins.admin import ADMIN_TOKEN
from tests.plugins.e2e import REPO_FILES
from tests.support import GITHUB_SECRET
from tests.unit.worker.pipelines.conftest import RepoWorld
from tests.unit.worker.pipelines.test_solve_run import World
from worker.jobs import PIPELINES, run_job
from worker.pipelines.solve import SolveRun

TLS_SETUP = "echo '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed' >&2; exit 1"


@pytest.fixture
def world(repo_world: RepoWorld) -> World:
    return World(repo_world.forge, repo_world.store, repo_world.settings)


def test_one_stored_reason_reads_the_same_in_the_comment_the_cli_and_the_admin_page(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = REPO_FILES[".ribbit.yml"] + f"setup: {json.dumps(TLS_SETUP)}\n"
    read = world.forge.read_file
    world.forge.read_file = lambda repo, path, ref=None: (  # type: ignore[method-assign]
        config if path == ".ribbit.yml" else read(repo, path, ref)
    )
    ctx = world.job()
    parts = world.parts()
    monkeypatch.setitem(PIPELINES, "solve", lambda c: SolveRun(c, parts).run())
    runtime = Runtime(world.settings, world.store.db, world.store, world.forges)  # type: ignore[arg-type]
    assert run_job(runtime, ctx.job.id) == "failed"

    job = world.store.get(ctx.job.id)
    failure = job.failure
    assert failure is not None and failure.fixer is not None
    assert failure.fixer.setting == "RIBBIT_SANDBOX__SETUP_CA_BUNDLE"
    assert job.failure_reason is not None and job.failure_reason.startswith("refused: setup failed")
    # The status comment is the record's markdown.
    assert failure.to_markdown() in world.status_text()

    # ribbit jobs (table and JSON), on the same database.
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(world.settings.data_dir))
    table = CliRunner().invoke(main, ["jobs"])
    assert table.exit_code == 0, table.output
    assert textwrap.indent(failure.to_text(), "    ") in table.output
    listed = CliRunner().invoke(main, ["jobs", "--json"])
    [row] = json.loads(listed.output)
    assert row["failure"] == failure.to_json()

    # The admin job page, escaped as the page escapes it.
    settings = load_settings(
        data_dir=world.settings.data_dir,
        admin_token=ADMIN_TOKEN,
        github={"webhook_secret": GITHUB_SECRET},
    )
    app = create_app(settings)
    try:
        page = (
            app.test_client()
            .get(f"/admin/jobs/{job.id}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
            .get_data(as_text=True)
        )
    finally:
        app.extensions["ribbit"].db.dispose()
    assert f'<pre class="failure">{escape(failure.to_text())}</pre>' in page
