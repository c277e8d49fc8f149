"""The repository's code installed as a copy (``pip install .``) is the repository's code
to the watch (worker/gates/watchboot.py ``_in_workspace``, worker/gates/watchcopies.py).

The tests of such a project import the copy in site-packages, not the workspace's
files (the bootstrap puts the workspace after site-packages). The audit hook and the
guards attribute what workspace files do, so on 9f021d3 a patch whose package walked
the garbage collector (the way to the channel's key) from the copy was recorded
nowhere: its run was watched and clean. Now each file a distribution installed from the
workspace wrote counts as the workspace file it copies.
"""

from __future__ import annotations

import functools
from pathlib import Path

from tests.copy_install import OwnVenvSandbox, copy_installed
from tests.fakes import make_git_repo
from tests.unit.worker.gates.helpers import make_ctx, make_patch
from worker.gates import GateResult
from worker.gates.tests import TestGate
from worker.repo_config import RepoConfig

WATCHED = "python3 -m pytest -q -p no:cacheprovider"
SETUP = "python3 -m pip install -q --no-build-isolation --no-deps --no-index ."
CALC = "def add(a, b):\n    return a + b\n"
WALKS = "import gc\n\n\ndef add(a, b):\n    gc.get_objects()\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _gate(tmp_path: Path, changes: dict[str, str]) -> GateResult:
    repo = tmp_path / "repo"
    files = {**copy_installed(CALC), "tests/test_calc.py": TESTS}
    base = make_git_repo(repo, files)
    patch = make_patch(repo, changes)
    config = RepoConfig(setup=SETUP, test=WATCHED)
    factory = functools.partial(OwnVenvSandbox, venv=tmp_path / "venv")
    result = TestGate().run(make_ctx(repo, base, patch, config=config, sandbox_factory=factory))
    assert result.details["after"]["watched"], result.logs
    assert not result.details["after"]["setup_failed"], result.logs  # the copy is there
    return result


def test_what_the_installed_copy_does_is_attributed_to_the_file_it_copies(
    tmp_path: Path,
) -> None:
    result = _gate(tmp_path, {"calc.py": WALKS})
    tamper = [f for f in result.findings if f.rule == "tamper"]
    assert tamper, (result.findings, result.logs)
    assert tamper[0].path == "calc.py" and tamper[0].line == 5, tamper
    assert tamper[0].message.endswith("[gc.get_objects]"), tamper


def test_an_honest_change_to_the_copy_is_clean(tmp_path: Path) -> None:
    changed = CALC.replace("return a + b", "total = a + b\n    return total")
    result = _gate(tmp_path, {"calc.py": changed})
    assert not [f for f in result.findings if f.severity == "error"], result.findings
