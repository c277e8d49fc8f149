"""A run the code under test cannot forge (issue #31): every attack in
tests/watch_attacks.py forges an unwatched run (checked here, so the corpus stays
honest) and is reported when the run is watched; an honest package and its tests,
full of the introspection the standard library does, give no tamper at all. Real
pytest runs in host-copy sandboxes (tests/fakes.LocalDirSandbox), no isolation needed:
what is tested is the bootstrap, the channel and the gate's reading of them."""

from __future__ import annotations

import ast
import base64
import hashlib
import hmac
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fakes import LocalDirSandbox, make_git_repo
from tests.unit.worker.gates.helpers import make_ctx, make_patch
from tests.watch_attacks import BASE, BROKEN, HONEST, MARKER, Attack, attacks
from tests.watch_child_attacks import REACH_PROBE, ChildAttack, child_attacks
from worker.gates import (
    watchboot,
    watchchannel,
    watchguard,
    watchrunner,
    watchtests,
    watchwitness,
)
from worker.gates.judge import SuiteRun
from worker.gates.tamper import tamper_findings
from worker.gates.testrun import TestRun, run_tests
from worker.gates.tests import TestGate
from worker.gates.trees import PatchTrees
from worker.gates.watch import (
    SWALLOWED,
    TamperEvent,
    bootstrap_source,
    parse_channel,
    watch_plan,
)
from worker.repo_config import RepoConfig

WATCHED = "python3 -m pytest -q -p no:cacheprovider"
PLAIN = "bash -c 'python3 -m pytest -q -p no:cacheprovider'"  # a shell command: unwatched
MUL = "tests/test_core.py::test_mul"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _run(tree: Path, command: str) -> TestRun:
    with LocalDirSandbox(tree) as sandbox:
        return run_tests(sandbox, command, timeout=120)


class _AsTheSandboxUser(LocalDirSandbox):
    """The host-copy sandbox with a $TMPDIR of its own (the host's /tmp is every test
    run's) and, when the tests run as root, without CAP_SYS_PTRACE, which the real
    sandboxes' user lacks too: only then is a non-dumpable process out of the reach of
    the processes it starts, here as there."""

    def own_command(self, argv: list[str]) -> list[str]:
        if os.geteuid() == 0:
            return ["setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", *argv]
        return argv

    def own_environment(self) -> dict[str, str]:
        tmp = self.workspace.parent / "own-tmp"
        tmp.mkdir(exist_ok=True)
        return {"TMPDIR": str(tmp)}


def _mul(run: TestRun) -> str | None:
    return next((o for cid, o in run.outcomes.items() if cid.endswith("test_mul")), None)


@pytest.mark.parametrize("attack", attacks(), ids=lambda a: a.name)
def test_each_attack_forges_an_unwatched_run_and_is_reported_when_watched(
    tmp_path: Path, attack: Attack
) -> None:
    tree = _tree(tmp_path, attack.files)
    if attack.forges_plain:
        plain = _run(tree, PLAIN)
        # Broken outside the watch: mul is wrong, yet the plain run says all passed.
        assert not plain.watched
        assert plain.exit_code == 0 and plain.tampered is None, plain.log()
        assert _mul(plain) == "passed"

    watched = _run(tree, WATCHED)
    assert watched.watched
    if not attack.forges_plain:
        # An attack on the watch's own encoding: the verdict stays the run's own.
        assert _mul(watched) == "failed" and watched.exit_code == 1, watched.log()
        assert watched.tampered == "the interpreter exited 0 but pytest's session ended 1"
    if attack.mechanism:
        named = [e for e in watched.tamper if e.mechanism == attack.mechanism]
        assert named, (watched.tamper, watched.log())
        assert named[0].path == attack.path
        assert named[0].line >= 1 or attack.path is None  # a run-wide record has no line
    else:
        # Rewrites at exit: the report and the status are the channel's, and what was
        # written on it later, or the exit forced to 0, shows.
        assert watched.tampered, watched.log()
        assert _mul(watched) != "passed"


