"""Run a repository's test command in a sandbox once, with per-test results: the one
way the test gate, the environment builder and the reward run tests.

pytest is asked for a JUnit report through ``PYTEST_ADDOPTS``, never by appending
flags to the command, so it reaches pytest however the command starts it
(``pytest``, ``python -m pytest -q``, ``make test``, a script; tox too, which is
told to pass the variable on through ``TOX_OVERRIDE``). The same variable carries
node ids when a caller selects tests: pytest puts its contents before the
command's own arguments.

Only that one report counts, and the patch under judgement cannot write it: it goes
to a fresh, randomly named folder in the sandbox's /tmp (``mkdir`` fails on a folder
that is already there, so nothing can pre-place it), is accepted only as a
single-link regular file newer than the run's start and within the size cap, and is
read back in the same exec, framed in the output by a random token (a second frame
is what a forged copy looks like). Other runners are told to write that same file
(its path is ``$RIBBIT_JUNIT`` while the command runs; worker/gates/testcmd.py says
how each runner is asked), except cargo, whose console output is its report. Any
other XML the run writes (or a file the code under test drops) is ignored; a
command with no report is judged on its exit code alone. Nothing runs through a
login shell, so a profile file in the sandbox cannot wrap Ribbit's own steps.

That file is within reach of the code under test, which runs in pytest's own process
(its path is in the environment). So a plain pytest command (``pytest ...``, ``python[3]
-m pytest ...``) runs watched instead (worker/gates/watch.py, the bootstrap in
worker/gates/watchboot.py): with no report path in its environment or command line, with
the standard library and pytest ahead of the workspace on ``sys.path``, its report and
exit status sent over a keyed channel opened before any repository file loads, and what
its audit hook and runner checks see of the repository's non-test code in
``TestRun.tamper``. What that interpreter runs before the bootstrap and trusts as the
runner is read first, by a command of its own (``TestRun.startup``,
worker/gates/startup.py), for the gate to compare with the base run's. Every run here is
one process tree in the sandbox it is given; the test gate gives each run, reruns too, a
fresh one. On a real backend (emptied before the run) a process still alive when the
command ends was left by the tests (once what is still exiting has had a moment to go):
it is killed before the report is read, and a run whose report is a file (unwatched, not
launched) counts it (``TestRun.strays``), for the judge to weigh against the base run's.
A cargo run that exits 0 though a test binary stopped before libtest's summary is not
its own either: libtest exits with failure when a test fails, so its output was ended
from inside.
"""

from __future__ import annotations

import base64
import secrets
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol, runtime_checkable

from worker.gates.junit import (
    MAX_JUNIT_BYTES,
    Existing,
    JUnitError,
    Outcome,
    TestCase,
    libtest_unfinished,
    outcomes,
    parse_jest_json,
    parse_junit,
    parse_libtest,
    parse_node_tap,
)
from worker.gates.startup import StartupItem, parse_scan, scan_command, unread
from worker.gates.testcmd import Invocation, TestCommand, recognise
from worker.gates.watch import (
    SELECT_VAR,
    Channel,
    TamperEvent,
    WatchPlan,
    channel_tamper,
    parse_channel,
    watch_plan,
)
from worker.sandbox.base import WORKSPACE, ExecResult, Sandbox

SHORT_TIMEOUT_S = 60
# The start-up scan reads the runner's and plugins' files (a large plugin package is
# thousands): more than a probe, far less than a suite.
SCAN_TIMEOUT_S = 300
SCAN_CAP = 4 * 1024 * 1024
# One environment string may hold at most 128 KiB on Linux (MAX_ARG_STRLEN); the
# JUnit options and the shell's own variables need some of it.
MAX_SELECT_CHARS = 100_000
_EXISTS_BATCH = 2000
_EXISTS_SCRIPT = 'for f in "$@"; do [ -f "$f" ] && printf "%s\\0" "$f"; done; exit 0'


