"""Gate findings where reviewers look: on the changed lines of the pull request.

Each finding that points into the patch becomes an :class:`Annotation` on a line the
patch adds (GitHub shows them in a check run beside the commit status; GitLab as merge
request discussions on the lines). A finding on a line the patch does not add cannot be
placed on the diff and stays in the report only; a finding that names a changed file
but no line (a failing test in a test file the patch changed) goes on that file's first
added line. The text comes from the patch and the repository's tests, so it is
sanitised like everything else the bot posts.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

from bot.forges.base import (
    Annotation,
    AnnotationLevel,
    Forge,
    ForgeError,
    ForgeUnavailable,
    GateReview,
    PullRequestRef,
)
from bot.forges.sanitize import sanitize_forge_text
from bot.store.records.gate_report import Finding, GateReport
from worker.gates.patch import PatchParseError, parse_patch

log = logging.getLogger(__name__)

_LEVELS: dict[str, AnnotationLevel] = {"error": "failure", "warning": "warning", "info": "notice"}


def line_annotations(report: GateReport | None, diff: str) -> tuple[Annotation, ...]:
    """The report's findings (kept in the job's record), and its failing tests, placed on
    the patch's lines."""
    if report is None:
        return ()
    try:
        patch = parse_patch(diff)
    except PatchParseError:
        return ()
    added = {c.path: list(c.added) for c in patch.files if c.added}
    findings = [f for r in report.results for f in r.findings] + failing_tests(report, added)
    return tuple(_place(findings, {p: [n for n, _t in lines] for p, lines in added.items()}))


def failing_tests(report: GateReport, added: dict[str, list[tuple[int, str]]]) -> list[Finding]:
    """One finding per test that fails with the patch (the tests gate's regressions and
    new failures) in a file the patch changes, on the line that defines the test when
    the patch adds it. The gate's own findings name them only in a sentence."""
    tests = report.result("tests")
    details = tests.details if tests is not None else {}
    found = []
    for key in ("regressions", "new_failures"):
        for test_id in details.get(key) or []:
            if not isinstance(test_id, str):
                continue
            path, _, rest = test_id.partition("::")
            if not rest or path not in added:
                continue
            name = rest.rsplit("::", 1)[-1].split("[", 1)[0]
            line = next(
                (
                    n
                    for n, text in added[path]
                    if re.match(rf"\s*(async\s+)?def\s+{re.escape(name)}\b", text)
                ),
                None,
            )
            verb = "passed before the patch and fails" if key == "regressions" else "fails"
            found.append(
                Finding(
                    gate="tests",
                    rule="test-regression" if key == "regressions" else "test-fails",
                    message=f"`{test_id}` {verb} with the patch.",
                    path=path,
                    line=line,
                )
            )
    return found


def _place(findings: list[Finding], added: dict[str, list[int]]) -> Iterator[Annotation]:
    seen = set()
    for f in findings:
        lines = added.get(f.path or "")
        if not lines:
            continue
        if f.line is None:
            line = lines[0]
        elif f.line in lines:
            line = f.line
        else:
            continue
        title = sanitize_forge_text(f"{f.gate}: {f.rule}" if f.rule else f.gate)
        note = Annotation(
            path=f.path or "",
            line=line,
            level=_LEVELS[f.severity],
            title=title,
            message=sanitize_forge_text(f.message) or title,
        )
        if note not in seen:  # one finding reported twice (before and after) shows once
            seen.add(note)
            yield note


def gate_review(
    *,
    job_id: str,
    head_sha: str,
    passed: bool,
    summary_line: str,
    report_md: str,
    gates: GateReport | None,
    diff: str,
    details_url: str | None,
    unverified: bool = False,
) -> GateReview:
    return GateReview(
        key=f"ribbit-{job_id}-{head_sha}",  # one check run per job and commit
        passed=passed,
        unverified=unverified and not passed,
        title=sanitize_forge_text(f"Ribbit gates: {summary_line}"),
        summary=sanitize_forge_text(report_md),
        annotations=line_annotations(gates, diff),
        details_url=details_url,
    )


def publish(forge: Forge, ref: PullRequestRef, head_sha: str, review: GateReview) -> None:
    """Publish, or log why not: a token that may not create check runs (GitHub allows
    only Apps to) must not fail a job whose PR and commit status are already there. An
    outage is raised, so the job is retried; publishing again is idempotent."""
    try:
        forge.publish_gate_review(ref, head_sha, review)
    except ForgeUnavailable:
        raise
    except ForgeError as exc:
        log.warning("gate findings not shown on %s: %s", ref, exc)
