from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from bot.store.records.gate_report import Finding, GateResult
from tests.support import require_service
from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from worker.gates import GateReport, default_gates, run_gates
from worker.gates.base import GateContext
from worker.gates.hygiene import HygieneGate
from worker.gates.semgrep import SemgrepGate, find_semgrep
from worker.gates.tests import TestGate

BASE = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
}

# The parts of SARIF 2.1.0 that code-scanning uploads insist on.
SARIF_MINIMAL_SCHEMA = {
    "type": "object",
    "required": ["version", "runs", "$schema"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "shortDescription"],
                                        },
                                    }
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "message", "level"],
                            "properties": {
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {"type": "object", "required": ["text"]},
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation"],
                                                "properties": {
                                                    "region": {
                                                        "type": "object",
                                                        "required": ["startLine"],
                                                        "properties": {
                                                            "startLine": {
                                                                "type": "integer",
                                                                "minimum": 1,
                                                            }
                                                        },
                                                    }
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


class CrashingGate:
    name = "crashy"

    def run(self, ctx: GateContext) -> GateResult:
        raise RuntimeError("boom")


class FixedGate:
    def __init__(self, name: str, passed: bool, findings: tuple[Finding, ...] = ()) -> None:
        self.name, self._passed, self._findings = name, passed, findings

    def run(self, ctx: GateContext) -> GateResult:
        return GateResult(name=self.name, passed=self._passed, findings=self._findings)


def _ctx(tmp_path: Path, changes: dict[str, str | bytes | None]) -> GateContext:
    repo, base = repo_with(tmp_path, BASE)
    return make_ctx(repo, base, make_patch(repo, changes))


def test_default_gates_are_tests_semgrep_hygiene(tmp_path: Path) -> None:
    gates = default_gates(_ctx(tmp_path, {"calc.py": "x = 1\n"}))
    assert [type(g) for g in gates] == [TestGate, SemgrepGate, HygieneGate]


def test_run_gates_turns_a_crash_into_a_failed_result(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, {"calc.py": "x = 1\n"})
    report = run_gates(ctx, [CrashingGate(), HygieneGate()])
    crashed, hygiene = report.results
    assert not report.passed
    assert not crashed.passed and crashed.findings[0].rule == "gate-error"
    assert "boom" in crashed.findings[0].message and "RuntimeError" in crashed.logs
    assert hygiene.passed


def test_run_gates_fails_every_gate_when_patch_does_not_apply(tmp_path: Path) -> None:
    repo, base = repo_with(tmp_path, BASE)
    patch = make_patch(repo, {"calc.py": "def add(a, b):\n    return a + b\n"})
    patch = patch.replace("return a - b", "return a * b")  # context that is not there
    report = run_gates(make_ctx(repo, base, patch))
    assert [r.name for r in report.results] == ["tests", "semgrep", "hygiene"]
    for result in report.results:
        assert not result.passed
        (finding,) = [f for f in result.findings if f.rule == "patch-does-not-apply"]
        assert "does not apply" in finding.message and base[:12] in finding.message
    assert report.summary_line().count("✖") == 3


def test_run_gates_rejects_empty_or_garbage_patch(tmp_path: Path) -> None:
    repo, base = repo_with(tmp_path, BASE)
    for patch in ("", "this is not a diff\n"):
        report = run_gates(make_ctx(repo, base, patch), [SemgrepGate(), HygieneGate()])
        assert not report.passed
        assert all("empty" in r.findings[0].message for r in report.results)


def test_run_gates_end_to_end_on_a_good_fix(tmp_path: Path) -> None:
    require_service(find_semgrep() is not None, "semgrep")
    ctx = _ctx(
        tmp_path,
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": BASE["tests/test_calc.py"]
            + "\n\ndef test_add():\n    assert add(2, 2) == 4\n",
        },
    )
    report = run_gates(ctx)
    assert report.passed, report.to_markdown()
    assert report.summary_line() == "tests ✔ semgrep ✔ hygiene ✔"


def _sample_report() -> GateReport:
    findings = (
        Finding(
            gate="semgrep",
            rule="ribbit.code-injection.eval-exec",
            message="eval | bad",
            path="app/x.py",
            line=3,
        ),
        Finding(
            gate="semgrep",
            rule="ribbit.tls.verify-disabled",
            message="tls",
            path="a.py",
            line=1,
            severity="warning",
        ),
    )
    semgrep = GateResult(
        name="semgrep",
        passed=False,
        findings=findings,
        details={
            "new": 2,
            "preexisting": 1,
            "fixed": 0,
            "rules": {
                "ribbit.code-injection.eval-exec": {
                    "short": "eval",
                    "message": "m",
                    "tags": ["code-injection"],
                }
            },
        },
    )
    tests = GateResult(
        name="tests",
        passed=True,
        details={
            "before": {
                "counts": {"passed": 2, "failed": 1, "skipped": 0, "total": 3},
                "exit_code": 1,
                "reran": True,
            },
            "after": {
                "counts": {"passed": 3, "failed": 0, "skipped": 0, "total": 3},
                "exit_code": 0,
            },
            "regressions": [],
            "target_failures": [],
            "flaky": ["tests.test_a::test_net"],
        },
    )
    hygiene = GateResult(
        name="hygiene",
        passed=True,
        findings=(
            Finding(gate="hygiene", rule="made-executable", message="x", severity="warning"),
        ),
    )
    return GateReport.from_results([tests, semgrep, hygiene], 1.5)


def test_report_summary_line() -> None:
    assert _sample_report().summary_line() == "tests ✔ semgrep ✖ (2 new findings) hygiene ✔"


def test_report_json_shape() -> None:
    data = json.loads(_sample_report().to_json())
    assert data["passed"] is False
    assert [g["name"] for g in data["gates"]] == ["tests", "semgrep", "hygiene"]
    semgrep = data["gates"][1]
    assert semgrep["passed"] is False
    assert semgrep["findings"][0] == {
        "gate": "semgrep",
        "rule": "ribbit.code-injection.eval-exec",
        "message": "eval | bad",
        "path": "app/x.py",
        "line": 3,
        "severity": "error",
    }


def test_report_markdown_has_a_table_per_gate_and_names_flaky_tests() -> None:
    md = _sample_report().to_markdown()
    assert md.startswith("### Ribbit gates: failed")
    for gate in ("tests", "semgrep", "hygiene"):
        assert f" {gate} (" in md
    assert "| before | 2 | 1 | 0 | 3 | exit 1 (after a rerun) |" in md
    assert "| after | 3 | 0 | 0 | 3 | exit 0 |" in md
    assert "`tests.test_a::test_net`" in md
    assert "| error | `ribbit.code-injection.eval-exec` | app/x.py:3 | eval \\| bad |" in md
    assert "already at the base commit: 1" in md


def test_report_sarif_is_valid_minimal_sarif() -> None:
    sarif = _sample_report().to_sarif()
    jsonschema.validate(sarif, SARIF_MINIMAL_SCHEMA)
    runs = {run["tool"]["driver"]["name"]: run for run in sarif["runs"]}
    semgrep = runs["ribbit-semgrep"]
    assert [r["ruleId"] for r in semgrep["results"]] == [
        "ribbit.code-injection.eval-exec",
        "ribbit.tls.verify-disabled",
    ]
    assert semgrep["results"][1]["level"] == "warning"
    rules = semgrep["tool"]["driver"]["rules"]
    assert [rules[r["ruleIndex"]]["id"] for r in semgrep["results"]] == [
        r["ruleId"] for r in semgrep["results"]
    ]
    assert rules[0]["properties"]["tags"] == ["code-injection"]
    assert runs["ribbit-hygiene"]["results"][0]["level"] == "warning"
    assert "locations" not in runs["ribbit-hygiene"]["results"][0]


def test_report_may_push_never_a_hygiene_or_semgrep_block() -> None:
    from bot.store.records.gate_report import Finding, GateReport, GateResult

    def result(name: str, passed: bool, rule: str = "x") -> GateResult:
        findings = () if passed else (Finding(gate=name, rule=rule, message="m"),)
        return GateResult(name=name, passed=passed, findings=findings)

    tests_only = GateReport.from_results(
        [result("tests", False), result("semgrep", True), result("hygiene", True)], 0.0
    )
    assert tests_only.may_push
    for blocked in ("semgrep", "hygiene"):
        report = GateReport.from_results(
            [result("tests", True), result(blocked, False), result("x", True)], 0.0
        )
        assert not report.may_push, blocked
    crashed = GateReport.from_results([result("tests", False, "gate-error")], 0.0)
    assert not crashed.may_push


def test_run_gates_stops_when_cancelled_or_out_of_budget(tmp_path: Path) -> None:
    import dataclasses
    import threading

    from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
    from worker.gates import run_gates
    from worker.gates.hygiene import HygieneGate
    from worker.gates.tests import TestGate

    repo, base = repo_with(tmp_path, {"a.py": "x = 1\n"})
    ctx = make_ctx(repo, base, make_patch(repo, {"a.py": "x = 2\n"}))
    cancel = threading.Event()
    cancel.set()
    report = run_gates(dataclasses.replace(ctx, cancel=cancel), [TestGate(), HygieneGate()])
    assert not report.passed and not report.may_push
    assert {f.rule for r in report.results for f in r.findings} == {"gate-cancelled"}
    spent = run_gates(dataclasses.replace(ctx, deadline=0.0), [TestGate(), HygieneGate()])
    assert {f.rule for r in spent.results for f in r.findings} == {"gate-timeout"}
