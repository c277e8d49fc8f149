"""The five tools the model was trained with: Read, Write, Edit, Glob, Bash.

Names, parameters and behaviour follow the harness the model was trained in
(Claude-Code-style tools): the model only does well with exactly these. Every
tool goes through the :class:`~worker.sandbox.base.Sandbox` interface
(``read_file`` / ``write_file`` / ``exec``); nothing here touches the host.

Bad arguments never raise: :meth:`ToolBox.run` always returns a
:class:`ToolObservation`, with ``is_error`` set and a message that says what
to change. A :class:`~worker.sandbox.base.SandboxError` from ``exec`` (Bash,
Glob: the sandbox itself broke, not the model's fault) propagates, so the job
fails as an infrastructure error instead of burning turns. From
``read_file``/``write_file`` it becomes an observation: backends also use it
for path problems the model caused (a parent folder that is a file).

Cancellation: ``Sandbox.exec`` blocks and has no kill handle, so Bash runs the
command on a helper thread and polls the cancel event every 0.1 s. On cancel
the tool returns at once; the command itself is killed when the caller closes
the sandbox (it always does, in a ``with`` block), and at the latest by its
own timeout.
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from worker.agent.trajectory import ToolCall, ToolObservation
from worker.sandbox.base import WORKSPACE, ExecResult, Sandbox, SandboxError

DEFAULT_BASH_TIMEOUT_S = 120.0  # the training harness's default
MAX_BASH_TIMEOUT_S = 600.0
DEFAULT_OUTPUT_CHARS = 30_000  # per observation; head and tail kept
READ_DEFAULT_LINES = 2000
READ_MAX_LINE_CHARS = 2000
GLOB_MAX_MATCHES = 1000
GLOB_TIMEOUT_S = 60.0
_POLL_S = 0.1
# Asked of the sandbox per stream; sandboxes keep the head only, so ask for plenty and
# cut here, where the tail (usually the error) can be kept.
_EXEC_CAP = 1024 * 1024


def _schema(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _schema(
        "Read",
        "Read a file from the repository. Returns its lines numbered from 1 (cat -n style). "
        f"By default up to {READ_DEFAULT_LINES} lines from the start; use offset and limit for "
        f"long files. Lines longer than {READ_MAX_LINE_CHARS} characters are cut.",
        {
            "file_path": {
                "type": "string",
                "description": "Path of the file, relative to the repository root.",
            },
            "offset": {"type": "integer", "description": "Line number to start at (1-based)."},
            "limit": {"type": "integer", "description": "Number of lines to read."},
        },
        ["file_path"],
    ),
    _schema(
        "Write",
        "Write a file, replacing it if it exists and creating parent folders if needed.",
        {
            "file_path": {
                "type": "string",
                "description": "Path of the file, relative to the repository root.",
            },
            "content": {"type": "string", "description": "The complete new file content."},
        },
        ["file_path", "content"],
    ),
    _schema(
        "Edit",
        "Replace exact text in a file. old_string must match the file exactly (whitespace "
        "included) and occur once, unless replace_all is true.",
        {
            "file_path": {
                "type": "string",
                "description": "Path of the file, relative to the repository root.",
            },
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence (default false).",
            },
        },
        ["file_path", "old_string", "new_string"],
    ),
    _schema(
        "Glob",
        f"Find files by glob pattern (e.g. '**/*.py'). Returns up to {GLOB_MAX_MATCHES} paths, "
        "sorted.",
        {
            "pattern": {"type": "string", "description": "Glob pattern; ** matches folders."},
            "path": {
                "type": "string",
                "description": "Folder to search in, relative to the repository root.",
            },
        },
        ["pattern"],
    ),
    _schema(
        "Bash",
        "Run a bash command in the repository root and return its exit code, stdout and "
        f"stderr. Default timeout {int(DEFAULT_BASH_TIMEOUT_S)} s, at most "
        f"{int(MAX_BASH_TIMEOUT_S)} s. There is no network.",
        {
            "command": {"type": "string", "description": "The command to run."},
            "description": {
                "type": "string",
                "description": "A few words on what the command does.",
            },
            "timeout": {"type": "integer", "description": "Timeout in seconds."},
        },
        ["command"],
    ),
]
TOOL_NAMES: tuple[str, ...] = tuple(s["function"]["name"] for s in TOOL_SCHEMAS)
_SCHEMA_BY_NAME = {s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS}
_ALIASES = {"path": "file_path"}  # models trained elsewhere say path; Glob's path is its own


class ToolArgumentError(ValueError):
    """Arguments a tool cannot use; the message is shown to the model."""


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and tail of ``text`` within ``limit`` characters, marking the cut."""
    if len(text) <= limit:
        return text, False
    head = limit * 2 // 3
    tail = limit - head
    dropped = len(text) - head - tail
    marker = f"\n\n[... {dropped} characters truncated ...]\n\n"
    return text[:head] + marker + text[len(text) - tail :], True


