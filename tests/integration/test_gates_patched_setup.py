"""No network for patched code (issue #32, item 4): ``ribbit gates`` and the trainer's
grader set the BASE tree up (with the registry proxy) and run the patched tree's tests
from the base's snapshot, as a solve job does. A patch that adds a ``postinstall`` hook
(it writes a marker and tries to reach a registry through whatever proxy it is given)
never has it run with network: the setup is never run over the patched tree, so the
marker is nowhere and the hook's output is in no log. Without the change both ran the
repository's ``npm install`` over the patched tree with the proxy, hook included.

The setup needs no registry (a package without dependencies, ``--offline``): CI has
no internet."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fakes import make_git_repo
from tests.support import require_service
from tests.unit.worker.gates.helpers import make_patch
from trainer.envs.schema import Environment
from trainer.rl.reward import compute_reward
from worker.gates.cli import gates_command
from worker.gates.tests import TestGate
from worker.sandbox.recipe import SandboxRecipe
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

SETUP = "npm install --offline --no-audit --no-fund && echo BASE-SET-UP"
TEST = "python -m pytest -q -p no:cacheprovider"
PACKAGE = '{"name": "app", "version": "1.0.0"}\n'
HOOKED = '{"name": "app", "version": "1.0.0", "scripts": {"postinstall": "sh hook.sh"}}\n'
# What a malicious patch's install hook does: leave a mark, print what network it has,
# and try to call out through the proxy it was given.
HOOK = (
    'echo "HOOK-RAN proxy=${HTTPS_PROXY:-none}"\n'
    'echo ran > "$VIRTUAL_ENV/hook-ran"\n'
    "python3 -c \"import urllib.request; urllib.request.urlopen('https://pypi.org/simple/', "
    'timeout=5)" || true\n'
)
# The patch's own test: fails wherever the hook ran before the tests.
HOOK_TEST = (
    "import os\n\n\ndef test_no_hook_ran():\n"
    "    assert not os.path.exists(os.environ['VIRTUAL_ENV'] + '/hook-ran')\n"
)
FILES = {
    "package.json": PACKAGE,
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n    assert add(1, 0) == 1\n",
    ".ribbit.yml": f"setup: '{SETUP}'\ntest: {TEST}\n",
}
PATCH = {
    "package.json": HOOKED,
    "hook.sh": HOOK,
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_hook.py": HOOK_TEST,
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    require_service(shutil.which("npm") is not None, "npm")
    checkout = tmp_path / "calc"
    make_git_repo(checkout, FILES)
    return checkout


def test_ribbit_gates_runs_no_install_hook_of_the_patch(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIBBIT_SANDBOX__SETUP_NETWORK", "true")  # the proxy is there
    patch = tmp_path / "hook.diff"
    patch.write_text(make_patch(repo, PATCH))
    args = ["--checkout", str(repo), "--patch", str(patch), "--backend", "bubblewrap", "--json"]
    result = CliRunner().invoke(gates_command, args)
    tests = next(r for r in json.loads(result.output)["gates"] if r["name"] == "tests")
    assert "HOOK-RAN" not in tests["logs"], tests["logs"]
    # Every run (before, after, and the evidence run of the patch's tests on the old code)
    # restored the base's set-up environment: nothing installed over a tree.
    runs = re.findall(r"^--- .+ ---$", tests["logs"], re.M)
    assert len(runs) >= 2, tests["logs"]
    assert tests["logs"].count("restored from this job's snapshot") == len(runs), tests["logs"]
    assert tests["details"]["after"]["counts"]["passed"] == 2, tests["logs"]


@pytest.fixture(params=["bubblewrap", "docker"])
def settings(request: pytest.FixtureRequest) -> SandboxSettings:
    base: SandboxSettings = request.getfixturevalue(f"{request.param}_settings")
    return base.model_copy(update={"setup_network": True})


def test_the_graders_test_gate_runs_no_install_hook_of_the_patch(
    repo: Path, settings: SandboxSettings
) -> None:
    diff = make_patch(repo, PATCH)
    env = Environment(
        instance_id="calc-1",
        repo="team/calc",
        base_commit=_head(repo),
        problem_statement="add subtracts",
        patch=diff,
        test_patch="",
        FAIL_TO_PASS=[],
        PASS_TO_PASS=[],
        setup_commands=[SETUP],
        test_command=TEST,
    )
    result = compute_reward(env, diff, repo, SandboxRecipe.production(settings), gates=[TestGate()])
    gate_logs = " ".join(f.message for f in result.findings)
    # Every test passed and no gate found anything; the reward is still 0 because this
    # environment names no FAIL_TO_PASS test, so nothing shows a fix (issue #31). A hook
    # that ran with network would fail the patch's own test: a gate finding instead.
    assert result.reason == "unverified", (result.reason, gate_logs, result.details)
    assert "HOOK-RAN" not in gate_logs


def _head(repo: Path) -> str:
    from bot.hostgit import run_git

    return run_git(repo, "rev-parse", "HEAD").stdout.decode().strip()


DEP_HOOK = 'echo "DEP-HOOK-RAN"; echo ran > "$VIRTUAL_ENV/dep-hook-ran"\n'
WITH_DEP = (
    '{"name": "app", "version": "1.0.0", "dependencies": {"localdep": "file:./vendor/localdep"}}\n'
)
DEP_TEST = (
    "import os\n\n\ndef test_dep_installed_without_its_hook():\n"
    "    assert os.path.isfile('node_modules/localdep/package.json')\n"
    "    assert not os.path.exists(os.environ['VIRTUAL_ENV'] + '/dep-hook-ran')\n"
)


def _gates(repo: Path, tmp_path: Path, changes: dict[str, str]) -> dict[str, object]:
    patch = tmp_path / "change.diff"
    patch.write_text(make_patch(repo, changes))
    args = ["--checkout", str(repo), "--patch", str(patch), "--backend", "bubblewrap", "--json"]
    result = CliRunner().invoke(gates_command, args)
    data = json.loads(result.output)
    tests: dict[str, object] = next(r for r in data["gates"] if r["name"] == "tests")
    return tests


def test_a_manifest_change_is_installed_again_with_scripts_off_and_recorded(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIBBIT_SANDBOX__SETUP_NETWORK", "true")
    dep = {
        "vendor/localdep/package.json": (
            '{"name": "localdep", "version": "1.0.0", "scripts": {"postinstall": "sh hook.sh"}}\n'
        ),
        "vendor/localdep/hook.sh": DEP_HOOK,
        "vendor/localdep/index.js": "module.exports = 1;\n",
    }
    tests = _gates(repo, tmp_path, {"package.json": WITH_DEP, **dep, "tests/test_dep.py": DEP_TEST})
    logs = str(tests["logs"])
    # The reviewer sees the step: what changed, what ran, how.
    assert (
        "[the patch changes package.json: `" + SETUP + "` ran again over the patched tree, "
        "registry network only, install scripts disabled]"
    ) in logs, logs
    assert "DEP-HOOK-RAN" not in logs
    details = tests["details"]
    assert isinstance(details, dict)
    # The dependency the patch added is there for its tests; its hook never ran.
    assert details["after"]["counts"]["passed"] == 2, logs
    assert details["before"]["counts"]["passed"] == 1, logs  # test_dep.py is the patch's


def test_ribbit_yml_may_allow_install_scripts_for_the_patched_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    require_service(shutil.which("npm") is not None, "npm")
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RIBBIT_SANDBOX__SETUP_NETWORK", "true")
    repo = tmp_path / "allowed"
    config = f"setup: '{SETUP}'\ntest: {TEST}\npatch_install_scripts: true\n"
    make_git_repo(repo, {**FILES, ".ribbit.yml": config})
    tests = _gates(repo, tmp_path, PATCH)
    logs = str(tests["logs"])
    assert "install scripts allowed by .ribbit.yml" in logs, logs
    # The hook ran in the recorded install step (with the proxy), not before the base's.
    assert "HOOK-RAN proxy=" in logs