@pytest.mark.parametrize("attack", child_attacks(), ids=lambda a: a.name)
def test_a_process_the_package_starts_cannot_forge_the_watched_run(
    tmp_path: Path, attack: ChildAttack
) -> None:
    with _AsTheSandboxUser(_tree(tmp_path, attack.files)) as sandbox:
        run = run_tests(sandbox, WATCHED, timeout=120)
    assert run.watched
    if attack.tampers:
        # It reached the key, but only through what the watch reports.
        assert run.tampered or run.tamper, run.log()
        assert attack.reason in (run.tampered or ""), run.log()
        return
    # It reached nothing: the run is the tests' own, regression and all.
    assert run.tampered is None and run.tamper == (), run.log()
    assert run.outcomes == {MUL: "failed", "tests/test_core.py::test_one": "passed"}
    assert run.exit_code == 1


def test_a_process_a_test_starts_reaches_neither_the_interpreter_nor_the_report(
    tmp_path: Path,
) -> None:
    # Each way in, tried for real by a child of the test interpreter (REACH_PROBE says
    # which); on an unwatched run the same child reaches the interpreter, so it can fail.
    tree = _tree(tmp_path, {**BASE, "tests/test_reach.py": REACH_PROBE})
    probe = "tests/test_reach.py::test_a_child_reaches_nothing"
    with _AsTheSandboxUser(tree) as sandbox:
        plain = run_tests(sandbox, PLAIN, timeout=120)
        run = run_tests(sandbox, WATCHED, timeout=120)
    assert plain.outcomes[probe] == "failed", plain.log()
    assert run.outcomes[probe] == "passed", run.log()


def test_a_report_descriptor_replaced_in_the_process_is_tamper(tmp_path: Path) -> None:
    # No audit event names a readlink or a dup2: the bootstrap checks, when it seals and
    # reads the report, that its descriptor is still the memfd it made.
    swap = (
        "import os\n\nfor fd in range(3, 64):\n    try:\n"
        "        if 'ribbit-report' in os.readlink(f'/proc/self/fd/{fd}'):\n"
        "            os.dup2(os.memfd_create('forged'), fd)\n"
        "    except OSError:\n        pass\n"
    )
    tree = _tree(tmp_path, {**BASE, "calc/core.py": BROKEN, "calc/__init__.py": swap})
    run = _run(tree, WATCHED)
    assert run.watched and not run.report, run.log()
    assert [e.mechanism for e in run.tamper] == ["report-descriptor"]
    assert run.tamper[0].what == "the report's descriptor was replaced"
    assert run.exit_code == 1


_FIND_REPORT = (
    "import mmap\nimport os\n\nfor fd in range(3, 64):\n    try:\n"
    "        found = 'ribbit-report' in os.readlink(f'/proc/self/fd/{fd}')\n"
    "    except OSError:\n        continue\n    if found:\n        break\n"
)


@pytest.mark.parametrize(
    ("reach", "mechanism", "path"),
    [
        # Reopened through /proc/self/fd: the audit hook names the file and line.
        ("_held = open(f'/proc/self/fd/{fd}', 'r+b')\n", "open", "calc/__init__.py"),
        # A writable shared mapping (no open, no event) could write it after pytest did:
        # the seal fails while the mapping exists, and that is recorded.
        ("os.ftruncate(fd, 4096)\n_held = mmap.mmap(fd, 4096)\n", "report-descriptor", None),
    ],
)
def test_reaching_the_report_from_the_process_is_tamper(
    tmp_path: Path, reach: str, mechanism: str, path: str | None
) -> None:
    package = _FIND_REPORT + reach
    tree = _tree(tmp_path, {**BASE, "calc/core.py": BROKEN, "calc/__init__.py": package})
    run = _run(tree, WATCHED)
    assert run.watched, run.log()
    assert [(e.mechanism, e.path) for e in run.tamper] == [(mechanism, path)], run.tamper
    assert _mul(run) == "failed" or not run.report