@runtime_checkable
class _Stoppable(Protocol):
    """A real backend, which can kill what is left running in it (the host-copy test
    sandbox cannot: its processes are the host's)."""

    def stop_processes(self) -> None: ...


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest test class, whatever its name says

    command: str
    result: ExecResult
    cases: tuple[TestCase, ...]
    report: bool  # a JUnit report was read (else only the exit code tells)
    tampered: str | None = None  # why the run's output is not the wrapper's own
    # The run went through Ribbit's pytest bootstrap (worker/gates/watchboot.py), and
    # what its audit hook and runner checks attributed to the repository's code.
    watched: bool = False
    tamper: tuple[TamperEvent, ...] = ()
    # What ran, as the gate log shows it (Invocation.ran; the command when not told).
    ran: str = ""
    # The runner reports whenever it runs its tests (Invocation.report_expected).
    report_expected: bool = False
    # Processes that outlived the command of a run whose report is a file (they could
    # have rewritten it; killed before it was read). Kept apart from ``tampered``: an
    # honest suite can leave some (an integration test that spawns a server and never
    # kills it), which the base run then shows too. 0 for a watched or launched run.
    strays: int = 0
    # A watched run's start-up, read before it ran (None: not watched, or not read).
    startup: tuple[StartupItem, ...] | None = None

    @property
    def timed_out(self) -> bool:
        return self.result.timed_out

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def outcomes(self) -> dict[str, Outcome]:
        return outcomes(self.cases)

    @property
    def by_id(self) -> dict[str, TestCase]:
        """One case per id: where an id was reported more than once, its worst."""
        worst = self.outcomes
        chosen: dict[str, TestCase] = {}
        for case in self.cases:
            if case.outcome == worst[case.id]:
                chosen.setdefault(case.id, case)
        return chosen

    @property
    def not_own(self) -> str | None:
        """Why the run's report or output may not be the command's own, strays included."""
        return self.tampered or strays_reason(self.strays)

    def log(self, limit: int = 4000) -> str:
        text = f"{self.result.stdout}\n{self.result.stderr}".strip()
        return text if len(text) <= limit else "…" + text[-limit:]


def pytest_env(report_path: str, select: Sequence[str] = ()) -> dict[str, str]:
    """The environment that makes pytest write ``report_path`` (xunit1: it keeps the
    ``file`` attribute) and, when given, run only the ``select``ed node ids."""
    # pytest splits PYTEST_ADDOPTS like a shell would, hence the quoting.
    words = [f"--junitxml={report_path}", "-o", "junit_family=xunit1", *select]
    return {
        "PYTEST_ADDOPTS": " ".join(shlex.quote(w) for w in words),
        "TOX_OVERRIDE": "testenv.pass_env+=PYTEST_ADDOPTS",
    }


def select_batches(ids: Iterable[str], limit: int = MAX_SELECT_CHARS) -> list[list[str]]:
    """``ids`` in batches whose quoted form fits one PYTEST_ADDOPTS."""
    batches: list[list[str]] = [[]]
    size = 0
    for test_id in ids:
        cost = len(shlex.quote(test_id)) + 1
        if batches[-1] and size + cost > limit:
            batches.append([])
            size = 0
        batches[-1].append(test_id)
        size += cost
    return [b for b in batches if b]


def sandbox_files(sandbox: Sandbox, cwd: str = WORKSPACE) -> Existing:
    """``existing`` for :func:`parse_junit`: which paths are files in the sandbox."""

    def existing(paths: Collection[str]) -> set[str]:
        found: set[str] = set()
        ordered = sorted(paths)
        for i in range(0, len(ordered), _EXISTS_BATCH):
            batch = ordered[i : i + _EXISTS_BATCH]
            result = sandbox.exec(
                ["bash", "-c", _EXISTS_SCRIPT, "exists", *batch],
                timeout=SHORT_TIMEOUT_S,
                cwd=cwd,
            )
            found.update(p for p in result.stdout.split("\0") if p in batch)
        return found

    return existing


