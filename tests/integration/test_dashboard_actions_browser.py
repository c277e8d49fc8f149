"""An admin retries a failed job from the dashboard in headless Chromium: the form's CSRF
token and the browser's own Origin get the POST through, and the audit log shows it."""

from __future__ import annotations

from typing import Any

import pytest

from bot.web.admin import overview
from tests.plugins.admin import ADMIN_TOKEN
from tests.plugins.browser import csp_violations, shot

pytestmark = pytest.mark.integration

FAILED_JOB = f"{3:032x}"  # seed_jobs: every fifth job from the fourth on has failed


def test_admin_retries_a_failed_job_in_chromium(
    served: tuple[str, Any], browser: Any, monkeypatch: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # No broker in this test: the health page must not wait on one.
    monkeypatch.setattr(overview, "inspect_workers", lambda _svc: [])
    base, app = served
    wait = WebDriverWait(browser, 20)
    browser.get(f"{base}/admin/login")
    browser.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
    browser.find_element(By.ID, "login-submit").click()
    wait.until(lambda d: d.find_elements(By.ID, "jobs"))

    browser.get(f"{base}/admin/jobs/{FAILED_JOB}")
    assert not browser.find_elements(By.ID, "cancel-job")
    browser.find_element(By.ID, "retry-job").click()
    wait.until(lambda d: d.find_elements(By.ID, "action-message"))
    message = browser.find_element(By.ID, "action-message").text
    assert message.startswith(f"job {FAILED_JOB} retried as ")
    audit_text = browser.find_element(By.ID, "audit").text
    assert "retry" in audit_text and f"job:{FAILED_JOB}" in audit_text and "ok" in audit_text
    shot(browser, "retry")
    assert csp_violations(browser) == []

    svc = app.extensions["ribbit"]
    new_id = message.rsplit(" ", 1)[-1]
    child = svc.store.get(new_id)
    assert child.parent_id == FAILED_JOB and child.state == "queued"
