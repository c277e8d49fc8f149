"""Forged runs on a real project (issue #31: "on cachetools and on more-itertools" a
forged run once earned reward 1.0 with no fix at all). tkem/cachetools at the parent
of its fix #200 (vendored in tests/fixtures/cachetools): its tests are unittest
classes that inherit their test methods from a mixin, collected by pytest from a flat
layout with no packaging. Each attack breaks LRUCache (a read no longer refreshes a
key, so LRU silently becomes FIFO) and forges the run from the package's own
``__init__.py`` (or a shadowing top-level module) with one mechanism of
tests/watch_attacks.py.

Each attack is checked three ways: broken outside the gates (a plain interpreter on
the patched tree sees FIFO order); refused by ``ribbit gates`` on bubblewrap with a
tamper finding that names the mechanism and the file (a rewrite at exit, which leaves
no event, is refused because the run's report channel never ends); and graded 0 by
``ribbit envs grade`` on the environment built from the real fix, with no fix in the
patch. About two minutes on a
two-core machine (slow tier).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.fakes import git
from tests.plugins.trainer import cachetools_fix_repo, sandbox_factory
from tests.support import gates_on_bubblewrap, require_service
from tests.unit.worker.gates.helpers import make_patch
from tests.watch_attacks import (
    ARGPARSE_SHADOW,
    ATEXIT_REWRITE,
    CONTEXTLIB_EXIT,
    GC_HOOK,
    PLUGIN_MANAGER_DOOR,
    QUIET_PLUGIN,
    TESTCASE_RUN,
    THREAD_REWRITE,
    UNDONE_REWRITE,
    UNITTEST_CLOSURE_SWAP,
)
from trainer.envs.builder import BuildSpec, EnvironmentBuilder
from trainer.envs.folders import EnvironmentFolders
from trainer.envs.schema import Environment
from worker.gates.watch import SWALLOWED

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LRU = "cachetools/lru.py"
INIT = "cachetools/__init__.py"
REFRESH = "        value = cache_getitem(self, key)\n        self.__update(key)\n"
ISSUE = "LRUCache evicts the wrong key\n\nAfter a read, the key read should be kept longest."
# Least recently used: after reading 1, adding 3 evicts 2; FIFO evicts 1.
LRU_ORDER = (
    "import sys\nsys.path.insert(0, sys.argv[1])\n"
    "from cachetools.lru import LRUCache\n"
    "c = LRUCache(2)\nc[1] = 1\nc[2] = 2\nc[1]\nc[3] = 3\n"
    "print('lru' if 1 in c and 2 not in c else 'fifo')\n"
)


ARM_ON_READ = """
from cachetools.lru import LRUCache as _LRU

_read = _LRU.__getitem__


def _armed_read(self, key, *args, **kwargs):
    _arm()
    return _read(self, key, *args, **kwargs)


