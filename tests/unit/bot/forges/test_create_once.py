"""The create-once order both forges share: look, post, and after a lost answer look again."""

from __future__ import annotations

import pytest

from bot.forges.base import ForgeError, ForgeUnavailable
from bot.forges.create_once import CREATE_ATTEMPTS, create_once
from bot.forges.retries import RateLimited


class FakeForge:
    """A forge whose POSTs fail as scripted; ``stored`` says the object was made anyway."""

    def __init__(self, failures: list[BaseException | None], *, stored: list[bool]) -> None:
        self.failures = failures
        self.stored_on_failure = stored
        self.objects: list[int] = []
        self.calls: list[str] = []

    def create(self) -> int:
        self.calls.append("create")
        attempt = len([c for c in self.calls if c == "create"]) - 1
        failure = self.failures[attempt] if attempt < len(self.failures) else None
        if failure is None or self.stored_on_failure[attempt]:
            self.objects.append(100 + attempt)
        if failure is not None:
            raise failure
        return self.objects[-1]

    def find(self) -> int | None:
        self.calls.append("find")
        return self.objects[0] if self.objects else None

    def pause(self) -> None:
        self.calls.append("pause")


def test_first_post_that_answers_is_all() -> None:
    forge = FakeForge([], stored=[])
    assert create_once(forge.create, forge.find, pause=forge.pause) == 100
    assert forge.calls == ["create"]


def test_a_lost_answer_is_found_not_posted_again() -> None:
    forge = FakeForge([ForgeUnavailable("502")], stored=[True])
    assert create_once(forge.create, forge.find, pause=forge.pause) == 100
    assert forge.objects == [100]
    assert forge.calls == ["create", "pause", "find"]


def test_a_refused_post_is_posted_again() -> None:
    forge = FakeForge([ForgeUnavailable("502"), None], stored=[False, False])
    assert create_once(forge.create, forge.find, pause=forge.pause) == 101
    assert forge.objects == [101]
    assert forge.calls == ["create", "pause", "find", "create"]


def test_look_first_reuses_what_an_earlier_run_made() -> None:
    forge = FakeForge([], stored=[])
    forge.objects.append(7)
    assert create_once(forge.create, forge.find, look_first=True, pause=forge.pause) == 7
    assert forge.calls == ["find"]


def test_rate_limit_is_raised_at_once_without_looking() -> None:
    forge = FakeForge([RateLimited("slow down", retry_after=60)], stored=[False])
    with pytest.raises(RateLimited):
        create_once(forge.create, forge.find, pause=forge.pause)
    assert forge.calls == ["create"]


def test_other_errors_are_raised_at_once() -> None:
    forge = FakeForge([ForgeError("422")], stored=[False])
    with pytest.raises(ForgeError, match="422"):
        create_once(forge.create, forge.find, pause=forge.pause)
    assert forge.calls == ["create"]


def test_bounded_attempts_raise_the_last_failure_after_a_last_look() -> None:
    failures: list[BaseException | None] = [
        ForgeUnavailable(f"50{i}") for i in range(CREATE_ATTEMPTS)
    ]
    forge = FakeForge(failures, stored=[False] * CREATE_ATTEMPTS)
    with pytest.raises(ForgeUnavailable, match=f"50{CREATE_ATTEMPTS - 1}"):
        create_once(forge.create, forge.find, pause=forge.pause)
    assert forge.calls == ["create", "pause", "find"] * CREATE_ATTEMPTS
    assert forge.objects == []


def test_attempts_below_one_is_a_caller_error() -> None:
    forge = FakeForge([], stored=[])
    with pytest.raises(ValueError, match="at least 1"):
        create_once(forge.create, forge.find, attempts=0)
