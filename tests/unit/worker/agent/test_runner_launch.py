"""How a tool call reaches the runner: Leaf's pod script, built string for string, and
what the model can see around its command, run through bash on a plain directory
against the observations recorded in Leaf's pod (tests/plugins/leaf_surroundings.py).
The process list and /tmp need a real sandbox: tests/integration/test_agent_sandbox.py."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.store.records.trajectory import ToolCall
from tests.fakes import LocalDirSandbox, make_git_repo
from tests.plugins.leaf_surroundings import normalised, recorded
from worker.agent.runner_launch import (
    FIND_PYTHON,
    LEAF_PLACES,
    RunnerPlaces,
    leaf_command,
    pod_script,
    provision_argv,
    read_reply,
    request_text,
    runner_call,
)
from worker.agent.tools import ToolBox, ToolRunError

REQUEST = "/tmp/frognano_leaf_request_0123456789abcdef0123456789abcdef.json"
SENTINEL = "__FROGNANO_RC_fedcba9876543210fedcba9876543210__"


# -- the command, as Leaf builds it ---------------------------------------------------------
def test_the_pod_script_is_leafs_string_for_string() -> None:
    # environment.py @ 5229bdfe (_execute) inside kubernetes.py @ 354fccee (run, workdir="/").
    assert pod_script(leaf_command(LEAF_PLACES, REQUEST), SENTINEL) == (
        "cd / && (trap 'rm -f -- /tmp/frognano_leaf_request_0123456789abcdef0123456789abcdef"
        ".json' EXIT; python_bin=$(test -x /usr/bin/python3 && echo /usr/bin/python3 || "
        'command -v python3 || command -v python); "$python_bin" '
        "/tmp/frognano_leaf_tool_runner.py /tmp/frognano_leaf_request_0123456789abcdef"
        "0123456789abcdef.json); rc=$?; printf '\\n__FROGNANO_RC_fedcba9876543210fedcba98"
        '76543210__%s\\n\' "$rc"'
    )
    assert FIND_PYTHON in leaf_command(LEAF_PLACES, REQUEST)


def test_places_are_quoted_as_leaf_quotes_them() -> None:
    places = RunnerPlaces(runner="/t d/runner.py", request_prefix="/t d/req_", workdir="/w")
    command = leaf_command(places, "/t d/req_1.json")
    assert command.startswith("trap 'rm -f -- '\"'\"'/t d/req_1.json'\"'\"'' EXIT; ")
    assert command.endswith("\"$python_bin\" '/t d/runner.py' '/t d/req_1.json'")


def test_a_call_writes_its_request_then_becomes_leafs_shell() -> None:
    request = request_text("Bash", {"command": "ls"}, "/workspace", {})
    call = runner_call(LEAF_PLACES, request)
    shell, flag, writer, argv0, path, script, *pieces = call.argv
    assert (shell, flag, argv0) == ("/bin/bash", "-c", "ribbit-tool")
    assert re.fullmatch(r"/tmp/frognano_leaf_request_[0-9a-f]{32}\.json", path)
    assert re.fullmatch(r"__FROGNANO_RC_[0-9a-f]{32}__", call.sentinel)
    assert script == pod_script(leaf_command(LEAF_PLACES, path), call.sentinel)
    assert "".join(pieces) == request
    # The writer ends in exec, so its argv (the request) is gone before the runner starts.
    assert writer.endswith('&& exec /bin/bash -lc "$script"')
    assert runner_call(LEAF_PLACES, request).sentinel != call.sentinel


def test_the_request_has_leafs_keys_and_options_only_when_on() -> None:
    assert json.loads(request_text("Read", {"file_path": "a"}, "/workspace", {})) == {
        "tool": "Read",
        "args": {"file_path": "a"},
        "workdir": "/workspace",
    }
    on = json.loads(request_text("Read", {}, "/w", {"keep_tail": True}))
    assert on["options"] == {"keep_tail": True}
    assert "\u00e9" in request_text("Write", {"content": "\u00e9"}, "/w", {})  # UTF-8, as Leaf
    with pytest.raises(UnicodeEncodeError):
        request_text("Bash", {"command": "echo \ud800"}, "/w", {})


def test_the_runner_is_written_where_leaf_copies_it(tmp_path: Path) -> None:
    places = RunnerPlaces(runner=str(tmp_path / "deep" / "r.py"))
    done = subprocess.run(provision_argv(places, "print('x')\n"), check=False, timeout=30)
    assert done.returncode == 0
    assert (tmp_path / "deep" / "r.py").read_text() == "print('x')\n"


def test_the_reply_is_read_after_the_marker_as_leaf_reads_it() -> None:
    reply = read_reply(SENTINEL, f"out\n\n{SENTINEL}0\n", "")
    assert reply is not None and (reply.output, reply.exit_code) == ("out\n", 0)
    killed = read_reply(SENTINEL, f"\n{SENTINEL}137\n", "/bin/bash: line 1: Killed\n")
    assert killed is not None
    assert (killed.output, killed.exit_code) == ("/bin/bash: line 1: Killed\n", 137)
    assert read_reply(SENTINEL, "the shell died first", "") is None
    assert read_reply(SENTINEL, f"\n{SENTINEL}0\ntrailing", "") is None  # not at the end


# -- what the model sees around its command, against Leaf's pod ---------------------------
@pytest.fixture
def plain_dir(tmp_path: Path) -> Iterator[LocalDirSandbox]:
    repo = tmp_path / "repo"
    make_git_repo(repo, {"calc.py": "x = 1\n"})
    with LocalDirSandbox(repo) as sandbox:
        yield sandbox


def _bash(box: ToolBox, command: str) -> str:
    return box.run(ToolCall("c", "Bash", {"command": command})).content


def test_shell_level_and_killed_line_are_the_pods(plain_dir: LocalDirSandbox) -> None:
    box = ToolBox(plain_dir)
    assert _bash(box, "echo $SHLVL") == recorded("echo $SHLVL")
    runner = LEAF_PLACES.runner
    killed = normalised(_bash(box, "kill -9 $PPID")).replace(box.places.runner, runner)
    killed = killed.replace(box.places.request_prefix, LEAF_PLACES.request_prefix)
    assert killed == recorded("kill -9 $PPID")
    # The runner's death does not break the next call.
    assert _bash(box, "echo after") == "Exit code: 0\nSTDOUT:\nafter\n\nSTDERR:\n"


def test_working_directories_are_the_pods(plain_dir: LocalDirSandbox) -> None:
    seen = _bash(ToolBox(plain_dir), 'echo "$PWD $OLDPWD"')
    assert seen.replace(str(plain_dir.workspace), "/workspace") == recorded('echo "$PWD $OLDPWD"')


def test_no_request_file_is_left_behind(plain_dir: LocalDirSandbox) -> None:
    box = ToolBox(plain_dir)
    _bash(box, "kill -9 $PPID")
    _bash(box, "true")
    left = sorted(p.name for p in Path(box.places.runner).parent.iterdir())
    assert left == ["frognano_leaf_tool_runner.py"]


def test_a_call_whose_shell_dies_ends_the_episode_as_leaf_does(
    plain_dir: LocalDirSandbox,
) -> None:
    # Killing the call's outer shell (with its whole group) loses the exit marker, where
    # Leaf raises RuntimeError.
    with pytest.raises(ToolRunError, match=r"^RuntimeError: pod command returned no exit marker"):
        _bash(ToolBox(plain_dir), "kill -9 -- -$(ps -o pgid= -p $PPID | tr -d ' ')")