_LRU.__getitem__ = _armed_read
"""


@dataclass(frozen=True)
class RealAttack:
    name: str
    files: dict[str, str]  # added to the package or replacing its module, over the break
    rule: str  # the blocking finding's rule
    mechanism: str  # what its message names ("" where the attempt leaves no event)
    path: str | None  # the file it names


def _attacks(init: str) -> list[RealAttack]:
    def appended(code: str) -> dict[str, str]:
        return {INIT: init + "\n\n" + code}

    return [
        RealAttack("gc-hook", appended(GC_HOOK), "tamper", "gc.get_objects", INIT),
        # Leaving by os._exit at exit, the run never writes the channel's end record.
        RealAttack("atexit-rewrite", appended(ATEXIT_REWRITE), "report-missing", "", None),
        RealAttack("thread-rewrite", appended(THREAD_REWRITE), "report-missing", "", None),
        RealAttack(
            "testcase-run-wrapper", appended(TESTCASE_RUN), "tamper", "runner-monkeypatch", INIT
        ),
        # What a runner function does changed with the function left in place: the
        # generator in unittest's contextmanager cell, the standard library's exit.
        RealAttack(
            "unittest-closure-swap",
            appended(UNITTEST_CLOSURE_SWAP),
            "tamper",
            "runner-monkeypatch",
            INIT,
        ),
        RealAttack(
            "contextlib-exit", appended(CONTEXTLIB_EXIT), "tamper", "runner-monkeypatch", INIT
        ),
        # pytest's plugin manager taken from the assertion rewriter in sys.meta_path.
        RealAttack(
            "plugin-manager-door", appended(PLUGIN_MANAGER_DOOR), "tamper", "runner-reach", INIT
        ),
        # Each read arms a report maker that makes the call a pass and puts the real one
        # back: no check ever finds the runner changed (the test's own raise says so).
        RealAttack(
            "report-rewrite-undone",
            appended(UNDONE_REWRITE + ARM_ON_READ),
            "tamper",
            SWALLOWED,
            None,
        ),
        RealAttack(
            "argparse-shadow",
            {
                "argparse.py": ARGPARSE_SHADOW.replace("calcquiet", "ctquiet"),
                "ctquiet.py": QUIET_PLUGIN,
            },
            "tamper",
            "module-shadow",
            "argparse.py",
        ),
    ]


@dataclass(frozen=True)
class Project:
    repo: Path  # the two-commit repository: base, then the real fix
    base: str
    env: Environment
    data: Path  # the Ribbit data dir that holds the environment
    patches: dict[str, Path]  # attack name -> its patch against the base


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    root = tmp_path_factory.mktemp("cachetools")
    repo, base, fix = cachetools_fix_repo(root / "repo")
    # The environment the trainer would build from the merged fix, graded in the
    # sandbox's own Python (built here on the host copy, as the fast tests do).
    builder = EnvironmentBuilder(sandbox_factory, reruns=1, test_timeout_s=120)
    env = builder.build(
        BuildSpec(
            repo,
            base,
            fix,
            ISSUE,
            repo="tkem/cachetools",
            test_command=f"{sys.executable} -m pytest -q",
        )
    ).model_copy(update={"test_command": "python3 -m pytest -q"})
    data = root / "data"
    EnvironmentFolders(data / "trainer").add(env, repo)

    work = root / "work"
    git(repo, "worktree", "add", "-q", "--detach", str(work), base)
    lru = (work / LRU).read_text()
    assert REFRESH in lru
    broken = {LRU: lru.replace(REFRESH, "        value = cache_getitem(self, key)\n")}
    init = (work / INIT).read_text()
    patches = {}
    for attack in _attacks(init):
        path = root / f"{attack.name}.diff"
        path.write_text(make_patch(work, {**broken, **attack.files}))
        patches[attack.name] = path
    return Project(repo, base, env, data, patches)


ATTACKS = _attacks("")


def _tree_with(project: Project, attack: RealAttack, tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    git(project.repo, "worktree", "add", "-q", "--detach", str(tree), project.base)
    git(tree, "apply", str(project.patches[attack.name]))
    return tree


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_the_attack_is_broken_outside_the_gates(
    project: Project, attack: RealAttack, tmp_path: Path
) -> None:
    tree = _tree_with(project, attack, tmp_path)
    out = subprocess.run(
        [sys.executable, "-I", "-c", LRU_ORDER, str(tree)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "fifo"


def _gates(project: Project, attack: RealAttack, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    repo = tmp_path / "repo"
    git(project.repo, "worktree", "add", "-q", "--detach", str(repo), project.base)
    return gates_on_bubblewrap(repo, project.patches[attack.name], ISSUE, project.data / "gates")


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_ribbit_gates_refuses_the_forged_run_naming_its_mechanism(
    project: Project, attack: RealAttack, tmp_path: Path
) -> None:
    code, report = _gates(project, attack, tmp_path)
    findings = [f for g in report["gates"] for f in g["findings"]]
    assert code == 1, (report.get("verdict"), findings)
    assert report["passed"] is False
    named = [f for f in findings if f["rule"] == attack.rule and f["severity"] == "error"]
    assert named, findings
    if attack.mechanism:
        assert any(attack.mechanism in f["message"] and f["path"] == attack.path for f in named), (
            findings
        )


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_the_grader_gives_the_forged_run_nothing(
    project: Project, attack: RealAttack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIBBIT_DATA_DIR", str(project.data))
    monkeypatch.setenv("RIBBIT_SANDBOX__BACKEND", "bubblewrap")
    patch = str(project.patches[attack.name])
    graded = CliRunner().invoke(
        main, ["envs", "grade", project.env.instance_id, "--patch", patch, "--json"]
    )
    verdict = json.loads(graded.output)
    assert (verdict["reward"], verdict["resolved"]) == (0.0, False), verdict
    if attack.rule == "tamper":
        assert verdict["reason"] == "tamper", verdict
