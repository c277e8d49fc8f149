"""Turn a job's stored result into what the job page shows: trajectory, diff, gate report.

``job.result`` is read through the typed record (bot.store.records.SolveRecord), which
checks every value; the gate report inside it is parsed leniently here. The trajectory
file is read as plain JSON (the same JSONL that worker.agent.trajectory writes; bot/
never imports worker/), only from inside the data directory, and only up to
``MAX_TRAJECTORY_BYTES``. Everything here is untrusted model output: the templates
escape it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.store.records import SolveRecord

MAX_TRAJECTORY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class ToolCallView:
    name: str
    arguments: str  # pretty JSON
    error: str | None


@dataclass(frozen=True)
class ObservationView:
    name: str
    content: str
    is_error: bool
    exit_code: int | None
    truncated: bool


@dataclass(frozen=True)
class TurnView:
    index: int
    content: str
    reasoning: str | None
    tool_calls: list[ToolCallView]
    observations: list[ObservationView]
    finish_reason: str
    completion_tokens: int | None


@dataclass
class TrajectoryView:
    turns: list[TurnView] = field(default_factory=list)
    exit_reason: str | None = None
    error: str | None = None
    model: str = ""
    duration_s: float | None = None
    diff: str | None = None


@dataclass(frozen=True)
class GateView:
    name: str
    passed: bool | None
    findings: list[dict[str, Any]]
    logs: str


@dataclass
class JobDetail:
    trajectory: TrajectoryView | None
    trajectory_note: str | None  # why no trajectory is shown
    diff: str | None
    gates: list[GateView]
    gates_passed: bool | None
    gates_summary: str | None
    extra: dict[str, Any]  # result keys this page does not know, shown as JSON

    @property
    def turn_count(self) -> int:
        return len(self.trajectory.turns) if self.trajectory is not None else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _turn(index: int, data: dict[str, Any]) -> TurnView:
    calls = [
        ToolCallView(
            name=_str(c.get("name")),
            arguments=json.dumps(c.get("arguments"), indent=2, ensure_ascii=False),
            error=c.get("error") if isinstance(c.get("error"), str) else None,
        )
        for c in data.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    observations = [
        ObservationView(
            name=_str(o.get("name")),
            content=_str(o.get("content")),
            is_error=bool(o.get("is_error")),
            exit_code=_int(o.get("exit_code")),
            truncated=bool(o.get("truncated")),
        )
        for o in data.get("observations") or []
        if isinstance(o, dict)
    ]
    reasoning = data.get("reasoning")
    stored_index = _int(data.get("index"))
    return TurnView(
        index=index if stored_index is None else stored_index,
        content=_str(data.get("content")),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
        tool_calls=calls,
        observations=observations,
        finish_reason=_str(data.get("finish_reason")),
        completion_tokens=_int(data.get("completion_tokens")),
    )


def trajectory_from_dict(data: dict[str, Any]) -> TrajectoryView:
    turns = [_turn(i, t) for i, t in enumerate(data.get("turns") or []) if isinstance(t, dict)]
    duration = data.get("duration_s")
    return TrajectoryView(
        turns=turns,
        exit_reason=data.get("exit_reason") if isinstance(data.get("exit_reason"), str) else None,
        error=data.get("error") if isinstance(data.get("error"), str) else None,
        model=_str(data.get("model")),
        duration_s=float(duration) if isinstance(duration, int | float) else None,
        diff=data.get("diff") if isinstance(data.get("diff"), str) else None,
    )


def load_trajectory(path_value: Any, data_dir: Path) -> tuple[TrajectoryView | None, str | None]:
    """The last trajectory in the JSONL file, or None and the reason."""
    if not isinstance(path_value, str) or not path_value:
        return None, "no trajectory was recorded"
    root = data_dir.resolve()
    path = Path(path_value)
    path = (path if path.is_absolute() else root / path).resolve()
    if not path.is_relative_to(root):
        return None, "the trajectory path lies outside the data directory; not shown"
    try:
        size = path.stat().st_size
        if size > MAX_TRAJECTORY_BYTES:
            return None, f"the trajectory file is too large to show ({size} bytes)"
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except FileNotFoundError:
        return None, "the trajectory file no longer exists"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"the trajectory file cannot be read ({type(exc).__name__})"
    if not lines:
        return None, "the trajectory file is empty"
    try:
        data = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None, "the trajectory file is not valid JSON lines"
    if not isinstance(data, dict):
        return None, "the trajectory file is not valid JSON lines"
    return trajectory_from_dict(data), None


def _gate(data: Any, name: str = "") -> GateView | None:
    if not isinstance(data, dict):
        return None
    findings = [f for f in data.get("findings") or [] if isinstance(f, dict)]
    passed = data.get("passed")
    return GateView(
        name=_str(data.get("name")) or name,
        passed=passed if isinstance(passed, bool) else None,
        findings=findings,
        logs=_str(data.get("logs")),
    )


def parse_gates(value: Any) -> tuple[list[GateView], bool | None]:
    """A gate report as GateReport.to_dict() writes it (``{"passed", "summary", "gates":
    [...]}``), with ``results`` instead of ``gates``, a bare list, or ``{name: result}``."""
    overall: bool | None = None
    items: list[GateView] = []
    if isinstance(value, dict):
        if isinstance(value.get("passed"), bool):
            overall = value["passed"]
        results = value.get("results", value.get("gates"))
        if isinstance(results, list):
            items = [g for g in (_gate(r) for r in results) if g]
        elif isinstance(results, dict):
            items = [g for g in (_gate(r, k) for k, r in results.items()) if g]
        elif results is None:
            items = [
                g
                for g in (
                    _gate(r, k)
                    for k, r in value.items()
                    if k not in {"passed", "summary", "duration_s"}
                )
                if g
            ]
    elif isinstance(value, list):
        items = [g for g in (_gate(r) for r in value) if g]
    if overall is None and items and all(g.passed is not None for g in items):
        overall = all(bool(g.passed) for g in items)
    return items, overall


def job_detail(result: Any, data_dir: Path) -> JobDetail:
    """The page's view of a job's ``result``: a solve/revise job's record
    (bot.store.records), with other kinds' results and unknown keys shown as JSON."""
    record = SolveRecord.from_json(result)
    extra = dict(record.extra)
    inline = extra.pop("trajectory", None)  # an inline trajectory instead of a file
    trajectory: TrajectoryView | None
    if isinstance(inline, dict):
        trajectory, note = trajectory_from_dict(inline), None
    else:
        trajectory, note = load_trajectory(record.trajectory_path, data_dir)
    diff = record.diff
    if diff is None and trajectory is not None:
        diff = trajectory.diff
    gates, passed = parse_gates(record.gates)
    shown = record.with_(trajectory_path=None, diff=None, gates=None, gates_summary=None)
    return JobDetail(
        trajectory=trajectory,
        trajectory_note=note,
        diff=diff,
        gates=gates,
        gates_passed=passed,
        gates_summary=record.summary_line,
        extra={k: v for k, v in shown.to_json().items() if k not in {"version", "trajectory"}},
    )


def with_live_turns(detail: JobDetail, turns: list[dict[str, Any]]) -> JobDetail:
    """While the agent works there is no trajectory yet: show the turns recorded so far
    (bot.live), rendered like the finished ones. A finished trajectory wins."""
    if detail.trajectory is not None or not turns:
        return detail
    return replace(detail, trajectory=trajectory_from_dict({"turns": turns}), trajectory_note=None)
