"""What one training environment is.

The first block of fields is SWE-bench's instance schema, with the same names
(upper-case ``FAIL_TO_PASS`` included) so an exported JSONL line is a valid
SWE-bench instance for its harness and for verl/SkyRL loaders that read it. The
rest is Ribbit's: how to run it, where it came from, how hard it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# What an environment runs its tests with when its repository names no command (the
# builder, `ribbit envs build` and a record without the field agree on it).
DEFAULT_TEST_COMMAND = "python -m pytest"

Split = Literal["train", "heldout", "test"]
Author = Literal["bot", "human", "unknown"]


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(default="local", description="pr, outcome, local, import")
    # The forge of the repository the environment came from (github, gitlab), where known:
    # with ``repo`` it decides which model lines may train on it (bot/model_lines.py).
    forge: str | None = None
    fix_commit: str | None = None
    # When the fix was made (its commit's date; a fix from a diff: when it was built), ISO
    # 8601 in UTC: `ribbit envs split` holds the newest fixes out. None: built before it
    # was recorded (the split then goes by ``created_at``).
    fixed_at: str | None = None
    pr_url: str | None = None
    author: Author = "unknown"
    leak_stripped: bool = False  # the issue text quoted the fix; those parts were removed
    flaky_tests: list[str] = Field(default_factory=list)  # dropped after reruns disagreed
    # The issue a job solved (environments from outcomes): the task text's Instance ID, as
    # the job showed it.
    issue_number: int | None = None


class PromptComment(BaseModel):
    """One of the issue's comments as the solve job's prompt carries it: a writer's, under
    their name (selected by worker.pipelines.issue_task.prompt_comments)."""

    model_config = ConfigDict(extra="forbid")

    author: str
    body: str


class Calibration(BaseModel):
    """pass@k of the current policy on this environment, from k rollouts."""

    model_config = ConfigDict(extra="forbid")

    k: int = 0
    solved: int = 0
    model: str | None = None

    @property
    def pass_rate(self) -> float:
        return self.solved / self.k if self.k else 0.0

    @property
    def has_signal(self) -> bool:
        """Always- or never-solved environments give GRPO groups with no variance."""
        return self.k > 0 and 0 < self.solved < self.k


class Environment(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # -- SWE-bench fields ----------------------------------------------------
    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    hints_text: str = ""
    patch: str  # the non-test part of the fix: the reference solution
    test_patch: str  # the test part, applied before grading
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    created_at: str = ""
    version: str = ""
    environment_setup_commit: str = ""

    # -- Ribbit fields ---------------------------------------------------------
    image: str | None = None  # sandbox image; None: the sandbox backend's default
    # The repository's .ribbit.yml setup and test commands at the time of the fix.
    setup_commands: list[str] = Field(default_factory=list)
    test_command: str = DEFAULT_TEST_COMMAND
    test_timeout_s: float = 300.0
    provenance: Provenance = Field(default_factory=Provenance)
    calibration: Calibration = Field(default_factory=Calibration)
    split: Split = "train"
    # The first user message exactly as the solve job this environment came from gave it
    # (bot.store.records.TaskRecord.first_message): its rollouts replay it byte for byte,
    # so training sees what serving saw (vouching line, trusted comments, repository
    # instructions). None: built from a fix with no job, from a job recorded before the
    # text was kept, or from one whose text quoted the fix; rollouts then render the task
    # from the fields above through the same function (worker.agent.prompt).
    task_text: str | None = None
    # The issue's comments a solve job on it would have shown (writers' only, the newest
    # few): a merged fix with no job renders them as the job would have. Empty: none
    # were given, or the environment was built before they were kept.
    issue_comments: list[PromptComment] = Field(default_factory=list)

    @field_validator("problem_statement")
    @classmethod
    def _has_problem(cls, value: str) -> str:
        # An environment without a task trains the model to act on nothing.
        if not value.strip():
            raise ValueError("an environment needs a non-empty problem_statement")
        return value

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        # SWE-bench on the hub stores these lists as JSON strings.
        return json.loads(value) if isinstance(value, str) else value

    @property
    def setup_command(self) -> str | None:
        """The setup commands as the production setup step runs them."""
        return one_setup_command(self.setup_commands)

    def content_hash(self) -> str:
        """SHA-256 of what the environment asks and checks (every field but its split and
        calibration, which change without changing the task): a score or a training run
        names the exact environment it used."""
        # An environment without a replayed text or comments hashes as it did before
        # those fields existed.
        unset = {"task_text"} if self.task_text is None else set()
        unset |= set() if self.issue_comments else {"issue_comments"}
        body = self.model_dump_json(exclude={"split", "calibration", *unset})
        return hashlib.sha256(body.encode()).hexdigest()

    def to_swebench(self) -> dict[str, Any]:
        """The SWE-bench instance (its fields only)."""
        return self.model_dump(include=set(SWEBENCH_FIELDS))


def one_setup_command(commands: Sequence[str]) -> str | None:
    """Setup commands as the one command the production setup step runs (stopping at
    the first that fails); None when there are none."""
    return " && ".join(commands) or None


SWEBENCH_FIELDS: tuple[str, ...] = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "hints_text",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "created_at",
    "version",
    "environment_setup_commit",
)


class Rejection(BaseModel):
    """A candidate that did not become an environment, and why."""

    model_config = ConfigDict(extra="forbid")

    candidate: str  # repo@base..fix
    reason: Literal[
        "no_fail_to_pass",
        "no_code_change",
        "timeout",
        "patch_does_not_apply",
        "duplicate",
        "no_test_results",
        "ids_not_runnable",  # an id that, given back to the test command, selects no pass
        "no_problem_statement",  # no issue text to give the model (never built empty)
        "pr_not_merged",  # a closed bot PR: its patch checks the same issue's environments
        "passes_rejected_patch",  # the tests pass a patch reviewers closed for the issue
        "no_base_commit",  # the outcome does not say which commit the fix was made on
        "setup_failed",  # the production setup step failed with the repo's setup command
        "run_not_own",  # the fixed code's test run is not its own (processes left behind)
        "copy_install",  # the set-up installs a copy of the package, not an editable one
    ]
    detail: str = ""
    negative_trajectory: str | None = None  # path of a rejected bot PR's trajectory
    hints: list[str] = Field(default_factory=list)  # reviewer comments on that PR