def test_every_step_of_the_bootstrap_runs_with_its_private_globals() -> None:
    # A step left out of _STEPS would be called through the ``__main__`` namespace the
    # code under test can rebind (tests/watch_attacks.py's bootstrap-step-rebind); the
    # program run is watchboot.py with its parts' code (watchchannel.py, watchrunner.py,
    # watchtests.py, watchwitness.py) in place of its imports of them.
    tree = ast.parse(bootstrap_source())
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for part in (watchchannel, watchguard, watchrunner, watchtests, watchwitness):
        source = ast.parse(Path(str(part.__file__)).read_text())
        assert {n.name for n in source.body if isinstance(n, ast.FunctionDef)} <= defined
    imported = [n.module for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m and m.startswith("worker")]  # none in the sandbox
    assert {step.__name__ for step in watchboot._STEPS} == defined - {"_run_privately"}
    assert all(not step.__defaults__ and not step.__kwdefaults__ for step in watchboot._STEPS)


def test_a_test_that_makes_the_interpreter_dumpable_again_is_recorded_and_undone(
    tmp_path: Path,
) -> None:
    # Test code may call what it likes (its ctypes lookup is not flagged), but after each
    # test the bootstrap asks the kernel again: a child could read the key from memory.
    undo = (
        "import ctypes\n\n\ndef test_a_undo():\n"
        "    assert ctypes.CDLL(None).prctl(4, 1, 0, 0, 0) == 0\n\n\n"
        "def test_b_undumpable_again():\n"
        "    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0\n"
    )
    run = _run(_tree(tmp_path, {**BASE, "tests/test_undo.py": undo}), WATCHED)
    assert run.watched and run.tampered is None, run.log()
    assert [e.mechanism for e in run.tamper] == ["dumpable"], run.tamper
    assert run.outcomes["tests/test_undo.py::test_b_undumpable_again"] == "passed"


class _Without(LocalDirSandbox):
    """The host-copy sandbox whose interpreters load ``sitecustomize`` (in ``site``)
    first: it takes away one thing the bootstrap uses."""

    def __init__(self, tree: Path, site: Path) -> None:
        super().__init__(tree)
        self.site = site

    def own_environment(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.site)}


@pytest.mark.parametrize(
    "missing",
    [
        "import sys\nsys.modules['ctypes'] = None\n",
        "import fcntl\ndel fcntl.F_ADD_SEALS\n",
        "import fcntl\nfcntl.fcntl = lambda *a: (_ for _ in ()).throw(OSError(22, 'no seals'))\n",
        "import os\nos.MFD_ALLOW_SEALING = 1 << 30\n",  # memfd_create refuses the flag
    ],
    ids=["ctypes", "F_ADD_SEALS", "sealing", "MFD_ALLOW_SEALING"],
)
def test_an_interpreter_missing_what_the_bootstrap_calls_runs_unwatched(
    tmp_path: Path, missing: str
) -> None:
    # The probe makes the bootstrap's own calls: where one fails the tests run as
    # written and the run says it was not watched, instead of a bootstrap that dies
    # after its key record (a broken run) or records itself dumpable.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(missing)
    with _Without(_tree(tmp_path, BASE), site) as sandbox:
        run = run_tests(sandbox, WATCHED, timeout=120)
    assert not run.watched, run.log()
    assert run.tampered is None and run.tamper == (), run.log()
    assert run.outcomes == {MUL: "passed", "tests/test_core.py::test_one": "passed"}


def test_exiting_zero_after_the_session_shows(tmp_path: Path) -> None:
    exit_zero = "import atexit\nimport os\n\natexit.register(os._exit, 0)\n"
    tree = _tree(tmp_path, {**BASE, "calc/core.py": "def mul(a, b):\n    return a + b\n"})
    (tree / "calc/__init__.py").write_text(exit_zero)
    assert _run(tree, PLAIN).exit_code == 0
    watched = _run(tree, WATCHED)
    assert watched.tampered == "the interpreter exited 0 but pytest's session ended 1"
    assert watched.exit_code == 1
    assert _mul(watched) == "failed"


def test_exiting_zero_before_the_session_ends_shows(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {**BASE, "calc/__init__.py": "import os\n\nos._exit(0)\n"})
    watched = _run(tree, WATCHED)
    assert watched.tampered == "the interpreter exited 0 before pytest's session ended"


def test_an_honest_package_full_of_introspection_gives_no_tamper(tmp_path: Path) -> None:
    run = _run(_tree(tmp_path, HONEST), WATCHED)
    assert run.watched and run.tampered is None, run.log()
    assert run.tamper == ()
    assert run.exit_code == 0
    assert set(run.outcomes.values()) == {"passed"} and len(run.outcomes) == 6


