"""The host's side of a watched pytest run (the sandbox's side is
:mod:`worker.gates.watchboot`): how the command is started, and what its channel says.

A plain pytest command runs as ``<python> -P -c <bootstrap> <test-path regex> <report
size cap> <its arguments>`` when a probe run in the sandbox before the tests (so nothing they do
decides it) finds that interpreter knows ``-P`` (3.11+) and has pytest; anything else
runs as written, unwatched, and says so (``TestRun.watched``). The channel is the
wrapper's stdout, handed to the interpreter as fd 3; the wrapper marks its end before
the command's own output is shown, so what the tests print never lands inside it. It
must be exactly the bootstrap's: a key record first (written before any repository
code can run), then records numbered 1, 2, ... each with an HMAC under that key;
anything else on it (a forged record, a gap, a record cut short by a flood of output)
makes the whole run tampered (:func:`channel_tamper`). A watched run that exits 0
without its ``end`` record was ended from inside (``os._exit``). A test process that
reopens the wrapper's stdout through /proc can add to the channel, never take back what
is on it.
"""

from __future__ import annotations

import ast
import base64
import binascii
import hashlib
import hmac
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from worker.gates.junit import MAX_JUNIT_BYTES
from worker.gates.testcmd import PYTHON_WORD

# The one rule for what is test code, shared with hygiene so the two never drift.
from worker.gates.weakened import TEST_PATH_RE

_RECORD = re.compile(r"^ribbit1 (\d+) ([a-z]+) ([A-Za-z0-9+/=]*) (-|[0-9a-f]{64})$")
# What the bootstrap writes, unsigned, from a child forked past its fork handler.
_CHILD = re.compile(r"^ribbit1 child \d+$")
_FORKED = (
    "a process forked from the test interpreter past Python's fork handlers (it holds "
    "the channel's key) did what the watch reports"
)
CHANNEL_FD = 3
# The bootstrap's parts, each put in place of watchboot's import of it.
_INLINED = {
    "worker.gates.watchchannel": "watchchannel.py",
    "worker.gates.watchcopies": "watchcopies.py",
    "worker.gates.watchrunner": "watchrunner.py",
    "worker.gates.watchtests": "watchtests.py",
    "worker.gates.watchwitness": "watchwitness.py",
    "worker.gates.watchguard": "watchguard.py",
}
# watchboot's and watchchannel's own calls, in their order; an exception exits 1.
_PROBE = """import ctypes, fcntl, os, pytest
prctl = ctypes.CDLL(None, use_errno=True).prctl
if prctl(4, 0, 0, 0, 0) != 0 or prctl(3, 0, 0, 0, 0) != 0:
    raise SystemExit('prctl')
fd = os.memfd_create('probe', os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
os.stat(f'/proc/self/fd/{fd}')
seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
"""
SELECT_VAR = "RIBBIT_PYTEST_SELECT"


# The bootstrap's record of tests whose results came from another process.
OUTSIDE = "outside"
# Its record of a test function that raised in its call whose call still reported a pass.
SWALLOWED = "swallowed"
# Its record of test code that is not what its file compiles to, or a test file changed.
TEST_CODE = "test-code"
# Records about the run, not one place in the code: what they say names them.
RUN_WIDE = frozenset({OUTSIDE, SWALLOWED, TEST_CODE})


@dataclass(frozen=True)
class TamperEvent:
    """One attributed event: the mechanism (the audit event, ``runner-monkeypatch`` or
    ``module-shadow``), what it did, and the workspace file and line behind it (a path
    outside the workspace, or None, when the replacement came from no repository file)."""

    mechanism: str
    what: str
    path: str | None
    line: int

    def describe(self) -> str:
        if self.mechanism in RUN_WIDE:
            return self.what  # the run's, not one place's
        where = f"{self.path}:{self.line}" if self.path else "code from no repository file"
        return f"{self.what} at {where}"


@dataclass(frozen=True)
class Channel:
    """What a watched run's channel said."""

    events: tuple[TamperEvent, ...]
    report: bytes | None  # the JUnit report pytest wrote, as the bootstrap read it
    status: int | None  # pytest's exit status (None: the run never got to its end)
    failed: int  # node ids with a failed phase, counted by the bootstrap
    broken: str | None  # why the channel is not the bootstrap's own, or None


def bootstrap_source() -> str:
    """The bootstrap as one program for ``python -c``: watchboot.py with each of its
    imports of its parts (watchchannel, watchcopies, watchrunner, watchtests,
    watchwitness, watchguard) replaced by that module's code (past its docstring and
    ``__future__`` import), since nothing of Ribbit's is importable in the sandbox."""
    return inlined_program("watchboot.py", _INLINED)


def inlined_program(name: str, parts: dict[str, str]) -> str:
    """The module ``name`` of this folder as one program for ``python -c``: each of its
    imports of ``parts`` (module -> file here) replaced by that module's code."""
    here = Path(__file__).parent
    program = (here / name).read_text()
    lines = program.splitlines(keepends=True)
    inlined = [
        node
        for node in ast.parse(program).body
        if isinstance(node, ast.ImportFrom) and node.module in parts
    ]
    assert {node.module for node in inlined} == set(parts), f"{name}'s imports moved"
    for node in sorted(inlined, key=lambda n: n.lineno, reverse=True):
        part = (here / parts[str(node.module)]).read_text()
        start, end = node.lineno - 1, node.end_lineno or node.lineno
        lines[start:end] = [_body(part)]
    return "".join(lines)


