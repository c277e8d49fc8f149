"""All gates' results for one patch, and the forms they are shown in: JSON for the
job's record, the outcome store and trainer, Markdown for PR bodies, SARIF for
code-scanning tools.

The gates (worker/gates/) write these records; the job's record keeps
:meth:`GateReport.to_dict`, and its readers (the admin and reviewer pages, the line
annotations) read it back with :meth:`GateReport.from_dict`: one schema, here in bot/, the
bottom layer. Reading is tolerant, as rows outlive the code that wrote them: a value of
the wrong type reads as absent, an entry of the wrong shape is skipped.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

from bot.store.tolerant import opt_int

Severity = Literal["info", "warning", "error"]

# Which judge made a verdict: the gates, the grader and the trainer's reward share one
# (worker/gates/evidence.py), so one version names it everywhere. Stored with every
# report the gates write, and with every held-out score (trainer/promotion.py reads it
# from here): scores or verdicts by different judges are never compared, and a report
# without one was judged before this was recorded (`ribbit prs rejudge` finds its PR).
# Bump it whenever the verdict changes meaning (trainer/rl/reward.py, the gates, the
# grader's checks), so what was judged before is re-judged, not trusted.
# reward-2: 1.0 only for a verified patch (fail-to-pass evidence), 0 for a tampered run,
# the test files a rollout touched put back as the base has them (issues #31, #38).
# reward-3: a test absent from the old-code run is evidence only when its module could
# not load there; Go, Rust and node code that ends its test process with success or
# writes its runner's lines, and a test command that leaves processes behind, block.
# reward-4: for mocha and node's test runner, a test absent from the old-code run is
# evidence only as each runner shows a file that did not load (never for mocha, whose
# run stops with no report then; node's case named by the file's path); a watched
# pytest run is one process (pytest-xdist and --forked off), and a run with results
# another process sent shows nothing.
# reward-5: a watched pytest run holds all of the runner's code still (every module of
# pytest and its plugins, pluggy, unittest, contextlib; what a function does as well as
# which function it is), a test function that raised in its call yet reports a pass is
# tamper (swallowed), and so is test code that is not what its file compiles to, or a
# test file changed while the tests ran (test-code), and pytest's config, session or
# plugin manager reached from where pytest leaves them (runner-reach).
# reward-6: a watched run whose interpreter starts differently from the base run's (a
# .pth file, a module one imports, sitecustomize, pytest's or an entry-point plugin's
# files, or any environment file changed after its restore: what a set-up step over the
# patched tree wrote), and a test file or test configuration that step changed, are
# tamper (startup); a copy of the package pip installed from the workspace is the
# repository's code to the watch.
# reward-7: a Cargo workspace's tests are named under their member's folder (one crate's
# test no longer stands for another's of the same name, and a member's new test is
# found); a set-up's copy of the package is installed again with the build backend the
# set-up fetched (such repositories' patches were all refused as a failed set-up).
JUDGE_VERSION = "reward-7"


class Verdict(StrEnum):
    """What the gates' run shows about a patch: the one scale every reader uses (the PR
    body, the status comment, the forge's statuses, ``ribbit gates``, the trainer's
    reward). Only ``VERIFIED`` is "passed" anywhere."""

    # A test fails (or does not exist) on the base code with the patch's own tests, and
    # passes with the patch; nothing regressed; no gate found anything blocking.
    VERIFIED = "verified"
    # Nothing regressed and nothing blocking was found, but no test shows the fix (a
    # docs-only patch, a new test that already passed on the old code).
    UNVERIFIED = "unverified"
    REFUSED = "refused"  # a gate blocked the patch
    # A report stored before the gates looked for evidence: it only knows passed/failed.
    BEFORE_EVIDENCE = "judged before evidence"

    @classmethod
    def of(cls, *, blocked: bool, evidence: bool) -> Verdict:
        """The level of a judged patch: ``blocked`` when anything refuses it, ``evidence``
        when at least one test goes from failing (or absent) without it to passing with it."""
        if blocked:
            return cls.REFUSED
        return cls.VERIFIED if evidence else cls.UNVERIFIED

    @property
    def word(self) -> str:
        """How the report's heading says it: only a verified patch "passed"."""
        return {
            Verdict.VERIFIED: "passed",
            Verdict.UNVERIFIED: "not verified",
            Verdict.REFUSED: "failed",
            Verdict.BEFORE_EVIDENCE: "judged before evidence",
        }[self]

    @property
    def heading(self) -> str:
        """The Markdown report's first line (a PR body's, found again by `ribbit prs rejudge`)."""
        return f"### Ribbit gates: {self.word}"