# An installed pytest plugin (outside the workspace, loaded with -p) whose wrapper
# around each call uses a context manager of its own, as plugins do.
GUARD_PLUGIN = """import pytest


class Guard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with Guard():
        return (yield)
"""


class _WithAVenvFirst(LocalDirSandbox):
    """The host-copy sandbox with a virtual environment's python3 first on PATH."""

    venv: Path

    def own_environment(self) -> dict[str, str]:
        return {"PATH": f"{self.venv}/bin:{os.environ['PATH']}"}


def test_an_installed_plugins_code_is_held_still_too(tmp_path: Path) -> None:
    # The package makes the plugin's exit swallow what the call raised: the plugin's
    # module, loaded before the first conftest, is snapshotted like pytest's own. It is
    # installed in a virtual environment over the host's packages (a watched run takes
    # no PYTHONPATH).
    venv = tmp_path / "venv"
    python3 = shutil.which("python3") or "python3"
    venv_args = ["-m", "venv", "--without-pip", "--system-site-packages", str(venv)]
    subprocess.run([python3, *venv_args], check=True)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "guardplugin.py").write_text(GUARD_PLUGIN)
    swallow = "import guardplugin\n\nguardplugin.Guard.__exit__ = lambda self, *exc: True\n"
    tree = _tree(tmp_path, {**BASE, "calc/core.py": BROKEN, "calc/__init__.py": swallow})
    command = f"{WATCHED} -p guardplugin"
    with _WithAVenvFirst(tree) as sandbox:
        sandbox.venv = venv
        plain = run_tests(sandbox, f"bash -c '{command}'", timeout=120)
        run = run_tests(sandbox, command, timeout=120)
    assert _mul(plain) == "passed", plain.log()  # it forges an unwatched run
    assert run.watched, run.log()
    replaced = [e for e in run.tamper if e.mechanism == "runner-monkeypatch"]
    assert replaced and replaced[0].path == "calc/__init__.py", (run.tamper, run.log())
    assert "guardplugin.Guard.__exit__" in replaced[0].what


def test_a_runner_functions_defaults_changed_by_the_package_are_recorded(tmp_path: Path) -> None:
    # Defaults decide what a function does while it stays in place (call_and_report's
    # log=False would drop every report); the audit hook sees them set, and the keyword
    # defaults taken to change in place, for the runner's functions.
    package = (
        "import _pytest.compat\nimport _pytest.runner\n\n"
        "_pytest.runner.call_and_report.__defaults__ = (True,)\n"
        "_pytest.compat.getfuncargnames.__kwdefaults__['cls'] = None\n"
        "\n\ndef own(a=1):\n    return a\n\n\nown.__defaults__ = (2,)\n"
    )
    tree = _tree(tmp_path, {**BASE, "calc/__init__.py": package})
    run = _run(tree, WATCHED)
    assert run.watched, run.log()
    found = sorted((e.mechanism, e.path, e.line) for e in run.tamper)
    assert found == [
        ("object.__getattr__", "calc/__init__.py", 5),
        ("object.__setattr__", "calc/__init__.py", 4),
    ], run.tamper  # the package's own function's defaults are its business


def test_a_frozenset_constant_compares_whatever_order_its_elements_come_in() -> None:
    # A .pyc pytest wrote in an earlier run (another hash seed) holds a set literal's
    # elements in another order than a fresh compile (python-pathspec's tests, in the
    # real-fixes corpus, read as changed test code when compared by repr).
    assert repr(frozenset([8, 0])) != repr(frozenset([0, 8]))  # 0 and 8 share a slot
    code = compile("x in {0, 8}", "t.py", "eval")

    def with_set(elements: list[int]) -> object:
        consts = tuple(
            frozenset(elements) if isinstance(c, frozenset) else c for c in code.co_consts
        )
        return code.replace(co_consts=consts)

    assert watchtests._signature(with_set([8, 0])) == watchtests._signature(with_set([0, 8]))
    assert watchtests._signature(with_set([8, 0])) != watchtests._signature(with_set([0, 9]))