def run_tests(
    sandbox: Sandbox,
    command: str | TestCommand,
    *,
    timeout: float,
    select: Sequence[str] = (),
    written_since: int | None = None,
) -> TestRun:
    """Run ``command`` once in ``sandbox``'s workspace (``result.stdout`` is the tail of
    its output, stdout and stderr together). A plain string is recognised as
    :func:`worker.gates.testcmd.recognise` does (``go test ./...`` reports per test;
    ``make test`` is run as written). ``written_since``: when the set-up environment's
    restore into ``sandbox`` ended (SetupResult.restored_at_ns), for a watched run's
    start-up scan to list what was written into the environment after it."""
    test = command if isinstance(command, TestCommand) else recognise(command, "caller")
    how = test.invocation(select)
    if isinstance(sandbox, _Stoppable):
        # Nothing left running (a setup step's daemon, an earlier run's children) may
        # watch this run's processes or reopen its output through /proc.
        sandbox.stop_processes()
    plan = _usable_watch_plan(sandbox, test)
    token = secrets.token_hex(16)
    report_dir = f"/tmp/ribbit-report-{token}"  # noqa: S108 (the sandbox's own /tmp)
    cap = LOG_BYTES + MAX_JUNIT_BYTES * 4 // 3 + 4096 + _CHANNEL_EVENTS_BYTES
    # pytest's report is asked for whatever runs (``make test`` may start pytest);
    # ids select through PYTEST_ADDOPTS only where pytest is the runner. A watched run
    # gets neither variable: its report's place is known only inside the bootstrap.
    pytest_select = select if test.runner in ("pytest", "shell") else ()
    env, script = _environment_and_script(how, plan, report_dir, pytest_select)
    # Read before the run, by a command of its own: nothing the run does can change it.
    startup = _startup(sandbox, plan, env, written_since) if plan is not None else None
    # The command comes from the repository's config (trusted, like CI config), never
    # from an issue or a model; what Ribbit adds travels in the environment.
    mode = "watch" if plan is not None or how.channel else "plain"
    own = "own" if isinstance(sandbox, _Stoppable) else "shared"
    args = (report_dir, script, token, how.report, mode, own)
    result = sandbox.exec([*_RUN_SHELL, *args], timeout=timeout, env=env, output_cap=cap)
    if plan is not None:
        existing = sandbox_files(sandbox)
        watched = _watched_run(test, result, token, lambda d: parse_junit(d, existing, "auto"))
        shown = f"{test.command}  # watched by Ribbit's pytest bootstrap"
        return replace(watched, ran=shown, report_expected=how.report_expected, startup=startup)
    if how.channel:
        launched = _launched_run(test, result, token, lambda d: _parse_report(how, d, sandbox))
        return replace(launched, ran=how.ran, report_expected=how.report_expected)
    ran = test.command if test.runner in ("pytest", "shell") else how.ran
    plain = _plain_run(test, how, result, token, sandbox)
    return replace(plain, ran=ran, report_expected=how.report_expected)


def _environment_and_script(
    how: Invocation, plan: WatchPlan | None, report_dir: str, pytest_select: Sequence[str]
) -> tuple[dict[str, str], str]:
    """What the run's environment holds and the shell text it runs: only an unwatched,
    unlaunched run is told the report's place (the watched and launched ones send it)."""
    if plan is not None:
        env = {**how.env, SELECT_VAR: " ".join(shlex.quote(w) for w in pytest_select)}
        return env, plan.script()
    if how.channel:
        return dict(how.env), how.script  # the report's place is the launcher's own
    return {**how.env, **pytest_env(f"{report_dir}/junit.xml", pytest_select)}, how.script


def _usable_watch_plan(sandbox: Sandbox, test: TestCommand) -> WatchPlan | None:
    """How to watch a pytest run, or None where the command is not plain pytest or the
    sandbox's interpreter cannot run the bootstrap."""
    plan = watch_plan(test.command) if test.runner == "pytest" else None
    if plan is not None:
        # Asked before the tests run, in a sandbox they have not touched yet.
        probe = sandbox.exec(plan.probe(), timeout=SHORT_TIMEOUT_S)
        if probe.exit_code != 0 or probe.timed_out:
            return None
    return plan


def _startup(
    sandbox: Sandbox, plan: WatchPlan, env: Mapping[str, str], written_since: int | None
) -> tuple[StartupItem, ...]:
    """What the watched interpreter runs before the bootstrap and trusts as the runner
    (worker/gates/startup.py); one ``unread`` row where that could not be read."""
    scanned = sandbox.exec(
        scan_command(plan.python, written_since),
        timeout=SCAN_TIMEOUT_S,
        env=dict(env),
        output_cap=SCAN_CAP,
    )
    if scanned.timed_out:
        return unread(f"it ran past {SCAN_TIMEOUT_S} s")
    if scanned.exit_code != 0 or scanned.truncated:
        return unread(f"exit status {scanned.exit_code}: {scanned.stderr[-300:].strip()}")
    return parse_scan(scanned.stdout) or unread("its output is not a scan's")


