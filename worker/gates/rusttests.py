"""Rust's unit tests live in the code's own files (a ``#[cfg(test)] mod tests`` beside
the code), so "the patch's tests against the old code" cannot be built file by file as
it is for other languages (worker/gates/evidence.py). This module builds it change by
change: the base file with only those of the patch's changes that lie wholly inside
test code (a ``#[cfg(test)]`` module, or a ``#[test]`` function) in both versions.

Test code is found by braces, not by a Rust parser: braces in strings, chars and
comments are left out of the count, and a region whose braces do not close is no
region. A change that touches code and tests at once stays out (the old code keeps
its own lines), so the tree never runs the patch's code; a test that then does not
compile or run shows nothing, which is the honest outcome.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

_ATTRIBUTE_RE = re.compile(r"^\s*#\[")
_CFG_TEST_RE = re.compile(r"^\s*#\[cfg\(test\)\]\s*$")
_TEST_ATTR_RE = re.compile(r"^\s*#\[(?:\w+::)*test\]\s*$")  # #[test], #[tokio::test]
_MOD_OR_FN_RE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:mod|fn)\s+\w+")
# What does not count toward braces: line comments, strings, and char literals.
_NOT_CODE_RE = re.compile(r'//.*$|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'')


def rust_test_lines(lines: list[str]) -> set[int]:
    """The 0-based indexes of the lines that are test code: each ``#[cfg(test)]`` item
    and each ``#[test]`` function, from its first attribute to its closing brace."""
    inside: set[int] = set()
    for start, line in enumerate(lines):
        if start in inside or not (_CFG_TEST_RE.match(line) or _TEST_ATTR_RE.match(line)):
            continue
        item = start
        while item < len(lines) and _ATTRIBUTE_RE.match(lines[item]):
            item += 1
        if item == len(lines) or not _MOD_OR_FN_RE.match(lines[item]):
            continue
        end = _closing_line(lines, item)
        if end is not None:
            inside.update(range(start, end + 1))
    return inside


def _closing_line(lines: list[str], first: int) -> int | None:
    """The line where the braces opened from line ``first`` on close again."""
    depth, opened = 0, False
    for index in range(first, len(lines)):
        code = _NOT_CODE_RE.sub("", lines[index])
        for char in code:
            if char == "{":
                depth, opened = depth + 1, True
            elif char == "}":
                depth -= 1
                if opened and depth == 0:
                    return index
    return None


def only_test_changes(base: str, patched: str) -> str | None:
    """The base file's text with the patch's changes to its test code only, or None when
    the patch changes no test code in it (then the base file is that file)."""
    old, new = base.splitlines(keepends=True), patched.splitlines(keepends=True)
    old_tests, new_tests = rust_test_lines(old), rust_test_lines(new)
    out: list[str] = []
    taken = False
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        # Blank lines change no code: a test added between two others brings some.
        in_tests = all(i in old_tests or not old[i].strip() for i in range(i1, i2)) and all(
            j in new_tests or not new[j].strip() for j in range(j1, j2)
        )
        if tag != "equal" and in_tests:
            out += new[j1:j2]
            taken = True
        else:
            out += old[i1:i2]
    return "".join(out) if taken else None