@dataclass(frozen=True)
class Finding:
    gate: str
    rule: str
    message: str
    path: str | None = None
    line: int | None = None
    severity: Severity = "error"

    @classmethod
    def from_dict(cls, data: Any, *, gate: str = "") -> Finding | None:
        """A stored finding (None for a non-dict); ``gate`` names it when it does not
        itself, and an unknown severity reads as an error."""
        if not isinstance(data, dict):
            return None
        severity = data.get("severity")
        return cls(
            gate=str(data.get("gate") or gate),
            rule=str(data.get("rule") or ""),
            message=str(data.get("message") or ""),
            path=data["path"] if isinstance(data.get("path"), str) else None,
            line=opt_int(data.get("line")),
            severity=severity if severity in ("info", "warning") else "error",
        )


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    findings: tuple[Finding, ...] = ()
    logs: str = ""
    duration_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)  # gate-specific, JSON-safe
    # The test ids that fail (or do not exist) on the base code with the patch's own
    # tests and pass with the patch (worker/gates/evidence.py): what makes a verdict
    # verified. Only the test gate finds any.
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        # JSON's shapes (a list, not the tuple), so a stored report reads back equal; no
        # evidence, no key, so a report stored before there was any writes back the same.
        data = {**asdict(self), "findings": [asdict(f) for f in self.findings]}
        data.pop("evidence")
        return data | ({"evidence": list(self.evidence)} if self.evidence else {})

    @classmethod
    def from_dict(cls, data: Any) -> GateResult | None:
        """A stored result; None when it is not a dict or does not say whether it passed."""
        if not isinstance(data, dict) or not isinstance(data.get("passed"), bool):
            return None
        name = data.get("name")
        name = name if isinstance(name, str) else ""
        findings = (Finding.from_dict(f, gate=name) for f in data.get("findings") or ())
        logs, duration, details = data.get("logs"), data.get("duration_s"), data.get("details")
        evidence = data.get("evidence")
        return cls(
            name=name,
            passed=data["passed"],
            findings=tuple(f for f in findings if f is not None),
            logs=logs if isinstance(logs, str) else "",
            duration_s=float(duration) if isinstance(duration, int | float) else 0.0,
            details=details if isinstance(details, dict) else {},
            evidence=tuple(
                t for t in (evidence if isinstance(evidence, list) else ()) if isinstance(t, str)
            ),
        )


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_URI = "https://github.com/ribbit-bot/ribbit"
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_MAX_MD_FINDINGS = 50


UNVERIFIED_NOTE = (
    "**Not verified: no test fails without this patch.** Nothing regressed and no gate "
    "found anything blocking, but no test shows that the patch fixes the issue."
)

# Gates whose block means the patch itself is unsafe to put where CI runs.
_NEVER_PUSHED = frozenset({"hygiene", "semgrep"})
_UNJUDGED = frozenset({"gate-error", "patch-does-not-apply", "gate-timeout"})


