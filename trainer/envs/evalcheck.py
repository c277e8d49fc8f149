"""The Python half of the exported eval script (trainer/envs/export.py writes the bash
half): how it runs the tests and judges them, as two programs the script hands to
``python3`` on stdin.

Each program is assembled from the source of the module that owns each part
(``inspect.getsource``), so the script and Ribbit's own runs read reports, channels and
tamper alike and each rule has one home: the JUnit reader (:mod:`worker.gates.junit`),
the channel reader and its verdict (:mod:`worker.gates.watch`), which tamper events the
patch caused (:func:`worker.gates.tamper.written_by_patch`), the bootstrap
(:mod:`worker.gates.watchboot`, inside the watch plan's shell text) and the functions
below. Everything embedded is standard library only, because the script runs in a
framework's container with nothing but the repository's environment.

- :func:`report_program`: a run that was not watched (the command is not plain pytest):
  the JUnit report the script asked for at a path it chose, read after the run.
- :func:`watched_program`: a plain pytest command, run as the gates run it (the watch
  plan of :mod:`worker.gates.watch`): its interpreter under ``-P`` with Ribbit's
  bootstrap first, fd 3 a pipe that only this program reads, no report path in any
  environment variable or argument. The bootstrap needs Python 3.11+ (``-P``) with
  pytest in the test interpreter; one without them is a failed setup, never an
  unwatched run (nothing here can tell the repository's habit from a patch that
  broke the watch). The program itself needs only Python 3.8+.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence

from worker.gates import junit, watch
from worker.gates.junit import JUnitError, TestCase, local_files, outcomes, parse_junit
from worker.gates.tamper import written_by_patch
from worker.gates.watch import SELECT_VAR, Channel, WatchPlan, channel_tamper, parse_channel

# Exit codes besides 0 (resolved) and 1 (tests did not pass); export.py documents them.
EXIT_SETUP_FAILED = 3
EXIT_TEST_PATCH_FAILED = 4
EXIT_NO_REPORT = 5
EXIT_TIMEOUT = 6
EXIT_TAMPER = 7
_TIMED_OUT = (124, 137)  # timeout(1)'s own statuses: the limit, then the kill


def required_passed(results: dict[str, str], required: list[str]) -> int:
    """0 iff every required test passed, else 1; what did not pass is printed."""
    failed = [t for t in required if results.get(t) != "passed"]
    for t in failed:
        print(f"ribbit-eval: not passed: {t} ({results.get(t, 'missing')})")
    print(f"ribbit-eval: {len(required) - len(failed)}/{len(required)} required tests passed")
    return 1 if failed else 0


def judge_report(report_path: str, required: list[str]) -> int:
    """The verdict on an unwatched run from the JUnit report it wrote."""
    with open(report_path, encoding="utf-8", errors="replace") as fh:
        report = fh.read()
    try:
        results = outcomes(parse_junit(report, local_files(".")))
    except JUnitError as exc:
        print(f"ribbit-eval: {exc}")
        return EXIT_NO_REPORT
    return required_passed(dict(results), required)


def run_watched(script: str, timeout_s: int) -> tuple[int, str]:
    """(exit status, what the channel held): ``script`` (the watch plan's shell text)
    under timeout(1), its fd 3 a pipe only this process reads. The pipe is read while the
    tests run (a large report fills it) and drained once the run has exited; a process
    it left behind holding the pipe can only add records after the end, which breaks
    the channel."""
    import os
    import selectors
    import subprocess

    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != SELECT_VAR}
    shell = f"exec 3>&{write_end} {write_end}>&-; {script}"
    argv = ["timeout", "--kill-after=10", str(timeout_s), "bash", "--noprofile", "--norc"]
    proc = subprocess.Popen(
        [*argv, "-c", shell], pass_fds=(write_end,), stdin=subprocess.DEVNULL, env=env
    )
    os.close(write_end)
    os.set_blocking(read_end, False)
    chunks: list[bytes] = []
    with selectors.DefaultSelector() as selector:
        selector.register(read_end, selectors.EVENT_READ)
        while True:
            exited = proc.poll() is not None
            if not selector.select(0 if exited else 0.5):
                if exited:
                    break
                continue
            try:
                chunk = os.read(read_end, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_end)
    return proc.wait(), b"".join(chunks).decode("utf-8", "replace")


def tree_changes(base: str) -> tuple[Callable[[str, int], bool], Callable[[str], bool]]:
    """``wrote`` and ``created`` for ``written_by_patch``, read off the checkout (the
    candidate patch is applied there, not committed) against ``base``: a line inside a
    hunk ``git diff`` adds, or any line of a path that was not there at base."""
    import re
    import subprocess

    hunk = re.compile(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", re.M)

    def created(path: str) -> bool:
        spec = f"{base}:{path}"
        return subprocess.run(["git", "cat-file", "-e", spec], capture_output=True).returncode != 0

    def wrote(path: str, line: int) -> bool:
        if path.startswith("/"):
            return False  # outside the checkout: no patch line
        if created(path):
            return True
        git_diff = ["git", "--literal-pathspecs", "diff", "--no-color", "--no-ext-diff", "-U0"]
        diff = subprocess.run([*git_diff, base, "--", path], capture_output=True, text=True).stdout
        for m in hunk.finditer(diff):
            start, count = int(m[1]), int(m[2] if m[2] is not None else 1)
            if start <= line < start + count:
                return True
        return False

    return wrote, created


def judge_watched(
    probe: list[str], script: str, required: list[str], base: str, timeout_s: int
) -> int:
    """The verdict on a watched run: timeout, tamper (the channel does not vouch for
    the run, or the patch caused an event), no report, or the required tests."""
    import subprocess

    try:
        usable = subprocess.run(probe, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        usable = False
    if not usable:
        print("ribbit-eval: the test interpreter cannot run Ribbit's pytest bootstrap")
        return EXIT_SETUP_FAILED
    status, text = run_watched(script, timeout_s)
    if status in _TIMED_OUT:
        print("ribbit-eval: tests timed out")
        return EXIT_TIMEOUT
    channel = parse_channel(text) or Channel((), None, None, 0, "the watched run sent nothing")
    cases: list[TestCase] = []
    if channel.report is not None and not channel.broken:
        try:
            cases = parse_junit(channel.report, local_files("."))
        except JUnitError as exc:
            print(f"ribbit-eval: {exc}")
    failing = len({c.id for c in cases if c.failed}) if cases else None
    wrote, created = tree_changes(base)
    why = [channel_tamper(channel, status, failing)]
    why += [e.describe() for e in channel.events if written_by_patch(e, wrote, created)]
    forged = [w for w in why if w]
    for reason in forged:
        print(f"ribbit-eval: tamper: {reason}")
    if forged:
        return EXIT_TAMPER
    if not cases:
        print("ribbit-eval: the watched run sent no readable report")
        return EXIT_NO_REPORT
    return required_passed(dict(outcomes(cases)), required)


_PREAMBLE = "import base64, binascii, hashlib, hmac, subprocess, sys\n"
_EXITS = ("EXIT_SETUP_FAILED", "EXIT_NO_REPORT", "EXIT_TIMEOUT", "EXIT_TAMPER")


def _program(
    parts: Sequence[Callable[..., object]], constants: Mapping[str, object], main: str
) -> str:
    # junit's source comes first: its ``from __future__`` import must lead the program.
    sources = [inspect.getsource(junit), _PREAMBLE]
    sources += [f"{name} = {value!r}\n" for name, value in constants.items()]
    sources += [f"{name} = {globals()[name]!r}\n" for name in _EXITS]
    sources += [inspect.getsource(part) for part in parts]
    return "\n\n".join(sources) + f"\n\n{main}\n"


def report_program() -> str:
    """Reads ``argv[1]`` (the report) and ``argv[2]`` (the required ids, JSON)."""
    main = "sys.exit(judge_report(sys.argv[1], json.loads(sys.argv[2])))"
    return _program([required_passed, judge_report], {}, main)


def watched_program(plan: WatchPlan) -> str:
    """Runs ``plan`` watched and judges it; ``argv[1]`` the required ids (JSON),
    ``argv[2]`` the base commit, ``argv[3]`` the time limit in seconds."""
    parts: list[Callable[..., object]] = [
        watch.TamperEvent,
        Channel,
        parse_channel,
        watch._broken,
        channel_tamper,
        written_by_patch,
        required_passed,
        run_watched,
        tree_changes,
        judge_watched,
    ]
    constants = {
        "SELECT_VAR": SELECT_VAR,
        "_TIMED_OUT": _TIMED_OUT,
        "_FORKED": watch._FORKED,
        "RUN_WIDE": watch.RUN_WIDE,  # TamperEvent.describe reads it
    }
    main = (
        f"_RECORD = re.compile({watch._RECORD.pattern!r})\n"
        f"_CHILD = re.compile({watch._CHILD.pattern!r})\n"
        f"sys.exit(judge_watched({json.dumps(plan.probe())}, {plan.script()!r},"
        " json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])))"
    )
    return _program(parts, constants, main)
