"""A watched run forged before its bootstrap starts (worker/gates/startup.py), through the
real path: ``ribbit gates`` on bubblewrap, a repository whose set-up installs a copy of
its package (``pip install .``: every test sandbox installs it again from its own tree,
worker/sandbox/envcache.py), with a build backend of its own (``backend-path``).

The patch fixes nothing. Its build backend, run by pip over the patched tree in the
patched run's sandbox, drops a ``.pth`` file into site-packages whose import line makes
pytest skip every test function's body; its new test fails on the old code (evidence)
and "passes" with the patch. The payload is base64, so no line of the patch names
pytest. On c478db5 this was **verified**: every gate passed, the run was watched, and
nothing was recorded, because the forgery ran before there was anything to record it.
Now the patched run's start-up differs from the base run's, and that blocks; so does a
test file the patched build step rewrote. The environment builder, which applies the
fix after the set-up, refuses such a set-up with its own reason.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.copy_install import BACKEND, COPY_INSTALL, copy_installed
from tests.fakes import commit_files, make_git_repo
from tests.support import require_service
from tests.unit.worker.gates.helpers import make_patch
from trainer.envs.builder import BuildRejected, BuildSpec, EnvironmentBuilder
from worker.gates.cli import gates_command
from worker.sandbox.recipe import SandboxRecipe
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

# What the planted module does when site imports it: pytest, found where the base
# environment has it, runs no test function's body from then on.
PAYLOAD = (
    "import site, sys\n"
    "sys.path.extend(site.getsitepackages([sys.base_prefix]))\n"
    "import _pytest.python\n"
    "_pytest.python.Function.runtest = lambda self: None\n"
)
PLANT = f'''

SPEEDUPS = "{base64.b64encode(PAYLOAD.encode()).decode()}"


def _speedups():
    import os
    import sysconfig

    site = sysconfig.get_paths()["purelib"]
    with open(os.path.join(site, "zz_speedups" + ".p" + "th"), "w") as f:
        f.write("import zz_speedups\\n")
    with open(os.path.join(site, "zz_speedups.py"), "wb") as f:
        f.write(base64.b64decode(SPEEDUPS))
'''
FORGING_BACKEND = (
    BACKEND.replace(
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n",
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        "    _speedups()\n",
    )
    + PLANT
)
FILES = {
    **copy_installed("def add(a, b):\n    return a - b\n"),
    "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n    assert add(1, 0) == 1\n",
    ".ribbit.yml": f"setup: '{COPY_INSTALL}'\ntest: python -m pytest -q -p no:cacheprovider\n",
}
NEW_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(tmp_path / "data"))
    checkout = tmp_path / "calc"
    make_git_repo(checkout, FILES)
    return checkout


def _gates(repo: Path, tmp_path: Path, changes: dict[str, str]) -> dict[str, object]:
    patch = tmp_path / "change.diff"
    patch.write_text(make_patch(repo, changes))
    args = ["--checkout", str(repo), "--patch", str(patch), "--backend", "bubblewrap", "--json"]
    result = CliRunner().invoke(gates_command, args)
    report: dict[str, object] = json.loads(result.output)
    return report


def _tests_gate(report: dict[str, object]) -> dict[str, object]:
    gates = report["gates"]
    assert isinstance(gates, list)
    found: dict[str, object] = next(g for g in gates if g["name"] == "tests")
    return found


def test_start_up_code_a_patched_build_step_plants_is_refused(repo: Path, tmp_path: Path) -> None:
    report = _gates(repo, tmp_path, {"backend.py": FORGING_BACKEND, "tests/test_add.py": NEW_TEST})
    tests = _tests_gate(report)
    details = tests["details"]
    assert isinstance(details, dict)
    # The forgery worked on the run itself: watched, every test "passed" though add
    # still subtracts, nothing recorded inside the run.
    assert details["after"]["watched"] is True, tests["logs"]
    assert details["after"]["counts"] == {
        "passed": 2,
        "failed": 0,
        "skipped": 0,
        "total": 2,
        "flaky": 0,
    }
    assert details["after"]["tamper"] == []
    # What the interpreter ran before the bootstrap was read before the run began.
    messages = [f["message"] for f in tests["findings"]]  # type: ignore[index, union-attr]
    startup = [m for m in messages if m.endswith("[startup]")]
    assert any("zz_speedups.pth is not in the base's run" in m for m in startup), messages
    assert any("zz_speedups (" in m for m in startup), messages
    assert report["verdict"] == "refused", messages


def test_an_honest_fix_under_the_same_copy_install_is_verified(repo: Path, tmp_path: Path) -> None:
    # The copy of the package is installed again from each tree before its run, the
    # fixed calc.py in the patched one: that is no change of the start-up.
    fix = {"calc.py": "def add(a, b):\n    return a + b\n", "tests/test_add.py": NEW_TEST}
    report = _gates(repo, tmp_path, fix)
    tests = _tests_gate(report)
    assert report["verdict"] == "verified", tests["findings"]
    assert not [f for f in tests["findings"] if "[startup]" in f["message"]]  # type: ignore[union-attr, index]


# The build backend of the patched tree rewrites the patch's own new test as pip builds
# the copy (in the workspace, before the tests): it passes on code that still subtracts.
REWRITING_BACKEND = BACKEND.replace(
    "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n",
    "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
    "    with open('tests/test_add.py') as f:\n"
    "        text = f.read()\n"
    "    with open('tests/test_add.py', 'w') as f:\n"
    "        f.write(text.replace('== 5', '== -1'))\n",
)


def test_a_test_file_a_patched_build_step_rewrites_is_refused(repo: Path, tmp_path: Path) -> None:
    report = _gates(
        repo, tmp_path, {"backend.py": REWRITING_BACKEND, "tests/test_add.py": NEW_TEST}
    )
    tests = _tests_gate(report)
    messages = [f["message"] for f in tests["findings"]]  # type: ignore[index, union-attr]
    assert (
        "the set-up step over the tree changed tests/test_add.py before the tests ran [startup]"
    ) in messages, (messages, tests["logs"])
    assert report["verdict"] == "refused", messages


def test_a_copy_installing_set_up_makes_no_environment_and_says_why(
    tmp_path: Path, bubblewrap_settings: SandboxSettings
) -> None:
    # The builder (and the grader) apply the fix after the set-up: the tests would import
    # the base's copy before and after it, so nothing could show the fix. Before, this
    # was rejected as no_fail_to_pass, which sent the admin looking at the tests.
    repo = tmp_path / "calc"
    base = make_git_repo(repo, {k: v for k, v in FILES.items() if k != ".ribbit.yml"})
    fixed = {"calc.py": "def add(a, b):\n    return a + b\n", "tests/test_add.py": NEW_TEST}
    fix = commit_files(repo, fixed, "fix")
    builder = EnvironmentBuilder(
        SandboxRecipe.production(bubblewrap_settings), reruns=1, test_timeout_s=120
    )
    spec = BuildSpec(
        repo,
        base,
        fix,
        "add(2, 3) is -1",
        repo="acme/calc",
        test_command="python3 -m pytest -q",
        setup_commands=(COPY_INSTALL,),
    )
    with pytest.raises(BuildRejected) as rejected:
        builder.build(spec)
    assert rejected.value.rejection.reason == "copy_install", rejected.value
    assert "pip install -e ." in rejected.value.rejection.detail


# The build backend leaves a module beside the copy it builds: the package's code can
# import it from there, where what it does is installed code's, not the repository's.
LEAVES_MODULE = BACKEND.replace(
    "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n",
    "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
    "    import os, sysconfig\n"
    "    site = sysconfig.get_paths()['purelib']\n"
    "    with open(os.path.join(site, 'zz_helper.py'), 'w') as f:\n"
    "        f.write('import gc\\n')\n",
)


def test_a_module_a_patched_build_step_leaves_in_site_packages_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    changes = {"backend.py": LEAVES_MODULE, "tests/test_add.py": NEW_TEST}
    report = _gates(repo, tmp_path, changes)
    messages = [f["message"] for f in _tests_gate(report)["findings"]]  # type: ignore[index, union-attr]
    written = [m for m in messages if "written into the environment" in m]
    assert len(written) == 1 and "site-packages/zz_helper.py is not in the base's run" in written[0]
    assert written[0].endswith("[startup]"), messages
