from __future__ import annotations

import threading

import pytest

from tests.fakes import LocalDirSandbox
from worker.agent.tools import (
    GLOB_MAX_MATCHES,
    TOOL_NAMES,
    TOOL_SCHEMAS,
    ToolBox,
    cap_text,
    normalize_path,
)
from worker.agent.trajectory import ToolCall


def call(name: str, **args: object) -> ToolCall:
    return ToolCall("c1", name, dict(args))


def test_tools_are_exactly_the_trained_five() -> None:
    assert TOOL_NAMES == ("Read", "Write", "Edit", "Glob", "Bash")
    for schema in TOOL_SCHEMAS:
        assert schema["type"] == "function"
        assert schema["function"]["parameters"]["required"]


def test_read_numbers_lines(sandbox: LocalDirSandbox) -> None:
    obs = ToolBox(sandbox).run(call("Read", file_path="calc.py"))
    assert not obs.is_error
    assert obs.content.splitlines()[0] == "     1\tdef add(a, b):"
    assert "     2\t    return a - b" in obs.content


def test_read_offset_limit_and_continuation_hint(sandbox: LocalDirSandbox) -> None:
    obs = ToolBox(sandbox).run(call("Read", file_path="calc.py", offset=2, limit=2))
    lines = obs.content.splitlines()
    assert lines[0].startswith("     2\t")
    assert lines[1] == "     3\t"
    assert "use offset=4" in lines[2]


def test_read_accepts_path_alias_and_workspace_absolute(sandbox: LocalDirSandbox) -> None:
    box = ToolBox(sandbox)
    assert "def add" in box.run(call("Read", path="calc.py")).content
    assert "def add" in box.run(call("Read", file_path="/workspace/calc.py")).content


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"file_path": "nope.py"}, "no such file"),
        ({"file_path": "pkg"}, "is a directory"),
        ({"file_path": "../outside"}, "outside the repository"),
        ({"file_path": "/etc/passwd"}, "outside the repository"),
        ({"file_path": "calc.py", "offset": 0}, "1-based"),
        ({"file_path": "calc.py", "offset": 99}, "past the end"),
        ({"file_path": "calc.py", "limit": 0}, "limit must be"),
        ({"file_path": "calc.py", "offset": "two"}, "must be an integer"),
        ({}, "Read needs file_path"),
        ({"file_path": "calc.py", "colour": "red"}, "has no parameter 'colour'"),
        ({"file_path": ""}, "file path is empty"),
    ],
)
def test_read_errors_are_observations(
    sandbox: LocalDirSandbox, args: dict[str, object], message: str
) -> None:
    obs = ToolBox(sandbox).run(ToolCall("c", "Read", args))
    assert obs.is_error
    assert obs.content.startswith("Error: ")
    assert message in obs.content


def test_read_binary_and_long_lines(sandbox: LocalDirSandbox) -> None:
    sandbox.write_file("blob.bin", b"\x00\x01\x02")
    sandbox.write_file("long.txt", b"x" * 5000 + b"\n")
    box = ToolBox(sandbox)
    assert "binary file" in box.run(call("Read", file_path="blob.bin")).content
    long = box.run(call("Read", file_path="long.txt")).content
    assert "[line truncated]" in long
    assert len(long) < 2100


def test_write_creates_parent_folders(sandbox: LocalDirSandbox) -> None:
    obs = ToolBox(sandbox).run(call("Write", file_path="new/deep/file.txt", content="hi\n"))
    assert not obs.is_error, obs.content
    assert sandbox.read_file("new/deep/file.txt") == b"hi\n"
    assert "new/deep/file.txt" in sandbox.diff()


def test_write_errors(sandbox: LocalDirSandbox) -> None:
    box = ToolBox(sandbox)
    assert "Write needs content" in box.run(call("Write", file_path="a.txt")).content
    assert "is a directory" in box.run(call("Write", file_path="pkg", content="x")).content
    assert "outside" in box.run(call("Write", file_path="../evil", content="x")).content


