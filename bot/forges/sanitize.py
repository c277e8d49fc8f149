"""Text that reaches the forge from anything the bot does not control (model output,
tool arguments, test ids and file names from a patch, an issue title) must not act on
the forge: ping people or teams, close issues, run quick actions, or load remote images
in readers' browsers, nor hide from the reviewer what it says. One function for every
such text (:func:`sanitize_forge_text`: PR bodies, status comments, replies, review
notes), one for titles (:func:`sanitize_forge_title`: PR/MR titles, commit subjects).

Everything is made inert by inserting a zero-width space (U+200B) where the forge's
grammar needs two characters to touch: after the ``#`` of an issue reference that
follows a closing keyword, after ``@``, ``<`` and ``&``, after the ``]`` of a link or
``!`` of an image, before the ``/`` that starts a line. The reader sees exactly what was
written, as text, and nothing is removed.

Closing references follow the forges' own grammars:

- GitHub, "Linking a pull request to an issue using a keyword":
  https://docs.github.com/en/issues/tracking-your-work-with-issues/using-issues/linking-a-pull-request-to-an-issue
  close, closes, closed, fix, fixes, fixed, resolve, resolves, resolved, any case, an
  optional colon ("Closes: #10"), then ``#N``, ``owner/repo#N`` or the issue's URL.
- GitLab's "Default closing pattern" (vendored in tests/fixtures/forge_closing_grammar.json):
  https://docs.gitlab.com/user/project/issues/managing_issues/#default-closing-pattern
  also Closing, Fixing,
  Resolving, Implement(s/ed/ing), "issue"/"issues" words, ``group/subgroup/project#N``,
  external tracker ids (``JIRA-12``) and lists ("Closes #4, #6, and #7"), matched on the
  raw text, code spans included.

The neutraliser is wider than either grammar (any case, any markup or punctuation
between the keyword and a reference, every item of a list, any URL after a keyword),
because a missed reference closes an issue while an extra one only loses a link.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

from bot.forges.redact import scrub

# "fixes #12", "closes owner/repo#12", "resolves https://host/owner/repo/issues/12":
# GitHub's closing references in a human's PR body (closed_issue_numbers), not the
# neutraliser's, which is wider.
CLOSING_REFERENCE = re.compile(
    r"\b(fix(?:e[sd])?|close[sd]?|resolve[sd]?)(\s*:?\s+)"
    r"(#\d+|[\w.-]{1,100}/[\w.-]{1,100}#\d+|https?://[^\s)>\]]{1,300}/(?:issues|pull|merge_requests)/\d+)",
    re.IGNORECASE,
)
_SAME_REPO_ISSUE = re.compile(r"#(\d+)")

ZWSP = "\u200b"

# Both forges' keywords together (GitLab's is the wider list), in any case.
_CLOSING_KEYWORD = re.compile(
    r"clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?",
    re.IGNORECASE,
)
# What may stand between a keyword and a reference or between two references: blanks,
# punctuation, and the words lists and GitLab's pattern use. Possessive: it never gives
# back, so a long run of punctuation costs one pass.
_LIST_GLUE = re.compile(r"(?:[^\w#]|(?<!\w)(?:and|or|issues?)(?!\w))*+", re.IGNORECASE)
# One reference: an issue URL on any host; #12, project#12, group/sub/project#12; GitHub's
# GH-12 and GitLab's external JIRA-12.
_REFERENCE = re.compile(
    r"(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"'()\[\]]+"
    r"|(?:[\w.-]+(?:/[\w.-]+)*)?#\d+"
    r"|[a-z][a-z0-9]*-\d+",
    re.IGNORECASE,
)
# Within a reference, every place a forge's pattern needs two characters to touch: a
# zero-width space goes after each. All of them, as a forge may read a reference inside
# another ("JIRA-1group/project#2" holds GitLab's external JIRA-1).
_ANCHOR = re.compile(r"#|-(?=\d)|://|(?<![\w.])www\.", re.IGNORECASE)
# Markup a forge does not show (emphasis, code spans, escapes) and invisible format
# characters: taken out before the keywords are looked for, so "**Fixes** #1" and
# "Fi\u00adxes #1" are found as well as "Fixes #1".
_MARKUP = frozenset("*_~`\\")

# A line that starts with "/word" is a GitLab quick action ("/close", "/merge",
# "/approve", "/ready") when the bot posts it, with the bot's rights.
_QUICK_ACTION = re.compile(r"^([ \t]*)/", re.MULTILINE)
# "](" inline links and images, "][" reference links, "]:" link definitions: written
# text shown as text, the URL still shown (and still a plain autolink) to the reviewer.
_LINK = re.compile(r"\](?=[(\[:])")
_IMAGE = re.compile(r"!\[")
# "<" opens tags, comments, autolinks; "&" entities that decode into any of the above.
_MARKUP_OPENERS = re.compile(r"[@<&](?!\u200b)")

MAX_TITLE_CHARS = 200


def sanitize_forge_text(text: str) -> str:
    """``text`` made inert on GitHub and GitLab and shown as written: closing references
    broken, mentions, HTML (tags, comments, entities) and links shown as text, images as
    text, quick actions as text."""
    # Secrets first: the forge client masks them again, but no longer finds one that a
    # zero-width space has split ("p@ss", "glpat-1..." after "fixes").
    text = _neutralise_closing_references(scrub(text))
    text = _MARKUP_OPENERS.sub(lambda m: m.group() + ZWSP, text)
    text = _LINK.sub("]" + ZWSP, text)
    text = _IMAGE.sub("!" + ZWSP + "[", text)
    return _QUICK_ACTION.sub(lambda m: m.group(1) + ZWSP + "/", text)


def sanitize_forge_title(text: str, *, suffix: str = "", limit: int = MAX_TITLE_CHARS) -> str:
    """A title (of a PR or MR, a commit's subject) from ``text``: one line, no control or
    format characters, at most ``limit`` characters with ``suffix`` kept whole at its
    end, sanitised as a whole (so a keyword at the end of ``text`` cannot close an issue
    ``suffix`` names)."""
    head, tail = _one_line(scrub(text)), _one_line(suffix)  # masked before it is cut
    tail = f" {tail}" if tail and head else tail
    keep = max(0, limit - len(tail))
    while True:
        shown = head if len(head) <= keep else head[: max(0, keep - 1)].rstrip() + "…"
        title = sanitize_forge_text(shown + tail)
        if len(title) <= limit or keep == 0:
            return title[:limit]
        # Each inserted zero-width space costs one character: shrink by half the excess
        # so a title dense with them keeps as much as fits.
        keep = max(0, keep - max(1, (len(title) - limit) // 2))


def _one_line(text: str) -> str:
    """``text`` with line breaks and control characters as blanks, format characters
    (bidi overrides, zero-width) dropped, blanks collapsed."""
    kept = []
    for char in text:
        kind = unicodedata.category(char)
        if kind == "Cf":
            continue
        kept.append(" " if kind in ("Cc", "Zl", "Zp") else char)
    return " ".join("".join(kept).split())


def _neutralise_closing_references(text: str) -> str:
    """Every reference that follows a closing keyword, alone or in a list, with a
    zero-width space where the forge's pattern needs its characters to touch."""
    # The keywords are matched on the text as read (markup and format characters out),
    # while a keyword's start is judged on the text as written: "**Note**fixes #1" reads
    # "Notefixes" but the forge sees "fixes" start a word.
    shown, where = [], []
    for index, char in enumerate(text):
        if char not in _MARKUP and unicodedata.category(char) != "Cf":
            shown.append(char)
            where.append(index)
    read = "".join(shown)
    cuts: set[int] = set()
    pos = 0
    while keyword := _CLOSING_KEYWORD.search(read, pos):
        pos = keyword.end()
        start = where[keyword.start()]
        # A word boundary as Ruby's ASCII \b sees it: "prefixes" holds no keyword, while
        # "éfixes" may (the wider reading costs a link at most).
        if start > 0 and text[start - 1].isascii() and text[start - 1].isalnum():
            continue
        while reference := _REFERENCE.match(read, _past_glue(read, pos)):
            for anchor in _ANCHOR.finditer(read, reference.start(), reference.end()):
                if anchor.end() < reference.end():
                    cut = where[anchor.end()]
                    if text[cut - 1] != ZWSP:  # already inert (sanitised twice)
                        cuts.add(cut)
            pos = reference.end()
    bounds = [0, *sorted(cuts), len(text)]
    return ZWSP.join(text[a:b] for a, b in pairwise(bounds))


def _past_glue(read: str, pos: int) -> int:
    glue = _LIST_GLUE.match(read, pos)  # always matches, possibly nothing
    return glue.end() if glue else pos


def closed_issue_numbers(text: str) -> list[str]:
    """The numbers of this repository's issues ``text`` closes ("fixes #12", the keyword
    and the number apart by blanks only, the number not run on into a word), as digits."""
    numbers = []
    for match in CLOSING_REFERENCE.finditer(text):
        ref = _SAME_REPO_ISSUE.fullmatch(match.group(3))
        run_on = text[match.end() : match.end() + 1]
        if ref and ":" not in match.group(2) and not (run_on.isalnum() or run_on == "_"):
            numbers.append(ref.group(1))
    return numbers
