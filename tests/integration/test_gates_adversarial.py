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

# Families whose verdict comes from what happens inside the test run (the report channel,
# the process tree, /tmp, the environment the code under test sees), which is where the
# two backends differ: every variant of these runs on both. The other families are decided
# by the patch's text (hygiene, Semgrep on the host, the runner's configuration), the same
# code whatever runs the tests: every variant on bubblewrap, the first of each family on
# docker too (the "one per family also on docker").
RUN_SENSITIVE = frozenset(
    {
        "results-faked",
        "runner-detection",
        "sandbox-detection",
        "test-helper-restores",
        "denial-of-service",
        "no-evidence",
        "honest",
    }
)


def _on_docker(case: Case, first_of_family: set[str]) -> bool:
    # Go, Rust and Node run on the image's toolchains under docker, the host's under
    # bubblewrap: each of those cases on both.
    return case.family in RUN_SENSITIVE or case.base != "python" or case.name in first_of_family


_FIRST_OF_FAMILY = {next(c.name for c in CASES if c.family == f) for f in {c.family for c in CASES}}
BACKEND_CASES = [
    pytest.param(case, backend, id=f"{case.name}-{backend}")
    for case in CASES
    for backend in ("docker", "bubblewrap")
    if backend == "bubblewrap" or _on_docker(case, _FIRST_OF_FAMILY)
]


@pytest.mark.parametrize(("case", "backend"), BACKEND_CASES)
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
        gate_settings=GateSettings(test_timeout_s=case.test_timeout_s or 120),
        sandbox_factory=sandbox_factory(settings),
    )
    # Semgrep does not depend on the backend: it runs where it has a say (gates_for).
    assert_verdict(case, run_gates(ctx, gates_for(case)))