def test_what_the_runner_itself_makes_of_a_raise_is_not_swallowing(tmp_path: Path) -> None:
    # A test function that raises and is reported as anything but a pass (expected
    # failures, skips from inside the test) or raises inside its own handling (a
    # subTest, pytest.raises) leaves no record; a test that passes on its second call
    # within the same phase (a plugin's retry) is judged by its last call.
    tests = """import unittest

import pytest

from calc.core import mul

_calls = []


@pytest.mark.xfail(raises=AssertionError, strict=False)
def test_known_bug():
    assert mul(2, 3) == 7


def test_skipped_inside():
    pytest.skip("not here")


def test_raises_inside():
    with pytest.raises(TypeError):
        mul(2, None)


class TestOld(unittest.TestCase):
    @unittest.expectedFailure
    def test_expected(self):
        self.assertEqual(mul(2, 3), 7)

    def test_skip(self):
        self.skipTest("not here")

    def test_sub(self):
        for n in (1, 2):
            with self.subTest(n=n):
                self.assertEqual(mul(n, 1), n)
"""
    # A retry within the call phase, as a plugin might: the first call fails, the hook
    # is called again and passes.
    retry = """import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if item.name == "test_second_try":
        try:
            item.ihook.pytest_pyfunc_call(pyfuncitem=item)
        except AssertionError:
            pass
"""
    second = (
        "_tries = []\n\n\ndef test_second_try():\n"
        "    _tries.append(1)\n    assert len(_tries) > 1\n"
    )
    files = {
        **BASE,
        "tests/test_outcomes.py": tests,
        "conftest.py": retry,
        "tests/test_retry.py": second,
    }
    run = _run(_tree(tmp_path, files), WATCHED)
    assert run.watched and run.tampered is None, run.log()
    assert run.tamper == (), run.log()
    outcomes = {cid.rpartition("::")[2]: o for cid, o in run.outcomes.items()}
    assert outcomes["test_known_bug"] == "skipped" and outcomes["test_expected"] == "skipped"
    assert outcomes["test_skipped_inside"] == "skipped" and outcomes["test_skip"] == "skipped"
    assert outcomes["test_raises_inside"] == "passed" and outcomes["test_sub"] == "passed"
    assert outcomes["test_second_try"] == "passed"


def test_the_watched_run_names_no_report_in_what_the_tests_can_read(tmp_path: Path) -> None:
    # The environment, the command line (the bootstrap's source is there, no path) and
    # where every open descriptor leads.
    probe = (
        "import os\n\n\ndef test_nothing_names_the_report():\n"
        "    environ = open('/proc/self/environ', 'rb').read()\n"
        "    cmdline = open('/proc/self/cmdline', 'rb').read()\n"
        "    links = []\n"
        "    for fd in os.listdir('/proc/self/fd'):\n"
        "        try:\n            links.append(os.readlink(f'/proc/self/fd/{fd}'))\n"
        "        except OSError:\n            pass\n"
        "    assert b'junit' not in environ.lower()\n"
        "    assert b'--junitxml=/' not in cmdline\n"
        "    assert not [link for link in links if 'junit' in link]\n"
    )
    tree = _tree(tmp_path, {**BASE, "tests/test_probe.py": probe})
    assert _run(tree, PLAIN).outcomes["tests/test_probe.py::test_nothing_names_the_report"] == (
        "failed"
    )  # the check can fail: the unwatched run names its report
    run = _run(tree, WATCHED)
    assert run.outcomes["tests/test_probe.py::test_nothing_names_the_report"] == "passed"


def test_a_flat_layout_still_imports_from_the_workspace_last(tmp_path: Path) -> None:
    flat = {
        "calcmod.py": "def mul(a, b):\n    return a * b\n",
        "tests/test_flat.py": "import sys\n\nimport calcmod\n\n\ndef test_flat():\n"
        "    assert calcmod.mul(2, 3) == 6\n    assert sys.path[-1].endswith('workspace')\n",
    }
    run = _run(_tree(tmp_path, flat), WATCHED)
    assert run.watched and run.outcomes == {"tests/test_flat.py::test_flat": "passed"}, run.log()


def test_only_plain_pytest_commands_are_watched() -> None:
    assert watch_plan("python3 -m pytest -q") is not None
    assert watch_plan("pytest -x tests") is not None
    assert watch_plan("make test") is None
    assert watch_plan("python3 -m unittest") is None


