"""Forged runs through the real gate on both backends (issue #31): every attack of
tests/watch_attacks.py is refused with a finding that names its mechanism, the /tmp
marker no longer survives into the rerun, and an honest fix passes watched with no
tamper finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records.gate_report import GateResult
from tests.unit.worker.gates.helpers import make_patch, repo_with
from tests.watch_attacks import BASE, HONEST, Attack, attacks
from tests.watch_child_attacks import REACH_PROBE, ChildAttack, child_attacks
from worker.gates import GateContext
from worker.gates.testrun import run_tests
from worker.gates.tests import TestGate
from worker.repo_config import RepoConfig
from worker.sandbox.base import SandboxFactory
from worker.settings import GateSettings

pytestmark = pytest.mark.integration

PYTEST = "python3 -m pytest -q -p no:cacheprovider"
TMP_MARKER = (
    "import os\n\n_MARK = '/tmp/calc-warm'\n\n\ndef mul(a, b):\n"
    "    if os.path.exists(_MARK):\n        return a * b\n"
    "    open(_MARK, 'w').close()\n    return a + b\n"
)


def _gate(
    tmp_path: Path, backend_factory: SandboxFactory, base: dict[str, str], after: dict[str, str]
) -> GateResult:
    repo, commit = repo_with(tmp_path, base)
    changes = {p: t for p, t in after.items() if base.get(p) != t}
    ctx = GateContext(
        repo_dir=repo,
        base_commit=commit,
        patch=make_patch(repo, changes),
        repo_config=RepoConfig(test=PYTEST),
        gate_settings=GateSettings(),
        sandbox_factory=backend_factory,
    )
    return TestGate().run(ctx)


@pytest.mark.parametrize("attack", attacks(), ids=lambda a: a.name)
def test_a_forged_run_is_refused_naming_its_mechanism(
    tmp_path: Path, backend_factory: SandboxFactory, attack: Attack
) -> None:
    base = {**BASE, "tests/test_core.py": attack.files["tests/test_core.py"]}
    result = _gate(tmp_path, backend_factory, base, attack.files)
    assert not result.passed
    assert result.details["after"]["watched"] is True
    tamper = [f for f in result.findings if f.rule == "tamper"]
    assert tamper, (result.findings, result.logs)
    if attack.mechanism:
        assert any(attack.mechanism in f.message and f.path == attack.path for f in tamper)


@pytest.mark.parametrize("attack", child_attacks(), ids=lambda a: a.name)
def test_a_process_the_package_starts_is_refused(
    tmp_path: Path, backend_factory: SandboxFactory, attack: ChildAttack
) -> None:
    # Where the child reaches nothing the regression shows as the tests' own; where it
    # reaches the key (a fork past Python's handlers, an interpreter made dumpable again)
    # the run is tamper.
    base = {**BASE, "tests/test_core.py": attack.files["tests/test_core.py"]}
    result = _gate(tmp_path, backend_factory, base, attack.files)
    assert not result.passed
    assert result.details["after"]["watched"] is True
    tamper = [f for f in result.findings if f.rule == "tamper"]
    if attack.tampers:
        assert tamper and attack.reason in tamper[0].message, (result.findings, result.logs)
    else:
        assert not tamper, result.findings
        assert "tests/test_core.py::test_mul" in result.details["regressions"]


def test_the_sandbox_user_cannot_ptrace_and_a_test_child_reaches_nothing(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    # Non-dumpable keeps out only those without CAP_SYS_PTRACE: neither backend gives
    # the sandbox user any capability (bit 19 is CAP_SYS_PTRACE).
    tree = tmp_path / "tree"
    for rel, text in {**BASE, "tests/test_reach.py": REACH_PROBE}.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    with backend_factory(tree) as sandbox:
        caps = sandbox.exec(["grep", "^Cap", "/proc/self/status"], timeout=30).stdout
        run = run_tests(sandbox, PYTEST, timeout=120)
    held = {line.split(":")[0]: int(line.split()[1], 16) for line in caps.splitlines()}
    assert held.keys() >= {"CapEff", "CapPrm", "CapBnd", "CapAmb"}, caps
    assert not any(held[name] & (1 << 19) for name in held), caps
    assert run.watched and run.tampered is None, run.log()
    assert run.outcomes["tests/test_reach.py::test_a_child_reaches_nothing"] == "passed", run.log()


def test_a_tmp_marker_does_not_survive_into_the_rerun(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    result = _gate(tmp_path, backend_factory, BASE, {**BASE, "calc/core.py": TMP_MARKER})
    assert not result.passed
    assert result.details["after"]["reran"] is True
    assert "tests/test_core.py::test_mul" in result.details["regressions"]
    assert not result.details["flaky"]


def test_an_honest_fix_passes_watched_with_no_tamper(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    broken = {**HONEST, "calc/core.py": HONEST["calc/core.py"].replace(".a * b", ".a + b")}
    result = _gate(tmp_path, backend_factory, broken, HONEST)
    assert result.passed, (result.findings, result.logs)
    assert result.details["after"]["watched"] is True
    assert not [f for f in result.findings if f.rule.startswith("tamper")]


def test_a_run_starts_with_nothing_left_running_from_the_setup(
    tmp_path: Path, backend_factory: SandboxFactory
) -> None:
    # A setup step (the patched tree's install hooks run there) that leaves a daemon
    # behind, in a session of its own so its command's end does not take it along.
    alone = (
        "import os\n\n\ndef test_nothing_left_running():\n"
        "    pid = open('/tmp/daemon.pid').read().strip()\n"
        "    assert not os.path.exists(f'/proc/{pid}')\n"
    )
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests/test_alone.py").write_text(alone)
    daemon = (
        "setsid sleep 600 </dev/null >/dev/null 2>&1 & p=$!; echo $p > /tmp/daemon.pid; "
        # Waits (on a condition, not a clock) until it has its own session.
        'until [ "$(cut -d" " -f6 /proc/$p/stat)" = "$p" ]; do :; done'
    )
    with backend_factory(tree) as sandbox:
        assert sandbox.exec(["bash", "-c", daemon], timeout=30).exit_code == 0
        alive = sandbox.exec(["bash", "-c", "kill -0 $(cat /tmp/daemon.pid)"], timeout=30)
        assert alive.exit_code == 0  # it outlived its command
        run = run_tests(sandbox, PYTEST, timeout=120)
    assert run.outcomes == {"tests/test_alone.py::test_nothing_left_running": "passed"}, run.log()
