"""The gates on real sandbox backends (worker.sandbox.sandbox_factory): the test gate
runs the tests inside the sandbox, never on the host."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.unit.worker.gates.helpers import make_patch, repo_with
from worker.gates import GateContext, run_gates
from worker.repo_config import RepoConfig
from worker.sandbox.base import Sandbox, SandboxFactory
from worker.settings import GateSettings

pytestmark = pytest.mark.integration

PYTEST = "python3 -m pytest -q -p no:cacheprovider"
BASE = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
}
FIX = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": BASE["tests/test_calc.py"]
    + "\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


def _ctx(
    tmp_path: Path,
    backend_factory: SandboxFactory,
    changes: Mapping[str, str | bytes | None],
    settings: GateSettings | None = None,
) -> GateContext:
    repo, base = repo_with(tmp_path, BASE)
    return GateContext(
        repo_dir=repo,
        base_commit=base,
        patch=make_patch(repo, changes),
        repo_config=RepoConfig(test=PYTEST),
        gate_settings=settings or GateSettings(),
        sandbox_factory=backend_factory,
    )


def test_gates_pass_a_fix_in_a_real_sandbox(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    report = run_gates(_ctx(tmp_path, backend_factory, FIX))
    assert report.passed, report.to_markdown()
    tests = report.result("tests")
    assert tests is not None and tests.details["after"]["counts"]["passed"] == 2


def test_gates_time_out_a_hanging_suite_in_a_real_sandbox(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    hang = {
        "tests/test_calc.py": BASE["tests/test_calc.py"]
        + "\n\ndef test_hangs():\n    while True:\n        pass\n"
    }
    report = run_gates(_ctx(tmp_path, backend_factory, hang, GateSettings(test_timeout_s=10)))
    tests = report.result("tests")
    assert tests is not None and not tests.passed
    assert "tests-timeout" in {f.rule for f in tests.findings}


class _CancelAtTestRun:
    """A factory whose sandboxes set ``cancel`` as the test command starts (the way
    /ribbit stop arrives mid-run), with no clock involved."""

    def __init__(self, inner: SandboxFactory, cancel: threading.Event) -> None:
        self.inner, self.cancel = inner, cancel

    def __call__(self, source: Path) -> Sandbox:
        sandbox = self.inner(source)
        exec_ = sandbox.exec

        def exec(command: Any, **kw: Any) -> Any:
            if "ribbit-run" in list(command):
                self.cancel.set()
            return exec_(command, **kw)

        sandbox.exec = exec  # type: ignore[method-assign]
        return sandbox


@pytest.mark.timeout(120)  # a cancel that does not reach the run hangs here for 600 s
def test_gates_cancel_reaches_a_hanging_test_run(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    hang = {"tests/test_calc.py": BASE["tests/test_calc.py"] + "\n\nimport time\ntime.sleep(600)\n"}
    cancel = threading.Event()
    ctx = _ctx(
        tmp_path, _CancelAtTestRun(backend_factory, cancel), hang, GateSettings(test_timeout_s=600)
    )
    report = run_gates(dataclasses.replace(ctx, cancel=cancel))
    tests = report.result("tests")
    assert tests is not None and not tests.passed
    assert {f.rule for f in tests.findings} == {"gate-cancelled"}