def _body(source: str) -> str:
    """``source`` after its ``from __future__ import`` (which only a program's first
    statement may be)."""
    future = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom) and node.module == "__future__"
    )
    return "".join(source.splitlines(keepends=True)[future.end_lineno or future.lineno :])


@dataclass(frozen=True)
class WatchPlan:
    """How a plain pytest command (``pytest ...``, ``python[3] -m pytest ...``) runs
    watched: its interpreter and pytest's arguments."""

    python: str
    args: tuple[str, ...]

    def probe(self) -> list[str]:
        """The command that says whether this interpreter can be watched: it knows
        ``-P``, has pytest, and makes the calls the bootstrap makes (prctl through
        ctypes, a sealable memfd it reaches through /proc/self, its seals), which end
        it with an error where one is missing, so the run falls back to unwatched
        instead of a bootstrap that dies after its key. Run before the tests, so
        nothing they do decides it."""
        return [self.python, "-P", "-c", _PROBE]

    def script(self) -> str:
        """The shell text that runs the tests watched. The selection travels as
        ``$RIBBIT_PYTEST_SELECT`` and becomes pytest's ``PYTEST_ADDOPTS`` here; the
        report's place is never in the environment."""
        words = [
            *(self.python, "-P", "-c", bootstrap_source()),
            *(TEST_PATH_RE.pattern, str(MAX_JUNIT_BYTES), *self.args),
        ]
        return f'PYTEST_ADDOPTS="${{{SELECT_VAR}-}}" exec {" ".join(shlex.quote(w) for w in words)}'


def watch_plan(command: str) -> WatchPlan | None:
    """The plan for ``command`` when it is a plain pytest form, else None."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:1] in (["pytest"], ["py.test"]):
        return WatchPlan("python3", tuple(words[1:]))
    if len(words) >= 3 and PYTHON_WORD.fullmatch(words[0]) and words[1:3] == ["-m", "pytest"]:
        return WatchPlan(words[0], tuple(words[3:]))
    return None


def parse_channel(text: str) -> Channel | None:
    """The channel's records (``text`` is what the wrapper's stdout held before the run's
    own output); None when the run was not watched (no key record at all)."""
    lines = [line for line in text.split("\n") if line]
    if not lines:
        return None
    first = _RECORD.match(lines[0])
    if first is None or first[1] != "0" or first[2] != "key":
        if any(line.startswith("ribbit1 ") for line in lines):
            return _broken("the run's channel does not start with its key")
        return None
    try:
        key = base64.b64decode(first[3], validate=True)
    except binascii.Error:
        return _broken("the run's channel key is not base64")
    events: list[TamperEvent] = []
    report: bytes | None = None
    status: int | None = None
    failed = 0
    if any(_CHILD.match(line) for line in lines):
        return _broken(_FORKED)
    for number, line in enumerate(lines[1:], start=1):
        m = _RECORD.match(line)
        if m is None or int(m[1]) != number:
            return _broken(f"record {number} of the run's channel is not the bootstrap's")
        body = f"{m[1]} {m[2]} {m[3]}".encode()
        mac = hmac.new(key, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac, m[4]):
            return _broken(f"record {number} of the run's channel carries a forged signature")
        try:
            payload = base64.b64decode(m[3], validate=True)
        except binascii.Error:
            return _broken(f"record {number} of the run's channel is not base64")
        if status is not None:
            return _broken("the run's channel has records after its end")
        kind = m[2]
        if kind == "tamper":
            data = json.loads(payload)
            events.append(
                TamperEvent(
                    str(data["mechanism"]),
                    str(data["what"]),
                    data["path"] if isinstance(data["path"], str) else None,
                    int(data["line"]),
                )
            )
        elif kind == "overflow":
            events.append(TamperEvent("overflow", "more tamper events than Ribbit keeps", None, 0))
        elif kind == "report" and report is None:
            report = payload
        elif kind == "oversize" and report is None:
            pass  # no report: the exit status decides
        elif kind == "end":
            data = json.loads(payload)
            status, failed = int(data["status"]), int(data["failed"])
        else:
            return _broken(f"record {number} of the run's channel is of an unknown kind")
    return Channel(tuple(events), report, status, failed, None)


def _broken(why: str) -> Channel:
    return Channel((), None, None, 0, why)


def channel_tamper(
    channel: Channel, exit_code: int, report_failing: int | None, who: str = "pytest's session"
) -> str | None:
    """Why the channel does not vouch for the run, or None: it is broken; the
    interpreter exited 0 before ``who`` ended, or with a status the channel's end does
    not give; or the report (``report_failing`` failing tests, None when it has no
    cases) has fewer failures than the run counted while it was watched. The gates'
    runs (worker/gates/testrun.py) and the exported eval script judge by this alone."""
    if channel.broken:
        return channel.broken
    if channel.status is None:
        return f"the interpreter exited 0 before {who} ended" if exit_code == 0 else None
    if exit_code == 0 and channel.status != 0:
        return f"the interpreter exited 0 but {who} ended {channel.status}"
    if report_failing is not None and report_failing < channel.failed:
        return (
            f"the report has {report_failing} failing test(s) but {channel.failed} failed "
            "while the run was watched"
        )
    return None
