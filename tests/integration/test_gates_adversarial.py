"""The adversarial corpus (tests/adversarial.py) through every gate, the test gate
running in the real sandbox backends (docker via Podman, and bubblewrap): each hostile
patch blocked by the rules it names, each honest patch passing. Semgrep, which runs on
the host whatever the backend, joins for the evasion family and the honest patches."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial import CASES, Case, case_config, case_patch, make_base_repo
from tests.unit.worker.gates.test_adversarial import assert_verdict, gates_for
from worker.gates import GateContext, run_gates
from worker.settings import GateSettings, SandboxSettings

pytestmark = pytest.mark.integration

PYTEST = "python3 -m pytest -q -p no:cacheprovider"


@pytest.mark.parametrize("backend", ["docker", "bubblewrap"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_adversarial_case_on_real_backend(
    tmp_path: Path, case: Case, backend: str, request: pytest.FixtureRequest
) -> None:
    from worker.sandbox import sandbox_factory

    settings: SandboxSettings = request.getfixturevalue(f"{backend}_settings")
    if case.base != "python":
        # Compilers and V8 reserve far more address space than they use, and
        # bubblewrap's limit is per process: the defaults, not the small test limits.
        settings = settings.model_copy(update={"memory_mb": 2048, "pids": 256})
    repo, base = make_base_repo(tmp_path, case)
    ctx = GateContext(
        repo_dir=repo,
        base_commit=base,
        patch=case_patch(repo, case),
        repo_config=case_config(case, PYTEST),
        gate_settings=GateSettings(test_timeout_s=120),
        sandbox_factory=sandbox_factory(settings),
    )
    # Semgrep does not depend on the backend: it runs where it has a say (gates_for).
    assert_verdict(case, run_gates(ctx, gates_for(case)))