def normalize_path(path: str) -> str:
    """A workspace-relative path, or ToolArgumentError for anything outside the workspace."""
    if not path or not path.strip():
        raise ToolArgumentError("file path is empty")
    if "\x00" in path:
        raise ToolArgumentError("file path contains a NUL byte")
    raw = path.strip()
    if raw.startswith("/"):
        rel = posixpath.relpath(posixpath.normpath(raw), WORKSPACE)
    else:
        rel = posixpath.normpath(raw)
    if rel == ".." or rel.startswith("../"):
        raise ToolArgumentError(
            f"{path}: outside the repository (paths are relative to "
            f"the repository root, {WORKSPACE})"
        )
    return rel


@dataclass(frozen=True)
class _Args:
    values: dict[str, Any]

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.values.get(key, default)
        return value if value is None or isinstance(value, str) else str(value)

    def integer(self, key: str) -> int | None:
        return self.values.get(key)

    def flag(self, key: str) -> bool:
        return bool(self.values.get(key, False))


def validate_arguments(name: str, arguments: dict[str, Any]) -> _Args:
    schema = _SCHEMA_BY_NAME[name]
    props: dict[str, Any] = schema["properties"]
    values: dict[str, Any] = {}
    for key, value in arguments.items():
        target = key
        if key not in props and _ALIASES.get(key) in props:
            target = _ALIASES[key]
            if target in arguments:
                continue  # both given: the canonical name wins
        if target not in props:
            raise ToolArgumentError(
                f"{name} has no parameter {key!r}; its parameters are {', '.join(props)}"
            )
        values[target] = _coerce(name, target, props[target]["type"], value)
    missing = [k for k in schema["required"] if k not in values]
    if missing:
        raise ToolArgumentError(f"{name} needs {', '.join(missing)}")
    return _Args(values)


