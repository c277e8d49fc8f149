"""Tamper is a signal (issue #31): the worker counts tamper findings by mechanism and
each judged patch's verdict level, with labels from fixed sets only."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from bot.store.records.gate_report import Finding, GateReport, GateResult, Verdict
from worker.gates.startup import STARTUP, StartupChange, StartupItem
from worker.gates.tamper import CHANNEL, MECHANISMS, UNWATCHED, mechanism_of, tamper_findings
from worker.gates.trees import PatchTrees
from worker.gates.watch import TamperEvent, bootstrap_source
from worker.metrics import OTHER, record_gates


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _tamper(mechanism: str) -> float:
    return _value("ribbit_tamper_findings_total", mechanism=mechanism)


def _verdict(level: str) -> float:
    return _value("ribbit_verdicts_total", verdict=level)


@dataclass(frozen=True)
class _Run:
    watched: bool = True
    tamper: Sequence[TamperEvent] = ()
    mismatch: str | None = None
    startup: Sequence[StartupItem] | None = ()
    setup_wrote: Sequence[StartupChange] = ()


def _findings(tmp_path: Path, before: _Run, after: _Run) -> list[Finding]:
    (tmp_path / "calc.py").write_text("import gc\nx = gc.get_objects()\n")
    trees = PatchTrees(before=tmp_path, after=tmp_path, parsed=None)  # type: ignore[arg-type]
    return tamper_findings(before, after, trees)


def _report(*findings: Finding) -> GateReport:
    return GateReport.from_results([GateResult("tests", not findings, findings=findings)], 1.0)


def test_a_solve_job_with_a_tamper_finding_counts_its_mechanism(tmp_path: Path) -> None:
    event = TamperEvent("gc.get_objects", "garbage-collector traversal", "calc.py", 2)
    found = _findings(tmp_path, _Run(), _Run(tamper=[event]))
    before = {m: _tamper(m) for m in ("gc.get_objects", OTHER)}
    refused = _verdict("refused")
    record_gates(_report(*found))
    assert _tamper("gc.get_objects") == before["gc.get_objects"] + 1
    assert _tamper(OTHER) == before[OTHER]
    assert _verdict("refused") == refused + 1


def test_the_two_tamper_findings_without_an_event_have_their_own_mechanism(
    tmp_path: Path,
) -> None:
    unwatched = _findings(tmp_path, _Run(), _Run(watched=False))
    broken = _findings(tmp_path, _Run(), _Run(mismatch="record 3 is forged"))
    assert [mechanism_of(f) for f in (*unwatched, *broken)] == [UNWATCHED, CHANNEL]
    before = (_tamper(UNWATCHED), _tamper(CHANNEL))
    record_gates(_report(*unwatched, *broken))
    assert (_tamper(UNWATCHED), _tamper(CHANNEL)) == (before[0] + 1, before[1] + 1)


def test_a_start_up_that_is_not_the_bases_is_counted_as_startup(tmp_path: Path) -> None:
    planted = StartupItem("pth", "/opt/ribbit/venv/lib/python3.11/site-packages/x.pth", "1")
    found = _findings(tmp_path, _Run(), _Run(startup=[planted]))
    assert [mechanism_of(f) for f in found] == [STARTUP], found
    before = _tamper(STARTUP)
    record_gates(_report(*found))
    assert _tamper(STARTUP) == before + 1


def test_tamper_labels_are_bounded_and_never_a_file_name(tmp_path: Path) -> None:
    # The text the code under test controls (what it opened, its path) comes before the
    # mechanism; a mechanism outside the known set is counted as other.
    odd = TamperEvent("made.up-event", "open of /tmp/x [gc.get_objects]", "evil [open].py", 1)
    found = _findings(tmp_path, _Run(), _Run(tamper=[odd]))
    assert mechanism_of(found[0]) == "made.up-event"
    other, gc_count = _tamper(OTHER), _tamper("gc.get_objects")
    record_gates(_report(*found))
    assert _tamper(OTHER) == other + 1
    assert _tamper("gc.get_objects") == gc_count
    labels = {
        s.labels["mechanism"]
        for fam in REGISTRY.collect()
        if fam.name == "ribbit_tamper_findings"
        for s in fam.samples
    }
    assert labels <= MECHANISMS | {OTHER}


def test_a_tamper_the_base_code_does_too_is_a_warning_and_not_counted(tmp_path: Path) -> None:
    event = TamperEvent("gc.get_objects", "garbage-collector traversal", "calc.py", 2)
    found = _findings(tmp_path, _Run(tamper=[event]), _Run(tamper=[event]))
    assert [(f.rule, f.severity) for f in found] == [("tamper-in-base", "warning")]
    assert mechanism_of(found[0]) is None
    before = _tamper("gc.get_objects")
    record_gates(_report())
    record_gates(GateReport.from_results([GateResult("tests", True, findings=tuple(found))], 1))
    assert _tamper("gc.get_objects") == before


def test_other_findings_name_no_mechanism() -> None:
    assert mechanism_of(Finding("tests", "test-regression", "x [open]")) is None
    assert mechanism_of(Finding("tests", "tamper", "no bracket")) is None


@pytest.mark.parametrize(
    ("results", "level"),
    [
        ([GateResult("tests", True, evidence=("t.py::test_fix",))], "verified"),
        ([GateResult("tests", True)], "unverified"),
        (
            [GateResult("tests", False, findings=(Finding("tests", "test-regression", "x"),))],
            "refused",
        ),
    ],
)
def test_each_verdict_level_is_counted(results: list[GateResult], level: str) -> None:
    report = GateReport.from_results(results, 1.0)
    assert report.verdict.value == level
    before = {lv: _verdict(lv) for lv in ("verified", "unverified", "refused")}
    record_gates(report)
    after = {lv: _verdict(lv) for lv in before}
    assert after == {lv: n + (lv == level) for lv, n in before.items()}


def test_a_report_from_before_the_levels_counts_no_level() -> None:
    old = GateReport(passed=True, results=[GateResult("tests", True)])
    assert old.verdict is Verdict.BEFORE_EVIDENCE
    before = {lv: _verdict(lv) for lv in ("verified", "unverified", "refused")}
    record_gates(old)
    assert {lv: _verdict(lv) for lv in before} == before


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def test_every_audit_event_the_bootstrap_classifies_is_a_known_mechanism() -> None:
    """The bootstrap (worker/gates/watchboot.py with watchchannel.py) compares the audit
    ``event`` with the names it watches and records its own checks by name; one there
    without a label here would be counted as other. Read from its syntax, wherever in
    the program the comparisons live."""
    tree = ast.parse(bootstrap_source())
    named: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and getattr(node.left, "id", None) == "event":
            for side in node.comparators:
                named |= {
                    c.value
                    for c in ast.walk(side)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                }
    recorded = {
        n.args[0].value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and _called(n).lstrip("_") == "record"
        and n.args
        and isinstance(n.args[0], ast.Constant)
    }
    assert {"gc.get_objects", "sys._getframe", "open", "ctypes.dlsym"} <= named
    assert {"module-shadow", "runner-monkeypatch"} <= recorded
    assert named | recorded <= MECHANISMS


def test_the_node_launchers_tamper_records_name_a_counted_mechanism() -> None:
    import re

    from worker.gates.tamper import REPORT_CHANNEL

    launcher = (Path(__file__).parents[3] / "worker" / "gates" / "nodelaunch.js").read_text()
    named = set(re.findall(r"mechanism: '([^']+)'", launcher))
    assert named == {REPORT_CHANNEL}
    assert named <= MECHANISMS


def test_setup_refusals_are_counted_by_kind_never_by_host() -> None:
    from worker.metrics import record_setup_refusals
    from worker.sandbox.egress_policy import BlockedRequest

    def refused(reason: str) -> float:
        return _value("ribbit_setup_requests_refused_total", reason=reason)

    before = refused("sni mismatch"), refused("host header mismatch"), refused(OTHER)
    record_setup_refusals(
        [
            BlockedRequest("CONNECT", "registry.test", 443, "sni mismatch: evil.example"),
            BlockedRequest("GET", "registry.test", 80, "host header mismatch: evil.example"),
            BlockedRequest("GET", "x", 80, "a reason no one wrote down"),
        ]
    )
    after = refused("sni mismatch"), refused("host header mismatch"), refused(OTHER)
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1]
    labels = {
        s.labels.get("reason")
        for m in REGISTRY.collect()
        if m.name == "ribbit_setup_requests_refused"
        for s in m.samples
    }
    assert not any("evil" in str(label) for label in labels)
