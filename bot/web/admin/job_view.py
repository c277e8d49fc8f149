"""Turn a job's stored result into what the job page shows: trajectory, diff, gate report.

Nothing is parsed here: ``job.result`` is read through the typed record
(bot.store.records.SolveRecord), the gate report inside it and the trajectory file through
the classes the worker writes them with (bot.store.records.gate_report.GateReport,
bot.store.records.trajectory.Trajectory), each with its own ``from_dict``. The trajectory file is
read only from inside the data directory, and only up to ``MAX_TRAJECTORY_BYTES``.
Everything here is untrusted model output: the templates escape it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bot.forges.sanitize import sanitize_forge_title
from bot.store.records import SolveRecord
from bot.store.records.gate_report import GateResult
from bot.store.records.trajectory import Trajectory, TrajectoryFormatError, TurnRecord

MAX_TRAJECTORY_BYTES = 32 * 1024 * 1024


@dataclass
class JobDetail:
    trajectory: Trajectory | None
    trajectory_note: str | None  # why no trajectory is shown
    diff: str | None
    gates: list[GateResult]
    gates_passed: bool | None
    gates_summary: str | None
    extra: dict[str, Any]  # result keys this page does not know, shown as JSON
    # The report's level ("verified", "unverified", "refused", "judged before evidence").
    gates_verdict: str | None = None
    # The issue's title for the page's heading: the job's task record's (the worker read
    # it from the forge), else the one intake kept from the webhook (a job that failed
    # before its agent ran); None for an old job that has neither.
    issue_title: str | None = None

    @property
    def turn_count(self) -> int:
        return len(self.trajectory.turns) if self.trajectory is not None else 0


def load_trajectory(path_value: Any, data_dir: Path) -> tuple[Trajectory | None, str | None]:
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
        return Trajectory.from_json(lines[-1]), None
    except TrajectoryFormatError as exc:
        return None, f"the trajectory file cannot be shown: {exc}"


def job_detail(result: Any, data_dir: Path, *, admitted_title: str | None = None) -> JobDetail:
    """The page's view of a job's ``result``: a solve/revise job's record
    (bot.store.records), with other kinds' results and unknown keys shown as JSON.
    ``admitted_title``: the issue title intake stored on the job (``Job.issue_title``)."""
    record = SolveRecord.from_json(result)
    trajectory, note = load_trajectory(record.trajectory_path, data_dir)
    diff = record.diff
    if diff is None and trajectory is not None:
        diff = trajectory.diff
    report = record.gates
    shown = record.with_(trajectory_path=None, diff=None, gates=None, gates_summary=None)
    return JobDetail(
        trajectory=trajectory,
        trajectory_note=note,
        diff=diff,
        gates=report.results if report is not None else [],
        gates_passed=report.passed if report is not None else None,
        gates_summary=record.summary_line,
        extra={k: v for k, v in shown.to_json().items() if k != "version"},
        gates_verdict=report.verdict.value if report is not None else None,
        issue_title=heading_title(record, admitted_title),
    )


def heading_title(record: SolveRecord, admitted_title: str | None = None) -> str | None:
    """The issue's title fit for a heading: one line without control or bidi characters
    (an issue's author chose it; the template escapes it too). The task record's when the
    worker got that far, else ``admitted_title``."""
    title = record.task.issue_title if record.task is not None else admitted_title
    return sanitize_forge_title(title or "") or None


def _live_turn(data: dict[str, Any]) -> TurnRecord | None:
    try:
        return TurnRecord.from_dict(data)
    except (TypeError, AttributeError):
        return None  # not a turn this code wrote: left out rather than shown broken


def with_live_turns(detail: JobDetail, turns: list[dict[str, Any]]) -> JobDetail:
    """While the agent works there is no trajectory yet: show the turns recorded so far
    (bot.live, each a TurnRecord.to_dict() without its token ids), rendered like the
    finished ones. A finished trajectory wins."""
    if detail.trajectory is not None or not turns:
        return detail
    records = [t for t in map(_live_turn, turns) if t is not None]
    live = Trajectory(messages=[], tools=[], turns=records, duration_s=0.0)
    return replace(detail, trajectory=live, trajectory_note=None)
