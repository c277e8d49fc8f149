"""A running job's turns, as the worker records them one by one, for the reviewer page.

The final trajectory is written only when the agent stops; while it works, the worker
appends each finished turn to ``DATA_DIR/live/<job id>.jsonl`` (one JSON object per
line, the keys of bot.store.records.trajectory.TurnRecord without the token ids) and the
web app, which shares the data directory, reads them back. Lines are whole or absent:
a half-written last line (read mid-append) is skipped, never shown broken.

No Flask here: the worker writes through this module, the web app reads through it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_LIVE_BYTES = 32 * 1024 * 1024
# Training data, not something a reviewer reads, and by far the largest part of a turn.
_OMITTED = ("prompt_token_ids", "completion_token_ids", "completion_logprobs", "raw_text")

# What each pipeline stage (JobContext.stage) means to someone watching.
STAGE_LABELS: dict[str, str] = {
    "permission": "checking who asked",
    "config": "reading the issue and the repository",
    "clone": "cloning the repository",
    "setup": "running the repository's setup",
    "agent": "the agent is working",
    "gates": "running the tests, Semgrep and patch hygiene",
    "push": "pushing the commit",
    "pull_request": "opening the draft pull request",
}


@dataclass(frozen=True)
class Progress:
    """How far a job has got: shown on the status comment and the reviewer page."""

    turns: int
    step: str

    def line(self) -> str:
        return f"Turn {self.turns} · {self.step}" if self.turns else self.step.capitalize()


def live_path(data_dir: Path, job_id: str) -> Path:
    if not job_id.isalnum():
        raise ValueError(f"not a job id: {job_id!r}")
    return data_dir / "live" / f"{job_id}.jsonl"


def turn_line(turn: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in turn.items() if k not in _OMITTED}, ensure_ascii=False)


def append_turn(path: Path, turn: dict[str, Any]) -> None:
    """One write per turn, in append mode, so a reader sees whole lines or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (turn_line(turn) + "\n").encode("utf-8", errors="surrogateescape")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o640)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def clear(path: Path) -> None:
    """A retried job starts its live log again rather than continuing an old attempt's."""
    path.unlink(missing_ok=True)


def read_turns(path: Path) -> list[dict[str, Any]]:
    """The turns recorded so far (empty when there is no log yet); at most MAX_LIVE_BYTES
    are read, so a runaway log cannot exhaust the web app."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(MAX_LIVE_BYTES)
    turns = []
    for line in raw.split(b"\n"):
        try:
            data = json.loads(line)
        except ValueError:
            continue  # blank, cut at the byte cap, or still being written
        if isinstance(data, dict):
            turns.append(data)
    return turns


def step_for(stage: str | None, last_turn: dict[str, Any] | None) -> str:
    """The current step in words: the stage, and in the agent stage the last tools run."""
    label = STAGE_LABELS.get(stage or "", "waiting to start")
    if stage != "agent" or not last_turn:
        return label
    # Tool names are model output: only name-like characters reach the status comment.
    names = [
        re.sub(r"[^\w.-]", "", str(c.get("name")))[:40]
        for c in last_turn.get("tool_calls") or []
        if isinstance(c, dict) and c.get("name")
    ]
    names = [n for n in names if n]
    if not names:
        return label
    ran = ", ".join(names[:5])
    return f"{label} (last ran {ran})"
