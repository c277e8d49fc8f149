"""`ribbit sandbox check --json`: the same facts as its lines, for a script (issue #36
item 6), with the same exit status."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from bot.cli import main
from worker.sandbox import BackendCheck


@pytest.mark.parametrize(("docker_ok", "exit_code"), [(True, 0), (False, 1)])
def test_sandbox_check_json_says_which_backend_works(
    monkeypatch: pytest.MonkeyPatch, docker_ok: bool, exit_code: int
) -> None:
    checks = [
        BackendCheck("docker", docker_ok, "engine 27.1" if docker_ok else "no engine"),
        BackendCheck("bubblewrap", False, "bwrap not found"),
    ]
    monkeypatch.setattr("worker.sandbox.cli.check_backends", lambda _settings: checks)
    result = CliRunner().invoke(main, ["sandbox", "check", "--json"])
    assert result.exit_code == exit_code, result.output
    assert json.loads(result.stdout) == {
        "usable": docker_ok,
        "backends": [
            {"name": "docker", "ok": docker_ok, "detail": checks[0].detail},
            {"name": "bubblewrap", "ok": False, "detail": "bwrap not found"},
        ],
    }
