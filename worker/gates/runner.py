"""Runs every gate on one patch; a gate that crashes fails, it never raises."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from bot.store.records.gate_report import Finding, GateReport, GateResult
from worker.gates.base import Gate, GateContext, GateStopped
from worker.gates.trees import PatchApplyError, PatchTreeError, PatchTrees, patch_trees

APPLY_RULE = "patch-does-not-apply"
ERROR_RULE = "gate-error"


@runtime_checkable
class TreeGate(Gate, Protocol):
    """A gate that can judge trees someone else built (so they are built once per patch)."""

    def run_on_trees(self, ctx: GateContext, trees: PatchTrees) -> GateResult: ...

    def run_unapplied(self, ctx: GateContext, reason: str) -> GateResult:
        """The result when the patch does not apply (it must fail, saying why)."""
        ...


def apply_failure(name: str, reason: str, duration_s: float = 0.0) -> GateResult:
    return GateResult(
        name=name,
        passed=False,
        duration_s=duration_s,
        findings=(Finding(gate=name, rule=APPLY_RULE, message=reason),),
    )


def crash_result(name: str, exc: BaseException, duration_s: float) -> GateResult:
    return GateResult(
        name=name,
        passed=False,
        duration_s=duration_s,
        findings=(
            Finding(
                gate=name, rule=ERROR_RULE, message=f"the gate crashed: {type(exc).__name__}: {exc}"
            ),
        ),
        logs="".join(traceback.format_exception(exc)),
    )


def run_tree_gate(gate: TreeGate, ctx: GateContext) -> GateResult:
    """What a TreeGate's own ``run`` does: build the trees, judge them."""
    try:
        with patch_trees(ctx) as trees:
            return gate.run_on_trees(ctx, trees)
    except PatchApplyError as exc:
        return gate.run_unapplied(ctx, str(exc))
    except PatchTreeError as exc:
        return apply_failure(gate.name, str(exc))


def stopped_result(name: str, stop: GateStopped, duration_s: float = 0.0) -> GateResult:
    return GateResult(
        name=name,
        passed=False,
        duration_s=duration_s,
        findings=(Finding(gate=name, rule=stop.rule, message=str(stop)),),
    )


def _guarded(name: str, call: Callable[..., GateResult], *args: object) -> GateResult:
    start = time.monotonic()
    try:
        result = call(*args)
    except GateStopped as stop:
        return stopped_result(name, stop, time.monotonic() - start)
    except Exception as exc:  # a gate's bug must not hide the other gates' results
        return crash_result(name, exc, time.monotonic() - start)
    if not isinstance(result, GateResult):
        return crash_result(
            name, TypeError(f"returned {type(result).__name__}"), time.monotonic() - start
        )
    return result


def run_gates(
    ctx: GateContext,
    gates: Sequence[Gate] | None = None,
    *,
    on_gate: Callable[[str], None] | None = None,
) -> GateReport:
    """Run every gate on ``ctx.patch``; all run even when one fails. ``on_gate`` hears
    each gate's name as it starts (the CLI's progress)."""
    from worker.gates import default_gates

    start = time.monotonic()
    if ctx.deadline is None:
        ctx = replace(ctx, deadline=start + ctx.gate_settings.total_timeout_s)
    chosen = list(gates) if gates is not None else default_gates(ctx)
    results: list[GateResult] = []
    try:
        with patch_trees(ctx) as trees:
            for gate in chosen:
                if on_gate is not None:
                    on_gate(gate.name)
                stop = ctx.stop_reason()
                if stop is not None:
                    results.append(stopped_result(gate.name, stop))
                elif isinstance(gate, TreeGate):
                    results.append(_guarded(gate.name, gate.run_on_trees, ctx, trees))
                else:
                    results.append(_guarded(gate.name, gate.run, ctx))
    except PatchApplyError as exc:
        results = [
            _guarded(g.name, g.run_unapplied, ctx, str(exc))
            if isinstance(g, TreeGate)
            else apply_failure(g.name, str(exc))
            for g in chosen
        ]
    except PatchTreeError as exc:
        results = [apply_failure(g.name, str(exc)) for g in chosen]
    return GateReport.from_results(results, time.monotonic() - start)
