"""The tools against Leaf's exact strings, run through Ribbit's in-sandbox runner on a
plain directory (LocalDirSandbox: the runner runs as it would in a sandbox, without one).
The same script runs through both real sandbox backends in
tests/integration/test_agent_sandbox.py."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from bot.store.records.trajectory import ToolCall
from tests.fakes import LocalDirSandbox, make_git_repo
from tests.plugins.leaf_conformance import CASES, FIXTURE_FILES, call_args, expected_text
from worker.agent.prompt import SYSTEM_PROMPT
from worker.agent.runner_launch import LEAF_PLACES, runner_call
from worker.agent.tools import (
    TOOL_NAMES,
    TOOL_SCHEMAS,
    ToolBox,
    ToolOptions,
    ToolRunError,
    runner_request,
    runner_timeout_s,
)
from worker.sandbox.base import WORKSPACE, ExecResult

# sha256 of json.dumps(OPENAI_TOOLS, separators=(",", ":")) and of SYSTEM_PROMPT, computed
# from Leaf's tools.py @ 354fccee (microsoft/FrogNano) as published.
LEAF_TOOLS_JSON_SHA256 = "32e613b27deb12796fa6f225882eccd4025bb34b5eba342878ecfe4f956bf868"
LEAF_SYSTEM_PROMPT_SHA256 = "b87b133b10baf697fc7d6d0213247525a6b8c4b6f2d6fb018578e1e4cb20eb8f"


@pytest.fixture
def fixture_sandbox(tmp_path: Path) -> Iterator[LocalDirSandbox]:
    repo = tmp_path / "repo"
    make_git_repo(repo, FIXTURE_FILES)
    with LocalDirSandbox(repo) as sb:
        yield sb


def call(name: str, **args: object) -> ToolCall:
    return ToolCall("c1", name, dict(args))


def test_tools_are_exactly_the_trained_five() -> None:
    assert TOOL_NAMES == ("Read", "Write", "Edit", "Glob", "Bash")


def test_schemas_are_leafs_byte_for_byte() -> None:
    # Leaf's OPENAI_TOOLS as JSON; any change to a description or type changes the text.
    text = json.dumps(TOOL_SCHEMAS, separators=(",", ":"))
    assert '"name":"Read","description":"Read a text file. Returns numbered lines."' in text
    assert '"timeout":{"type":"number","description":"Optional timeout in seconds."}' in text
    assert '"description":"Glob pattern, e.g. **/*.py."' in text
    assert (
        '"replace_all":{"type":"boolean","description":"Replace every occurrence instead of '
        'requiring one match."}' in text
    )
    assert hashlib.sha256(text.encode()).hexdigest() == LEAF_TOOLS_JSON_SHA256
    assert hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest() == LEAF_SYSTEM_PROMPT_SHA256


def test_every_case_gives_leafs_text(fixture_sandbox: LocalDirSandbox) -> None:
    box = ToolBox(fixture_sandbox)
    workspace = str(fixture_sandbox.workspace)
    for case in CASES:
        if case.sandbox_only:
            continue
        obs = box.run(ToolCall("c", case.tool, call_args(case, workspace)))
        assert obs.content == expected_text(case, workspace), (case.tool, case.args)


def test_bash_observation_records_exit_code_and_errors(fixture_sandbox: LocalDirSandbox) -> None:
    box = ToolBox(fixture_sandbox)
    obs = box.run(call("Bash", command="exit 3"))
    assert obs.exit_code == 3 and not obs.is_error
    assert box.run(call("Read", file_path="nope")).is_error
    assert box.run(call("Delete")).is_error


def test_large_arguments_travel_in_pieces(fixture_sandbox: LocalDirSandbox) -> None:
    content = "x" * 250_000 + "\u00e9"
    request = runner_request(
        "Write", {"file_path": "big.txt", "content": content}, ToolOptions(), "/w"
    )
    argv = runner_call(LEAF_PLACES, request).argv
    assert len(argv) > 7 and all(len(piece.encode()) < 128 * 1024 for piece in argv)
    obs = ToolBox(fixture_sandbox).run(call("Write", file_path="big.txt", content=content))
    assert obs.content == "Wrote big.txt (250001 bytes)."
    assert fixture_sandbox.read_file("big.txt") == content.encode()


def test_unparseable_call_runs_with_empty_arguments(fixture_sandbox: LocalDirSandbox) -> None:
    bad = ToolCall("c", "Read", {"file_path": "calc.py"}, error="arguments are not valid JSON")
    assert ToolBox(fixture_sandbox).run(bad).content == "ValueError: file_path is required"
    recovered = ToolBox(fixture_sandbox, options=ToolOptions(recover_malformed_calls=True)).run(bad)
    assert recovered.content == "Error: arguments are not valid JSON" and recovered.is_error


def test_options_change_only_what_they_name(fixture_sandbox: LocalDirSandbox) -> None:
    fixture_sandbox.write_file("big.txt", "".join(f"{n}\n" for n in range(1, 20001)).encode())
    tail = ToolBox(fixture_sandbox, options=ToolOptions(keep_tail=True))
    text = tail.run(call("Bash", command="seq 1 20000")).content
    assert text.startswith("Exit code: 0\nSTDOUT:\n1\n") and text.endswith("20000\n\nSTDERR:\n")
    assert "\n[truncated " in text
    footer = ToolBox(fixture_sandbox, options=ToolOptions(read_footer=True))
    assert footer.run(call("Read", file_path="calc.py", limit=2)).content == (
        "calc.py\n1. def add(a, b):\n2.     return a - b\n[lines 1-2 of 6; use offset=3 to read on]"
    )
    clear = ToolBox(fixture_sandbox, options=ToolOptions(clear_errors=True))
    text = clear.run(call("Edit", file_path="calc.py", old_string="zzz", new_string="y")).content
    assert text.startswith("ValueError: old_string was not found\n(")
    plain = ToolBox(fixture_sandbox)
    assert plain.run(call("Read", file_path="calc.py", limit=2)).content == (
        "calc.py\n1. def add(a, b):\n2.     return a - b"
    )


class _ExitingSandbox:
    """A sandbox where every tool call's runner ends as ``result`` says (its code, its
    output), answered through Leaf's exit marker as the pod script prints it; the
    runner's provisioning succeeds and is not counted."""

    backend = "fake"

    def __init__(self, result: ExecResult) -> None:
        self.result = result
        self.timeouts: list[float] = []

    def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        output_cap: int = 0,
    ) -> ExecResult:
        sentinel = re.search(r"__FROGNANO_RC_[0-9a-f]{32}__", " ".join(command))
        if sentinel is None:  # the runner being written
            return ExecResult(0, "", "", 0.0)
        self.timeouts.append(timeout)
        if self.result.timed_out:
            return self.result
        stdout = f"{self.result.stdout}\n{sentinel.group()}{self.result.exit_code}\n"
        return replace(self.result, exit_code=0, stdout=stdout)


