"""The reviewer's and the admin's job pages through Flask's test client: the heading
names the issue's title (from the job's task record, else as intake stored it, so a job
that failed in set-up names it too), and a failed job says why it failed: its stored
record, else its one-line reason, else that none was stored."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from markupsafe import escape

from bot import joblinks
from bot.settings import ReviewerSettings, load_settings
from bot.store.failure import FailureReason, Fixer
from bot.store.records import SolveRecord, TaskRecord
from bot.store.tables import Job
from bot.web import create_app
from tests.fakes import RecordingDispatcher
from tests.plugins.admin import ADMIN_TOKEN, HOSTILE
from tests.support import GITHUB_SECRET, LINK_SECRET

LINKS = ReviewerSettings(link_secret=LINK_SECRET, public_url="http://ribbit.test")  # type: ignore[arg-type]
TITLE = "Adding two numbers overflows"
# An issue's author chooses its title: markup and a right-to-left override in it.
HOSTILE_TITLE = f"Fix {HOSTILE} \u202eevil"
RECORDED = "a" * 32  # failed after its agent ran: task record and failure record
ONE_LINE = "b" * 32  # failed with only the one-line reason
NO_REASON = "c" * 32  # failed with nothing stored
SUCCEEDED = "d" * 32
HOSTILE_JOB = "e" * 32
SETUP_FAILED = "f" * 32  # failed in set-up, before its agent: no task record, the admitted title
HOSTILE_ADMITTED = "9" * 32  # the same, with the hostile title as intake stored it
FAILURE = FailureReason.of(
    "The tests failed before the patch: the repository's own tests do not pass.",
    output="FAILED tests/test_calc.py::test_add - assert 3 == 4",
    fixer=Fixer("maintainer", "test", "name a test command that passes on the default branch"),
)

SETUP_FAILURE = FailureReason.of(
    "The repository's setup failed (`pip install -e .` exited 1), so the agent did not start.",
    output="ERROR: No matching distribution found for nosuchpkg",
    fixer=Fixer("maintainer", "setup", "name a setup command that installs"),
)


def _job(job_id: str, state: str, **fields: Any) -> Job:
    now = datetime.now(UTC)
    return Job(
        id=job_id,
        kind="solve",
        state=state,
        forge="github",
        repo="acme/calc",
        issue_number=7,
        created_at=now,
        updated_at=now,
        **fields,
    )


def _record(title: str) -> dict[str, Any]:
    task = TaskRecord(
        issue_title=title, issue_body="1 + 2 is 4", base_sha="0" * 40, test_command="pytest"
    )
    return SolveRecord(task=task, exit_reason="submitted", turns=3).to_json()


@pytest.fixture
def app(tmp_path: Path, dispatcher: RecordingDispatcher) -> Iterator[Flask]:
    settings = load_settings(
        data_dir=tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        github={"webhook_secret": GITHUB_SECRET},
        reviewer={"link_secret": LINK_SECRET, "public_url": "http://ribbit.test"},
    )
    flask_app = create_app(settings, dispatcher=dispatcher)
    db = flask_app.extensions["ribbit"].db
    with db.session() as session:
        session.add_all(
            [
                _job(
                    RECORDED,
                    "failed",
                    result=_record(TITLE),
                    failure_reason="refused: tests failed before the patch",
                    failure_detail=FAILURE.to_json(),
                ),
                _job(ONE_LINE, "failed", failure_reason="worker lost 3 times"),
                _job(NO_REASON, "failed"),
                _job(SUCCEEDED, "succeeded", result=_record(TITLE)),
                _job(HOSTILE_JOB, "succeeded", result=_record(HOSTILE_TITLE)),
                _job(
                    SETUP_FAILED,
                    "failed",
                    issue_title=TITLE,
                    failure_reason="refused: setup failed",
                    failure_detail=SETUP_FAILURE.to_json(),
                ),
                _job(HOSTILE_ADMITTED, "failed", issue_title=HOSTILE_TITLE),
            ]
        )
    yield flask_app
    db.dispose()


def _reviewer(app: Flask, job_id: str) -> str:
    sig = joblinks.sign(LINKS, job_id, now=time.time())
    resp = app.test_client().get(f"/review/jobs/{job_id}?sig={sig}")
    assert resp.status_code == 200
    return resp.get_data(as_text=True)


def _admin(app: Flask, job_id: str) -> str:
    resp = app.test_client().get(
        f"/admin/jobs/{job_id}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert resp.status_code == 200
    return resp.get_data(as_text=True)


PAGES = pytest.mark.parametrize("page", [_reviewer, _admin], ids=["reviewer", "admin"])
Page = Callable[[Flask, str], str]


def _heading(page: str) -> str:
    return page.split("<h1>", 1)[1].split("</h1>", 1)[0]


@PAGES
def test_job_page_heading_names_the_issue_title(app: Flask, page: Page) -> None:
    assert f'<span id="issue-title">{TITLE}</span>' in _heading(page(app, SUCCEEDED))


@PAGES
def test_job_page_heading_without_a_task_record_has_no_title(app: Flask, page: Page) -> None:
    assert 'id="issue-title"' not in _heading(page(app, NO_REASON))


@PAGES
def test_job_page_heading_escapes_a_hostile_title(app: Flask, page: Page) -> None:
    heading = _heading(page(app, HOSTILE_JOB))
    assert "<script" not in heading and "alert(&#39;pwned&#39;)" in heading
    assert "\u202e" not in heading  # no reordering of what follows


@PAGES
def test_failed_job_page_shows_the_stored_record(app: Flask, page: Page) -> None:
    shown = page(app, RECORDED)
    assert f'<pre class="failure">{escape(FAILURE.to_text())}</pre>' in shown
    assert "who can fix it: the maintainer" in shown


@PAGES
def test_failed_job_page_without_a_record_shows_the_one_line_reason(app: Flask, page: Page) -> None:
    assert '<pre class="failure">worker lost 3 times</pre>' in page(app, ONE_LINE)


@PAGES
def test_failed_job_page_says_when_no_reason_was_stored(app: Flask, page: Page) -> None:
    shown = page(app, NO_REASON)
    assert "Why it failed" in shown and "No reason was stored for this failure." in shown


@PAGES
def test_succeeded_job_page_has_no_failure_section(app: Flask, page: Page) -> None:
    assert 'id="failure"' not in page(app, SUCCEEDED)


@PAGES
def test_job_that_failed_in_setup_names_its_issue_title_and_why(app: Flask, page: Page) -> None:
    shown = page(app, SETUP_FAILED)
    assert f'<span id="issue-title">{TITLE}</span>' in _heading(shown)
    assert f'<pre class="failure">{escape(SETUP_FAILURE.to_text())}</pre>' in shown


@PAGES
def test_an_admitted_title_is_made_safe_like_a_recorded_one(app: Flask, page: Page) -> None:
    heading = _heading(page(app, HOSTILE_ADMITTED))
    assert 'id="issue-title"' in heading
    assert "<script" not in heading and "alert(&#39;pwned&#39;)" in heading
    assert "\u202e" not in heading


@PAGES
def test_the_task_records_title_wins_over_the_admitted_one(app: Flask, page: Page) -> None:
    # The worker read the issue after intake: a title edited in between is the newer one.
    db = app.extensions["ribbit"].db
    with db.session() as session:
        session.get(Job, SUCCEEDED).issue_title = "an older title"  # type: ignore[union-attr]
    assert f'<span id="issue-title">{TITLE}</span>' in _heading(page(app, SUCCEEDED))