def _plain_run(
    test: TestCommand, how: Invocation, result: ExecResult, token: str, sandbox: Sandbox
) -> TestRun:
    """An unwatched run's result, read from the report the run wrapper framed with
    ``token`` in its output."""
    log, data, tampered, strays = split_run_output(result.stdout, token)
    shown = replace(result, stdout=log)
    if data is None:
        return TestRun(test.command, shown, (), False, tampered, strays=strays)
    try:
        cases = _parse_report(how, data, sandbox)
    except JUnitError:
        return TestRun(test.command, shown, (), False, tampered, strays=strays)
    if how.report == "output" and result.exit_code == 0 and tampered is None:
        tampered = _ended_from_inside(data)
    return TestRun(test.command, shown, tuple(cases), True, tampered, strays=strays)


def _ended_from_inside(output: bytes) -> str | None:
    """Why a successful cargo run's output cannot be libtest's own: a test binary that
    stopped before its summary (libtest exits 101 when a test fails, and only after its
    summary), while cargo counted it a success."""
    unfinished = libtest_unfinished(output)
    if not unfinished:
        return None
    names = ", ".join(sorted(set(unfinished))[:5])
    return f"cargo exits 0, but the test binary of {names} ended before libtest's summary"


def _parse_report(how: Invocation, data: bytes, sandbox: Sandbox) -> list[TestCase]:
    """The cases in a report of the kind ``how`` asked for."""
    if how.report == "output":
        return list(parse_libtest(data))
    if how.flavour == "jest":
        return list(parse_jest_json(data, WORKSPACE))
    if how.flavour == "nested" and data.lstrip().startswith(b"TAP version"):
        return list(parse_node_tap(data))  # Node 18's reporter (see testcmd._node)
    existing = sandbox_files(sandbox) if how.flavour == "auto" else None
    return list(parse_junit(data, existing, how.flavour))


# Reads a report's bytes into its cases (raises JUnitError on one it cannot read).
ReadReport = Callable[[bytes], Iterable[TestCase]]


def _launched_run(test: TestCommand, result: ExecResult, token: str, read: ReadReport) -> TestRun:
    """A jest or mocha run through Ribbit's launcher: the report is the launcher's
    channel's (nodelaunch.js), the exit status the process's. Unlike pytest's bootstrap,
    no probe runs first, so a channel that never opened (node missing) is a run without
    a report, judged on its exit code. Exiting 0 without the launcher's end (cut short
    from inside), or with failing tests in the report, is tamper."""
    run = _watched_run(test, result, token, read, silent_ok=True, who="the runner's run")
    # The end record carries no status (the launcher sends it before mocha sets one).
    run = replace(run, result=replace(run.result, exit_code=result.exit_code), watched=False)
    failing = sum(1 for c in run.cases if c.failed)
    if run.tampered is None and result.exit_code == 0 and failing:
        why = f"node exited 0 but the runner's report has {failing} failing test(s)"
        run = replace(run, tampered=why)
    return run


