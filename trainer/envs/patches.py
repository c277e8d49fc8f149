"""Split a unified git diff by file, and tell test files from the rest."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

_HEADER = re.compile(r"^diff --git a/(?P<a>\S+) b/(?P<b>\S+)$")


@dataclass(frozen=True)
class FilePatch:
    path: str  # the new path (the old one for a deletion)
    text: str  # this file's whole section, header included

    @property
    def added_lines(self) -> list[str]:
        return [
            line[1:]
            for line in self.text.splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]


def split_by_file(diff: str) -> list[FilePatch]:
    sections: list[FilePatch] = []
    current: list[str] = []
    path = ""
    for line in diff.splitlines(keepends=True):
        match = _HEADER.match(line.rstrip("\n"))
        if match:
            if current:
                sections.append(FilePatch(path, "".join(current)))
            current, path = [line], match["b"]
        elif current:
            current.append(line)
    if current:
        sections.append(FilePatch(path, "".join(current)))
    return sections


def is_test_path(path: str) -> bool:
    """SWE-bench's rule of thumb: a test folder, or a test_/_test file, or conftest.py."""
    p = PurePosixPath(path)
    if any(part in {"test", "tests", "testing"} for part in p.parts[:-1]):
        return True
    name = p.name
    return (
        name.startswith("test_")
        or name.endswith(("_test.py", "_tests.py"))
        or (name == "conftest.py")
    )


def split_test_patch(diff: str) -> tuple[str, str]:
    """(code part, test part) of a diff."""
    code: list[str] = []
    tests: list[str] = []
    for section in split_by_file(diff):
        (tests if is_test_path(section.path) else code).append(section.text)
    return "".join(code), "".join(tests)
