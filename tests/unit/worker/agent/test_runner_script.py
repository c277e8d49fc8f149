"""The tool runner's pieces that the Leaf conformance suite (tests/plugins/leaf_conformance.py,
run through a sandbox in test_tools.py) does not pin one by one: how a long output is cut
(head only, or head and tail), how Bash's timeout arguments are read, how lenient the
argument parsing is, which options count as on, the hints, and the entry point's own
failures and byte-safe output. Imported and called in-process; each Leaf text itself is
the conformance suite's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from worker.agent import runner_script as runner
from worker.agent.runner_script import Request, bash_timeout_s, execute


# -- cutting long output ---------------------------------------------------------------------
def test_cap_leaves_short_text_and_a_zero_limit_alone() -> None:
    assert runner._cap("abc", 3, keep_tail=False) == "abc"
    assert runner._cap("abc" * 100, 0, keep_tail=True) == "abc" * 100


def test_cap_keeps_the_head_and_counts_what_it_dropped() -> None:
    assert runner._cap("0123456789", 4, keep_tail=False) == "0123\n[truncated 6 chars]"


def test_cap_with_tail_keeps_two_thirds_head_one_third_tail() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    cut = runner._cap(text, 30, keep_tail=True)
    head, marker, tail = cut.split("\n")
    assert (head, tail) == (text[:20], text[-10:])
    assert marker == "[truncated 70 chars]"


# -- Bash's timeout, read as Leaf reads it ---------------------------------------------------
@pytest.mark.parametrize(
    ("args", "seconds"),
    [
        ({}, 120.0),  # the default
        ({"timeout": 5}, 5.0),
        ({"timeout": "7.5"}, 7.5),
        ({"timeout": 1000}, 1000.0),  # up to 1000 it is seconds
        ({"timeout": 1500}, 1.5),  # above, milliseconds
        ({"timeout": 0}, 0.1),  # never below 0.1 s
        ({"timeout": -3}, 0.1),
        ({"timeout_ms": 2500}, 2.5),
        ({"timeout_ms": 2500, "timeout": 9}, 2.5),  # timeout_ms wins
        ({"timeout_ms": 0}, 0.1),
        ({"timeout": None}, 120.0),
    ],
)
def test_bash_timeout_is_read_as_leaf_reads_it(args: dict[str, object], seconds: float) -> None:
    assert bash_timeout_s(args, 120) == seconds


def test_bash_timeout_that_is_no_number_fails_as_a_value_error() -> None:
    with pytest.raises(ValueError):
        bash_timeout_s({"timeout": "soon"}, 120)


# -- argument leniency and options -------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "on"),
    [
        (True, True),
        (False, False),
        ("true", True),
        (" YES ", True),
        ("1", True),
        ("on", True),
        (1, True),
        ("false", False),
        ("no", False),
        ("", False),
        (None, False),
        (0, False),
        ("2", False),
    ],
)
def test_replace_all_flag_takes_the_usual_spellings(value: object, on: bool) -> None:
    assert runner._flag(value) is on


def test_int_arguments_default_only_when_missing_or_empty() -> None:
    assert runner._int_or(None, 5) == 5
    assert runner._int_or("", 5) == 5
    assert runner._int_or("3", 5) == 3
    assert runner._int_or(0, 5) == 0  # a given 0 is a value, not "missing"


def test_request_takes_odd_payloads_and_merges_limits_over_leafs() -> None:
    request = Request({"tool": None, "args": ["not", "a", "dict"], "limits": {"read_chars": 5}})
    assert (request.tool, request.args) == ("", {})
    assert request.limits == {**runner.DEFAULT_LIMITS, "read_chars": 5}
    assert Request({}).limits == runner.DEFAULT_LIMITS
    assert runner.DEFAULT_LIMITS == {
        "read_chars": 20000,
        "bash_chars": 30000,
        "glob_files": 1000,
        "bash_timeout_s": 120,
    }


def test_an_option_is_on_only_when_it_is_true_itself() -> None:
    options = {"keep_tail": True, "read_footer": "true", "clear_errors": 1}
    request = Request({"options": options})
    assert request.option("keep_tail")
    assert not request.option("read_footer") and not request.option("clear_errors")
    assert not request.option("missing")


def test_paths_are_shown_relative_inside_the_workdir_and_as_given_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ws" / "pkg").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "ws")
    assert runner._shown(Path("pkg/a.py").absolute()) == "pkg/a.py"
    assert runner._shown(tmp_path / "other.py") == str(tmp_path / "other.py")
    assert runner._absolute("pkg/a.py") == tmp_path / "ws" / "pkg" / "a.py"
    assert runner._absolute("/etc/hosts") == Path("/etc/hosts")


# -- errors as observations ----------------------------------------------------------------------
def test_a_failure_is_its_type_and_message_with_a_hint_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.py").write_text("x = 1\n")
    (tmp_path / "d").mkdir()
    calls = [
        ("Read", {"file_path": "gone.py"}, "Use Glob to find the right path"),
        ("Read", {"file_path": "d"}, "That is a directory"),
        ("Edit", {"file_path": "f.py", "old_string": "y", "new_string": "z"}, "Read it first"),
    ]
    for tool, args, hint in calls:
        plain = execute(Request({"tool": tool, "args": args}))
        helped = execute(Request({"tool": tool, "args": args, "options": {"clear_errors": True}}))
        assert hint not in plain
        assert helped.startswith(plain + "\n(") and hint in helped
    # Errors without a known remedy get no hint.
    bare = Request({"tool": "Glob", "args": {}, "options": {"clear_errors": True}})
    assert execute(bare) == "ValueError: pattern is required"
    assert execute(Request({"tool": "rm"})) == "Unknown tool: rm"
    # The Edit hint is Edit's: another tool's error that reads alike gets none.
    assert runner._hint("Bash", ValueError("old_string was not found")) == ""


# -- the entry point -----------------------------------------------------------------------------
def _main(argv: list[str], capsysbinary: pytest.CaptureFixture[bytes]) -> bytes:
    assert runner.main(["runner", *argv]) == 0
    return capsysbinary.readouterr().out


def test_main_reads_the_request_file_and_runs_in_its_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    request = tmp_path / "request.json"
    text = json.dumps({"tool": "Read", "args": {"file_path": "a.txt"}, "workdir": "ws"})
    request.write_text(text, encoding="utf-8")
    assert _main([str(request)], capsysbinary) == b"a.txt\n1. hello"


def _request_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "request.json"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("[1, 2]", b"tool runner error: ValueError: the request must be a JSON object"),
        ("{not json", b"tool runner error: JSONDecodeError: "),
        ("", b"tool runner error: JSONDecodeError: "),
    ],
)
def test_main_answers_a_bad_request_as_text_never_a_traceback(
    text: str, answer: bytes, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert _main([_request_file(tmp_path, text)], capsysbinary).startswith(answer)


def test_main_answers_a_missing_request_file_as_text(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    answer = _main([str(tmp_path / "gone.json")], capsysbinary)
    assert answer.startswith(b"tool runner error: FileNotFoundError: ")


def test_main_writes_a_file_name_that_is_not_utf8_as_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    monkeypatch.chdir(tmp_path)
    name = b"caf\xe9.py"  # Latin-1, not UTF-8
    (tmp_path / os.fsdecode(name)).write_text("")
    request = json.dumps({"tool": "Glob", "args": {"pattern": "*.py"}})
    assert _main([_request_file(tmp_path, request)], capsysbinary) == name
