"""The agent's tools through the real sandbox backends (bubblewrap, docker via Podman)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.settings import AgentSettings
from tests.conftest import require_service
from tests.fakes import ScriptedPolicy, make_git_repo
from worker.agent import AgentTask, run_agent
from worker.agent.tools import ToolBox
from worker.agent.trajectory import ToolCall
from worker.sandbox.base import Sandbox

pytestmark = pytest.mark.integration

FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


def xml_call(name: str, **args: str) -> str:
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


@pytest.fixture(params=["bubblewrap", "docker"])
def real_sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandbox]:
    module = importlib.import_module("worker.sandbox")
    open_sandbox = getattr(module, "open_sandbox", None)
    require_service(open_sandbox is not None, "worker.sandbox.open_sandbox")
    try:
        settings = request.getfixturevalue(f"{request.param}_settings")
    except pytest.FixtureLookupError:
        require_service(False, f"{request.param}_settings fixture (tests/plugins/sandbox.py)")
    repo = tmp_path / "repo"
    make_git_repo(repo, FILES)
    assert open_sandbox is not None
    with open_sandbox(settings, repo, network=False) as sandbox:
        yield sandbox


def test_agent_fixes_a_bug_in_a_real_sandbox(real_sandbox: Sandbox) -> None:
    script = [
        xml_call("Glob", pattern="**/*.py"),
        xml_call("Read", file_path="calc.py"),
        xml_call("Edit", file_path="calc.py", old_string="return a - b", new_string="return a + b"),
        xml_call("Write", file_path="notes/CHANGES.md", content="Fixed add.\n"),
        xml_call("Bash", command="python3 -B -c 'import calc; print(calc.add(2, 3))'"),
        "Fixed add(); it now returns 5 for add(2, 3).",
    ]
    result = run_agent(
        AgentTask("add() subtracts", "Fix it."),
        real_sandbox,
        ScriptedPolicy(script),
        AgentSettings(),
    )
    assert result.exit_reason == "agent"
    obs = [t.observations[0] for t in result.trajectory.turns[:-1]]
    assert not any(o.is_error for o in obs), [o.content for o in obs]
    assert obs[0].content.splitlines() == ["calc.py", "test_calc.py"]
    assert "     2\t    return a - b" in obs[1].content
    assert obs[4].exit_code == 0 and "5" in obs[4].content
    assert "+    return a + b" in result.diff
    assert "notes/CHANGES.md" in result.diff


def test_agent_path_mistakes_are_observations_in_a_real_sandbox(real_sandbox: Sandbox) -> None:
    box = ToolBox(real_sandbox)
    outcomes = [
        box.run(ToolCall("a", "Read", {"file_path": "missing.py"})),
        box.run(ToolCall("b", "Read", {"file_path": "/etc/passwd"})),
        box.run(ToolCall("c", "Write", {"file_path": "calc.py/inner.txt", "content": "x"})),
        box.run(
            ToolCall("d", "Edit", {"file_path": "calc.py", "old_string": "nope", "new_string": "x"})
        ),
        box.run(ToolCall("e", "Glob", {"pattern": "*", "path": "no-such-dir"})),
    ]
    assert all(o.is_error for o in outcomes), [o.content for o in outcomes]
    real_sandbox.exec("ln -s /etc/passwd leak", timeout=30)
    leak = box.run(ToolCall("f", "Read", {"file_path": "leak"}))
    assert "root:" not in leak.content
