"""Which forge text may reach the model's prompt: one rule, decided here and nowhere else.

Anyone can write on a public issue or pull request; only the repository's writers (write
access on the forge) steer the agent. Every piece of forge text a prompt carries (the
issue's title and body, its comments, a pull request's review comments and review
bodies, the words a person gave the job) passes through :meth:`TrustedText.admit`,
which keeps a writer's text, drops everyone else's and the bot's own, counts what it
dropped (``ribbit_prompt_text_withheld_total``) and keeps a tally, by source and author,
for the job's record (:class:`bot.store.records.WithheldText`). Whoever is kept is named
where the text appears (``Comment by @maya``, ``maya on calc.py:2``), so the model always
knows who said what.

The issue is the one piece a non-writer may have written and still be worked on: anyone
can open an issue, and the writer who labels it (or asks ``/ribbit retry``) takes it up.
That writer vouches for the text they asked Ribbit to act on, so an outsider's issue
reaches the prompt with a line naming its author and the writer who vouched
(:class:`worker.agent.prompt.Vouched`). The job's actor was checked for write access
before any text is read (``SolveRun.check_permission``), but the rule does not rely on
that: without a writer to vouch, the issue's words are withheld like any other outsider's.
A writer's own issue keeps the training layout (SWE-bench's title and body, no byline).

Not covered: the vouching is for the issue as it reads when the job runs, so an outsider
who edits their issue between a writer's label and the job's start changes what the
writer vouched for (a retry vouches again). Pinning the text the writer saw needs the
body's hash in the label's job.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from bot.forges.base import Forge, Issue, RepoRef
from bot.store.records import WithheldText
from worker.metrics import record_withheld

Source = Literal["issue", "comment", "review_comment", "review", "request"]
# What the rule makes of an author: a writer's text reaches the prompt; an outsider's is
# withheld and counted; the bot's own is left out silently.
Trust = Literal["writer", "outsider", "bot"]


@dataclass(frozen=True)
class IssueText:
    """The issue as the prompt may carry it: empty when no writer wrote or vouched for it;
    ``vouched_by`` is set when a writer took up a non-writer's issue."""

    title: str
    body: str
    author: str
    vouched_by: str | None = None


class TrustedText:
    """The trust rule for one job: write access asked once per author, what was withheld
    remembered for the record."""

    def __init__(self, forge: Forge, repo: RepoRef) -> None:
        self._forge = forge
        self._repo = repo
        self._writers: dict[str, bool] = {}
        self._withheld: Counter[tuple[str, str]] = Counter()

    def is_writer(self, author: str) -> bool:
        """Whether ``author`` has write access (never the bot, never an unnamed author)."""
        if not author or self._is_bot(author):
            return False
        if author not in self._writers:
            self._writers[author] = self._forge.has_write_access(self._repo, author)
        return self._writers[author]

    def _is_bot(self, author: str) -> bool:
        # Logins are case-insensitive on both forges: "Ribbit-Bot" is the bot too.
        return author.casefold() == self._forge.bot_login.casefold()

    def admit(self, source: Source, author: str) -> bool:
        """Whether text from ``source`` by ``author`` may reach the prompt."""
        return self.judge(source, author) == "writer"

    def judge(self, source: Source, author: str) -> Trust:
        """What the rule makes of text from ``source`` by ``author``. The bot's own words
        are left out silently (they are not an attempt); an outsider's are counted."""
        if author and self._is_bot(author):
            return "bot"
        if self.is_writer(author):
            return "writer"
        self._withheld[(source, author)] += 1
        record_withheld(source)
        return "outsider"

    def issue(self, issue: Issue, *, vouched_by: str | None) -> IssueText:
        """The issue's title and body: a writer's as they are; a non-writer's when the
        writer ``vouched_by`` asked for the work; else nothing of it."""
        if self.is_writer(issue.author):
            return IssueText(issue.title, issue.body, issue.author)
        if vouched_by and self.is_writer(vouched_by):
            return IssueText(issue.title, issue.body, issue.author, vouched_by=vouched_by)
        self.admit("issue", issue.author)  # counted and recorded as withheld
        return IssueText("", "", issue.author)

    def withheld(self) -> tuple[WithheldText, ...]:
        """What was kept out so far, by source and author, in a stable order."""
        return tuple(
            WithheldText(source, author, count)
            for (source, author), count in sorted(self._withheld.items())
        )
