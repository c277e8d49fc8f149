"""Headless Chromium for the dashboard's browser tests, and the dashboard it drives.

Uses Debian's chromium and chromium-driver (scripts/system-deps.sh installs them);
Selenium is pointed at /usr/bin/chromedriver so it never downloads a driver.
Screenshots land in test-artifacts/dashboard/.

Fixtures: ``browser`` (a Chromium driver) and ``served`` (the app with seeded jobs,
outcomes and a training run, over real HTTP). Helpers: :func:`shot`,
:func:`csp_violations`, :func:`seed_training_run`, and for pages that re-render
themselves (the live jobs list, the health page, the reviewer page) :func:`live_wait` and
:func:`read_all`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.admin import (
    ADMIN_TOKEN,
    seed_job_with_trajectory,
    seed_jobs,
    seed_outcomes,
)
from tests.plugins.services import free_port
from tests.support import GITHUB_SECRET, require_service, serving

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM = Path("/usr/lib/chromium/chromium")  # /usr/bin/chromium is a wrapper script
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"


@pytest.fixture
def served(tmp_path: Path, dispatcher: Any) -> Iterator[tuple[str, Any]]:
    from werkzeug.serving import make_server

    from bot.settings import load_settings
    from bot.web import create_app

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
    try:
        with serving(make_server("127.0.0.1", free_port(), app, threaded=True)) as url:
            yield url, app
    finally:
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


def shot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def csp_violations(driver: Any) -> list[str]:
    return [
        e["message"]
        for e in driver.get_log("browser")
        if "Content Security Policy" in e["message"] or "Refused to" in e["message"]
    ]


def live_wait(driver: Any, timeout: float) -> Any:
    """A WebDriverWait for a live page: a condition that finds an element the page then
    replaces (admin_live.js swaps the list's HTML when its version changes) and reads it
    gets StaleElementReferenceException; that look counts as "not yet", and the next one
    finds the new element."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,))


# One script both finds and reads: the page's own scripts run on the same thread, so no
# swap can come between the two, as it can between two WebDriver calls.
_READ_ALL = """
var property = arguments[1];
return Array.from(document.querySelectorAll(arguments[0]), function (element) {
  var value = element[property];
  return typeof value === "string" ? value.trim() : String(value);
});
"""


def read_all(driver: Any, css: str, prop: str = "innerText") -> list[str]:
    """``prop`` of every element ``css`` matches, found and read in one script:
    ``innerText`` is what WebElement.text gives, ``href`` the absolute link that
    WebElement.get_attribute("href") gives."""
    found = driver.execute_script(_READ_ALL, css, prop)
    return [str(value) for value in found]