def test_edit_replaces_unique_text(sandbox: LocalDirSandbox) -> None:
    obs = ToolBox(sandbox).run(
        call(
            "Edit",
            file_path="calc.py",
            old_string="def add(a, b):\n    return a - b",
            new_string="def add(a, b):\n    return a + b",
        )
    )
    assert not obs.is_error, obs.content
    assert "replaced 1 occurrence" in obs.content
    assert "return a + b" in sandbox.read_file("calc.py").decode()
    assert "-    return a - b\n+    return a + b" in sandbox.diff()


def test_edit_ambiguous_needs_replace_all(sandbox: LocalDirSandbox) -> None:
    box = ToolBox(sandbox)
    obs = box.run(call("Edit", file_path="pkg/util.py", old_string="X = 1", new_string="X = 2"))
    assert obs.is_error and "occurs 2 times" in obs.content
    assert sandbox.read_file("pkg/util.py") == b"X = 1\nX = 1\n"  # untouched
    obs = box.run(
        call(
            "Edit",
            file_path="pkg/util.py",
            old_string="X = 1",
            new_string="X = 2",
            replace_all="true",
        )
    )
    assert not obs.is_error and "2 occurrences" in obs.content
    assert sandbox.read_file("pkg/util.py") == b"X = 2\nX = 2\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"file_path": "calc.py", "old_string": "nothing like it", "new_string": "x"},
            "old_string not found",
        ),
        ({"file_path": "calc.py", "old_string": "", "new_string": "x"}, "old_string is empty"),
        ({"file_path": "calc.py", "old_string": "add", "new_string": "add"}, "the same"),
        ({"file_path": "missing.py", "old_string": "a", "new_string": "b"}, "no such file"),
        ({"file_path": "calc.py", "old_string": "a"}, "Edit needs new_string"),
        (
            {
                "file_path": "calc.py",
                "old_string": "add",
                "new_string": "x",
                "replace_all": "maybe",
            },
            "must be true or false",
        ),
    ],
)
def test_edit_errors(sandbox: LocalDirSandbox, args: dict[str, object], message: str) -> None:
    before = sandbox.read_file("calc.py")
    obs = ToolBox(sandbox).run(ToolCall("c", "Edit", args))
    assert obs.is_error and message in obs.content
    assert sandbox.read_file("calc.py") == before


def test_glob_recursive_and_in_folder(sandbox: LocalDirSandbox) -> None:
    box = ToolBox(sandbox)
    obs = box.run(call("Glob", pattern="**/*.py"))
    assert obs.content.splitlines() == ["calc.py", "pkg/util.py", "tests/test_calc.py"]
    assert box.run(call("Glob", pattern="*.py", path="pkg")).content == "pkg/util.py"
    assert "No files match" in box.run(call("Glob", pattern="*.rs")).content
    assert "No files match" in box.run(call("Glob", pattern="absent.txt")).content


def test_glob_pattern_is_never_shell_code(sandbox: LocalDirSandbox) -> None:
    obs = ToolBox(sandbox).run(call("Glob", pattern="$(touch pwned)*"))
    assert "No files match" in obs.content
    obs = ToolBox(sandbox).run(call("Glob", pattern="*; touch pwned2"))
    assert "pwned" not in sandbox.diff()


def test_glob_caps_matches(sandbox: LocalDirSandbox) -> None:
    for i in range(GLOB_MAX_MATCHES + 5):
        sandbox.write_file(f"many/f{i:05}.txt", b"")
    obs = ToolBox(sandbox).run(call("Glob", pattern="many/*.txt"))
    lines = obs.content.splitlines()
    assert len(lines) == GLOB_MAX_MATCHES + 1
    assert f"more than {GLOB_MAX_MATCHES} matches" in lines[-1]


