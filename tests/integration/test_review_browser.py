"""A reviewer follows the link in the status comment and watches the agent work, in a
real headless Chromium, against the bot as deployed (web app over HTTP, a Celery
worker on Redis, the local forge, a bubblewrap sandbox, the real gates).

The policy plays GOOD_SCRIPT one turn per step the test releases, so the page is seen
at turn 0, 1, 2 and 3 of a running job, each step driven by an event, never a sleep.
Screenshots land in test-artifacts/dashboard/ (review-*.png).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from bot.settings import ReviewerSettings
from tests.fakes import ScriptedPolicy
from tests.plugins.browser import csp_violations, live_wait, shot
from tests.plugins.e2e import GOOD_SCRIPT, bot_comments, label_issue, new_repo, wait_for
from tests.plugins.services import free_port
from tests.support import LINK_SECRET

pytestmark = pytest.mark.integration

LINK = re.compile(r"\[Follow this job\]\((http://[^)\s]+)\)")


class SteppedPolicy:
    """GOOD_SCRIPT, one turn per ``step()``: the worker waits in generate() until the
    test lets the next turn through (or the job is cancelled)."""

    name = "scripted"
    model_name = "scripted"

    def __init__(self, script: list[str]) -> None:
        self.inner = ScriptedPolicy(script)
        self.permits = threading.Semaphore(0)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.permits.release()

    def generate(
        self,
        messages: Sequence[Mapping[str, object]],
        tools: Sequence[dict[str, Any]],
        *,
        limits: object = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Any:
        from worker.agent.policy import PolicyError

        # The timeout only lets a cancelled job leave; the test's progress never waits on it.
        while not self.permits.acquire(timeout=0.5):
            if should_stop is not None and should_stop():
                raise PolicyError("stopped")
        return self.inner.generate(messages, tools, limits=limits, should_stop=should_stop)


def test_reviewer_follows_the_status_link_and_watches_turns_rise(
    forge_world: Any, deployment_for: Any, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from selenium.webdriver.common.by import By

    policy = SteppedPolicy(GOOD_SCRIPT)
    monkeypatch.setattr("worker.agent.load_policy", lambda *a, **k: policy)
    port = free_port()
    dep = deployment_for(
        GOOD_SCRIPT,
        port=port,
        reviewer=ReviewerSettings(
            link_secret=LINK_SECRET,  # type: ignore[arg-type]
            public_url=f"http://127.0.0.1:{port}",
            status_edit_interval_s=0,  # every turn edits the comment (bounded in unit tests)
            poll_interval_s=0.2,
        ),
    )
    try:
        repo = new_repo(forge_world, "github")
        number = label_issue(forge_world, "github", repo)
        [job] = dep.store.list()
        wait_for(lambda: dep.store.get(job.id).stage == "agent", what="agent stage")

        def status_body() -> str:
            bodies = [c.body for c in bot_comments(forge_world, "github", repo, number)]
            return bodies[0] if len(bodies) == 1 else ""

        body = wait_for(lambda: "agent is working" in (b := status_body()) and b, what="status")
        match = LINK.search(body)
        assert match, body
        link = match.group(1)
        assert link.startswith(f"{dep.url}/review/jobs/{job.id}?sig=")
        wait = live_wait(browser, 30)

        # Without the signature, with an altered one, or another job's: refused, nothing shown.
        browser.get(f"{dep.url}/review/jobs/{job.id}")
        refusal = browser.find_element(By.ID, "refusal")
        assert refusal.get_attribute("data-reason") == "missing"
        assert "signed link" in refusal.text
        assert "add() subtracts" not in browser.page_source
        shot(browser, "review-refused-missing")
        sig = link.split("sig=", 1)[1]
        browser.get(
            f"{dep.url}/review/jobs/{job.id}?sig={sig[:-2]}{'AA' if sig[-2:] != 'AA' else 'BB'}"
        )
        assert browser.find_element(By.ID, "refusal").get_attribute("data-reason") == "invalid"
        shot(browser, "review-refused-forged")
        browser.get(link.replace(job.id, "0" * 32))
        assert browser.find_element(By.ID, "refusal").get_attribute("data-reason") == "invalid"

        # The link from the comment: the running job, no turn yet.
        browser.get(link)
        assert browser.find_element(By.ID, "job-state").text == "running"
        assert browser.find_element(By.ID, "turn-count").text == "0"
        browser.execute_script("window.sameDocument = true;")
        shot(browser, "review-turn-0")

        def turns_shown(n: int) -> Callable[[Any], bool]:
            def seen(d: Any) -> bool:
                return d.find_element(By.ID, "turn-count").text == str(n) and (
                    len(d.find_elements(By.CSS_SELECTOR, "details.turn")) == n
                )

            return seen

        for n in (1, 2, 3):
            policy.step()
            wait.until(turns_shown(n))
            step = browser.find_element(By.ID, "current-step").text
            assert "the agent is working (last ran" in step, step
            shot(browser, f"review-turn-{n}")
        # The page updated itself: the same document throughout, never reloaded.
        assert browser.execute_script("return window.sameDocument === true")
        # A turn opened by the reviewer stays open across updates; reasoning is folded.
        first = browser.find_element(By.ID, "turn-0")
        first.find_element(By.TAG_NAME, "summary").click()
        assert "Read the code first." in first.find_element(
            By.CSS_SELECTOR, "details.reasoning"
        ).get_attribute("textContent")
        assert "calc.py" in first.text
        # The comment showed the count as it rose.
        [comment] = bot_comments(forge_world, "github", repo, number)
        history = [*comment.history, comment.body]
        assert any("Turn 2 ·" in h for h in history) and any("Turn 3 ·" in h for h in history)

        policy.step()  # the final answer: the job goes on to the gates and the PR
        wait.until(lambda d: d.find_element(By.ID, "job-state").text == "succeeded")
        assert browser.find_element(By.ID, "turn-count").text == "4"
        assert browser.find_element(By.ID, "turn-0").get_attribute("open")  # kept open
        assert "+    return a + b" in browser.find_element(By.ID, "diff").text
        assert "tests" in browser.find_element(By.ID, "gates").text
        assert browser.execute_script("return window.sameDocument === true")
        assert not csp_violations(browser)
        shot(browser, "review-finished")

        # The draft PR's body carries the same link, and it opens the page too.
        [pr] = forge_world.forge.pulls("github", repo)
        assert f"[job page]({link})" in pr.body
        browser.get(link)
        assert browser.find_element(By.ID, "turn-count").text == "4"
        assert "Follow this job" in status_body()
    finally:
        policy.step(10)  # never leave the worker waiting on a failed test
