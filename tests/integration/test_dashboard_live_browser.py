"""Live updates in headless Chromium: a job's state change shows on the filtered jobs
list, and a new queued job on the health page's queue depth, without a reload."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.settings import load_settings
from bot.store.jobs import JobSpec
from bot.web import create_app
from bot.web.admin import overview
from tests.plugins.admin import ADMIN_TOKEN, seed_jobs
from tests.plugins.browser import csp_violations, shot
from tests.plugins.services import free_port
from tests.support import GITHUB_SECRET

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
    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
        thread.join(timeout=10)
        app.extensions["ribbit"].db.dispose()


def test_job_state_changes_appear_on_the_list_and_health_without_reload(
    live_served: tuple[str, Any], browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base, app = live_served
    store = app.extensions["ribbit"].store
    wait = WebDriverWait(browser, 30)
    browser.get(f"{base}/admin/login")
    browser.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
    browser.find_element(By.ID, "login-submit").click()
    wait.until(lambda d: d.find_elements(By.ID, "jobs"))

    # The list filtered to running jobs; a marker that a reload would wipe.
    browser.get(f"{base}/admin/?state=running")
    browser.execute_script("window.notReloaded = true;")
    assert browser.find_element(By.ID, "job-total").text == "2"
    links = {e.get_attribute("href") for e in browser.find_elements(By.CSS_SELECTOR, "a.job-link")}
    assert links == {f"{base}/admin/jobs/{j}" for j in RUNNING}

    store.transition(RUNNING[0], "failed", reason="worker exploded")

    def running_rows(d: Any) -> list[str] | None:
        rows = [e.get_attribute("href") for e in d.find_elements(By.CSS_SELECTOR, "a.job-link")]
        return rows if len(rows) == 1 and d.find_element(By.ID, "job-total").text == "1" else None

    assert wait.until(running_rows) == [f"{base}/admin/jobs/{RUNNING[1]}"]
    assert browser.execute_script("return window.notReloaded === true")
    shot(browser, "live-jobs-filtered")

    # Unfiltered: the other running job's badge turns to succeeded in place.
    browser.get(f"{base}/admin/")
    browser.execute_script("window.notReloaded = true;")
    row = f"a.job-link[href='/admin/jobs/{RUNNING[1]}']"
    assert (
        browser.find_element(By.CSS_SELECTOR, row)
        .find_element(By.XPATH, "../../td/span[contains(@class, 'badge')]")
        .text
        == "running"
    )
    store.transition(RUNNING[1], "succeeded")

    def badge(d: Any) -> str:
        link = d.find_element(By.CSS_SELECTOR, row)
        return str(link.find_element(By.XPATH, "../../td/span[contains(@class, 'badge')]").text)

    wait.until(lambda d: badge(d) == "succeeded")
    assert browser.execute_script("return window.notReloaded === true")
    shot(browser, "live-jobs")

    # Health: a new queued job raises the queue depth on the open page.
    browser.get(f"{base}/admin/health")
    browser.execute_script("window.notReloaded = true;")
    depth = int(browser.find_element(By.ID, "queue-depth").text)
    with app.extensions["ribbit"].db.session() as session:
        spec = JobSpec(kind="solve", forge="github", repo="acme/new", issue_number=7, actor="a")
        assert store.create(session, spec) is not None
    wait.until(lambda d: d.find_element(By.ID, "queue-depth").text == str(depth + 1))
    assert browser.execute_script("return window.notReloaded === true")
    shot(browser, "live-health")
    assert csp_violations(browser) == []
