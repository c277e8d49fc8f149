"""The five tools the model was trained with, run the way the training harness runs them.

FrogNano-4B-2609 learned its tools in Leaf (microsoft/FrogNano,
``frognano/harness/leaf``). Everything the model reads here is Leaf's, byte for byte:

- the schemas (:data:`TOOL_SCHEMAS`) are ``OPENAI_TOOLS`` of ``tools.py`` at commit
  354fccee (names, descriptions, parameter types; Bash ``timeout`` is a number);
- each call runs INSIDE the sandbox, through Ribbit's own stdlib-only runner
  (:mod:`worker.agent.runner_script`), as Leaf's ``tool_runner.py`` (commit 6dc21748)
  runs inside its task pod: the runner and each request are files in ``/tmp`` where
  Leaf puts them, and one ``sandbox.exec`` per call runs Leaf's own pod script
  (:mod:`worker.agent.runner_launch`). So paths are the sandbox's own (absolute paths,
  ``/tmp``, ``~`` and symlinks behave as in training), what the model can see around
  its command (``ps``, ``$SHLVL``, bash's ``Killed`` line) is what the pod showed, and
  the host never resolves a path the model wrote;
- Python is found as Leaf's ``runtimes/python.py`` (commit 5229bdfe) finds it;
- a runner that exits non-zero (no Python in the image) gives Leaf's
  ``Tool runner exited with code N.`` text, and each call's host-side limit is Leaf's
  (``environment.py`` @ 5229bdfe: 120 s, or the Bash timeout + 60 s).

Ribbit's own improvements are :class:`ToolOptions`, all off by default.

Two things end the episode instead of giving an observation, as in Leaf
(``agent.py`` @ 33de19f9: any exception from the environment is ``tool_error``):
a Bash ``timeout`` Leaf cannot turn into whole seconds (a word, infinity, an integer
beyond float's range), and the runner outliving its host-side limit. They raise
:class:`ToolRunError`. A broken sandbox (:class:`SandboxError`) propagates unchanged,
so the job fails as an infrastructure error.

Cancellation: ``Sandbox.exec`` blocks and has no kill handle, so each call runs on a
helper thread and the cancel event is polled every 0.1 s; on cancel the call returns
at once and the command dies when the caller closes the sandbox.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from bot.store.records.trajectory import ToolCall, ToolObservation
from worker.agent.runner_launch import (
    LEAF_PLACES,
    RunnerCall,
    RunnerPlaces,
    provision_argv,
    read_reply,
    request_text,
    runner_call,
)
from worker.sandbox.base import WORKSPACE, ExecResult, Sandbox, SandboxError

LEAF_TOOLS_COMMIT = "354fcceef266d88d528403981dc8b33666175594"  # tools.py
LEAF_RUNNER_COMMIT = "6dc217483b9e0fffb9c6773aa29b860056d2a0c5"  # tool_runner.py
LEAF_ENVIRONMENT_COMMIT = "5229bdfe5e00aa33ab2e46480b9548e7db210481"  # environment.py

# Leaf's caps (tool_runner.py @ 6dc21748).
READ_OUTPUT_CHARS = 20_000
BASH_OUTPUT_CHARS = 30_000
GLOB_MAX_FILES = 1000
DEFAULT_BASH_TIMEOUT_S = 120.0
# Leaf's host-side limits per call (environment.py @ 5229bdfe: _timeout).
RUNNER_TIMEOUT_S = 120.0
RUNNER_GRACE_S = 60.0
_POLL_S = 0.1
# The runner's output is already capped (about 30,000 characters); Glob's list is not.
_EXEC_CAP = 4 * 1024 * 1024
_PROVISION_TIMEOUT_S = 60.0


def _tool(
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


def _param(kind: str, description: str) -> dict[str, str]:
    return {"type": kind, "description": description}


# Leaf's OPENAI_TOOLS (tools.py @ 354fccee), byte for byte.
TOOL_SCHEMAS: list[dict[str, Any]] = [
    _tool(
        "Read",
        "Read a text file. Returns numbered lines.",
        {
            "file_path": _param("string", "Path to the file to read."),
            "offset": _param("integer", "Optional 1-based starting line."),
            "limit": _param("integer", "Optional maximum number of lines."),
        },
        ["file_path"],
    ),
    _tool(
        "Write",
        "Write a complete file, creating parent directories when needed.",
        {
            "file_path": _param("string", "Path to write."),
            "content": _param("string", "Full file contents."),
        },
        ["file_path", "content"],
    ),
    _tool(
        "Edit",
        "Replace an exact string in a text file.",
        {
            "file_path": _param("string", "Path to edit."),
            "old_string": _param("string", "Exact text to replace."),
            "new_string": _param("string", "Replacement text."),
            "replace_all": _param(
                "boolean", "Replace every occurrence instead of requiring one match."
            ),
        },
        ["file_path", "old_string", "new_string"],
    ),
    _tool(
        "Glob",
        "Find files by glob pattern.",
        {
            "pattern": _param("string", "Glob pattern, e.g. **/*.py."),
            "path": _param("string", "Optional directory to search from."),
        },
        ["pattern"],
    ),
    _tool(
        "Bash",
        "Run a shell command in the repository workdir.",
        {
            "command": _param("string", "Command to run."),
            "description": _param("string", "Short description of the command."),
            "timeout": _param("number", "Optional timeout in seconds."),
        },
        ["command"],
    ),
]
TOOL_NAMES: tuple[str, ...] = tuple(s["function"]["name"] for s in TOOL_SCHEMAS)


@dataclass(frozen=True)
class ToolOptions:
    """Ribbit's departures from Leaf. Each is off by default: turn one on only when a
    measurement (the GPU benchmark, a replay corpus) shows the model does better."""

    keep_tail: bool = False
    """Long Read/Bash output keeps its head AND tail (errors are usually at the end)."""
    read_footer: bool = False
    """Read ends with ``[lines A-B of N; use offset=B+1 to read on]`` when limit cut it."""
    clear_errors: bool = False
    """Common errors (missing file, Edit without a match) add a line on what to do."""
    recover_malformed_calls: bool = False
    """A tool call that could not be parsed gets an error observation saying why (Leaf
    runs it with empty arguments, which usually gives ``ValueError: ... is required``)."""


class ToolRunError(Exception):
    """A tool call Leaf would have ended the episode on (``tool_error``)."""


def runner_source() -> str:
    return resources.files("worker.agent").joinpath("runner_script.py").read_text("utf-8")


def runner_request(tool: str, arguments: dict[str, Any], options: ToolOptions, workdir: str) -> str:
    """The request file's text for one call (raises on text UTF-8 cannot hold)."""
    flags = {k: v for k, v in asdict(options).items() if v and k != "recover_malformed_calls"}
    return request_text(tool, arguments, workdir, flags)


