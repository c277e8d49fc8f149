"""The test interpreter's start-up (worker/gates/startup.py, worker/gates/startupscan.py):
what ``site`` runs before Ribbit's bootstrap and what the bootstrap then trusts as the
runner, read with ``-I -S`` before each watched run and compared between the base run
and the patched one. tests/integration/test_startup_forgery.py is the same attack
through ``ribbit gates`` on bubblewrap."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest

from tests.copy_install import OwnVenvSandbox, make_venv
from tests.fakes import make_git_repo
from tests.unit.worker.gates.helpers import make_ctx, make_patch
from worker.gates.startup import (
    StartupChange,
    StartupItem,
    parse_scan,
    scan_command,
    startup_changes,
    unread,
)
from worker.gates.tests import TestGate
from worker.repo_config import RepoConfig

WATCHED = "python3 -m pytest -q -p no:cacheprovider"


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3.*/site-packages"))


def _scan(venv: Path, cwd: Path) -> tuple[StartupItem, ...]:
    command = scan_command(str(venv / "bin" / "python"))
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr  # (the command itself is the 30 kB program)
    items = parse_scan(done.stdout)
    assert items is not None, done.stdout
    return items


def _named(items: tuple[StartupItem, ...], kind: str) -> list[str]:
    return [i.name for i in items if i.kind == kind]


@pytest.fixture
def env(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A virtual environment with start-up code of every kind, and a workspace."""
    venv = make_venv(tmp_path / "venv")
    site = _site(venv)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    marker = tmp_path / "a-pth-line-ran"
    (site / "runs.pth").write_text(f"import os; open({str(marker)!r}, 'w').close()\n")
    (site / "hooked.pth").write_text("# a comment\nimport hookmod; hookmod.install()\n")
    (site / "hookmod.py").write_text("def install():\n    pass\n")
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "sitecustomize.py").write_text("print('customized')\n")
    (site / "paths.pth").write_text(f"{extra}\n{workspace}\n")
    (site / "pluggy").mkdir()
    (site / "pluggy" / "__init__.py").write_text("HOOKS = 1\n")
    info = site / "fakeplug-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text(
        "[pytest11]\nfake = fakeplug\n\n[console_scripts]\nx = y\n"
    )
    (site / "fakeplug.py").write_text("def pytest_configure(config):\n    pass\n")
    own = site / "wsplug-1.0.dist-info"
    own.mkdir()
    (own / "entry_points.txt").write_text("[pytest11]\nws = wsplug.plugin\n")
    (workspace / "wsplug").mkdir()
    (workspace / "wsplug" / "__init__.py").write_text("")
    (workspace / "wsplug" / "plugin.py").write_text("X = 1\n")
    # A copy of the repository installed into site-packages (``pip install .``): pip's
    # direct_url.json names the workspace, its RECORD the files it wrote.
    copy = site / "ownplug-1.0.dist-info"
    copy.mkdir()
    (copy / "entry_points.txt").write_text("[pytest11]\nown = ownplug\n")
    (copy / "direct_url.json").write_text(json.dumps({"url": f"file://{workspace}"}))
    (copy / "RECORD").write_text("ownplug.py,sha256=x,1\nownplug-1.0.dist-info/RECORD,,\n")
    (site / "ownplug.py").write_text("Y = 1\n")
    return venv, workspace, marker


def test_the_scan_lists_what_site_would_run_and_runs_none_of_it(
    env: tuple[Path, Path, Path],
) -> None:
    venv, workspace, marker = env
    site = _site(venv)
    items = _scan(venv, workspace)
    assert not marker.exists()  # read, never run
    assert {Path(n).name for n in _named(items, "pth")} == {"runs.pth", "hooked.pth", "paths.pth"}
    modules = _named(items, "pth-module")
    assert any(n.startswith("hookmod (") for n in modules), modules
    assert any(n.startswith("os (") for n in modules), modules
    # Found on a folder a path line adds, as site would import it.
    assert _named(items, "customize") == [
        f"sitecustomize ({Path(venv).parent / 'extra'}/sitecustomize.py)"
    ]
    assert f"pluggy ({site / 'pluggy'})" in _named(items, "runner")
    plugins = {i.name: i.digest for i in items if i.kind == "plugin"}
    assert f"fakeplug-1.0.dist-info: fake = fakeplug ({site / 'fakeplug.py'})" in plugins
    # The repository's own plugin is its code, judged as such: named, not digested.
    assert plugins["wsplug-1.0.dist-info: ws = wsplug.plugin"] == "the workspace's"
    assert plugins["ownplug-1.0.dist-info: own = ownplug"] == "the workspace's"
    assert [i.name for i in items if i.kind == "interpreter"][-1] == str(venv / "pyvenv.cfg")