def _watched_run(
    test: TestCommand,
    result: ExecResult,
    token: str,
    read: ReadReport,
    *,
    silent_ok: bool = False,
    who: str = "pytest's session",
) -> TestRun:
    """A watched run's result: the report and the exit status are the channel's, never
    the console's or a file's; anything the channel does not vouch for is tamper.
    ``silent_ok``: a channel with no records at all is a run with no report."""
    marker = f"\n{token} channel\n"
    if result.stdout.count(marker) != 1:
        shown = replace(result, stdout=result.stdout.split(marker, 1)[-1])
        if result.timed_out and marker not in result.stdout:
            return TestRun(test.command, shown, (), False, None, watched=True)
        return TestRun(
            test.command, shown, (), False, "the run's channel is not the wrapper's", True
        )
    text, rest = result.stdout.split(marker, 1)
    # The report is the channel's, out of reach of what the tests left running (it is
    # killed before the frame all the same).
    log, _data, tampered, _strays = split_run_output(rest, token, count_strays=False)
    silent = Channel((), None, None, 0, None if silent_ok else "the watched run sent nothing")
    channel = parse_channel(text) or silent
    shown = replace(result, stdout=log)
    if tampered is None and channel.status is not None and result.exit_code != channel.status:
        shown = replace(shown, exit_code=channel.status)
    cases: tuple[TestCase, ...] = ()
    if channel.report is not None and not channel.broken:
        try:
            cases = tuple(read(channel.report))
        except JUnitError:
            cases = ()
    failing = len({c.id for c in cases if c.failed}) if cases else None
    tampered = tampered or channel_tamper(channel, result.exit_code, failing, who)
    return TestRun(
        test.command,
        shown,
        cases,
        bool(cases) or channel.report is not None,
        tampered,
        watched=True,
        tamper=channel.events,
    )


# One exec, so the report folder is made, written and read in the same place. $1 the
# folder, $2 the command as Ribbit runs it, $3 the token that frames the report, $4
# what the report is ("junit": the file at $RIBBIT_JUNIT; "output": the console), $5
# whether a channel is open on fd 3, $6 "own" where the sandbox's processes are all
# this run's (a real backend, emptied before it). The command's output goes to a file,
# so only its tail and the framed report reach stdout; the report is sent only if it is
# a single-link regular file newer than the start marker and within the size cap. The
# marker is dated a second back: a file's time is the kernel's coarse clock, so a report
# written within the same tick as the marker would otherwise not be "newer" (a fast
# runner's honest report refused by chance); nothing older than the run's folder, which
# mkdir has just made, can be in it, so the second lets no old report in.
# A process that outlives the command (one the tests left detached, which could still
# rewrite the report or the output) is killed before either is read, and counted in
# the frame's first line; the shell's builtins alone look, so the look starts nothing.
# First what is still on its way out (esbuild's service child, a server SIGTERMed in
# teardown) gets up to {SETTLE_TICKS} ticks of 0.1 s to go, so an honest run is not
# flagged by chance. Then ``kill -STOP -1`` freezes every process of the sandbox user
# but this shell at once: the kernel's kill(-1) reaches a child forked while it runs,
# so a process that forks and exits in a loop cannot slip between two looks. (The
# sandbox's resident process is one of them, and is continued after; as root, which
# no backend runs as, kill(-1) would reach the host, so then only the scan is done.)
# Every new pid is then stopped and killed whatever its state, and counted when alive:
# a zombie leader whose other threads still run (pthread_exit in the main thread) is.
# Passes repeat, at most {KILL_PASSES}, until one finds no pid it had not seen.
LOG_BYTES = 65536
SETTLE_TICKS = 20
KILL_PASSES = 8
_CHANNEL_EVENTS_BYTES = 256 * 1024  # room for the bootstrap's tamper records
_RUN_SCRIPT = f"""
d=$1; cmd=$2; tok=$3; kind=$4; watch=$5; own=$6
mkdir -m 700 -- "$d" && touch -d '1 second ago' -- "$d/start" || exit 97
pids() {{ local f; REPLY=" "; for f in /proc/[0-9]*; do REPLY="$REPLY${{f#/proc/}} "; done; }}
left() {{ local p; pids; NEW=; for p in $REPLY; do
  case "$before" in *" $p "*) ;; *) NEW="$NEW $p" ;; esac; done; }}
alive() {{ local k v st= th=1
  while read -r k v _; do case $k in State:) st=$v ;; Threads:) th=$v ;; esac
  done 2>/dev/null <"/proc/$1/status"
  [ -n "$st" ] && {{ [ "$st" != Z ] || [ "$th" -gt 1 ]; }}; }}
pids; before=$REPLY
if [ "$watch" = watch ]; then
  bash --noprofile --norc -c "$cmd" 3>&1 >"$d/out" 2>&1 </dev/null
  rc=$?
  printf '\\n%s channel\\n' "$tok"
else
  RIBBIT_JUNIT=$d/junit.xml bash --noprofile --norc -c "$cmd" >"$d/out" 2>&1 </dev/null
  rc=$?
fi
strays=0
if [ "$own" = own ]; then
  n=0
  while [ $n -lt {SETTLE_TICKS} ]; do
    left; live=
    for p in $NEW; do alive "$p" && live=1 && break; done
    [ -z "$live" ] && break
    sleep 0.1 2>/dev/null || break
    n=$((n + 1))
  done
  frozen=
  [ "$EUID" -ne 0 ] && kill -s STOP -- -1 2>/dev/null && frozen=1
  seen=" "; n=0
  while [ $n -lt {KILL_PASSES} ]; do
    left; fresh=
    for p in $NEW; do
      case "$seen" in *" $p "*) continue ;; esac
      seen="$seen$p "; fresh="$fresh $p"
      kill -STOP "$p" 2>/dev/null
      alive "$p" && strays=$((strays + 1))
    done
    [ -z "$fresh" ] && break
    for p in $fresh; do kill -9 "$p" 2>/dev/null; done
    n=$((n + 1))
  done
  [ -n "$frozen" ] && for p in $before; do kill -CONT "$p" 2>/dev/null; done
fi
tail -c {LOG_BYTES} -- "$d/out"
printf '\\n%s begin %s %s\\n' "$tok" "$rc" "$strays"
r=$d/junit.xml
[ "$kind" = output ] && r=$d/out
if [ -n "$(find "$r" -maxdepth 0 -type f -links 1 -newer "$d/start" \\
        -size -{MAX_JUNIT_BYTES + 1}c 2>/dev/null)" ]; then
  base64 -w0 -- "$r"
fi
printf '\\n%s end\\n' "$tok"
rm -rf -- "$d"
exit $rc
"""
# The run script's interpreter, with no profile or rc file of the sandbox's.
_RUN_SHELL = ("bash", "--noprofile", "--norc", "-c", _RUN_SCRIPT, "ribbit-run")


