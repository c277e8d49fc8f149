"""Per-test outcomes from pytest's JUnit XML (``-o junit_family=xunit1``).

xunit1 keeps each test case's ``file`` attribute, which turns ``classname`` back
into a pytest node id (``tests/test_x.py::TestCls::test_y``), the form SWE-bench
uses in FAIL_TO_PASS / PASS_TO_PASS for pytest repositories.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Literal

Outcome = Literal["passed", "failed", "error", "skipped"]


class JUnitError(ValueError):
    """The report is missing or not JUnit XML."""


def parse_junit(xml_text: str) -> dict[str, Outcome]:
    try:
        # The report comes out of the sandbox (untrusted). ElementTree never resolves
        # external entities, and expat >= 2.4.1 (Python 3.11 ships 2.5) bounds entity
        # expansion, so the attacks defusedxml guards against do not apply here.
        root = ET.fromstring(xml_text)  # noqa: S314
    except ET.ParseError as exc:
        raise JUnitError(f"not JUnit XML: {exc}") from None
    outcomes: dict[str, Outcome] = {}
    for case in root.iter("testcase"):
        outcomes[_node_id(case)] = _outcome(case)
    return outcomes


def _node_id(case: ET.Element) -> str:
    name = case.get("name", "")
    classname = case.get("classname", "")
    file = case.get("file")
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file[: -len(".py")].replace("/", ".") if file.endswith(".py") else file
    rest = classname[len(module) :].lstrip(".") if classname.startswith(module) else ""
    return "::".join(part for part in (file, *rest.split("."), name) if part)


def _outcome(case: ET.Element) -> Outcome:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "error"
    if "failure" in tags:
        return "failed"
    if "skipped" in tags:
        return "skipped"
    return "passed"