def test_runner_failure_is_leafs_text() -> None:
    sandbox = _ExitingSandbox(ExecResult(127, "", "bash: : command not found\n", 0.01))
    obs = ToolBox(sandbox).run(call("Read", file_path="x"))  # type: ignore[arg-type]
    assert obs.content == "Tool runner exited with code 127.\nbash: : command not found\n"
    assert obs.is_error


def test_host_side_limits_are_leafs() -> None:
    sandbox = _ExitingSandbox(ExecResult(0, "ok", "", 0.01))
    box = ToolBox(sandbox)  # type: ignore[arg-type]
    box.run(call("Read", file_path="x"))
    box.run(call("Bash", command="true", timeout=10))
    box.run(call("Bash", command="true", timeout=90_000))
    box.run(call("Bash", command="true", timeout_ms=2500))
    assert sandbox.timeouts == [120.0, 70.0, 150.0, 62.0]
    assert runner_timeout_s("Bash", {}) == 180.0


def test_non_numeric_timeout_ends_the_episode() -> None:
    box = ToolBox(_ExitingSandbox(ExecResult(0, "", "", 0.0)))  # type: ignore[arg-type]
    with pytest.raises(ToolRunError, match="ValueError: could not convert string to float"):
        box.run(call("Bash", command="true", timeout="soon"))


