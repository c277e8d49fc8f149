"""The typed record a solve or revise job keeps in its row (``jobs.result``).

Written by the worker's solve pipeline, read by the admin and reviewer pages, the
``/ribbit explain`` reply, the outcome recorder and the trainer's environment builder.
One record, one reader: every consumer goes through :meth:`SolveRecord.from_json`, so a
key is named once, here, instead of in each module that reads the JSON.

Records are versioned. Rows written before the version field existed read as version 1
(the same keys); keys this version does not know are kept in ``extra`` and written back
unchanged, so an older worker and a newer web process can share a database during an
upgrade without losing anything. Reading is tolerant (a value of the wrong type reads as
absent) because rows outlive the code that wrote them; writing is exact.

The nested parts are typed records of their own, each in its module of this package:
``task`` and ``withheld`` (task.py), ``setup`` (setup.py, what the worker's SetupResult
did), ``sandbox_image`` (image.py, the worker's ImageChoice) and ``publish``
(publish.py). A part is written back exactly as it was read until the record is given a
new one (:meth:`SolveRecord.with_`): an older row's part may lack a key its record fills
in, or hold a value this code cannot read (which reads as absent). ``gates`` is the
:class:`bot.store.records.gate_report.GateReport` itself, stored as its ``to_dict()`` and read
back with ``GateReport.from_dict``, so that schema lives here in bot/.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from bot.store.records.gate_report import GateReport, Verdict
from bot.store.records.image import ImageRecord
from bot.store.records.publish import PublishPlan
from bot.store.records.setup import SetupRecord
from bot.store.records.task import TaskRecord, WithheldText
from bot.store.tolerant import opt_dict, opt_int, opt_str

SOLVE_RECORD_VERSION = 1
TASK_KEY = "task"
BASE_SHA_KEY = "base_sha"
# The nested parts written back as they were read until replaced (see the docstring).
STORED_PARTS = ("setup", "sandbox_image", "publish")


# The fields a record keeps once its repository's data is deleted (`ribbit data delete`):
# how the run ended, nothing that holds code, issue text or a path.
CONTENT_FREE_FIELDS = frozenset({"version", "exit_reason", "turns"})


def holds_content(result: Any) -> bool:
    """Whether a job's stored result (``jobs.result``, of any kind) holds more than the
    CONTENT_FREE_FIELDS, so that deleting a repository's data must cut it down."""
    if isinstance(result, dict):
        return bool(set(result) - CONTENT_FREE_FIELDS)
    return bool(result)


def content_free(result: Any, keep: frozenset[str] = CONTENT_FREE_FIELDS) -> dict[str, Any] | None:
    """A job's stored result cut down to the fields in ``keep`` (None: nothing left)."""
    kept = {k: v for k, v in result.items() if k in keep} if isinstance(result, dict) else {}
    return kept or None


