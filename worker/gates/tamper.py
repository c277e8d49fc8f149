"""Tamper findings: what a watched test run (worker/gates/watch.py) attributed to the
repository's own non-test code, judged against the base's run.

An attributed event blocks as ``tamper``, naming the mechanism, file and line, unless
the base's run had the same one (same mechanism, same file, same source line): then
it is the repository's own habit (a library that walks frames for its error
messages), not the patch's, and it is a warning. A patched run that is no longer
watched while the base's was, or whose channel is broken, is tamper too.
Where no base run is at hand (the reward, the exported eval script), an event counts
when the patch wrote it (:func:`written_by_patch`): code from no file, a line the
patch adds, or a module-shadowing path the patch created.
Audit hooks detect, they do not prevent (PEP 578): these findings say a mechanism was
used, never that forgery is impossible.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from bot.store.records.gate_report import Finding
from worker.gates.startup import STARTUP, StartupChange, StartupItem, startup_changes
from worker.gates.trees import PatchTrees, regular_file_inside
from worker.gates.watch import OUTSIDE, SWALLOWED, TEST_CODE, TamperEvent

GATE = "tests"
RULE = "tamper"
# The mechanisms of the two findings that come from no single event.
UNWATCHED = "unwatched"
CHANNEL = "channel"
# What the node launcher (worker/gates/nodelaunch.js) records: a second write to the
# report, or fs's write functions replaced while the runner ran.
REPORT_CHANNEL = "report-channel"
# Every mechanism a finding can name: the audit events the bootstrap classifies and the
# checks it records by name (worker/gates/watchboot.py, kept in step by a test), the
# two above, the launcher's, and the start-up comparison's (worker/gates/startup.py).
# The metrics count a finding naming anything else as another mechanism.
MECHANISMS = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._getframe",
        "sys._current_frames",
        "sys._getframemodulename",
        "object.__getattr__",
        "object.__setattr__",
        "sys.settrace",
        "sys.setprofile",
        "sys.addaudithook",
        "ctypes.dlopen",
        "ctypes.cdata",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "ctypes.dlsym",
        "open",
        "runner-monkeypatch",
        "runner-plugin",
        "runner-reach",
        "module-shadow",
        "dumpable",
        "report-descriptor",
        OUTSIDE,
        SWALLOWED,
        TEST_CODE,
        UNWATCHED,
        CHANNEL,
        REPORT_CHANNEL,
        STARTUP,
    }
)


class WatchedRun(Protocol):
    """What a tree's runs say about being watched (worker.gates.judge.SuiteRun)."""

    @property
    def watched(self) -> bool: ...

    @property
    def tamper(self) -> Sequence[TamperEvent]: ...

    @property
    def mismatch(self) -> str | None: ...

    @property
    def startup(self) -> Sequence[StartupItem] | None: ...

    @property
    def setup_wrote(self) -> Sequence[StartupChange]: ...


class _Recorded(Protocol):
    @property
    def tamper(self) -> Sequence[TamperEvent]: ...


def ran_outside(*runs: _Recorded) -> bool:
    """Whether a test of any of ``runs`` ran in another process, which sent its result
    back: that result is the other process's word, where the code under test ran
    unwatched, so it is no evidence (a finding too, where the base's run had none)."""
    return any(event.mechanism == OUTSIDE for run in runs for event in run.tamper)


def tamper_findings(before: WatchedRun, after: WatchedRun, trees: PatchTrees) -> list[Finding]:
    found: list[Finding] = []
    if before.watched and not after.watched:
        found.append(
            Finding(
                gate=GATE,
                rule=RULE,
                message="the patched run was not watched though the base's was "
                f"(the test interpreter no longer starts under Ribbit's bootstrap) [{UNWATCHED}]",
            )
        )
    if after.watched and after.mismatch and not before.mismatch:
        found.append(
            Finding(
                gate=GATE, rule=RULE, message=f"the run's channel: {after.mismatch} [{CHANNEL}]"
            )
        )
    found += [
        Finding(
            gate=GATE,
            rule=RULE,
            message=f"the test interpreter's start-up: {change.describe()} [{STARTUP}]",
        )
        for change in startup_changes(before.startup, after.startup)
    ]
    found += [
        Finding(gate=GATE, rule=RULE, message=f"{c.describe()} [{STARTUP}]", path=c.item.name)
        for c in _new_to_patch(before.setup_wrote, after.setup_wrote)
    ]
    base = {_key(e, trees.before) for e in before.tamper}
    for event in after.tamper:
        if _key(event, trees.after) in base:
            found.append(
                Finding(
                    gate=GATE,
                    rule="tamper-in-base",
                    message=f"{event.describe()} (the base code does the same)",
                    severity="warning",
                    path=event.path,
                    line=event.line or None,
                )
            )
            continue
        found.append(
            Finding(
                gate=GATE,
                rule=RULE,
                message=f"tamper: {event.describe()} [{event.mechanism}]",
                path=event.path,
                line=event.line or None,
            )
        )
    return found


def _new_to_patch(
    base: Sequence[StartupChange], patched: Sequence[StartupChange]
) -> list[StartupChange]:
    """What a set-up step changed in the patched tree's workspace and not in the
    base's (a set-up that generates a test file from a template does it for both)."""

    def key(change: StartupChange) -> tuple[str, str, str]:
        digest = "" if change.what == "gone" else change.item.digest
        return change.what, change.item.name, digest

    habits = {key(c) for c in base}
    return [c for c in patched if key(c) not in habits]


def written_by_patch(
    event: TamperEvent, wrote: Callable[[str, int], bool], created: Callable[[str], bool]
) -> bool:
    """Whether the patch under judgement caused ``event``: it came from code in no file,
    from a line the patch wrote (``wrote(path, line)``), or it is a module named like the
    standard library's that the patch created (``created(path)``: the file, or a package
    of that name). Events elsewhere are the repository's own habits (a logging library
    that walks frames), which would otherwise fail every patch touching such a file.
    Standard library only: the eval script (trainer/envs/evalcheck.py) embeds it."""
    if event.path is None or wrote(event.path, event.line):
        return True
    return event.mechanism == "module-shadow" and created(event.path)


def mechanism_of(finding: Finding) -> str | None:
    """The mechanism a blocking tamper finding names (its message ends with it in
    brackets, as :func:`tamper_findings` writes it); None for any other finding. Only
    the last bracket counts: the text before it quotes what the code under test did."""
    if finding.rule != RULE or finding.severity != "error":
        return None
    _, sep, tail = finding.message.rstrip().rpartition(" [")
    if not sep or not tail.endswith("]"):
        return None
    return tail[:-1]


def _key(event: TamperEvent, tree: Path) -> tuple[str, str | None, str]:
    # A swallowed raise or a test's changed code names no line: the test or the file it
    # is about tells two apart.
    if event.mechanism in (SWALLOWED, TEST_CODE):
        return event.mechanism, event.path, event.what
    return event.mechanism, event.path, _line(tree, event.path, event.line)


def _line(tree: Path, path: str | None, number: int) -> str:
    """The source line an event names, stripped (lines move; their text rarely does)."""
    if path is None or path.startswith("/"):
        return ""
    file = regular_file_inside(tree, path)
    if file is None:
        return ""
    try:
        lines: Iterable[str] = file.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for i, text in enumerate(lines, start=1):
        if i == number:
            return text.strip()
    return ""