class RunOutput(NamedTuple):
    """The run wrapper's output, read: what the command printed, the framed report, why
    the output is not the wrapper's own, and how many processes outlived the command."""

    log: str
    report: bytes | None
    tampered: str | None  # None: the frame is the wrapper's own
    strays: int = 0  # the frame's count (0 where the caller does not count them)


def split_run_output(stdout: str, token: str, *, count_strays: bool = True) -> RunOutput:
    """The command's output, the report's bytes (or None) and why the output is not the
    wrapper's own (or None). Exactly one framed report must be there: code the tests
    started can learn the token and write to the wrapper's stdout, and a second frame
    is what a forged report looks like. ``count_strays``: read how many processes
    outlived the command (a report file they could have rewritten); a run whose report
    comes over a channel leaves it 0."""
    begin, end = f"\n{token} begin ", f"\n{token} end\n"
    if stdout.count(begin) != 1 or stdout.count(end) != 1:
        if begin not in stdout and end not in stdout:
            return RunOutput(stdout, None, None)  # killed before the frame, or never started
        log = stdout.split(begin, 1)[0]
        return RunOutput(log, None, "the run's output holds more than one report")
    log, rest = stdout.split(begin, 1)
    status, _, rest = rest.partition("\n")
    body, _, trailer = rest.partition(end)
    strays = _stray_count(status) if count_strays else 0
    if trailer.strip():
        return RunOutput(log, None, "something wrote to the run's output after its report", strays)
    body = body.strip()
    if not body:
        return RunOutput(log, None, None, strays)
    try:
        return RunOutput(log, base64.b64decode(body, validate=True), None, strays)
    except ValueError:
        return RunOutput(log, None, "the framed report is not base64", strays)


def _stray_count(status: str) -> int:
    """How many processes outlived the command, from the frame's first line (the exit
    status, then that count)."""
    words = status.split()
    return int(words[1]) if len(words) > 1 and words[1].isdigit() else 0


def strays_reason(count: int) -> str | None:
    """Why a run whose report is a file is not the command's own when ``count``
    processes outlived the command (None when none did)."""
    if not count:
        return None
    return (
        f"{count} process(es) outlived the test command (killed before its report was "
        "read): something the tests started could still change the report or the output"
    )