@dataclass(frozen=True)
class SolveRecord:
    """A solve or revise job's record, filled in as the job goes: set-up, then the
    agent's run, then the gates, then (before the push) the publish plan, then the PR.
    A field is None until its step ran."""

    version: int = SOLVE_RECORD_VERSION
    task: TaskRecord | None = None  # holds the base commit: see base_sha
    branch: str | None = None
    setup: SetupRecord | None = None
    sandbox_image: ImageRecord | None = None
    exit_reason: str | None = None
    diff: str | None = None
    turns: int | None = None
    trajectory_path: str | None = None
    gates: GateReport | None = None
    gates_summary: str | None = None
    # The plan stored before the push and dropped once the PR exists, so a rerun after a
    # killed worker publishes the same commit instead of running the agent again.
    publish: PublishPlan | None = None
    pr_number: int | None = None
    pr_url: str | None = None
    head_sha: str | None = None
    timings: dict[str, float] | None = None  # seconds per stage
    # Forge text the trust rule kept out of the prompt, by source and author (None: the
    # job built no prompt yet, or was recorded before this field existed).
    withheld: tuple[WithheldText, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer version, kept
    # The STORED_PARTS as the row had them, by key: written back in place of the typed
    # part until it is replaced (not part of the record's value, so not compared).
    stored_parts: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def with_(self, **changes: Any) -> SolveRecord:
        """The record with ``changes``; a part given here replaces the row's copy."""
        kept = {k: v for k, v in self.stored_parts.items() if k not in changes}
        return replace(self, **changes, stored_parts=kept)

    @property
    def base_sha(self) -> str | None:
        """The commit the job started from, kept once: in the task. Rows also carry it at
        the top level (older readers look there), written from the task; a row from
        before task records has only that top-level key, kept in ``extra``."""
        if self.task is not None:
            return self.task.base_sha
        return opt_str(self.extra.get(BASE_SHA_KEY))

    def to_json(self) -> dict[str, Any]:
        """The row's JSON: absent steps are left out (as the record was always written)."""
        out: dict[str, Any] = dict(self.extra)
        for f in fields(self):
            if f.name in ("extra", "stored_parts"):
                continue
            if f.name in self.stored_parts:
                out[f.name] = self.stored_parts[f.name]
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, TaskRecord | SetupRecord | ImageRecord):
                value = value.to_json()
            elif isinstance(value, GateReport | PublishPlan):
                value = value.to_dict()
            elif f.name == "withheld":
                value = [w.to_json() for w in value]
            out[f.name] = value
        if self.task is not None:
            out[BASE_SHA_KEY] = self.task.base_sha
        return out

    @classmethod
    def from_json(cls, data: Any) -> SolveRecord:
        """The record in a job's ``result`` (an empty record for None or non-dicts)."""
        if not isinstance(data, dict):
            return cls()
        task = TaskRecord.from_json(data.get(TASK_KEY))
        known = {f.name for f in fields(cls)} - {"extra", "stored_parts"}
        if task is not None:  # the top-level copy is the task's, written back from it
            known.add(BASE_SHA_KEY)
        timings = opt_dict(data.get("timings"))
        version = opt_int(data.get("version"))
        return cls(
            version=SOLVE_RECORD_VERSION if version is None else version,
            task=task,
            branch=opt_str(data.get("branch")),
            setup=SetupRecord.from_json(data.get("setup")),
            sandbox_image=ImageRecord.from_json(data.get("sandbox_image")),
            exit_reason=opt_str(data.get("exit_reason")),
            diff=opt_str(data.get("diff")),
            turns=opt_int(data.get("turns")),
            trajectory_path=opt_str(data.get("trajectory_path")),
            gates=GateReport.from_dict(data.get("gates")),
            gates_summary=opt_str(data.get("gates_summary")),
            publish=PublishPlan.read(data.get("publish")),
            pr_number=opt_int(data.get("pr_number")),
            pr_url=opt_str(data.get("pr_url")),
            head_sha=opt_str(data.get("head_sha")),
            timings=(
                {str(k): float(v) for k, v in timings.items() if isinstance(v, int | float)}
                if timings is not None
                else None
            ),
            withheld=_withheld(data.get("withheld")),
            extra={k: v for k, v in data.items() if k not in known},
            stored_parts={k: data[k] for k in STORED_PARTS if isinstance(data.get(k), dict)},
        )

    @property
    def summary_line(self) -> str | None:
        """The gates' one-line summary (stored beside the report, or inside older ones)."""
        if self.gates_summary is not None:
            return self.gates_summary
        return self.gates.summary_line() if self.gates is not None else None

    @property
    def verdict(self) -> Verdict | None:
        """The gates' level (verified, unverified, refused; a report stored before the
        levels reads as judged before evidence), or None when no gate ran."""
        return self.gates.verdict if self.gates is not None else None

    @property
    def judge(self) -> str | None:
        """The version of the judge that made :attr:`verdict` (gate_report.JUDGE_VERSION);
        None when no gate ran or the report was stored before judges were recorded."""
        return self.gates.judge if self.gates is not None else None

    @property
    def changed_files(self) -> list[str]:
        """Paths the diff writes (``+++ b/...``), sorted."""
        return sorted(
            {line[6:] for line in (self.diff or "").splitlines() if line.startswith("+++ b/")}
        )


def _withheld(data: Any) -> tuple[WithheldText, ...] | None:
    if not isinstance(data, list):
        return None
    return tuple(w for w in map(WithheldText.from_json, data) if w is not None)
