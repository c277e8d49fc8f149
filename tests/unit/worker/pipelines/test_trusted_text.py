"""The one trust rule for forge text on its way to a prompt: writers' words are kept under
their names, everyone else's are withheld, counted and tallied for the job's record; an
outsider's issue speaks only when the writer who asked for the work vouches for it."""

from __future__ import annotations

from prometheus_client import REGISTRY

from bot.forges.base import Issue, IssueRef, RepoRef
from bot.store.records import SolveRecord, WithheldText
from worker.agent import AgentTask, Vouched
from worker.agent.prompt import render_user_message
from worker.pipelines.trusted_text import TrustedText

REPO = RepoRef("github", "o/r")
BOT = "ribbit[bot]"


class _Forge:
    bot_login = BOT

    def __init__(self, writers: set[str]) -> None:
        self.writers = writers
        self.asked: list[str] = []

    def has_write_access(self, repo: RepoRef, username: str) -> bool:
        self.asked.append(username)
        return username in self.writers


def _trust(*writers: str) -> tuple[TrustedText, _Forge]:
    forge = _Forge(set(writers))
    return TrustedText(forge, REPO), forge  # type: ignore[arg-type]


def _withheld_count(source: str) -> float:
    labels = {"source": source}
    return REGISTRY.get_sample_value("ribbit_prompt_text_withheld_total", labels) or 0.0


def _issue(author: str) -> Issue:
    return Issue(IssueRef(REPO, 7), "Add is wrong", "add(1, 2) gives -1", author, "open")


def test_writers_are_admitted_and_everyone_else_is_withheld_counted_and_tallied() -> None:
    trust, forge = _trust("maya")
    before = _withheld_count("review_comment"), _withheld_count("review")
    said = [
        ("review_comment", "maya"),
        ("review_comment", "otto"),
        ("review", "otto"),
        ("review_comment", BOT),  # the bot's own words: left out, but no attempt
        ("review_comment", BOT.upper()),  # logins are case-insensitive
        ("review_comment", ""),  # an author the forge did not name is nobody's writer
        ("review_comment", "otto"),
    ]
    kept = [author for source, author in said if trust.admit(source, author)]  # type: ignore[arg-type]
    assert kept == ["maya"]
    assert forge.asked == ["maya", "otto"]  # once per author; never the bot or nobody
    assert trust.withheld() == (
        WithheldText("review", "otto", 1),
        WithheldText("review_comment", "", 1),
        WithheldText("review_comment", "otto", 2),
    )
    after = _withheld_count("review_comment"), _withheld_count("review")
    assert (after[0] - before[0], after[1] - before[1]) == (3, 1)


def test_the_tally_survives_the_solve_record() -> None:
    tally = (WithheldText("comment", "otto", 2), WithheldText("review", "eve", 1))
    stored = SolveRecord(withheld=tally).to_json()
    assert stored["withheld"] == [
        {"source": "comment", "author": "otto", "count": 2},
        {"source": "review", "author": "eve", "count": 1},
    ]
    assert SolveRecord.from_json(stored).withheld == tally
    assert SolveRecord.from_json({}).withheld is None  # a record from before the field
    assert SolveRecord.from_json({"withheld": [{"source": 1}, "x"]}).withheld == ()


def test_a_writers_issue_keeps_the_training_layout() -> None:
    trust, _ = _trust("maya")
    text = trust.issue(_issue("maya"), vouched_by="maya")
    assert (text.title, text.body, text.vouched_by) == ("Add is wrong", "add(1, 2) gives -1", None)
    assert trust.withheld() == ()
    message = render_user_message(AgentTask(title=text.title, body=text.body))
    assert message == "# Task\n\nAdd is wrong\nadd(1, 2) gives -1\n"


def test_an_outsiders_issue_speaks_when_the_writer_who_asked_vouches_and_says_so() -> None:
    trust, _ = _trust("maya")
    text = trust.issue(_issue("otto"), vouched_by="maya")
    assert (text.body, text.author, text.vouched_by) == ("add(1, 2) gives -1", "otto", "maya")
    assert trust.withheld() == ()  # taken up by a writer: nothing was kept out
    task = AgentTask(title=text.title, body=text.body, vouched=Vouched(text.author, "maya"))
    assert render_user_message(task) == (
        "# Task\n\nAdd is wrong\nadd(1, 2) gives -1\n\n"
        "(This issue was written by @otto, who has no write access to the repository; "
        "@maya, who has, asked for this work.)\n"
    )


def test_an_outsiders_issue_without_a_writer_to_vouch_is_withheld() -> None:
    for actor in ("eve", None, ""):
        trust, _ = _trust("maya")
        text = trust.issue(_issue("otto"), vouched_by=actor)
        assert (text.title, text.body, text.vouched_by) == ("", "", None)
        assert trust.withheld() == (WithheldText("issue", "otto", 1),)
