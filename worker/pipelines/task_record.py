"""What a solve job was asked and how its repository is set up and tested, stored in
the job's record in the database (``job.result["task"]``).

The trainer turns a merged PR into an environment from this record on any host: the
issue text is the problem statement, and the ``.ribbit.yml`` commands and image in
force at the time of the job are the environment's setup and test commands and image.
Nothing is read back from a worker's disk.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

RESULT_KEY = "task"


@dataclass(frozen=True)
class TaskRecord:
    issue_title: str
    issue_body: str
    base_sha: str
    test_command: str
    setup_command: str | None = None
    image: str | None = None  # .ribbit.yml's; None: the deployment's

    @property
    def problem_statement(self) -> str:
        return f"{self.issue_title.strip()}\n\n{self.issue_body.strip()}".strip()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_result(cls, result: dict[str, Any] | None) -> TaskRecord | None:
        """The record in a job's result; None for jobs from before records were kept
        or results that lack a usable one."""
        data = (result or {}).get(RESULT_KEY)
        if not isinstance(data, dict):
            return None
        try:
            record = cls(
                issue_title=str(data["issue_title"]),
                issue_body=str(data["issue_body"]),
                base_sha=str(data["base_sha"]),
                test_command=str(data["test_command"]),
                setup_command=(
                    None if data.get("setup_command") is None else str(data["setup_command"])
                ),
                image=None if data.get("image") is None else str(data["image"]),
            )
        except KeyError:
            return None
        return record