def _record(key: bytes, number: int, kind: str, payload: bytes) -> str:
    body = f"{number} {kind} {base64.b64encode(payload).decode()}"
    return f"ribbit1 {body} {hmac.new(key, body.encode(), hashlib.sha256).hexdigest()}"


def _channel(key: bytes, *records: str) -> str:
    return "\n".join([f"ribbit1 0 key {base64.b64encode(key).decode()} -", *records]) + "\n"


KEY = b"k" * 32
END = b'{"status": 0, "failed": 0}'


def test_the_channel_reads_the_bootstraps_records() -> None:
    report = _record(KEY, 1, "report", b"<testsuite/>")
    channel = parse_channel(_channel(KEY, report, _record(KEY, 2, "end", END)))
    assert channel is not None and channel.broken is None
    assert channel.report == b"<testsuite/>" and channel.status == 0


@pytest.mark.parametrize(
    ("records", "why"),
    [
        ([_record(b"x" * 32, 1, "end", END)], "forged signature"),
        ([_record(KEY, 2, "end", END)], "not the bootstrap's"),  # a gap
        ([_record(KEY, 1, "end", END), _record(KEY, 2, "end", END)], "after its end"),
        ([_record(KEY, 1, "end", END), "2 passed"], "not the bootstrap's"),
        ([_record(KEY, 1, "shell", b"")], "unknown kind"),
    ],
)
def test_a_channel_with_anything_but_the_bootstraps_records_is_broken(
    records: list[str], why: str
) -> None:
    channel = parse_channel(_channel(KEY, *records))
    assert channel is not None and channel.broken is not None and why in channel.broken


def test_a_channel_without_its_key_first_is_broken_and_none_is_unwatched() -> None:
    forged = parse_channel(_record(KEY, 1, "end", END) + "\n")
    assert forged is not None and forged.broken
    bad_key = parse_channel("ribbit1 0 key abc -\n")
    assert bad_key is not None and bad_key.broken == "the run's channel key is not base64"
    assert parse_channel("") is None
    assert parse_channel("hello\n") is None