@dataclass(frozen=True)
class GateReport:
    passed: bool  # the verdict is verified (a stored report from before: every gate passed)
    results: list[GateResult] = field(default_factory=list)
    duration_s: float = 0.0
    verdict: Verdict = Verdict.BEFORE_EVIDENCE
    # The judge that made the verdict (JUDGE_VERSION when written); None for a report
    # stored before judges were recorded.
    judge: str | None = None

    @classmethod
    def from_results(cls, results: list[GateResult], duration_s: float) -> GateReport:
        verdict = Verdict.of(
            blocked=not results or not all(r.passed for r in results),
            evidence=any(r.evidence for r in results),
        )
        return cls(
            passed=verdict is Verdict.VERIFIED,
            results=results,
            duration_s=duration_s,
            verdict=verdict,
            judge=JUDGE_VERSION,
        )

    @property
    def current_judge(self) -> bool:
        """Whether today's judge made this verdict (not one before evidence or an older one)."""
        return self.judge == JUDGE_VERSION

    def result(self, name: str) -> GateResult | None:
        return next((r for r in self.results if r.name == name), None)

    @property
    def refused(self) -> bool:
        """Whether a gate blocked the patch (an unverified patch is not refused)."""
        if self.verdict is Verdict.BEFORE_EVIDENCE:
            return not self.passed
        return self.verdict is Verdict.REFUSED

    @property
    def may_push(self) -> bool:
        """Whether a failing patch may still go to a branch as a draft
        (``draft_on_failure``): never when hygiene or Semgrep blocked it, or when a gate
        crashed or could not judge it; a branch of the repository is where CI runs."""
        if not self.refused:
            return True
        unsafe = any(not r.passed and r.name in _NEVER_PUSHED for r in self.results)
        unjudged = any(f.rule in _UNJUDGED for r in self.results for f in r.findings)
        return not (unsafe or unjudged)

    def to_dict(self) -> dict[str, Any]:
        judged = {} if self.verdict is Verdict.BEFORE_EVIDENCE else {"verdict": self.verdict.value}
        return {
            "passed": self.passed,
            **judged,  # a report read from before the levels writes back as it was
            **({} if self.judge is None else {"judge": self.judge}),
            "duration_s": round(self.duration_s, 3),
            "summary": self.summary_line(),
            "gates": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: Any) -> GateReport | None:
        """The report :meth:`to_dict` wrote (kept in a job's record); None when it is not
        one. Results of the wrong shape are left out."""
        if not isinstance(data, dict) or not isinstance(data.get("passed"), bool):
            return None
        entries = data.get("gates")
        results = (GateResult.from_dict(r) for r in (entries if isinstance(entries, list) else ()))
        duration = data.get("duration_s")
        stored = data.get("verdict")
        # No level (or an unknown one): written before the gates looked for evidence.
        verdict = Verdict(stored) if stored in set(Verdict) else Verdict.BEFORE_EVIDENCE
        judge = data.get("judge")
        return cls(
            passed=data["passed"] and verdict in (Verdict.VERIFIED, Verdict.BEFORE_EVIDENCE),
            results=[r for r in results if r is not None],
            duration_s=float(duration) if isinstance(duration, int | float) else 0.0,
            verdict=verdict,
            judge=judge if isinstance(judge, str) and judge else None,
        )

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False, default=str)

    def summary_line(self) -> str:
        parts = []
        for r in self.results:
            blocking = [f for f in r.findings if f.severity != "info"]
            mark = "✔" if r.passed else "✖"
            note = ""
            if not r.passed and blocking:
                noun = "new finding" if r.name == "semgrep" else "finding"
                note = f" ({len(blocking)} {noun}{'s' if len(blocking) != 1 else ''})"
            parts.append(f"{r.name} {mark}{note}")
        return " ".join(parts)

    def to_markdown(self) -> str:
        out = [self.verdict.heading, "", f"`{self.summary_line()}`", ""]
        if self.verdict is Verdict.UNVERIFIED:
            out += [UNVERIFIED_NOTE, ""]
        for r in self.results:
            out += _gate_markdown(r)
        return "\n".join(out).rstrip() + "\n"

    def to_sarif(self) -> dict[str, Any]:
        """SARIF 2.1.0: one run per gate, each finding a result, each rule described."""
        runs = []
        for r in self.results:
            rule_info: dict[str, Any] = r.details.get("rules", {}) if r.details else {}
            rule_ids = sorted({f.rule for f in r.findings})
            rules = []
            for rule_id in rule_ids:
                info = rule_info.get(rule_id, {})
                example = next(f for f in r.findings if f.rule == rule_id)
                rule: dict[str, Any] = {
                    "id": rule_id,
                    "shortDescription": {"text": info.get("short") or rule_id},
                    "fullDescription": {"text": info.get("message") or example.message},
                    "defaultConfiguration": {"level": _SARIF_LEVEL[example.severity]},
                }
                if info.get("tags"):
                    rule["properties"] = {"tags": info["tags"]}
                rules.append(rule)
            index = {rule_id: n for n, rule_id in enumerate(rule_ids)}
            runs.append(
                {
                    "tool": {
                        "driver": {
                            "name": f"ribbit-{r.name}",
                            "informationUri": TOOL_URI,
                            "rules": rules,
                        }
                    },
                    "results": [_sarif_result(f, index[f.rule]) for f in r.findings],
                    "properties": {"passed": r.passed},
                }
            )
        return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": runs}