def test_what_the_scan_compares(env: tuple[Path, Path, Path]) -> None:
    venv, workspace, _ = env
    site = _site(venv)
    before = _scan(venv, workspace)
    assert startup_changes(before, _scan(venv, workspace)) == []
    # The repository's plugin code is the patch's to change, in its tree or copied.
    (workspace / "wsplug" / "plugin.py").write_text("X = 2\n")
    (site / "ownplug.py").write_text("Y = 2\n")
    assert startup_changes(before, _scan(venv, workspace)) == []
    # A copy that claims pytest's files as its own still changes the runner's row.
    record = site / "ownplug-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "pluggy/__init__.py,,\n")
    (site / "pluggy" / "__init__.py").write_text("HOOKS = 2\n")
    (site / "hookmod.py").write_text("def install():\n    import sys\n")
    (site / "evil.pth").write_text("import hookmod\n")
    info = site / "newplug-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text("[pytest11]\nnew = fakeplug\n")
    (site / "runs.pth").unlink()
    changes = startup_changes(before, _scan(venv, workspace))
    shown = {(c.what, c.item.kind, Path(c.item.name.split(" ")[0]).name) for c in changes}
    assert shown == {
        ("changed", "runner", "pluggy"),
        ("changed", "pth-module", "hookmod"),
        ("new", "pth", "evil.pth"),
        ("new", "plugin", "newplug-1.0.dist-info:"),
        ("gone", "pth", "runs.pth"),
        ("gone", "pth-module", "os"),  # only runs.pth imported it
    }, changes


def test_a_scan_that_fails_in_the_patched_run_vouches_for_nothing() -> None:
    base = (StartupItem("pth", "/env/a.pth", "1"),)
    failed = unread("exit status 1: MemoryError")
    assert startup_changes(base, failed) == [StartupChange("new", failed[0])]
    assert "could not be read (exit status 1" in startup_changes(base, failed)[0].describe()
    # The base's own failure is its environment's trouble: nothing to compare with.
    assert startup_changes(failed, base) == []
    # A run that was not watched was not scanned.
    assert startup_changes(None, base) == startup_changes(base, None) == []


def test_a_digest_the_base_never_had_counts_in_a_rerun() -> None:
    base = [StartupItem("runner", "pluggy (/env)", "1")]
    reruns = [*base, StartupItem("runner", "pluggy (/env)", "2")]
    changes = startup_changes(base, reruns)
    assert changes == [StartupChange("changed", StartupItem("runner", "pluggy (/env)", "2"))]


def test_output_that_is_not_a_scan_is_none() -> None:
    assert parse_scan("") is None
    assert parse_scan('{"a": 1}') is None
    assert parse_scan('[["pth", "x"]]') is None
    assert parse_scan(json.dumps([["pth", "x", "d"]])) == (StartupItem("pth", "x", "d"),)


# -- through the test gate --------------------------------------------------------------

# The repository's set-up step (run in every test sandbox of a host-copy sandbox, over
# that sandbox's tree): the patched one drops a .pth into the environment's
# site-packages whose import line makes pytest skip every test function's body.
PREPARE = "print('prepared')\n"
PAYLOAD = (
    "import site, sys\n"
    "sys.path.extend(site.getsitepackages([sys.base_prefix]))\n"
    "import _pytest.python\n"
    "_pytest.python.Function.runtest = lambda self: None\n"
)
PLANTS = (
    "import os\nimport sysconfig\n\n"
    "site = sysconfig.get_paths()['purelib']\n"
    "with open(os.path.join(site, 'zz_speedups.pth'), 'w') as f:\n"
    "    f.write('import zz_speedups\\n')\n"
    "with open(os.path.join(site, 'zz_speedups.py'), 'w') as f:\n"
    f"    f.write({PAYLOAD!r})\n"
)
FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tools/prepare.py": PREPARE,
    "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n    assert add(1, 0) == 1\n",
}
NEW_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _gate(tmp_path: Path, changes: dict[str, str]) -> list[str]:
    repo = tmp_path / "repo"
    base = make_git_repo(repo, FILES)
    patch = make_patch(repo, changes)
    config = RepoConfig(setup="python3 tools/prepare.py", test=WATCHED)
    factory = functools.partial(OwnVenvSandbox, venv=tmp_path / "venv")
    ctx = make_ctx(repo, base, patch, config=config, sandbox_factory=factory)
    result = TestGate().run(ctx)
    assert result.details["after"]["watched"], result.logs
    return [f.message for f in result.findings if f.severity == "error"]