def test_the_gate_blocks_a_tampering_patch_naming_mechanism_file_and_line(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    base = make_git_repo(repo, BASE)
    attack = next(a for a in attacks() if a.name == "gc-hook")
    patch = make_patch(repo, {p: t for p, t in attack.files.items() if BASE.get(p) != t})
    ctx = make_ctx(repo, base, patch, config=RepoConfig(test=WATCHED))
    result = TestGate().run(ctx)
    tamper = [f for f in result.findings if f.rule == "tamper"]
    assert not result.passed
    assert tamper and tamper[0].path == "calc/__init__.py" and tamper[0].line
    assert "gc.get_objects" in tamper[0].message
    assert result.details["after"]["watched"] is True


def test_the_gate_passes_an_honest_fix_with_no_tamper_finding(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    broken = {**HONEST, "calc/core.py": HONEST["calc/core.py"].replace(".a * b", ".a + b")}
    base = make_git_repo(repo, broken)
    patch = make_patch(repo, {"calc/core.py": HONEST["calc/core.py"]})
    result = TestGate().run(make_ctx(repo, base, patch, config=RepoConfig(test=WATCHED)))
    assert result.passed, result.findings
    assert not [f for f in result.findings if f.rule.startswith("tamper")]


def test_the_rerun_shares_no_state_with_the_first_run(tmp_path: Path) -> None:
    # MARKER passes once its first call has left a file in $HOME; the rerun used to
    # share the first run's sandbox, so the regression read as "flaky".
    repo = tmp_path / "repo"
    base = make_git_repo(repo, BASE)
    patch = make_patch(repo, {"calc/core.py": MARKER})
    result = TestGate().run(make_ctx(repo, base, patch, config=RepoConfig(test=WATCHED)))
    assert not result.passed
    assert result.details["after"]["reran"] is True
    assert MUL in result.details["regressions"]
    assert not result.details["flaky"]


def test_a_tamper_the_base_does_too_is_only_a_warning(tmp_path: Path) -> None:
    files = {"calc/core.py": "import gc\n\nN = len(gc.get_objects())\n"}
    before = _tree(tmp_path / "b", files)
    after = _tree(tmp_path / "a", {"calc/core.py": "import gc\n\n\nN = len(gc.get_objects())\n"})
    trees = PatchTrees(before=before, after=after, parsed=None)  # type: ignore[arg-type]
    event = TamperEvent("gc.get_objects", "garbage-collector traversal", "calc/core.py", 3)
    old = TamperEvent("gc.get_objects", "garbage-collector traversal", "calc/core.py", 3)
    found = tamper_findings(
        SuiteRun("before", watched=True, tamper=[old]),
        SuiteRun("after", watched=True, tamper=[event]),
        trees,
    )
    assert [f.rule for f in found] == ["tamper"]  # line 3 differs in text: not the base's
    moved = TamperEvent("gc.get_objects", "garbage-collector traversal", "calc/core.py", 4)
    found = tamper_findings(
        SuiteRun("before", watched=True, tamper=[old]),
        SuiteRun("after", watched=True, tamper=[moved]),
        trees,
    )
    assert [(f.rule, f.severity) for f in found] == [("tamper-in-base", "warning")]
    unwatched = tamper_findings(
        SuiteRun("before", watched=True), SuiteRun("after", watched=False), trees
    )
    assert [f.rule for f in unwatched] == ["tamper"]


def test_a_swallowed_raise_is_excused_only_by_the_same_tests_in_the_base(tmp_path: Path) -> None:
    # No line to compare: the test a swallowed record names tells two apart, so the
    # base's swallowing one test never excuses another's.
    tree = _tree(tmp_path, BASE)
    trees = PatchTrees(before=tree, after=tree, parsed=None)  # type: ignore[arg-type]

    def swallowed(test: str) -> TamperEvent:
        return TamperEvent(SWALLOWED, f"{test} raised AssertionError in its call", None, 0)

    before = SuiteRun("before", watched=True, tamper=[swallowed("tests/test_a.py::test_a")])
    same = tamper_findings(
        before,
        SuiteRun("after", watched=True, tamper=[swallowed("tests/test_a.py::test_a")]),
        trees,
    )
    assert [(f.rule, f.severity) for f in same] == [("tamper-in-base", "warning")]
    other = tamper_findings(before, SuiteRun("after", watched=True, tamper=[swallowed(MUL)]), trees)
    assert [(f.rule, f.severity) for f in other] == [("tamper", "error")]
    assert other[0].message.startswith(f"tamper: {MUL} raised AssertionError")


def test_a_watched_run_selects_tests_by_node_id(tmp_path: Path) -> None:
    tree = _tree(tmp_path, BASE)
    with LocalDirSandbox(tree) as sandbox:
        run = run_tests(sandbox, WATCHED, timeout=120, select=["tests/test_core.py::test_one"])
    assert run.watched and run.outcomes == {"tests/test_core.py::test_one": "passed"}


def test_events_from_many_threads_are_reported_once_per_site(tmp_path: Path) -> None:
    # Non-test code raising the same watched event from 8 threads: one record for the
    # site, and a channel still whole.
    threads = (
        "import sys\nimport threading\n\n\ndef walk(n):\n    for _ in range(50):\n"
        "        sys._getframe(0)\n\n\ndef mul(a, b):\n"
        "    workers = [threading.Thread(target=walk, args=(i,)) for i in range(8)]\n"
        "    for w in workers:\n        w.start()\n    for w in workers:\n        w.join()\n"
        "    return a * b\n"
    )
    run = _run(_tree(tmp_path, {**BASE, "calc/core.py": threads}), WATCHED)
    assert run.tampered is None, run.log()
    assert [e.mechanism for e in run.tamper] == ["sys._getframe"]
    assert run.exit_code == 0


def test_a_broken_channel_after_the_patch_is_tamper(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"calc/core.py": "x = 1\n"})
    trees = PatchTrees(before=tree, after=tree, parsed=None)  # type: ignore[arg-type]
    broken = SuiteRun("after", watched=True, mismatch="record 3 of the run's channel is forged")
    found = tamper_findings(SuiteRun("before", watched=True), broken, trees)
    assert [(f.rule, f.severity) for f in found] == [("tamper", "error")]
    assert "record 3" in found[0].message
