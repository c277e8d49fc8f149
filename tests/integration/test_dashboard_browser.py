"""The admin dashboard in a real headless Chromium, served over real HTTP by werkzeug.

The browser and the served dashboard are tests/plugins/browser.py's fixtures, shared with
the other browser tests. Screenshots land in test-artifacts/dashboard/.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugins.admin import ADMIN_TOKEN
from tests.plugins.browser import csp_violations, shot

pytestmark = pytest.mark.integration


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
    shot(browser, "jobs")

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
    shot(browser, "job")

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
    shot(browser, "outcomes")

    browser.get(f"{base}/admin/training-runs")
    wait.until(lambda d: d.execute_script("return !!(window.ribbitCharts||{}).rewards"))
    curve = browser.execute_script(
        "const c = Chart.getChart('reward-chart'); return c.data.datasets[0].data;"
    )
    assert curve == [0.25, 0.4, 0.55, 0.8, 0.9]
    label = browser.execute_script("return Chart.getChart('reward-chart').data.datasets[0].label")
    assert label == "run 1"
    assert "finished" in browser.find_element(By.ID, "trainer-table").text
    shot(browser, "training-runs")
    assert csp_violations(browser) == []

    # Logging out ends the session.
    browser.get(f"{base}/admin/")
    browser.find_element(By.CSS_SELECTOR, "form.logout button").click()
    browser.get(f"{base}/admin/")
    assert "/admin/login" in browser.current_url