def _sarif_result(f: Finding, rule_index: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.rule,
        "ruleIndex": rule_index,
        "level": _SARIF_LEVEL[f.severity],
        "message": {"text": f.message},
    }
    if f.path:
        physical: dict[str, Any] = {"artifactLocation": {"uri": f.path}}
        if f.line is not None and f.line >= 1:
            physical["region"] = {"startLine": f.line}
        result["locations"] = [{"physicalLocation": physical}]
    return result


def _md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def _gate_markdown(r: GateResult) -> list[str]:
    mark = "✔" if r.passed else "✖"
    out = [f"#### {mark} {r.name} ({r.duration_s:.1f} s)", ""]
    if r.name == "tests" and r.details:
        out += _tests_markdown(r.details)
    elif r.name == "semgrep" and r.details:
        d = r.details
        out += [
            f"New findings: {d.get('new', 0)}; already at the base commit: "
            f"{d.get('preexisting', 0)}; fixed by the patch: {d.get('fixed', 0)}.",
            "",
        ]
    if r.findings:
        out += ["| severity | rule | where | message |", "|---|---|---|---|"]
        for f in r.findings[:_MAX_MD_FINDINGS]:
            where = f"{f.path}:{f.line}" if f.path and f.line else (f.path or "")
            out.append(
                f"| {f.severity} | `{_md_cell(f.rule)}` | {_md_cell(where)} | "
                f"{_md_cell(f.message)} |"
            )
        if len(r.findings) > _MAX_MD_FINDINGS:
            out.append(f"\n…and {len(r.findings) - _MAX_MD_FINDINGS} more.")
        out.append("")
    elif r.passed:
        out += ["No findings.", ""]
    return out


def _run_cell(run: dict[str, Any]) -> str:
    if run.get("timed_out"):
        return "timed out"
    return f"exit {run.get('exit_code')}" + (" (after a rerun)" if run.get("reran") else "")


def _tests_markdown(d: dict[str, Any]) -> list[str]:
    out = []
    before, after = d.get("before") or {}, d.get("after") or {}
    if before or after:
        out += [
            "| | passed | failed | skipped | total | command |",
            "|---|---|---|---|---|---|",
        ]
        for label, run in (("before", before), ("after", after)):
            c = run.get("counts") or {}
            out.append(
                f"| {label} | {c.get('passed', '-')} | {c.get('failed', '-')} | "
                f"{c.get('skipped', '-')} | {c.get('total', '-')} | {_run_cell(run)} |"
            )
        out.append("")
    for key, title in (
        ("regressions", "Passed before, fail after"),
        ("target_failures", "Tests the issue is about that fail"),
        ("flaky", "Flaky (failed, then passed on a rerun)"),
    ):
        names = d.get(key) or []
        if names:
            out.append(f"{title}: " + ", ".join(f"`{_md_cell(n)}`" for n in names[:30]))
            out.append("")
    return out
