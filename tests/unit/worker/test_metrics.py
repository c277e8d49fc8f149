"""Worker metrics: bounded labels, and the policy and gate counters."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from bot.store.records.gate_report import Finding, GateReport, GateResult
from tests.fakes import ScriptedPolicy
from worker.agent.policy import AssistantTurn, ContextWindowExceeded
from worker.metrics import (
    OTHER,
    REPO_RULE,
    InstrumentedPolicy,
    builtin_semgrep_rules,
    record_gates,
    record_job,
    record_stage,
    rule_label,
)


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_rule_label_keeps_ribbit_rules_and_builtin_semgrep_ids() -> None:
    builtin = sorted(builtin_semgrep_rules())
    assert builtin, "the shipped Semgrep rules have ids"
    assert rule_label("semgrep", builtin[0]) == builtin[0]
    assert rule_label("semgrep", "semgrep-failed") == "semgrep-failed"
    assert rule_label("hygiene", "github-token") == "github-token"
    assert rule_label("tests", "test-regression") == "test-regression"


@pytest.mark.parametrize(
    ("gate", "rule", "label"),
    [
        # A repository's own .semgrep.yml names its rules: any id it likes, every patch.
        ("semgrep", "acme-rule-0001", REPO_RULE),
        ("semgrep", "x" * 5000, REPO_RULE),
        ("hygiene", "tests/test_a.py::test_b", OTHER),
        ("hygiene", "Secret Rule", OTHER),
        ("tests", "a-" * 40 + "b", OTHER),
        ("made-up-gate", "gate-error", OTHER),
    ],
)
def test_metrics_rule_label_bounds_untrusted_values(gate: str, rule: str, label: str) -> None:
    assert rule_label(gate, rule) == label


def test_metrics_unknown_kind_stage_and_outcome_are_other() -> None:
    before = _value("ribbit_job_stage_duration_seconds_count", kind=OTHER, stage=OTHER)
    record_stage("$(payload)", "waiting:17", 1.0)
    after = _value("ribbit_job_stage_duration_seconds_count", kind=OTHER, stage=OTHER)
    assert after == before + 1
    before = _value("ribbit_job_duration_seconds_count", kind="solve", outcome=OTHER)
    record_job("solve", "exploded", 2.0)
    assert _value("ribbit_job_duration_seconds_count", kind="solve", outcome=OTHER) == before + 1


def test_metrics_gate_report_counts_verdicts_and_blocking_findings() -> None:
    report = GateReport.from_results(
        [
            GateResult("tests", True),
            GateResult(
                "semgrep",
                False,
                findings=(
                    Finding("semgrep", "their-own-rule", "x"),
                    Finding("semgrep", "semgrep-partial-scan", "warn", severity="warning"),
                ),
            ),
        ],
        1.0,
    )
    passed = _value("ribbit_gate_runs_total", gate="tests", result="passed")
    failed = _value("ribbit_gate_runs_total", gate="semgrep", result="failed")
    repo_rule = _value("ribbit_gate_findings_total", gate="semgrep", rule=REPO_RULE)
    partial = _value("ribbit_gate_findings_total", gate="semgrep", rule="semgrep-partial-scan")
    record_gates(report)
    assert _value("ribbit_gate_runs_total", gate="tests", result="passed") == passed + 1
    assert _value("ribbit_gate_runs_total", gate="semgrep", result="failed") == failed + 1
    assert _value("ribbit_gate_findings_total", gate="semgrep", rule=REPO_RULE) == repo_rule + 1
    # Warnings do not block, so they are not findings here.
    assert (
        _value("ribbit_gate_findings_total", gate="semgrep", rule="semgrep-partial-scan") == partial
    )


class _Replay(ScriptedPolicy):
    name = "replay"


def test_metrics_policy_counts_tokens_turns_and_errors() -> None:
    turn = AssistantTurn("done", None, [], "stop", prompt_tokens=120, completion_tokens=30)
    policy = InstrumentedPolicy(_Replay([turn]))
    assert (policy.name, policy.model_name) == ("replay", "scripted")
    completion = _value("ribbit_model_tokens_total", policy="replay", direction="completion")
    prompt = _value("ribbit_model_tokens_total", policy="replay", direction="prompt")
    turns = _value("ribbit_model_turns_total", policy="replay")
    errors = _value("ribbit_model_errors_total", policy="replay", error="policy")
    assert policy.generate([{"role": "user", "content": "hi"}], []) is turn
    assert _value("ribbit_model_tokens_total", policy="replay", direction="completion") == (
        completion + 30
    )
    assert _value("ribbit_model_tokens_total", policy="replay", direction="prompt") == prompt + 120
    assert _value("ribbit_model_turns_total", policy="replay") == turns + 1
    # Past its script the scripted policy raises PolicyError, like a failed backend.
    with pytest.raises(Exception, match="script"):
        policy.generate([{"role": "user", "content": "again"}], [])
    assert _value("ribbit_model_errors_total", policy="replay", error="policy") == errors + 1
    assert _value("ribbit_model_turns_total", policy="replay") == turns + 1


def test_metrics_policy_context_window_is_its_own_error() -> None:
    class Full(ScriptedPolicy):
        name = "openai"

        def generate(self, *args: object, **kwargs: object) -> AssistantTurn:
            raise ContextWindowExceeded("prompt too long")

    before = _value("ribbit_model_errors_total", policy="openai", error="context_window")
    with pytest.raises(ContextWindowExceeded):
        InstrumentedPolicy(Full([])).generate([], [])
    after = _value("ribbit_model_errors_total", policy="openai", error="context_window")
    assert after == before + 1


def test_metrics_prepare_empties_the_samples_folder_and_cleans_up_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from worker.metrics import MULTIPROC_ENV, cleanup, prepare
    from worker.settings import WorkerSettings

    off = WorkerSettings(data_dir=tmp_path)
    assert prepare(off) is None and MULTIPROC_ENV not in os.environ
    on = WorkerSettings(data_dir=tmp_path, metrics={"worker_port": 9808})
    # An operator's folder: last run's sample files go (they would be summed in), the
    # rest and the folder stay.
    given = tmp_path / "samples"
    given.mkdir()
    (given / "counter_123.db").write_bytes(b"old")
    (given / "README").write_text("mine")
    monkeypatch.setenv(MULTIPROC_ENV, str(given))
    assert prepare(on) == given
    assert sorted(p.name for p in given.iterdir()) == ["README"]
    cleanup()
    assert given.is_dir()
    # A folder of its own: made, named in the environment, removed at shutdown.
    monkeypatch.delenv(MULTIPROC_ENV)
    own = prepare(on)
    assert own is not None and own.is_dir() and os.environ[MULTIPROC_ENV] == str(own)
    cleanup()
    assert not own.exists()
