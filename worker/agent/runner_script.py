# ruff: noqa: UP006, UP021, UP022, UP031, UP035
"""Ribbit's tool runner: executes ONE tool call inside the sandbox and prints its result.

This file is written into the sandbox where Leaf writes its own runner
(``/tmp/frognano_leaf_tool_runner.py``) and run as ``"$python_bin" RUNNER REQUEST``
for every tool call, the way the training harness (Leaf, microsoft/FrogNano
``frognano/harness/leaf/tool_runner.py`` at commit 6dc21748) runs its own runner inside
the task pod (worker/agent/runner_launch.py builds that command). Running the tools
*inside* the sandbox is what makes absolute paths, symlinks, ``/tmp`` and ``~`` mean
what they meant in training, and it means the host never resolves a path the model
wrote.

Constraints, because this runs on whatever Python the repository's image has:
stdlib only, Python 3.6 syntax (no ``from __future__ import annotations``, no
dataclasses, no ``capture_output``/``text=``), one file, no imports from Ribbit.

Every string the model reads is Leaf's, byte for byte, unless the request turns on one
of Ribbit's options (all off by default; see worker/agent/README.md):

- ``keep_tail``: a long output keeps its head and its tail (where the error usually is)
  instead of the head only;
- ``read_footer``: Read says which lines it showed and how to read on when ``limit``
  cut the file;
- ``clear_errors``: the common errors (missing file, no match for Edit) add a hint on
  what to do next.

The request is one JSON object in a UTF-8 file whose path is the first argument (as
Leaf's; no argument or ``-``: read from stdin), with keys ``tool``, ``args``,
``workdir`` (optional), ``limits`` (optional caps) and ``options`` (optional flags).
"""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

# Leaf's defaults (tool_runner.py @ 6dc21748: LEAF_TOOL_OUTPUT_CHARS, LEAF_BASH_OUTPUT_CHARS,
# LEAF_GLOB_LIMIT, LEAF_BASH_TIMEOUT_SEC).
DEFAULT_LIMITS = {
    "read_chars": 20000,
    "bash_chars": 30000,
    "glob_files": 1000,
    "bash_timeout_s": 120,
}


class Request:
    def __init__(self, payload: Dict[str, Any]) -> None:
        self.tool = str(payload.get("tool") or "")
        args = payload.get("args")
        self.args = args if isinstance(args, dict) else {}  # type: Dict[str, Any]
        limits = dict(DEFAULT_LIMITS)
        limits.update(payload.get("limits") or {})
        self.limits = limits
        self.options = dict(payload.get("options") or {})  # type: Dict[str, Any]

    def option(self, name: str) -> bool:
        return self.options.get(name) is True


def execute(request: Request) -> str:
    handlers = {
        "Read": tool_read,
        "Write": tool_write,
        "Edit": tool_edit,
        "Glob": tool_glob,
        "Bash": tool_bash,
    }
    handler = handlers.get(request.tool)
    if handler is None:
        return "Unknown tool: " + request.tool
    try:
        return handler(request)
    except Exception as exc:  # every failure is an observation: "TypeName: message"
        text = "%s: %s" % (type(exc).__name__, exc)
        if request.option("clear_errors"):
            text += _hint(request.tool, exc)
        return text


# -- argument leniency (the model's arguments are taken as Leaf takes them) -----------------
def _given(value: Any) -> bool:
    return value not in (None, "")


def _int_or(value: Any, default: int) -> int:
    return int(value) if _given(value) else default


def _text(args: Dict[str, Any], key: str) -> str:
    """Text argument where a missing or empty value means empty (Leaf: ``or ""``)."""
    return str(args.get(key) or "")


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


def _target(args: Dict[str, Any], key: str) -> Path:
    raw = args.get(key) or args.get("path")  # ``path`` is accepted for any file argument
    if not raw:
        raise ValueError(key + " is required")
    return _absolute(raw)


def _absolute(raw: Any) -> Path:
    candidate = Path(str(raw)).expanduser()
    if candidate.is_absolute():
        return candidate
    return Path.cwd() / candidate


def _shown(path: Path) -> str:
    """Relative to the working directory when inside it, else the path as given."""
    here = Path.cwd().resolve()
    try:
        return path.resolve().relative_to(here).as_posix()
    except ValueError:
        return str(path)


def _cap(text: str, limit: int, keep_tail: bool) -> str:
    if limit <= 0 or len(text) <= limit:
        return text
    dropped = len(text) - limit
    if not keep_tail:
        return text[:limit] + "\n[truncated %d chars]" % dropped
    head = limit * 2 // 3
    tail = limit - head
    return "%s\n[truncated %d chars]\n%s" % (text[:head], dropped, text[len(text) - tail :])


