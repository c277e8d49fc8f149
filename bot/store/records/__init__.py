"""The typed records that cross from one process to another through the database and
the job's files: one module per record, each the only place its keys are named. Every
reader goes through a record's ``from_json`` (or ``from_dict``), which reads rows
tolerantly (bot/store/tolerant.py), and every writer through its ``to_json``.

- solve.py: a solve or revise job's record (``jobs.result``), with its parts:
  task.py (what the job was asked, and the forge text kept out of its prompt),
  setup.py (the set-up step), image.py (the sandbox image) and publish.py (the publish
  plan stored between the gates and the PR).
- gate_report.py: the gates' report and the verdict scale every reader uses.
- trajectory.py: the agent's trajectory, as the agent loop writes it and the trainer,
  the replay policy and the pages read it.
- outcome.py: a pull request's outcome as the outcome job found it, with review.py,
  the reviewers' feedback it keeps (the hints of the environments built from it).

The solve record's names are re-exported here (``from bot.store.records import
SolveRecord``); the other records are imported from their modules.
"""

from bot.store.records.image import ImageRecord
from bot.store.records.publish import PublishPlan
from bot.store.records.setup import SetupRecord
from bot.store.records.solve import (
    BASE_SHA_KEY,
    CONTENT_FREE_FIELDS,
    SOLVE_RECORD_VERSION,
    TASK_KEY,
    SolveRecord,
    content_free,
    holds_content,
)
from bot.store.records.task import TaskRecord, WithheldText

__all__ = [
    "BASE_SHA_KEY",
    "CONTENT_FREE_FIELDS",
    "SOLVE_RECORD_VERSION",
    "TASK_KEY",
    "ImageRecord",
    "PublishPlan",
    "SetupRecord",
    "SolveRecord",
    "TaskRecord",
    "WithheldText",
    "content_free",
    "holds_content",
]