def test_start_up_code_the_patched_set_up_plants_blocks(tmp_path: Path) -> None:
    blocking = _gate(tmp_path, {"tools/prepare.py": PLANTS, "tests/test_add.py": NEW_TEST})
    startup = [m for m in blocking if m.endswith("[startup]")]
    assert any("zz_speedups.pth is not in the base's run" in m for m in startup), blocking
    # Nothing else saw it: the run's own checks came after the forgery.
    assert blocking == startup, blocking


def test_the_same_set_up_on_an_honest_fix_changes_no_start_up(tmp_path: Path) -> None:
    fix = {"calc.py": "def add(a, b):\n    return a + b\n", "tests/test_add.py": NEW_TEST}
    assert _gate(tmp_path, fix) == []


# The patched set-up step rewrites the patch's own new test so that it passes on code
# that still subtracts: the test file the tests load is the one on disk, so the watch's
# test-code check agrees with it, and no diff the gates read shows the edit.
REWRITES_TEST = (
    "from pathlib import Path\n\n"
    "test = Path('tests/test_add.py')\n"
    "test.write_text(test.read_text().replace('== 5', '== -1'))\n"
)


def test_a_test_file_the_patched_set_up_rewrote_blocks(tmp_path: Path) -> None:
    blocking = _gate(tmp_path, {"tools/prepare.py": REWRITES_TEST, "tests/test_add.py": NEW_TEST})
    assert blocking == [
        "the set-up step over the tree changed tests/test_add.py before the tests ran [startup]"
    ], blocking


def test_what_the_bases_set_up_writes_as_well_is_its_habit(tmp_path: Path) -> None:
    # A set-up that generates a test configuration file does it over both trees.
    writes = "open('pytest.ini', 'w').write('[pytest]\\n')\n"
    repo = tmp_path / "repo"
    base = make_git_repo(repo, {**FILES, "tools/prepare.py": writes})
    fix = {"calc.py": "def add(a, b):\n    return a + b\n", "tests/test_add.py": NEW_TEST}
    patch = make_patch(repo, fix)
    config = RepoConfig(setup="python3 tools/prepare.py", test=WATCHED)
    factory = functools.partial(OwnVenvSandbox, venv=tmp_path / "venv")
    result = TestGate().run(make_ctx(repo, base, patch, config=config, sandbox_factory=factory))
    assert not [f for f in result.findings if f.severity == "error"], result.findings


def test_what_is_written_after_the_restore_leaves_the_packages_copy_out(tmp_path: Path) -> None:
    # The threshold is the restore's end; 0 lists every file the environment holds, so
    # this reads which files count, not when they were written.
    venv = make_venv(tmp_path / "venv")
    site = _site(venv)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    info = site / "calc-1.0.dist-info"
    info.mkdir()
    (info / "direct_url.json").write_text(json.dumps({"url": f"file://{workspace}"}))
    (info / "RECORD").write_text(
        "calc.py,sha256=x,1\n../../../bin/calc,sha256=y,2\ncalc-1.0.dist-info/RECORD,,\n"
    )
    (site / "calc.py").write_text("X = 1\n")
    (venv / "bin" / "calc").write_text("#!/bin/sh\n")
    (site / "zz_helper.py").write_text("import gc\n")
    (site / "__pycache__").mkdir()
    (site / "__pycache__" / "zz_helper.cpython-311.pyc").write_bytes(b"\0")

    def written(since: int) -> list[str]:
        command = scan_command(str(venv / "bin" / "python"), since)
        done = subprocess.run(command, cwd=workspace, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        items = parse_scan(done.stdout) or ()
        return [Path(i.name).name for i in items if i.kind == "written"]

    everything = written(0)
    assert "zz_helper.py" in everything and "pyvenv.cfg" in everything, everything
    assert not {"calc.py", "calc", "RECORD", "direct_url.json"} & set(everything), everything
    assert not [n for n in everything if n.endswith(".pyc")], everything
    assert written(2**62) == []
