"""Rust's unit tests live in the code's own files (a ``#[cfg(test)] mod tests`` beside
the code), so "the patch's tests against the old code" cannot be built file by file as
it is for other languages (worker/gates/evidence.py). This module builds it change by
change: the base file with only those of the patch's changes that lie wholly inside
test code (a ``#[cfg(test)]`` item: a module, a function, or a table such as rust-shlex's
``#[cfg(test)] static SPLIT_TEST_ITEMS``; or a ``#[test]`` function) in both versions.

Test code is found by brackets, not by a Rust parser: brackets in strings, chars and
comments are left out of the count. An item ends where the brace that opened its body
closes, or at a ``;`` outside all brackets (a ``static``, ``const`` or ``use``); an item
that never ends is no region. A change that touches code and tests at once stays out
(the old code keeps its own lines), so the tree never runs the patch's code; a test that
then does not compile or run shows nothing, which is the honest outcome.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

_ATTRIBUTE_RE = re.compile(r"^\s*#\[")
_CFG_TEST_RE = re.compile(r"^\s*#\[cfg\(test\)\]\s*$")
_TEST_ATTR_RE = re.compile(r"^\s*#\[(?:\w+::)*test\]\s*$")  # #[test], #[tokio::test]
# The items a #[cfg(test)] can make test code; #[test] only ever marks a fn.
_ITEM_RE = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|const|unsafe)\s+)*"
    r"(?:mod|fn|static|const|struct|enum|impl|use|type|trait)\b"
)
_FN_RE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|const|unsafe)\s+)*fn\s+\w+")
_OPENING, _CLOSING = "{[(", "}])"
# What does not count toward brackets: line comments, strings, and char literals.
_NOT_CODE_RE = re.compile(r'//.*$|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'')


def rust_test_lines(lines: list[str]) -> set[int]:
    """The 0-based indexes of the lines that are test code: each ``#[cfg(test)]`` item
    and each ``#[test]`` function, from its first attribute to the line it ends on."""
    inside: set[int] = set()
    for start, line in enumerate(lines):
        if start in inside or not (_CFG_TEST_RE.match(line) or _TEST_ATTR_RE.match(line)):
            continue
        item_re = _ITEM_RE if _CFG_TEST_RE.match(line) else _FN_RE
        item = start
        while item < len(lines) and _ATTRIBUTE_RE.match(lines[item]):
            item += 1
        if item == len(lines) or not item_re.match(lines[item]):
            continue
        end = _item_end(lines, item)
        if end is not None:
            inside.update(range(start, end + 1))
    return inside


def _item_end(lines: list[str], first: int) -> int | None:
    """The line where the item starting on line ``first`` ends: its body's braces close,
    or a ``;`` stands outside all brackets. Brackets of other kinds (a type's ``[u8]``,
    a signature's ``()``) only nest."""
    depth = 0
    for index in range(first, len(lines)):
        for char in _NOT_CODE_RE.sub("", lines[index]):
            if char in _OPENING:
                depth += 1
            elif char in _CLOSING:
                depth -= 1
                if char == "}" and depth == 0:
                    return index
            elif char == ";" and depth == 0:
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
