"""The admin dashboard in a real headless Chromium, served over real HTTP by werkzeug.

Uses Debian's chromium and chromium-driver (scripts/system-deps.sh installs them);
Selenium is pointed at /usr/bin/chromedriver so it never downloads a driver.
Screenshots land in test-artifacts/dashboard/.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot import create_app
from bot.settings import load_settings
from tests.plugins.admin import (
    ADMIN_TOKEN,
    seed_job_with_trajectory,
    seed_jobs,
    seed_outcomes,
)
from tests.plugins.services import free_port
from tests.support import GITHUB_SECRET, require_service

pytestmark = pytest.mark.integration

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM = Path("/usr/lib/chromium/chromium")  # /usr/bin/chromium is a wrapper script
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"


@pytest.fixture
def served(tmp_path: Path, dispatcher: Any) -> Iterator[tuple[str, Any]]:
    from werkzeug.serving import make_server

    settings = load_settings(
        data_dir=tmp_path / "data",
        admin_token=ADMIN_TOKEN,
        github={"webhook_secret": GITHUB_SECRET},
    )
    app = create_app(settings, dispatcher=dispatcher)
    db = app.extensions["ribbit"].db
    seed_jobs(db, 120)
    seed_job_with_trajectory(db, settings.data_dir)
    seed_outcomes(db, weeks=6)
    seed_training_run(db, [0.25, 0.4, 0.55, 0.8, 0.9])
    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
        thread.join(timeout=10)
        db.dispose()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    available = CHROMEDRIVER.exists() and CHROMIUM.exists()
    require_service(
        available, "chromium and chromium-driver (apt-get install chromium chromium-driver)"
    )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        require_service(False, "selenium (pip install selenium)")
        raise
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "chromium", ignore_errors=True)


def seed_training_run(db: Any, curve: list[float]) -> None:
    from trainer.store import TrainingRun

    with db.session() as s:
        s.add(
            TrainingRun(
                base_model="tiny",
                output_dir="/tmp/run",
                settings={},
                state="finished",
                steps_done=len(curve),
                first_mean_reward=curve[0],
                last_mean_reward=curve[-1],
                reward_curve=curve,
            )
        )


def _shot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def _csp_violations(driver: Any) -> list[str]:
    return [
        e["message"]
        for e in driver.get_log("browser")
        if "Content Security Policy" in e["message"] or "Refused to" in e["message"]
    ]


def test_dashboard_in_chromium_login_jobs_trajectory_charts(
    served: tuple[str, Any], browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    base, _app = served
    wait = WebDriverWait(browser, 20)

    # Anonymous: the jobs list is not shown; the browser lands on the login form.
    browser.get(f"{base}/admin/")
    assert "/admin/login" in browser.current_url
    assert not browser.find_elements(By.ID, "jobs")
    browser.find_element(By.ID, "token").send_keys("not-the-token")
    browser.find_element(By.ID, "login-submit").click()
    # click() returns before the answer to the POST has loaded; wait for the new page.
    assert wait.until(ec.visibility_of_element_located((By.ID, "login-error")))
    # The session cookie is invisible to page scripts (HttpOnly).
    assert "ribbit_admin" not in browser.execute_script("return document.cookie")

    browser.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
    browser.find_element(By.ID, "login-submit").click()
    wait.until(ec.presence_of_element_located((By.ID, "jobs")))
    assert browser.find_element(By.ID, "job-total").text == "121"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")) == 50
    assert "ribbit_admin" not in browser.execute_script("return document.cookie")
    _shot(browser, "jobs")

    # Filter through the form, then page.
    browser.find_element(By.CSS_SELECTOR, "select[name=state] option[value=failed]").click()
    browser.find_element(By.CSS_SELECTOR, "#job-filters button").click()
    wait.until(ec.url_contains("state=failed"))
    assert browser.find_element(By.ID, "job-total").text == "24"
    states = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "#jobs .badge")}
    assert states == {"failed"}

    # The newest job (the one with a trajectory) heads the unfiltered list.
    browser.get(f"{base}/admin/")
    browser.find_element(By.CSS_SELECTOR, "#jobs tbody tr:first-child a.job-link").click()
    wait.until(ec.presence_of_element_located((By.ID, "trajectory")))
    turns = browser.find_elements(By.CSS_SELECTOR, "details.turn")
    assert len(turns) == 2
    turns[0].find_element(By.TAG_NAME, "summary").click()
    observation = turns[0].find_element(By.CSS_SELECTOR, "details.observation")
    observation.find_element(By.TAG_NAME, "summary").click()
    text = observation.find_element(By.TAG_NAME, "pre").text
    assert "<script>alert('pwned')</script>" in text  # shown as text, never run
    assert browser.execute_script("return document.querySelectorAll('main script').length") == 0
    assert "+return a + b" in browser.find_element(By.ID, "diff").text
    assert "no-eval" in browser.find_element(By.ID, "gates").text
    _shot(browser, "job")

    # Outcomes: Chart.js (served from /admin/static) draws on both canvases.
    browser.get(f"{base}/admin/outcomes")
    wait.until(lambda d: d.execute_script("return !!window.ribbitCharts"))
    drawn = browser.execute_script("""
        const out = {};
        for (const id of ['rates-chart', 'counts-chart']) {
          const chart = Chart.getChart(id);
          const c = document.getElementById(id);
          const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let painted = 0;
          for (let i = 3; i < px.length; i += 4) { if (px[i] !== 0) painted++; }
          out[id] = {type: chart && chart.config.type, points: chart && chart.data.labels.length,
                     painted: painted, w: c.width, h: c.height};
        }
        return out;""")
    assert drawn["rates-chart"]["type"] == "line" and drawn["counts-chart"]["type"] == "bar"
    assert drawn["rates-chart"]["points"] == 6
    for info in drawn.values():
        assert info["w"] > 0 and info["painted"] > 1000, drawn
    _shot(browser, "outcomes")

    browser.get(f"{base}/admin/training-runs")
    wait.until(lambda d: d.execute_script("return !!(window.ribbitCharts||{}).rewards"))
    curve = browser.execute_script(
        "const c = Chart.getChart('reward-chart'); return c.data.datasets[0].data;"
    )
    assert curve == [0.25, 0.4, 0.55, 0.8, 0.9]
    label = browser.execute_script("return Chart.getChart('reward-chart').data.datasets[0].label")
    assert label == "run 1"
    assert "finished" in browser.find_element(By.ID, "trainer-table").text
    _shot(browser, "training-runs")
    assert _csp_violations(browser) == []

    # Logging out ends the session.
    browser.get(f"{base}/admin/")
    browser.find_element(By.CSS_SELECTOR, "form.logout button").click()
    browser.get(f"{base}/admin/")
    assert "/admin/login" in browser.current_url
