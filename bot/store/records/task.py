"""What a solve or revise job was asked (:class:`TaskRecord`) and what forge text the
trust rule kept out of its prompt (:class:`WithheldText`): the parts of the job's record
(:class:`bot.store.records.solve.SolveRecord`) written when the prompt is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bot.store.tolerant import opt_int, opt_str


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
