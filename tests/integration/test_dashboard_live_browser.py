"""Live updates in headless Chromium: a job's state change shows on the filtered jobs
list, and a new queued job on the health page's queue depth, without a reload.

The page replaces its list while the test reads it, so every read of the live part finds
and reads in one script (read_all) and every wait takes a replaced element as "not yet"
(live_wait): a find and a read as two WebDriver calls failed with
StaleElementReferenceException on a loaded machine (issue #36)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.settings import load_settings
from bot.store.jobs import JobSpec
from bot.web import create_app
from bot.web.admin import overview
from tests.plugins.admin import ADMIN_TOKEN, seed_jobs
from tests.plugins.browser import csp_violations, live_wait, read_all, shot
from tests.plugins.services import free_port
from tests.support import GITHUB_SECRET, serving

pytestmark = pytest.mark.integration

RUNNING = (f"{1:032x}", f"{6:032x}")  # seed_jobs: job i is in STATES[i % 5]


@pytest.fixture
def live_served(tmp_path: Path, dispatcher: Any, monkeypatch: Any) -> Iterator[tuple[str, Any]]:
    from werkzeug.serving import make_server

    # No broker here: the health page's worker list must not wait on one.
    monkeypatch.setattr(overview, "inspect_workers", lambda _svc: [])
    settings = load_settings(
        data_dir=tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        github={"webhook_secret": GITHUB_SECRET},
        # Small, so the test is quick; it waits on what the page shows, never on time.
        admin_poll_interval_s=0.2,
    )
    app = create_app(settings, dispatcher=dispatcher)
    seed_jobs(app.extensions["ribbit"].db, 10)
    try:
        with serving(make_server("127.0.0.1", free_port(), app, threaded=True)) as url:
            yield url, app
    finally:
        app.extensions["ribbit"].db.dispose()


def test_job_state_changes_appear_on_the_list_and_health_without_reload(
    live_served: tuple[str, Any], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    base, app = live_served
    store = app.extensions["ribbit"].store
    wait = live_wait(browser, 30)
    browser.get(f"{base}/admin/login")
    browser.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
    browser.find_element(By.ID, "login-submit").click()
    wait.until(lambda d: d.find_elements(By.ID, "jobs"))

    # The list filtered to running jobs; a marker that a reload would wipe.
    browser.get(f"{base}/admin/?state=running")
    browser.execute_script("window.notReloaded = true;")
    assert read_all(browser, "#job-total") == ["2"]
    links = set(read_all(browser, "a.job-link", "href"))
    assert links == {f"{base}/admin/jobs/{j}" for j in RUNNING}

    store.transition(RUNNING[0], "failed", reason="worker exploded")

    def running_rows(d: Any) -> list[str] | None:
        rows = read_all(d, "a.job-link", "href")
        return rows if len(rows) == 1 and read_all(d, "#job-total") == ["1"] else None

    assert wait.until(running_rows) == [f"{base}/admin/jobs/{RUNNING[1]}"]
    assert browser.execute_script("return window.notReloaded === true")
    shot(browser, "live-jobs-filtered")

    # Unfiltered: the other running job's badge turns to succeeded in place.
    browser.get(f"{base}/admin/")
    browser.execute_script("window.notReloaded = true;")
    # The state badge in the row of the link to the other running job.
    badge = f"tr:has(a.job-link[href='/admin/jobs/{RUNNING[1]}']) > td > span.badge"
    assert read_all(browser, badge) == ["running"]
    store.transition(RUNNING[1], "succeeded")
    wait.until(lambda d: read_all(d, badge) == ["succeeded"])
    assert browser.execute_script("return window.notReloaded === true")
    shot(browser, "live-jobs")

    # Health: a new queued job raises the queue depth on the open page.
    browser.get(f"{base}/admin/health")
    browser.execute_script("window.notReloaded = true;")
    [depth] = [int(shown) for shown in read_all(browser, "#queue-depth")]
    with app.extensions["ribbit"].db.session() as session:
        spec = JobSpec(kind="solve", forge="github", repo="acme/new", issue_number=7, actor="a")
        assert store.create(session, spec) is not None
    wait.until(lambda d: read_all(d, "#queue-depth") == [str(depth + 1)])
    assert browser.execute_script("return window.notReloaded === true")
    shot(browser, "live-health")
    assert csp_violations(browser) == []
