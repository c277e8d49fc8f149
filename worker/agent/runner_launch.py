"""How one tool call reaches the runner inside the sandbox: the way Leaf's pod exec does.

Leaf (microsoft/FrogNano, ``harness/leaf/environment.py`` @ 5229bdfe and
``runtimes/kubernetes.py`` @ 354fccee) copies its runner once to
``/tmp/frognano_leaf_tool_runner.py``, copies each request to
``/tmp/frognano_leaf_request_<hex>.json``, and runs one ``kubectl exec`` per call::

    /bin/bash -lc "cd / && (trap 'rm -f -- REQ' EXIT; <find python>; \\
        \\"$python_bin\\" RUNNER REQ); rc=$?; printf '\\n<sentinel>%s\\n' \\"$rc\\""

The model can see that from inside (``ps``, ``ls /tmp``, ``$SHLVL``, ``$OLDPWD``, and
bash's ``Killed`` line when the runner is killed), so Ribbit runs the same script: the
same shells in the same nesting (``$SHLVL`` is 2 in the model's Bash), the runner and
the request as files where Leaf has them, never their text in anyone's argv.

The sandbox API has no way to copy a file into ``/tmp``, so one exec per call writes
the request and then ``exec``s Leaf's ``/bin/bash -lc`` script: the request's text is in
the writer's argv only until that exec replaces it, before the runner starts, and
``exec`` takes the writer's shell level back off (bash does so before it execs). The
runner is written the same way, once per sandbox, before the first call.
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from worker.sandbox.base import WORKSPACE

# environment.py @ 5229bdfe: _RUNNER_PATH, _REQUEST_PREFIX.
RUNNER_PATH = "/tmp/frognano_leaf_tool_runner.py"  # noqa: S108 (inside the sandbox)
REQUEST_PREFIX = "/tmp/frognano_leaf_request_"  # noqa: S108 (inside the sandbox)
# runtimes/python.py @ 5229bdfe: FIND_PYTHON.
FIND_PYTHON = (
    "python_bin=$(test -x /usr/bin/python3 && echo /usr/bin/python3 "
    "|| command -v python3 || command -v python)"
)
# One argv string may hold at most 128 KiB (MAX_ARG_STRLEN); the request is split below it.
ARG_PIECE = 100_000
# $1 the request's path, $2 Leaf's script, the rest the request's pieces.
_WRITE_THEN_RUN = (
    'request=$1; script=$2; shift 2; printf %s "$@" > "$request" && exec /bin/bash -lc "$script"'
)
# $1 the runner's path, $2 its source (copy_to_container: mkdir -p, then the file).
_PROVISION = 'mkdir -p -- "$(dirname -- "$1")" && printf %s "$2" > "$1"'
_ARGV0 = "ribbit-tool"


@dataclass(frozen=True)
class RunnerPlaces:
    """Where the runner and its requests are written, and where the tools run."""

    runner: str = RUNNER_PATH
    request_prefix: str = REQUEST_PREFIX
    workdir: str = WORKSPACE
    """The request's ``workdir`` (Leaf: the task's repository), the runner's cwd."""


LEAF_PLACES = RunnerPlaces()


@dataclass(frozen=True)
class RunnerCall:
    """One tool call's exec: its argv and the marker its exit code comes back after."""

    argv: list[str]
    sentinel: str


@dataclass(frozen=True)
class RunnerReply:
    """What Leaf's environment reads back: the output before the marker and the code."""

    output: str
    exit_code: int


def request_text(
    tool: str, arguments: Mapping[str, object], workdir: str, options: Mapping[str, bool]
) -> str:
    """The request file's text: Leaf's three keys, plus Ribbit's options when any is on.
    Raises UnicodeEncodeError on text no UTF-8 can hold (a lone surrogate), as Leaf's
    ``write_text(encoding="utf-8")`` does, before anything runs."""
    payload: dict[str, object] = {"tool": tool, "args": arguments, "workdir": workdir}
    if options:
        payload["options"] = dict(options)
    text = json.dumps(payload, ensure_ascii=False)
    text.encode("utf-8")
    return text


def leaf_command(places: RunnerPlaces, request_path: str) -> str:
    """environment.py's ``command``, quoted as it quotes it."""
    cleanup = shlex.quote(f"rm -f -- {shlex.quote(request_path)}")
    return (
        f"trap {cleanup} EXIT; {FIND_PYTHON}; "
        f'"$python_bin" {shlex.quote(places.runner)} {shlex.quote(request_path)}'
    )


def pod_script(command: str, sentinel: str) -> str:
    """kubernetes.py's ``run`` script for ``workdir="/"``."""
    return f"cd / && ({command}); rc=$?; printf '\\n{sentinel}%s\\n' \"$rc\""


def provision_argv(places: RunnerPlaces, source: str) -> list[str]:
    """The exec that writes the runner where Leaf's ``_provision`` copies it."""
    return ["/bin/bash", "-c", _PROVISION, _ARGV0, places.runner, source]


def runner_call(places: RunnerPlaces, request: str) -> RunnerCall:
    """The exec of one call: write the request, then become Leaf's ``/bin/bash -lc``."""
    request_path = f"{places.request_prefix}{uuid.uuid4().hex}.json"
    sentinel = f"__FROGNANO_RC_{uuid.uuid4().hex}__"
    script = pod_script(leaf_command(places, request_path), sentinel)
    pieces = [request[i : i + ARG_PIECE] for i in range(0, len(request), ARG_PIECE)]
    argv = ["/bin/bash", "-c", _WRITE_THEN_RUN, _ARGV0, request_path, script, *pieces]
    return RunnerCall(argv=argv, sentinel=sentinel)


def read_reply(sentinel: str, stdout: str, stderr: str) -> RunnerReply | None:
    """Leaf's reading of the exec's output (None: no marker, which Leaf raises on).

    Leaf's stream interleaves stdout and stderr as they arrive; here they come apart, so
    stderr (bash's ``Killed`` line, a crashed runner's traceback) follows the runner's
    stdout, which is where it arrives in the cases that print both: the runner writes
    its answer once, at its end."""
    marker = re.search(rf"\n{re.escape(sentinel)}(\d+)\n?$", stdout)
    if marker is None:
        return None
    return RunnerReply(output=stdout[: marker.start()] + stderr, exit_code=int(marker.group(1)))
