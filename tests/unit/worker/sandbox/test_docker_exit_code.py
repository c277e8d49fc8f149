"""The engine's exit code, asked for again while it has not recorded one yet."""

from __future__ import annotations

from typing import Any

import pytest

from worker.sandbox.base import SandboxError
from worker.sandbox.docker import _exit_code


class FakeApi:
    def __init__(self, answers: list[int | None]) -> None:
        self.answers = answers
        self.asked = 0

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        assert exec_id == "e1"
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return {"ExitCode": answer}


def test_exit_code_waits_until_the_engine_records_it() -> None:
    api = FakeApi([None, None, 3])
    waits: list[float] = []
    assert _exit_code(api, "e1", sleep=waits.append) == 3
    assert api.asked == 3 and waits == [0.02, 0.02]


def test_exit_code_never_recorded_is_a_sandbox_error() -> None:
    api = FakeApi([None])
    waits: list[float] = []
    with pytest.raises(SandboxError, match="did not report"):
        _exit_code(api, "e1", sleep=waits.append)
    assert api.asked == 50 and len(waits) == 49
