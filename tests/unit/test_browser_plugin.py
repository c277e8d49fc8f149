"""The browser tests' helpers for live pages (tests/plugins/browser.py), on a recording
stand-in for the driver: a wait that takes a replaced element as "not yet", and a read
that finds and reads in one script."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.support.ui import WebDriverWait

from tests.plugins.browser import live_wait, read_all


class ScriptedDriver:
    """Answers execute_script from a list; records each script and its arguments."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def execute_script(self, script: str, *args: Any) -> Any:
        self.calls.append((script, args))
        return self.answers.pop(0)


def _swapped_once() -> tuple[Callable[[object], str], list[int]]:
    """A condition whose first look meets an element the page replaced between its find
    and its read, and whose later looks see the new one."""
    looks: list[int] = []

    def badge(_driver: object) -> str:
        looks.append(1)
        if len(looks) == 1:
            raise StaleElementReferenceException("element is not attached to the page")
        return "succeeded"

    return badge, looks


def test_live_wait_takes_a_replaced_element_as_not_yet() -> None:
    badge, looks = _swapped_once()
    assert live_wait(ScriptedDriver([]), 5).until(badge) == "succeeded"
    assert len(looks) == 2


def test_a_plain_wait_fails_on_a_replaced_element() -> None:
    # What the live tests did before live_wait, and how they failed on a loaded machine.
    badge, _ = _swapped_once()
    with pytest.raises(StaleElementReferenceException):
        WebDriverWait(ScriptedDriver([]), 5).until(badge)


def test_read_all_finds_and_reads_in_one_script() -> None:
    driver = ScriptedDriver([["2"], ["http://h/admin/jobs/1", 3]])
    assert read_all(driver, "#job-total") == ["2"]
    assert read_all(driver, "a.job-link", "href") == ["http://h/admin/jobs/1", "3"]
    assert [args for _, args in driver.calls] == [
        ("#job-total", "innerText"),
        ("a.job-link", "href"),
    ]
    script = driver.calls[0][0]
    assert "querySelectorAll(arguments[0])" in script and "element[property]" in script