def _coerce(tool: str, key: str, kind: str, value: Any) -> Any:
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float, bool)):
            return str(value)
        raise ToolArgumentError(f"{tool}.{key} must be a string")
    if kind == "integer":
        if isinstance(value, bool):
            raise ToolArgumentError(f"{tool}.{key} must be an integer, not {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
        raise ToolArgumentError(f"{tool}.{key} must be an integer, not {value!r}")
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ToolArgumentError(f"{tool}.{key} must be true or false, not {value!r}")
    return value


class ToolBox:
    """Runs the model's tool calls against one sandbox."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        output_chars: int = DEFAULT_OUTPUT_CHARS,
        bash_timeout_s: float = DEFAULT_BASH_TIMEOUT_S,
        should_stop: Callable[[], bool] | None = None,
        time_left: Callable[[], float] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.output_chars = output_chars
        self.bash_timeout_s = bash_timeout_s
        self._should_stop = should_stop or (lambda: False)
        self._time_left = time_left or (lambda: float("inf"))

    def run(self, call: ToolCall) -> ToolObservation:
        start = time.monotonic()
        exit_code: int | None = None
        truncated = False
        try:
            if call.error is not None:
                raise ToolArgumentError(call.error)
            if call.name not in TOOL_NAMES:
                raise ToolArgumentError(
                    f"unknown tool {call.name!r}; the tools are {', '.join(TOOL_NAMES)}"
                )
            args = validate_arguments(call.name, call.arguments)
            handler: Callable[[_Args], tuple[str, int | None, bool]] = getattr(
                self, f"_{call.name.lower()}"
            )
            text, exit_code, truncated = handler(args)
            is_error = False
        except ToolArgumentError as exc:
            text, is_error = f"Error: {exc}", True
        text, cut = cap_text(text, self.output_chars)
        return ToolObservation(
            call_id=call.id,
            name=call.name,
            content=text,
            is_error=is_error,
            duration_s=time.monotonic() - start,
            exit_code=exit_code,
            truncated=truncated or cut,
        )

    def run_all(self, calls: Sequence[ToolCall]) -> list[ToolObservation]:
        return [self.run(c) for c in calls]

    # -- file helpers ------------------------------------------------------------
    def _read_text(self, rel: str, shown: str) -> str:
        try:
            data = self.sandbox.read_file(rel)
        except SandboxError as exc:
            raise ToolArgumentError(f"{shown}: cannot read it ({exc})") from None
        except FileNotFoundError:
            raise ToolArgumentError(f"{shown}: no such file") from None
        except IsADirectoryError:
            raise ToolArgumentError(f"{shown} is a directory; use Glob or Bash ls") from None
        except PermissionError as exc:
            raise ToolArgumentError(f"{shown}: not readable ({exc})") from None
        except (OSError, ValueError) as exc:
            raise ToolArgumentError(f"{shown}: cannot read it ({exc})") from None
        if b"\x00" in data[:8192]:
            raise ToolArgumentError(f"{shown} is a binary file; it cannot be shown as text")
        return data.decode("utf-8", errors="replace")

    def _write_bytes(self, rel: str, shown: str, data: bytes) -> None:
        try:
            self.sandbox.write_file(rel, data)
        except SandboxError as exc:
            raise ToolArgumentError(f"{shown}: cannot write it ({exc})") from None
        except IsADirectoryError:
            raise ToolArgumentError(f"{shown} is a directory") from None
        except (OSError, ValueError) as exc:
            raise ToolArgumentError(f"{shown}: cannot write it ({exc})") from None

    # -- the tools ---------------------------------------------------------------
    def _read(self, args: _Args) -> tuple[str, int | None, bool]:
        shown = args.text("file_path") or ""
        rel = normalize_path(shown)
        offset = args.integer("offset")
        limit = args.integer("limit")
        offset = 1 if offset is None else offset
        limit = READ_DEFAULT_LINES if limit is None else limit
        if offset < 1:
            raise ToolArgumentError("offset is a 1-based line number (1 or more)")
        if limit < 1:
            raise ToolArgumentError("limit must be 1 or more")
        lines = self._read_text(rel, shown).splitlines()
        if not lines:
            return f"{shown} is empty.", None, False
        if offset > len(lines):
            raise ToolArgumentError(
                f"offset {offset} is past the end of {shown} ({len(lines)} lines)"
            )
        chosen = lines[offset - 1 : offset - 1 + limit]
        out = []
        for n, line in enumerate(chosen, offset):
            if len(line) > READ_MAX_LINE_CHARS:
                line = line[:READ_MAX_LINE_CHARS] + " [line truncated]"
            out.append(f"{n:6}\t{line}")
        last = offset + len(chosen) - 1
        if last < len(lines):
            out.append(f"[lines {offset}-{last} of {len(lines)}; use offset={last + 1} to read on]")
        return "\n".join(out), None, False

    def _write(self, args: _Args) -> tuple[str, int | None, bool]:
        shown = args.text("file_path") or ""
        rel = normalize_path(shown)
        content = args.text("content") or ""
        data = content.encode("utf-8")
        self._write_bytes(rel, shown, data)
        return f"Wrote {len(data)} bytes to {shown}.", None, False

    def _edit(self, args: _Args) -> tuple[str, int | None, bool]:
        shown = args.text("file_path") or ""
        rel = normalize_path(shown)
        old = args.text("old_string") or ""
        new = args.text("new_string") or ""
        if old == "":
            raise ToolArgumentError("old_string is empty; use Write to create a file")
        if old == new:
            raise ToolArgumentError("old_string and new_string are the same; nothing to do")
        text = self._read_text(rel, shown)
        count = text.count(old)
        if count == 0:
            raise ToolArgumentError(
                f"old_string not found in {shown}; it must match exactly, whitespace and "
                "indentation included (Read the file to copy it)"
            )
        if count > 1 and not args.flag("replace_all"):
            raise ToolArgumentError(
                f"old_string occurs {count} times in {shown}; include more surrounding lines "
                "to make it unique, or set replace_all to true"
            )
        updated = text.replace(old, new) if args.flag("replace_all") else text.replace(old, new, 1)
        self._write_bytes(rel, shown, updated.encode("utf-8"))
        first = updated[: text.index(old)].count("\n") + 1
        lines = updated.splitlines()
        lo, hi = max(first - 3, 1), min(first + new.count("\n") + 3, len(lines))
        snippet = "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(lo, hi + 1))
        what = f"{count} occurrences" if count > 1 else "1 occurrence"
        return f"Edited {shown}: replaced {what}.\n{snippet}", None, False

    def _glob(self, args: _Args) -> tuple[str, int | None, bool]:
        pattern = args.text("pattern") or ""
        if not pattern.strip():
            raise ToolArgumentError("pattern is empty")
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise ToolArgumentError("pattern must be relative to the search folder, without ..")
        base = normalize_path(args.text("path") or ".")
        # The pattern and folder travel as argv, never inside the script text.
        script = (
            'shopt -s globstar nullglob extglob; cd -- "$1" 2>/dev/null || '
            '{ echo "no such folder: $1" >&2; exit 2; }; IFS=; n=0; '
            'for f in $2; do [ -e "$f" ] || continue; printf "%s\\n" "$f"; n=$((n+1)); '
            f'[ "$n" -gt {GLOB_MAX_MATCHES} ] && break; done'
        )
        cwd = base if base != "." else "."
        result = self._exec(
            ["bash", "-c", script, "glob", cwd, pattern],
            timeout=min(GLOB_TIMEOUT_S, max(self._time_left(), 1.0)),
        )
        if result.exit_code == 2:
            raise ToolArgumentError(f"{args.text('path')}: no such folder")
        if result.timed_out:
            raise ToolArgumentError("Glob timed out; use a narrower pattern or path")
        matches = sorted(line for line in result.stdout.splitlines() if line)
        prefix = "" if base == "." else base.rstrip("/") + "/"
        shown = [prefix + m for m in matches[:GLOB_MAX_MATCHES]]
        if not shown:
            return f"No files match {pattern!r}.", None, False
        capped = len(matches) > GLOB_MAX_MATCHES
        if capped:
            shown.append(
                f"[more than {GLOB_MAX_MATCHES} matches; showing the first "
                f"{GLOB_MAX_MATCHES}. Use a narrower pattern]"
            )
        return "\n".join(shown), None, capped

    def _bash(self, args: _Args) -> tuple[str, int | None, bool]:
        command = args.text("command") or ""
        if not command.strip():
            raise ToolArgumentError("command is empty")
        requested = args.integer("timeout")
        if requested is not None and requested < 1:
            raise ToolArgumentError("timeout must be 1 second or more")
        timeout = float(requested) if requested is not None else self.bash_timeout_s
        timeout = min(timeout, MAX_BASH_TIMEOUT_S, max(self._time_left(), 1.0))
        result = self._exec(command, timeout=timeout)
        half = self.output_chars // 2
        stdout, cut_out = cap_text(result.stdout, half)
        stderr, cut_err = cap_text(result.stderr, half)
        parts = [f"Exit code: {result.exit_code}"]
        if result.timed_out:
            parts.append(f"Command timed out after {timeout:g} s and was killed.")
        if result.oom_killed:
            parts.append("Command was killed: out of memory.")
        if result.truncated and not (cut_out or cut_err):
            parts.append("(output was cut by the sandbox's output cap)")
        parts.append("--- stdout ---\n" + stdout if stdout else "--- stdout --- (empty)")
        if stderr:
            parts.append("--- stderr ---\n" + stderr)
        return "\n".join(parts), result.exit_code, cut_out or cut_err or result.truncated

    def _exec(self, command: str | list[str], *, timeout: float) -> ExecResult:
        """``sandbox.exec`` on a helper thread, returning early when told to stop."""
        box: dict[str, ExecResult | BaseException] = {}

        def target() -> None:
            try:
                box["result"] = self.sandbox.exec(
                    command, timeout=timeout, output_cap=max(_EXEC_CAP, self.output_chars)
                )
            except BaseException as exc:  # handed to the caller's thread below
                box["error"] = exc

        worker = threading.Thread(target=target, name="ribbit-tool-exec", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(_POLL_S)
            if worker.is_alive() and self._should_stop():
                raise ToolArgumentError("stopped: the run was cancelled or ran out of time")
        if "error" in box:
            error = box["error"]
            if isinstance(error, SandboxError):
                raise error
            raise ToolArgumentError(f"could not run the command: {error}")
        result = box["result"]
        assert isinstance(result, ExecResult)
        return result
