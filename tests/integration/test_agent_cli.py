"""``ribbit run`` end to end: replayed trajectory, real sandbox, diff on stdout."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fakes import make_git_repo, record_replay
from tests.support import require_service
from worker.agent import read_jsonl
from worker.agent.cli import run

pytestmark = pytest.mark.integration

EDIT = (
    "<tool_call>\n<function=Edit>\n<parameter=file_path>\ncalc.py\n</parameter>\n"
    "<parameter=old_string>\nreturn a - b\n</parameter>\n<parameter=new_string>\n"
    "return a + b\n</parameter>\n</function>\n</tool_call>"
)


def test_ribbit_run_replays_in_a_real_sandbox(tmp_path: Path) -> None:
    require_service(
        hasattr(importlib.import_module("worker.sandbox"), "open_sandbox"),
        "worker.sandbox.open_sandbox",
    )
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    repo = tmp_path / "repo"
    make_git_repo(repo, {"calc.py": "def add(a, b):\n    return a - b\n"})
    replay = record_replay(repo, tmp_path / "recorded.jsonl", [EDIT, "Fixed."])
    issue = tmp_path / "issue.md"
    issue.write_text("# add() subtracts\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        run,
        [
            "--checkout",
            str(repo),
            "--issue-file",
            str(issue),
            "--replay",
            str(replay),
            "--trajectory-out",
            str(out),
            "--backend",
            "bubblewrap",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "+    return a + b" in result.stdout
    assert "ribbit run: agent after 2 turns" in result.stderr
    assert read_jsonl(out)[0].exit_reason == "agent"
    assert "a - b" in (repo / "calc.py").read_text()  # the checkout itself is untouched
