"""The gates a candidate patch must pass before it becomes a draft PR: the tests
(in a sandbox, before and after), Semgrep (new findings only) and patch hygiene."""

from __future__ import annotations

from bot.store.gate_report import Finding, GateReport, GateResult
from worker.gates.base import Gate, GateContext
from worker.gates.runner import run_gates

__all__ = [
    "Finding",
    "Gate",
    "GateContext",
    "GateReport",
    "GateResult",
    "default_gates",
    "run_gates",
]


def default_gates(ctx: GateContext) -> list[Gate]:
    """The gates every patch goes through, in report order."""
    from worker.gates.hygiene import HygieneGate
    from worker.gates.semgrep import SemgrepGate
    from worker.gates.tests import TestGate

    return [TestGate(), SemgrepGate(), HygieneGate()]
