"""Text that reaches the forge from anything the bot does not control (model output,
tool arguments, test ids and file names from a patch, an issue title) must not act on
the forge: ping people or teams, close issues, or load remote images in readers'
browsers. One function for every such text: PR bodies, commit messages, status
comments, replies."""

from __future__ import annotations

import re

# "fixes #12", "closes owner/repo#12", "resolves https://host/owner/repo/issues/12"
CLOSING_REFERENCE = re.compile(
    r"\b(fix(?:e[sd])?|close[sd]?|resolve[sd]?)(\s*:?\s+)"
    r"(#\d+|[\w.-]{1,100}/[\w.-]{1,100}#\d+|https?://[^\s)>\]]{1,300}/(?:issues|pull|merge_requests)/\d+)",
    re.IGNORECASE,
)
_SAME_REPO_ISSUE = re.compile(r"#(\d+)")
_IMAGE = re.compile(r"!\[")
_HTML_MEDIA = re.compile(r"<\s*(img|picture|source|video|audio|iframe|object|embed)\b", re.I)


def sanitize_forge_text(text: str) -> str:
    """``text`` made inert on GitHub and GitLab: mentions broken with a zero-width space,
    closing references put in code spans, images turned into plain links."""
    text = text.replace("@", "@\u200b")
    text = CLOSING_REFERENCE.sub(lambda m: f"{m.group(1)}{m.group(2)}`{m.group(3)}`", text)
    text = _IMAGE.sub("!\u200b[", text)
    return _HTML_MEDIA.sub(lambda m: "&lt;" + m.group(1), text)


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
