"""The status comment: progress at a bounded edit rate (decided by an injected clock),
the reviewer link, and the live turn log the reviewer page reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot import live
from bot.forges.base import IssueRef, RepoRef
from bot.settings import load_settings
from bot.store.records.trajectory import ToolCall, TurnRecord
from tests.support import LINK_SECRET
from worker.status import LiveTurns, Status, StatusComment, job_link, render_status

ISSUE = IssueRef(RepoRef("github", "acme/calc"), 7)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingForge:
    """Only the two calls a status comment makes."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def post_comment(self, issue: IssueRef, body: str) -> int:
        self.bodies.append(body)
        return 55

    def edit_comment(self, issue: IssueRef, comment_id: int, body: str) -> None:
        assert comment_id == 55
        self.bodies.append(body)


class NullStore:
    def update(self, job_id: str, **fields: Any) -> None:
        pass


def _comment(clock: Clock, interval: float = 30.0) -> tuple[StatusComment, RecordingForge]:
    forge = RecordingForge()
    status = StatusComment(
        forge,  # type: ignore[arg-type]
        ISSUE,
        NullStore(),  # type: ignore[arg-type]
        "a" * 32,
        None,
        link="https://ribbit.example/review/jobs/aaa?sig=x",
        min_progress_interval_s=interval,
        clock=clock,
    )
    return status, forge


def _turn(index: int, tool: str = "Bash") -> TurnRecord:
    return TurnRecord(
        index=index,
        content="",
        reasoning="thinking",
        tool_calls=[ToolCall(id=f"c{index}", name=tool, arguments={"command": "ls"})],
        observations=[],
        finish_reason="stop",
        prompt_token_ids=[1, 2, 3],
        completion_token_ids=[4],
        completion_logprobs=[-0.1],
    )


def test_progress_edits_are_bounded_by_the_clock_and_phases_always_show() -> None:
    clock = Clock()
    status, forge = _comment(clock)
    assert not status.show_progress(live.Progress(1, "x"))  # nothing shown yet: not working
    status.show(Status("working", "The agent is working in a sandbox."))
    assert len(forge.bodies) == 1
    clock.now += 29.9
    assert not status.show_progress(live.Progress(1, "the agent is working"))
    clock.now += 0.1
    assert status.show_progress(live.Progress(2, "the agent is working"))
    assert "**Progress:** Turn 2 · the agent is working" in forge.bodies[-1]
    assert "The agent is working in a sandbox." in forge.bodies[-1]  # detail kept
    assert not status.show_progress(live.Progress(3, "the agent is working"))  # same instant
    status.show(Status("gates", "Running the tests."))  # a phase change is never held back
    assert len(forge.bodies) == 3 and "Progress" not in forge.bodies[-1]
    clock.now += 100
    assert not status.show_progress(live.Progress(4, "late"))  # not working any more


def test_status_carries_the_link_and_sanitises_the_step() -> None:
    body = render_status(
        "j" * 32,
        Status("working", progress=live.Progress(3, "ran `@maya` fixes #1")),
        "https://ribbit.example/review/jobs/jjj?sig=abc.def",
    )
    assert "[Follow this job](https://ribbit.example/review/jobs/jjj?sig=abc.def)" in body
    assert "@maya" not in body and "fixes #1" not in body


def test_job_link_only_when_configured(tmp_path: Path) -> None:
    bare = load_settings(data_dir=tmp_path)
    assert job_link(bare, "a" * 32) is None
    half = load_settings(data_dir=tmp_path, reviewer={"link_secret": LINK_SECRET})
    assert job_link(half, "a" * 32) is None  # no public URL to point at
    full = load_settings(
        data_dir=tmp_path,
        reviewer={"link_secret": LINK_SECRET, "public_url": "https://ribbit.example/"},
    )
    url = job_link(full, "a" * 32)
    assert url is not None and url.startswith(f"https://ribbit.example/review/jobs/{'a' * 32}?sig=")


def test_live_turns_log_each_turn_without_token_ids_and_count_on_the_comment(
    tmp_path: Path,
) -> None:
    clock = Clock()
    status, forge = _comment(clock, interval=10)
    path = live.live_path(tmp_path, "a" * 32)
    path.parent.mkdir(parents=True)
    path.write_text('{"index": 99}\n')  # an earlier attempt's log: started afresh
    status.show(Status("working"))
    recorder = LiveTurns(tmp_path, "a" * 32, status)
    clock.now += 10
    recorder(_turn(0, "Read"))
    recorder(_turn(1, "Edit\n@everyone`"))  # within the interval: logged, comment not edited
    turns = live.read_turns(path)
    assert [t["index"] for t in turns] == [0, 1]
    assert "prompt_token_ids" not in turns[0] and turns[0]["reasoning"] == "thinking"
    assert (
        len(forge.bodies) == 2
        and "Turn 1 · the agent is working (last ran Read)" in (forge.bodies[-1])
    )
    clock.now += 10
    recorder(_turn(2, "Edit\n@everyone`"))
    assert "Turn 3 · the agent is working (last ran Editeveryone)" in forge.bodies[-1]


def test_live_log_skips_a_half_written_line(tmp_path: Path) -> None:
    path = live.live_path(tmp_path, "b" * 32)
    live.append_turn(path, {"index": 0})
    with path.open("a") as fh:
        fh.write('{"index": 1, "cont')  # the worker is mid-append
    assert live.read_turns(path) == [{"index": 0}]
    assert live.read_turns(tmp_path / "missing.jsonl") == []