def _load(path: Path) -> str:
    with open(str(path), encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _store(path: Path, text: str) -> None:
    with open(str(path), "w", encoding="utf-8") as handle:
        handle.write(text)


# -- the five tools ------------------------------------------------------------------------
def tool_read(request: Request) -> str:
    path = _target(request.args, "file_path")
    lines = _load(path).splitlines()
    first = max(1, _int_or(request.args.get("offset"), 1))
    count = _int_or(request.args.get("limit"), 0)
    stop = len(lines) if count <= 0 else min(len(lines), first - 1 + count)
    numbered = ["%d. %s" % (number, lines[number - 1]) for number in range(first, stop + 1)]
    body = _shown(path) + "\n" + "\n".join(numbered)
    if request.option("read_footer") and stop < len(lines):
        body += "\n[lines %d-%d of %d; use offset=%d to read on]" % (
            first,
            stop,
            len(lines),
            stop + 1,
        )
    return _cap(body, int(request.limits["read_chars"]), request.option("keep_tail"))


def tool_write(request: Request) -> str:
    path = _target(request.args, "file_path")
    # Leaf: a missing content is empty, but any given value is written as its str().
    content = str(request.args.get("content", ""))
    if not path.parent.is_dir():
        os.makedirs(str(path.parent), exist_ok=True)
    _store(path, content)
    return "Wrote %s (%d bytes)." % (_shown(path), len(content))


def tool_edit(request: Request) -> str:
    path = _target(request.args, "file_path")
    old = _text(request.args, "old_string")
    new = _text(request.args, "new_string")
    if not old:
        raise ValueError("old_string must be non-empty")
    text = _load(path)
    found = text.count(old)
    every = _flag(request.args.get("replace_all"))
    if found == 0:
        raise ValueError("old_string was not found")
    if found > 1 and not every:
        raise ValueError(
            "old_string matched %d times; set replace_all=true or use a more specific "
            "old_string" % found
        )
    _store(path, text.replace(old, new) if every else text.replace(old, new, 1))
    changed = found if every else 1
    return "Edited %s (%d replacement%s)." % (_shown(path), changed, "" if changed == 1 else "s")


def tool_glob(request: Request) -> str:
    pattern = _text(request.args, "pattern")
    if not pattern:
        raise ValueError("pattern is required")
    base = _absolute(request.args.get("path") or ".")
    found = [m for m in glob.glob(str(base / pattern), recursive=True) if os.path.isfile(m)]
    listed = sorted(_shown(Path(m)) for m in found)
    if not listed:
        return "No files matched."
    most = max(1, int(request.limits["glob_files"]))
    text = "\n".join(listed[:most])
    if len(listed) > most:
        text += "\n... %d more files" % (len(listed) - most)
    return text


def bash_timeout_s(args: Dict[str, Any], default: float) -> float:
    """Seconds, read as Leaf reads them: ``timeout_ms`` wins; a ``timeout`` above 1000
    is taken as milliseconds; never below 0.1."""
    if args.get("timeout_ms") is not None:
        return max(0.1, float(args["timeout_ms"]) / 1000.0)
    raw = args.get("timeout")
    if raw is None:
        return float(default)
    seconds = float(raw)
    if seconds > 1000:
        seconds = seconds / 1000.0
    return max(0.1, seconds)


def _decoded(data: Any) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return str(data)


def tool_bash(request: Request) -> str:
    command = _text(request.args, "command")
    if not command:
        raise ValueError("command is required")
    seconds = bash_timeout_s(request.args, request.limits["bash_timeout_s"])
    cap = int(request.limits["bash_chars"])
    tail = request.option("keep_tail")
    try:
        done = subprocess.run(
            ["/bin/bash", "-lc", command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=max(0.1, seconds),
            check=False,
            # A session of its own: the sandbox ends what a call leaves in the call's
            # process group, and the model's background processes must outlive the
            # call, as they do in Leaf's pod.
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as expired:
        report = "Timed out after %.1fs\nSTDOUT:\n%s\nSTDERR:\n%s" % (
            seconds,
            _decoded(expired.stdout),
            _decoded(expired.stderr),
        )
        return _cap(report, cap, tail)
    report = "Exit code: %d\nSTDOUT:\n%s\nSTDERR:\n%s" % (
        done.returncode,
        done.stdout or "",
        done.stderr or "",
    )
    return _cap(report, cap, tail)


def _hint(tool: str, exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return "\n(Use Glob to find the right path; Write creates new files.)"
    if isinstance(exc, IsADirectoryError):
        return "\n(That is a directory; use Glob or Bash ls to list it.)"
    if tool == "Edit" and "was not found" in str(exc):
        return "\n(old_string must match the file exactly, whitespace included; Read it first.)"
    return ""


# -- entry point ---------------------------------------------------------------------------
def main(argv: Any) -> int:
    try:
        payload = json.loads(_request_text(argv))
        if not isinstance(payload, dict):
            raise ValueError("the request must be a JSON object")
        workdir = payload.get("workdir")
        if workdir:
            os.chdir(str(workdir))
        result = execute(Request(payload))
    except Exception as exc:
        result = "tool runner error: %s: %s" % (type(exc).__name__, exc)
    # Bytes, not print(): a file name that is not UTF-8 must not crash the reply.
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        sys.stdout.write(result)
    else:
        out.write(result.encode("utf-8", "surrogateescape"))
    sys.stdout.flush()
    return 0


def _request_text(argv: Any) -> str:
    if len(argv) > 1 and argv[1] not in ("", "-"):
        with open(str(argv[1]), encoding="utf-8") as handle:
            return handle.read()
    return sys.stdin.read()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
