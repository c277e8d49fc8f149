"""The agent's tools through the real sandbox backends (bubblewrap, docker via Podman)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.records.trajectory import ToolCall
from tests.fakes import ScriptedPolicy, make_git_repo
from tests.plugins.leaf_conformance import CASES, FIXTURE_FILES, call_args, expected_text
from tests.plugins.leaf_surroundings import normalised, recorded_calls, split_processes
from tests.support import require_service
from worker.agent import AgentTask, run_agent
from worker.agent.tools import ToolBox
from worker.sandbox import open_sandbox
from worker.sandbox.base import WORKSPACE, Sandbox
from worker.settings import AgentSettings

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
    assert obs[0].content == "calc.py\ntest_calc.py"
    assert obs[1].content == "calc.py\n1. def add(a, b):\n2.     return a - b"
    assert obs[2].content == "Edited calc.py (1 replacement)."
    assert obs[3].content == "Wrote notes/CHANGES.md (11 bytes)."
    assert obs[4].content == "Exit code: 0\nSTDOUT:\n5\n\nSTDERR:\n" and obs[4].exit_code == 0
    assert "+    return a + b" in result.diff
    assert "notes/CHANGES.md" in result.diff


def test_every_tool_gives_leafs_text_in_a_real_sandbox(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The whole conformance script (tests/plugins/leaf_conformance.py), the cases that
    need a real sandbox (/tmp, ~, background processes) included, on each backend."""
    for backend in ("bubblewrap", "docker"):
        settings = request.getfixturevalue(f"{backend}_settings")
        repo = tmp_path / backend
        make_git_repo(repo, FIXTURE_FILES)
        with open_sandbox(settings, repo) as sandbox:
            box = ToolBox(sandbox)
            for case in CASES:
                obs = box.run(ToolCall("c", case.tool, call_args(case, WORKSPACE)))
                assert obs.content == expected_text(case, WORKSPACE), (
                    backend,
                    case.tool,
                    case.args,
                )


def test_a_symlink_out_reads_the_sandbox_file_never_the_hosts(
    real_sandbox: Sandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST-ONLY-MARKER\n")
    real_sandbox.exec(f"ln -s {secret} leak", timeout=30)
    leak = ToolBox(real_sandbox).run(ToolCall("f", "Read", {"file_path": "leak"}))
    # The runner resolves the link inside the sandbox, where the host's file is not.
    assert leak.content == (
        f"FileNotFoundError: [Errno 2] No such file or directory: '{WORKSPACE}/leak'"
    )


def test_what_the_model_sees_around_its_command_is_a_leaf_pods(
    real_sandbox: Sandbox, request: pytest.FixtureRequest
) -> None:
    """Each recorded call of tests/fixtures/leaf_pod/bash_surroundings.json, in order, in
    a fresh sandbox: $SHLVL, /tmp, the working directories, bash's Killed line and the
    tool call's own processes as Leaf's pod showed them."""
    box = ToolBox(real_sandbox)
    for call in recorded_calls():
        seen = normalised(box.run(ToolCall("c", "Bash", {"command": call.command})).content)
        if call.command != "ps -eo args":
            assert seen == call.observation, call.command
            continue
        own, calls = split_processes(seen)
        pod_own, pod_calls = split_processes(call.observation)
        assert calls == pod_calls
        # What is not the call's: the pod's pid 1 and its sleep there; here the sandbox's
        # own, each short (the resident runner starts from a bootstrap): bubblewrap's
        # reaper and runner; docker's pid-1 loop, its sleep and the runner.
        extra = {"bubblewrap": 0, "docker": 1}[request.node.callspec.params["real_sandbox"]]
        assert len(own) == len(pod_own) + extra, own
        assert all(len(line) < 400 for line in own), own


def test_the_whole_process_list_fits_well_under_the_bash_cap(real_sandbox: Sandbox) -> None:
    # It was 38,950 characters on bubblewrap, cut at the 30,000-character cap.
    listing = ToolBox(real_sandbox).run(ToolCall("c", "Bash", {"command": "ps aux"})).content
    assert "[truncated" not in listing
    assert len(listing) < 4000, listing