def sandbox_places(sandbox: Sandbox) -> RunnerPlaces:
    """Leaf's places, unless the sandbox is no sandbox and says where its own ``/tmp``
    and workspace are (the tests' plain directory, whose ``/tmp`` is the host's)."""
    places = getattr(sandbox, "runner_places", None)
    return places if isinstance(places, RunnerPlaces) else LEAF_PLACES


def runner_timeout_s(tool: str, arguments: dict[str, Any]) -> float:
    """Leaf's host-side limit for one call; raises as Leaf's environment does on a
    timeout that is not a finite number in float's range (ValueError, TypeError,
    OverflowError). NaN and negative values give the 60 s minimum, as in Leaf."""
    if tool != "Bash":
        return RUNNER_TIMEOUT_S
    if arguments.get("timeout_ms") is not None:
        seconds = float(arguments["timeout_ms"]) / 1000.0
    else:
        raw = arguments.get("timeout")
        seconds = DEFAULT_BASH_TIMEOUT_S if raw is None else float(raw)
        if seconds > 1000:
            seconds /= 1000.0
    return float(max(1, int(max(0.1, seconds)) + int(RUNNER_GRACE_S)))


class ToolBox:
    """Runs the model's tool calls in one sandbox."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        options: ToolOptions | None = None,
        should_stop: Callable[[], bool] | None = None,
        time_left: Callable[[], float] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.options = options or ToolOptions()
        self.places = sandbox_places(sandbox)
        self._should_stop = should_stop or (lambda: False)
        self._time_left = time_left or (lambda: float("inf"))
        self._provisioned = False

    def run(self, call: ToolCall) -> ToolObservation:
        start = time.monotonic()
        if call.error is not None and self.options.recover_malformed_calls:
            return self._observe(call, f"Error: {call.error}", start, is_error=True)
        # Leaf parses unparseable arguments as {} and runs the call anyway.
        arguments = call.arguments if call.error is None else {}
        try:
            limit = runner_timeout_s(call.name, arguments)
            request = runner_request(call.name, arguments, self.options, self.places.workdir)
        except Exception as exc:
            # Leaf ends the episode on any exception its environment raises here, with
            # this text: a word (ValueError), infinity or an int past float's range
            # (OverflowError), a list (TypeError) as the timeout, or text no UTF-8 can
            # hold (UnicodeEncodeError: a lone surrogate, when it writes the request).
            raise ToolRunError(f"{type(exc).__name__}: {exc}") from exc
        self._provision()
        launch = runner_call(self.places, request)
        result = self._exec(
            launch.argv, timeout=min(limit, max(self._time_left(), 1.0) + RUNNER_GRACE_S)
        )
        if result.timed_out:
            raise ToolRunError(f"the tool runner ran past its {limit:g} s limit")
        text, code = _reply_of(launch, result)
        if code != 0:
            text = f"Tool runner exited with code {code}.\n{text}"
        return self._observe(
            call, text, start, is_error=code != 0 or _looks_failed(call.name, text)
        )

    def _provision(self) -> None:
        """Write the runner where Leaf copies it, once per sandbox (Leaf's
        ``_provision``); a sandbox that cannot take a file in /tmp is broken."""
        if self._provisioned:
            return
        done = self._exec(
            provision_argv(self.places, runner_source()), timeout=_PROVISION_TIMEOUT_S
        )
        if done.exit_code != 0 or done.timed_out:
            raise SandboxError(
                f"could not write the tool runner to {self.places.runner}: "
                f"exit {done.exit_code}: {done.stderr[-2000:]}"
            )
        self._provisioned = True

    def run_all(self, calls: Sequence[ToolCall]) -> list[ToolObservation]:
        return [self.run(c) for c in calls]

    @staticmethod
    def _observe(call: ToolCall, text: str, start: float, *, is_error: bool) -> ToolObservation:
        return ToolObservation(
            call_id=call.id,
            name=call.name,
            content=text,
            is_error=is_error,
            duration_s=time.monotonic() - start,
            exit_code=_bash_exit(call.name, text),
            truncated="\n[truncated " in text,
        )

    def _exec(self, argv: list[str], *, timeout: float) -> ExecResult:
        """``sandbox.exec`` on a helper thread, returning early when told to stop."""
        box: dict[str, ExecResult | BaseException] = {}

        def target() -> None:
            try:
                box["result"] = self.sandbox.exec(
                    argv, timeout=timeout, cwd=WORKSPACE, output_cap=_EXEC_CAP
                )
            except BaseException as exc:  # handed to the caller's thread below
                box["error"] = exc

        worker = threading.Thread(target=target, name="ribbit-tool-exec", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(_POLL_S)
            if worker.is_alive() and self._should_stop():
                raise ToolRunError("stopped: the run was cancelled or ran out of time")
        error = box.get("error")
        if isinstance(error, BaseException):
            raise error
        result = box["result"]
        assert isinstance(result, ExecResult)
        return result


def _reply_of(launch: RunnerCall, result: ExecResult) -> tuple[str, int]:
    """The runner's output and exit code, read after Leaf's exit marker. No marker: the
    call's own shell was killed (the model killed it), where Leaf raises and the
    episode ends as ``tool_error``."""
    reply = read_reply(launch.sentinel, result.stdout, result.stderr)
    if reply is None:
        raise ToolRunError(
            f"RuntimeError: pod command returned no exit marker: {result.stdout[-2000:]}"
        )
    return reply.output, reply.exit_code


_ERROR_PREFIXES = ("Unknown tool: ", "Tool runner exited with code ")


def _looks_failed(tool: str, text: str) -> bool:
    """For statistics only: Leaf's errors are ``TypeName: message`` on one line."""
    if text.startswith(_ERROR_PREFIXES):
        return True
    head = text.split("\n", 1)[0]
    name, sep, _ = head.partition(": ")
    return (
        bool(sep)
        and name.isidentifier()
        and name[:1].isupper()
        and name.endswith(("Error", "Exception"))
    )


def _bash_exit(tool: str, text: str) -> int | None:
    if tool != "Bash" or not text.startswith("Exit code: "):
        return None
    first = text.split("\n", 1)[0][len("Exit code: ") :]
    try:
        return int(first)
    except ValueError:
        return None
