"""Invisible markers that make a comment findable after its POST's answer was lost."""

from __future__ import annotations

import re
from collections.abc import Iterable

_MARKER = re.compile(r"<!-- ribbit:([0-9a-f]{32}) -->")


def with_marker(body: str, marker: str) -> str:
    """``body`` with an HTML comment both forges render as nothing."""
    return f"{body}\n\n<!-- ribbit:{marker} -->"


def find_marked(comments: Iterable[tuple[int, str]], marker: str) -> int | None:
    """The id of the first comment carrying ``marker``."""
    for comment_id, body in comments:
        match = _MARKER.search(body)
        if match and match.group(1) == marker:
            return comment_id
    return None


def marker_of(body: str) -> str | None:
    """The marker a comment carries, if any."""
    match = _MARKER.search(body)
    return match.group(1) if match else None