# What Leaf's environment.py @ 5229bdfe (_timeout) raises for each: any exception there
# ends its episode as tool_error with `f"{type(exc).__name__}: {exc}"`.
_INFINITE = "OverflowError: cannot convert float infinity to integer"
_TOO_BIG = "OverflowError: int too large to convert to float"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"timeout": float("inf")}, _INFINITE),  # JSON 1e400 decodes to this
        ({"timeout": "inf"}, _INFINITE),
        ({"timeout": "Infinity"}, _INFINITE),
        ({"timeout": "1e400"}, _INFINITE),
        ({"timeout": 10**400}, _TOO_BIG),
        ({"timeout_ms": float("inf")}, _INFINITE),
        ({"timeout_ms": 10**400}, _TOO_BIG),
        (
            {"timeout": [5]},
            "TypeError: float() argument must be a string or a real number, not 'list'",
        ),
    ],
)
def test_a_timeout_leaf_cannot_make_whole_seconds_ends_the_episode(
    arguments: dict[str, object], error: str
) -> None:
    sandbox = _ExitingSandbox(ExecResult(0, "", "", 0.0))
    with pytest.raises(ToolRunError) as raised:
        ToolBox(sandbox).run(call("Bash", command="true", **arguments))  # type: ignore[arg-type]
    assert str(raised.value) == error
    assert sandbox.timeouts == []  # nothing ran


@pytest.mark.parametrize(
    "arguments",
    [{"timeout": float("nan")}, {"timeout": "nan"}, {"timeout": -5}, {"timeout": float("-inf")}],
)
def test_nan_and_negative_timeouts_run_with_leafs_minimum(arguments: dict[str, object]) -> None:
    # Leaf: max(0.1, value) keeps 0.1 for NaN and anything below it, so the call runs.
    sandbox = _ExitingSandbox(ExecResult(0, "ok", "", 0.01))
    ToolBox(sandbox).run(call("Bash", command="true", **arguments))  # type: ignore[arg-type]
    assert sandbox.timeouts == [60.0]


def test_runner_timeout_ends_the_episode() -> None:
    timed_out = ExecResult(124, "", "", 180.0, timed_out=True)
    with pytest.raises(ToolRunError, match="past its"):
        ToolBox(_ExitingSandbox(timed_out)).run(call("Bash", command="x"))  # type: ignore[arg-type]


def test_cancel_returns_while_the_call_runs(fixture_sandbox: LocalDirSandbox) -> None:
    cancel = threading.Event()
    box = ToolBox(fixture_sandbox, should_stop=cancel.is_set)
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(ToolRunError, match="cancelled"):
        box.run(call("Bash", command="sleep 20"))


@pytest.mark.parametrize(
    "arguments",
    [
        {"name": "Bash", "command": "echo \ud800"},
        {"name": "Write", "file_path": "a\udfff.txt", "content": "x"},
        {"name": "Edit", "file_path": "a.txt", "old_string": "a", "new_string": "\ud83d"},
    ],
)
def test_a_lone_surrogate_ends_the_episode_before_anything_runs(
    arguments: dict[str, str],
) -> None:
    # Leaf writes its request with write_text(encoding="utf-8") (environment.py
    # @ 5229bdfe), which raises: the episode ends as tool_error.
    sandbox = _ExitingSandbox(ExecResult(0, "", "", 0.0))
    name = arguments.pop("name")
    with pytest.raises(ToolRunError, match=r"^UnicodeEncodeError: 'utf-8' codec can't encode"):
        ToolBox(sandbox).run(call(name, **arguments))  # type: ignore[arg-type]
    assert sandbox.timeouts == []  # nothing ran
