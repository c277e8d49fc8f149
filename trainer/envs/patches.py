"""Split a unified git diff by file, and tell test files from the rest."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The gate's own rule (worker/gates/evidence.py): an environment's test_patch is what the
# test gate runs against the old code, so a solve job and an environment split a patch
# the same way (``*_test.go`` and ``*.test.ts`` files included).
from worker.gates.evidence import is_test_file as is_test_path

_HEADER = "diff --git "
# How git writes a name with unusual bytes (a quote, a control or non-ASCII character):
# C-quoted, non-ASCII bytes as octal escapes ("b/t\303\251st.py").
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"$')
_ESCAPE = re.compile(r"\\([0-7]{3}|.)")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13}


@dataclass(frozen=True)
class FilePatch:
    path: str  # the new path (the old one for a deletion)
    text: str  # this file's whole section, header included

    @property
    def added_lines(self) -> list[str]:
        # Only inside hunks: the "+++ b/path" header comes before the first "@@", and an
        # added line may itself start with "++" ("++i;").
        added: list[str] = []
        in_hunk = False
        for line in self.text.splitlines():
            in_hunk = in_hunk or line.startswith("@@")
            if in_hunk and line.startswith("+"):
                added.append(line[1:])
        return added


def split_by_file(diff: str) -> list[FilePatch]:
    sections: list[FilePatch] = []
    current: list[str] = []
    path = ""
    for line in diff.splitlines(keepends=True):
        if line.startswith(_HEADER):
            if current:
                sections.append(FilePatch(path, "".join(current)))
            current, path = [line], _new_path(line.rstrip("\r\n")[len(_HEADER) :])
        elif current:
            current.append(line)
    if current:
        sections.append(FilePatch(path, "".join(current)))
    return sections


def _new_path(names: str) -> str:
    """The new path in a header's ``a/<old> b/<new>``. A name may hold spaces (git leaves
    them unquoted) or be C-quoted; without a rename both names are the same, which tells
    where the first ends even when it holds " b/"."""
    quoted = _QUOTED.search(names)
    if quoted is not None:
        return _unquote(quoted.group(0)).removeprefix("b/")
    n, odd = divmod(len(names) - len("a/ b/"), 2)
    if not odd and names.startswith("a/") and names[2 : 2 + n] == names[5 + n :]:
        return names[5 + n :]
    return names.rsplit(" b/", 1)[-1]  # a rename: the last " b/" starts the new name


def _unquote(token: str) -> str:
    def byte(match: re.Match[str]) -> str:
        code = match.group(1)
        value = int(code, 8) if len(code) == 3 else _ESCAPES.get(code, ord(code))
        return chr(value)  # one char per byte (latin-1), decoded as UTF-8 below

    return _ESCAPE.sub(byte, token[1:-1]).encode("latin-1").decode("utf-8", "replace")


def split_test_patch(diff: str) -> tuple[str, str]:
    """(code part, test part) of a diff."""
    code: list[str] = []
    tests: list[str] = []
    for section in split_by_file(diff):
        (tests if is_test_path(section.path) else code).append(section.text)
    return "".join(code), "".join(tests)
