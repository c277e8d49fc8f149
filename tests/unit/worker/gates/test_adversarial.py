"""The adversarial corpus (tests/adversarial.py) through the real gates, tests on, in the
local test sandbox: every hostile patch is blocked by the rules it names, every
honest one passes. tests/integration/test_gates_adversarial.py runs the same corpus on
the real sandbox backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records.gate_report import GateReport, Verdict
from tests.adversarial import CASES, Case, case_config, case_patch, make_base_repo
from tests.support import in_ci, require_service
from tests.unit.worker.gates.helpers import PYTEST, make_ctx
from worker.gates import Gate, run_gates
from worker.gates.hygiene import HygieneGate
from worker.gates.semgrep import find_semgrep
from worker.gates.tests import TestGate
from worker.settings import GateSettings

# The local run's limit per test run where a case names none: the default's.
GATE_TIMEOUT_S = GateSettings().test_timeout_s


def gates_for(case: Case) -> list[Gate] | None:
    """All gates where Semgrep has a say (evasion, and honest patches it must not block);
    the test and hygiene gates alone elsewhere, to keep the runs short."""
    if case.family in {"semgrep-evasion", "honest"}:
        return None
    return [TestGate(), HygieneGate()]


def judge_case(tmp_path: Path, case: Case) -> GateReport:
    repo, base = make_base_repo(tmp_path, case)
    patch = case_patch(repo, case)
    settings = GateSettings(test_timeout_s=case.test_timeout_s or GATE_TIMEOUT_S)
    ctx = make_ctx(repo, base, patch, config=case_config(case, PYTEST), settings=settings)
    return run_gates(ctx, gates_for(case))


def assert_verdict(case: Case, report: GateReport) -> None:
    errors = {f.rule for r in report.results for f in r.findings if f.severity == "error"}
    if case.honest:
        # Not refused, and verified only when a test shows the fix (issue #31).
        assert report.verdict is case.verdict, report.to_markdown()
        assert report.passed is (case.verdict is Verdict.VERIFIED)
        assert report.may_push
        return
    assert not report.passed, f"{case.name} got through:\n{report.to_markdown()}"
    missing = case.blocked_by - errors
    assert not missing, f"{case.name}: expected {sorted(missing)} among {sorted(errors)}"
    blocked_gates = {r.name for r in report.results if not r.passed}
    if blocked_gates & {"hygiene", "semgrep"}:
        assert not report.may_push


def test_corpus_has_thirty_hostile_variants_across_families() -> None:
    hostile = [c for c in CASES if not c.honest]
    assert len(hostile) >= 30
    assert len({c.name for c in CASES}) == len(CASES)
    assert {c.family for c in hostile} >= {
        "tests-dropped",
        "results-faked",
        "parser-mismatch",
        "ci-config",
        "semgrep-evasion",
        "denial-of-service",
    }


@pytest.mark.slow  # two test runs per case, Semgrep for some: about 5 s each
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_adversarial_case_local(tmp_path: Path, case: Case) -> None:
    if in_ci():
        # CI runs every case on bubblewrap and the run-sensitive ones on docker too
        # (tests/integration/test_gates_adversarial.py), where a laptop without them has
        # only this host-copy sandbox: a weaker twin, not worth CI's minutes.
        pytest.skip("under CI every case runs on the real sandbox backends instead")
    require_service(find_semgrep() is not None, "semgrep")
    if case.base != "python":
        # The local sandbox runs the host's own tools (a rustup cargo, no GOCACHE) under
        # another $HOME; the real backends run these (tests/integration).
        pytest.skip("Go, Rust and Node cases run on the real sandbox backends")
    if case.needs_limits:
        pytest.skip("the local test sandbox enforces no limits: the real backends run it")
    assert_verdict(case, judge_case(tmp_path, case))


def test_issue_31_source_and_hygiene_families_have_three_variants_each() -> None:
    from collections import Counter

    from tests.adversarial import ISSUE_31_CASES

    families = Counter(c.family for c in ISSUE_31_CASES)
    for family in (
        "hidden-source",
        "trojan-source",
        "runner-detection",
        "sandbox-detection",
        "test-helper-restores",
        "ci-script",
        "install-hook",
        "auto-run-file",
        "package-index",
    ):
        assert families[family] >= 3, family
    assert families["semgrep-evasion"] >= 6
    assert all(not c.honest for c in ISSUE_31_CASES)


def test_every_hostile_family_has_three_variants() -> None:
    """Issue #31: at least three hostile variants in every family, each a different
    mechanism (a family of one or two tests a single spelling of its attack)."""
    from collections import Counter

    families = Counter(c.family for c in CASES if not c.honest)
    thin = {family: n for family, n in families.items() if n < 3}
    assert not thin, f"families with fewer than 3 hostile variants: {thin}"
    assert len(families) >= 16
