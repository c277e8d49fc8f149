"""The host's side of the resident command runner (worker/sandbox/session_server.py).

Both backends keep one such runner per sandbox and send it every ``exec``: bubblewrap
over the pipes of the ``bwrap`` process (the runner is its command), docker over the one
attached stream of a long-lived exec. So a command costs a process spawn inside the
sandbox, not an engine round trip (runc exec and three API calls took about 100 ms per
command on Podman).

Answers are untrusted data: any process in the sandbox can write to the runner's output,
so lines are bounded, strictly parsed, and matched to requests by random ids.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from worker.sandbox.base import TIMEOUT_EXIT_CODE, ExecResult, SandboxError
from worker.sandbox.common import (
    DIFF_CAP,
    command_argv,
    sandbox_env,
    timed_out_exit,
    workspace_cwd,
)

# Longest answer line accepted from the sandbox: two base64 streams of a diff at its cap.
MAX_LINE = 3 * DIFF_CAP


def server_source() -> str:
    """The runner's code, shipped as text and run with the sandbox's own python3."""
    return resources.files("worker.sandbox").joinpath("session_server.py").read_text()


# ``python3 -c`` this with the source's length as its argument, then write the source on
# its stdin ahead of any request: it reads exactly that much (unbuffered, so the requests
# after it stay in the pipe) and runs it as ``__main__``. So the process list inside the
# sandbox, which the model can read with ``ps``, shows these few lines, not 15 kB of
# source as the runner's command line.
SERVER_BOOTSTRAP = (
    "import os,sys\n"
    "n=int(sys.argv[1]);b=b''\n"
    "while len(b)<n:\n"
    " c=os.read(0,n-len(b))\n"
    " if not c:sys.exit(1)\n"
    " b+=c\n"
    "exec(compile(b,'session_server.py','exec'))"
)


def server_payload() -> bytes:
    """What the bootstrap reads before anything else: the runner's source."""
    return server_source().encode("utf-8")


def bootstrap_args() -> list[str]:
    """``python3 -c`` 's program and argument: the bootstrap and the source's length."""
    return [SERVER_BOOTSTRAP, str(len(server_payload()))]


@dataclass
class _Pending:
    done: threading.Event
    answer: dict[str, object] | None = None


class SessionClient:
    """Requests to one runner and the answers matched back to them, from any thread.

    ``send`` writes bytes to the runner's input; ``read`` returns the next bytes of its
    output (b"" at its end) and is called only by the reader thread this starts."""

    def __init__(
        self, send: Callable[[bytes], None], read: Callable[[], bytes], *, bootstrap: bool = False
    ) -> None:
        """``bootstrap``: the runner was started with :func:`bootstrap_args` and is sent
        its source ahead of any request."""
        if bootstrap:
            # A runner that could not start has closed its input: the first call says so.
            with contextlib.suppress(OSError):
                send(server_payload())
        self._send = send
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self.ended = threading.Event()  # the runner's output is closed: it is gone
        threading.Thread(target=self._read_answers, args=(read,), daemon=True).start()

    def _read_answers(self, read: Callable[[], bytes]) -> None:
        """Hand each answer to the call waiting for its id; a line longer than MAX_LINE
        is dropped whole (a flood from the sandbox, never a real answer)."""
        buffered = bytearray()
        scanned = 0  # bytes of ``buffered`` known to hold no newline
        dropping = False
        try:
            while chunk := read():
                buffered += chunk
                while (end := buffered.find(b"\n", scanned)) >= 0:
                    line = bytes(buffered[:end])
                    del buffered[: end + 1]
                    scanned = 0
                    if dropping:
                        dropping = False
                        continue
                    self._deliver(line)
                scanned = len(buffered)
                if scanned > MAX_LINE:
                    buffered.clear()
                    scanned, dropping = 0, True
        except (OSError, ValueError):  # ValueError: the pipe was closed under the read
            pass
        finally:
            self.ended.set()
            # Nobody is left to answer.
            for waiter in list(self._pending.values()):
                waiter.done.set()

    def _deliver(self, line: bytes) -> None:
        try:
            answer = json.loads(line)
            waiter = self._pending.get(int(answer["id"]))
        except (ValueError, KeyError, TypeError):
            return
        if waiter is not None and not waiter.done.is_set():
            waiter.answer = answer
            waiter.done.set()

    def call(self, request: Mapping[str, object], wait_s: float) -> dict[str, object] | None:
        """Send one request and wait for its answer (None: none came in ``wait_s``).
        Raises SandboxError when the runner is gone or dies before answering."""
        if self.ended.is_set():
            raise SandboxError("the sandbox's command runner is gone")
        # Random, so a process in the sandbox writing to the answer stream cannot guess
        # the id of a command still running and answer in its place.
        request_id = secrets.randbits(63)
        waiter = _Pending(threading.Event())
        self._pending[request_id] = waiter
        try:
            with self._lock:
                self._send(json.dumps({**request, "id": request_id}).encode() + b"\n")
            answered = waiter.done.wait(wait_s)
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise SandboxError(f"the sandbox is gone: {exc}") from exc
        finally:
            self._pending.pop(request_id, None)
        if not answered:
            return None
        if waiter.answer is None:
            raise SandboxError("the sandbox died while a command ran")
        return waiter.answer

    def wake_all(self) -> None:
        """Release every waiting call (the sandbox is being closed)."""
        for waiter in list(self._pending.values()):
            waiter.done.set()


def exec_request(
    command: str | Sequence[str],
    *,
    timeout: float,
    cwd: str,
    env: Mapping[str, str] | None,
    output_cap: int,
) -> dict[str, object]:
    if not 0 < timeout < math.inf:  # NaN too: the runner would never time it out
        raise ValueError("timeout must be positive and finite")
    argv, environ, where = command_argv(command), sandbox_env(env), workspace_cwd(cwd)
    _check_encodable([*argv, *environ.keys(), *environ.values(), where])
    return {"argv": argv, "env": environ, "cwd": where, "timeout": timeout, "cap": output_cap}


def _check_encodable(texts: list[str]) -> None:
    """Raise UnicodeEncodeError (a ValueError) for text no process can be given: the
    runner inside would fail to start it and never answer, and the caller would wait out
    the timeout and lose the sandbox. Python's own rule for argv and the environment
    (the file system encoding with surrogateescape) decides, as subprocess would."""
    for text in texts:
        os.fsencode(text)


# Asks the runner to kill every other process of the sandbox user; runs nothing.
STOP_ALL_REQUEST: dict[str, object] = {
    "stop_all": True,
    "argv": [],
    "env": {},
    "cwd": "/",
    "timeout": 1,
    "cap": 0,
}


def parse_result(
    answer: Mapping[str, object], elapsed: float, timeout: float, cap: int
) -> ExecResult:
    try:
        exit_code = int(str(answer["rc"]))
        out = base64.b64decode(str(answer["out"]), validate=True)[:cap]
        err = base64.b64decode(str(answer["err"]), validate=True)[:cap]
        totals = int(str(answer["out_total"])), int(str(answer["err_total"]))
    except (KeyError, ValueError) as exc:
        raise SandboxError(f"the sandbox answered nonsense: {exc}") from exc
    timed_out = timed_out_exit(exit_code, elapsed, timeout)
    return ExecResult(
        exit_code=TIMEOUT_EXIT_CODE if timed_out else exit_code,
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        duration_s=elapsed,
        timed_out=timed_out,
        truncated=totals[0] > cap or totals[1] > cap,
        oom_killed=False,
    )
