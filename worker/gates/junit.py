"""Per-test outcomes from JUnit XML, the one report format nearly every test runner
writes (pytest --junitxml, jest-junit, go-junit-report, surefire...).

The XML comes out of a sandbox, so it is untrusted: documents with a DOCTYPE are
refused outright (no entity expansion, no external entities), and size is capped.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Literal

Outcome = Literal["passed", "failed", "skipped"]
MAX_JUNIT_BYTES = 32 * 1024 * 1024


class JUnitError(ValueError):
    """Not a JUnit document we can read."""


@dataclass(frozen=True)
class TestCase:
    id: str  # "classname::name" (pytest: "tests.test_mod::test_x[1]")
    name: str
    classname: str
    outcome: Outcome
    message: str = ""

    @property
    def base_name(self) -> str:
        """The function name without parametrisation: ``test_x[1]`` -> ``test_x``."""
        return self.name.split("[", 1)[0]


def parse_junit(data: bytes) -> list[TestCase]:
    if len(data) > MAX_JUNIT_BYTES:
        raise JUnitError("JUnit report too large")
    head = data[:4096].lower()
    if b"<!doctype" in data.lower() or b"<!entity" in head:
        raise JUnitError("JUnit report with a DOCTYPE refused")
    try:
        root = ET.fromstring(data)  # noqa: S314 - see the module docstring
    except ET.ParseError as exc:
        raise JUnitError(f"not XML: {exc}") from None
    if root.tag not in {"testsuites", "testsuite"}:
        raise JUnitError(f"not a JUnit report (root <{root.tag}>)")
    cases = []
    for case in root.iter("testcase"):
        name = case.get("name", "")
        classname = case.get("classname", "")
        outcome: Outcome = "passed"
        message = ""
        for child in case:
            if child.tag in {"failure", "error"}:
                outcome = "failed"
                message = (child.get("message") or (child.text or "")).strip()[:500]
                break
            if child.tag == "skipped":
                outcome = "skipped"
        case_id = f"{classname}::{name}" if classname else name
        cases.append(
            TestCase(id=case_id, name=name, classname=classname, outcome=outcome, message=message)
        )
    return cases