def test_glob_errors(sandbox: LocalDirSandbox) -> None:
    box = ToolBox(sandbox)
    assert "no such folder" in box.run(call("Glob", pattern="*", path="nope")).content
    assert "without .." in box.run(call("Glob", pattern="../*")).content
    assert "pattern is empty" in box.run(call("Glob", pattern=" ")).content


def test_bash_reports_exit_code_and_streams(sandbox: LocalDirSandbox) -> None:
    obs = ToolBox(sandbox).run(
        call("Bash", command="echo out; echo err >&2; exit 3", description="test")
    )
    assert not obs.is_error
    assert obs.exit_code == 3
    assert obs.content.startswith("Exit code: 3")
    assert "--- stdout ---\nout" in obs.content
    assert "--- stderr ---\nerr" in obs.content


def test_bash_runs_in_the_repository(sandbox: LocalDirSandbox) -> None:
    obs = ToolBox(sandbox).run(call("Bash", command="git status --short; ls"))
    assert "calc.py" in obs.content


def test_bash_timeout(sandbox: LocalDirSandbox) -> None:
    obs = ToolBox(sandbox).run(call("Bash", command="sleep 10", timeout=1))
    assert obs.exit_code == 124
    assert "timed out after 1 s" in obs.content


def test_bash_errors(sandbox: LocalDirSandbox) -> None:
    box = ToolBox(sandbox)
    assert "command is empty" in box.run(call("Bash", command="  ")).content
    assert "timeout must be" in box.run(call("Bash", command="true", timeout=0)).content
    assert "must be an integer" in box.run(call("Bash", command="true", timeout=True)).content


def test_bash_output_keeps_head_and_tail(sandbox: LocalDirSandbox) -> None:
    box = ToolBox(sandbox, output_chars=2000)
    obs = box.run(call("Bash", command="echo START; seq 1 20000; echo END"))
    assert obs.truncated
    assert "START" in obs.content and "END" in obs.content
    assert "characters truncated" in obs.content
    assert len(obs.content) < 2200


def test_bash_returns_promptly_when_cancelled(sandbox: LocalDirSandbox) -> None:
    cancel = threading.Event()
    box = ToolBox(sandbox, should_stop=cancel.is_set)
    threading.Timer(0.3, cancel.set).start()
    obs = box.run(call("Bash", command="sleep 5"))
    # Returned while the command still ran: a finished one would show its exit code.
    assert obs.is_error and "cancelled" in obs.content and obs.exit_code is None


def test_unknown_tool_and_parse_error_become_observations(sandbox: LocalDirSandbox) -> None:
    box = ToolBox(sandbox)
    obs = box.run(ToolCall("c", "Delete", {"file_path": "x"}))
    assert obs.is_error and "unknown tool 'Delete'" in obs.content and "Read" in obs.content
    obs = box.run(ToolCall("c", "Read", {}, error="tool call to Read is truncated"))
    assert obs.is_error and "truncated" in obs.content


def test_cap_text_marks_the_cut() -> None:
    text, cut = cap_text("a" * 100 + "b" * 100, 60)
    assert cut and text.startswith("a") and text.endswith("b") and "truncated" in text
    assert cap_text("short", 60) == ("short", False)


def test_normalize_path() -> None:
    assert normalize_path("./a/../b.py") == "b.py"
    assert normalize_path("/workspace/x/y") == "x/y"
    with pytest.raises(ValueError):
        normalize_path("/workspace/../etc")


def test_read_empty_file_and_edit_shows_the_changed_lines(sandbox: LocalDirSandbox) -> None:
    sandbox.write_file("empty.txt", b"")
    box = ToolBox(sandbox)
    assert box.run(call("Read", file_path="empty.txt")).content == "empty.txt is empty."
    obs = box.run(call("Edit", file_path="calc.py", old_string="def sub", new_string="def minus"))
    assert "     5\tdef minus(a, b):" in obs.content
