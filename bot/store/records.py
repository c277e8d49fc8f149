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

The nested reports (``setup``, ``sandbox_image``, ``publish``) are the JSON of the
worker's own typed records (SetupResult, RepoImage, PublishPlan), which live with the
code that makes them; bot/ stores them as they are. ``gates`` is the
:class:`bot.store.gate_report.GateReport` itself, stored as its ``to_dict()`` and read
back with ``GateReport.from_dict``, so that schema lives here in bot/.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from bot.store.gate_report import GateReport, Verdict
from bot.store.tolerant import opt_dict, opt_int, opt_str

SOLVE_RECORD_VERSION = 1
TASK_KEY = "task"
BASE_SHA_KEY = "base_sha"


@dataclass(frozen=True)
class TaskRecord:
    """What the job was asked and how its repository is set up and tested.

    The trainer turns a merged PR into an environment from this record on any host: the
    issue text is the problem statement, and the ``.ribbit.yml`` commands and image in
    force at the time of the job are the environment's setup and test commands and image.
    Nothing is read back from a worker's disk."""

    issue_title: str
    issue_body: str
    base_sha: str
    test_command: str
    setup_command: str | None = None
    image: str | None = None  # .ribbit.yml's; None: the deployment's
    # The first user message exactly as the model had it (the task text with its vouching
    # line, trusted comments and repository instructions): a training rollout of an
    # environment built from this job replays it byte for byte. None: recorded before it
    # was kept (the rollout renders the task again from the issue's title and body).
    first_message: str | None = None

    @property
    def problem_statement(self) -> str:
        return f"{self.issue_title.strip()}\n\n{self.issue_body.strip()}".strip()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> TaskRecord | None:
        """None for records without the required fields (jobs from before task records)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                issue_title=str(data["issue_title"]),
                issue_body=str(data["issue_body"]),
                base_sha=str(data["base_sha"]),
                test_command=str(data["test_command"]),
                setup_command=opt_str(data.get("setup_command")),
                image=opt_str(data.get("image")),
                first_message=opt_str(data.get("first_message")),
            )
        except KeyError:
            return None


@dataclass(frozen=True)
class WithheldText:
    """Forge text kept out of a job's prompt (worker/pipelines/trusted_text.py): ``count``
    pieces from ``source`` ("issue", "comment", "review_comment", "review", "request") by
    ``author``, who has no write access. The text itself is not kept: an outsider's words
    are no part of the job."""

    source: str
    author: str
    count: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> WithheldText | None:
        if not isinstance(data, dict):
            return None
        source, author, count = (
            opt_str(data.get("source")),
            opt_str(data.get("author")),
            opt_int(data.get("count")),
        )
        if source is None or author is None or count is None:
            return None
        return cls(source, author, count)


# The fields a record keeps once its repository's data is deleted (`ribbit data delete`):
# how the run ended, nothing that holds code, issue text or a path.
CONTENT_FREE_FIELDS = frozenset({"version", "exit_reason", "turns"})


@dataclass(frozen=True)
class SolveRecord:
    """A solve or revise job's record, filled in as the job goes: set-up, then the
    agent's run, then the gates, then (before the push) the publish plan, then the PR.
    A field is None until its step ran."""

    version: int = SOLVE_RECORD_VERSION
    task: TaskRecord | None = None  # holds the base commit: see base_sha
    branch: str | None = None
    setup: dict[str, Any] | None = None  # SetupResult.to_dict()
    sandbox_image: dict[str, Any] | None = None  # RepoImage.to_dict()
    exit_reason: str | None = None
    diff: str | None = None
    turns: int | None = None
    trajectory_path: str | None = None
    gates: GateReport | None = None
    gates_summary: str | None = None
    # The plan stored before the push and dropped once the PR exists, so a rerun after a
    # killed worker publishes the same commit instead of running the agent again.
    publish: dict[str, Any] | None = None  # PublishPlan.to_dict()
    pr_number: int | None = None
    pr_url: str | None = None
    head_sha: str | None = None
    timings: dict[str, float] | None = None  # seconds per stage
    # Forge text the trust rule kept out of the prompt, by source and author (None: the
    # job built no prompt yet, or was recorded before this field existed).
    withheld: tuple[WithheldText, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer version, kept

    def with_(self, **changes: Any) -> SolveRecord:
        return replace(self, **changes)

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
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, TaskRecord):
                value = value.to_json()
            elif isinstance(value, GateReport):
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
        known = {f.name for f in fields(cls)} - {"extra"}
        if task is not None:  # the top-level copy is the task's, written back from it
            known.add(BASE_SHA_KEY)
        timings = opt_dict(data.get("timings"))
        version = opt_int(data.get("version"))
        return cls(
            version=SOLVE_RECORD_VERSION if version is None else version,
            task=task,
            branch=opt_str(data.get("branch")),
            setup=opt_dict(data.get("setup")),
            sandbox_image=opt_dict(data.get("sandbox_image")),
            exit_reason=opt_str(data.get("exit_reason")),
            diff=opt_str(data.get("diff")),
            turns=opt_int(data.get("turns")),
            trajectory_path=opt_str(data.get("trajectory_path")),
            gates=GateReport.from_dict(data.get("gates")),
            gates_summary=opt_str(data.get("gates_summary")),
            publish=opt_dict(data.get("publish")),
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
