"""Whether the gates' report holds a patch back from the forge, and what the issue and
the job's record then say: the gates refused it (hygiene or Semgrep block even a draft;
a failing test blocks unless the repository asks for failing drafts), or no test shows
the fix and the repository refuses unverified patches. solve.py acts on the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.store.failure import FailureReason, Fixer
from bot.store.records.gate_report import GateReport, GateResult, Verdict
from worker.gates.verdict import TestVerdict
from worker.repo_config import CONFIG_PATH, RepoConfig
from worker.sandbox.failure import output_fixer


@dataclass(frozen=True)
class HeldBack:
    """A patch that gets no pull request."""

    message: str  # what held it back, one paragraph
    reason: str  # the job's one-line failure reason
    failure: FailureReason  # the job's stored reason; the status comment shows it


def held_back(report: GateReport, verdict: TestVerdict, config: RepoConfig) -> HeldBack | None:
    """Why the patch the gates judged is not published, or None: it is (a pass, or a
    failing draft the repository asked for)."""
    draft_on_failure = config.gates.draft_on_failure
    if report.refused and not (draft_on_failure and report.may_push):
        return _gates_failed(report, verdict, draft_on_failure=draft_on_failure)
    if report.verdict is Verdict.UNVERIFIED and config.gates.unverified == "refuse":
        message = (
            "Not verified: no test fails without this patch, and this repository "
            f"refuses unverified patches (`gates.unverified: refuse` in `{CONFIG_PATH}`), "
            "so no PR was opened."
        )
        return HeldBack(
            message,
            "gates: not verified (the repository refuses unverified patches)",
            FailureReason.of(message),
        )
    return None


def _gates_failed(report: GateReport, verdict: TestVerdict, *, draft_on_failure: bool) -> HeldBack:
    """Which gates failed, and whether the base's own tests failed too (then the
    repository's test set-up is blamed, not the patch)."""
    why = (
        " (hygiene or Semgrep blocked it, so it is not pushed even with gates.draft_on_failure)"
        if draft_on_failure
        else ""
    )
    blame = (
        f"The gates did not pass (`{report.summary_line()}`), but the base tree's "
        f"tests fail too ({verdict.base_reason}): the repository's test set-up "
        f"looks broken rather than the patch. No PR was opened{why}."
        if verdict.base_broken
        else f"The patch did not pass the gates "
        f"(`{report.summary_line()}`), so no PR was opened{why}."
    )
    return HeldBack(
        blame, f"gates failed: {report.summary_line()}", gates_failure(blame, report, verdict)
    )


def gates_failure(message: str, report: GateReport, verdict: TestVerdict) -> FailureReason:
    """The stored reason of a refusal: ``message`` and the first blocking finding's own
    words (the summary line only counts them), the tail of the refusing gate's log, and
    who can fix a broken base (the patch's own failures have no one but the patch)."""
    refused = [r for r in report.results if not r.passed]
    found = next(
        ((r, f) for r in refused for f in r.findings if f.severity == "error"),
        None,
    )
    what = (
        message
        if found is None
        else f"{message} First finding ({found[0].name}): {found[1].message}"
    )
    result = found[0] if found is not None else (refused[0] if refused else None)
    output = "" if result is None else _own_output(result)
    fixer = None
    if verdict.base_broken:
        fixer = output_fixer(output) or Fixer(
            "maintainer",
            "test",
            "the base tree's tests fail too: check that `test` runs the suite and `setup` "
            "installs what it needs.",
        )
    return FailureReason.of(what, output, fixer=fixer)


def _own_output(result: GateResult) -> str:
    """The patched run's part of the test gate's log (the run that refused the patch);
    another gate's whole log."""
    logs = result.logs
    if result.name == "tests" and "--- after ---\n" in logs:
        logs = logs.split("--- after ---\n", 1)[1].split("\n--- ", 1)[0]
    return logs
