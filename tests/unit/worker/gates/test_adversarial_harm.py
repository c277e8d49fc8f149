"""Each hostile variant of the adversarial corpus is really broken outside the gates
(issue #31): its patch, applied by plain ``git apply`` to the toy repository, shows
the harm tests/adversarial_harm.py names for it, on a production host and never under
a test runner. A refusal of a harmless patch would be a false positive the corpus
itself could not see."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.adversarial import CASES, Case, case_patch, make_base_repo
from tests.adversarial_harm import (
    HARMS,
    NODE_PRELUDE,
    PYTHON_PRELUDE,
    CodeHarm,
    FileGone,
    Harm,
    harm_of,
)
from tests.support import require_service

HOSTILE = [c for c in CASES if not c.honest]


def _patched(tmp_path: Path, case: Case) -> Path:
    repo, _ = make_base_repo(tmp_path, case)
    patch = case_patch(repo, case)
    subprocess.run(["git", "apply", "--index", "-"], input=patch, text=True, cwd=repo, check=True)
    return repo


def _run_probe(tree: Path, harm: CodeHarm, scratch: Path) -> str:
    if harm.language == "python":
        argv = [sys.executable, "-I", "-c", PYTHON_PRELUDE + harm.probe, str(tree)]
    else:
        node = shutil.which("node")
        require_service(node is not None, "node")
        argv = [str(node), "-e", NODE_PRELUDE + harm.probe, str(tree)]
    # A production host: no CI or test-runner variables reach the probe.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch), "LANG": "C.UTF-8"}
    out = subprocess.run(
        argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    lines = out.stdout.strip().splitlines()
    return lines[-1] if lines else f"no verdict (exit {out.returncode}): {out.stderr[-2000:]}"


def shows(tree: Path, harm: Harm, scratch: Path) -> str:
    """``HARM`` when the harm shows, else what showed instead."""
    if isinstance(harm, CodeHarm):
        return _run_probe(tree, harm, scratch)
    if isinstance(harm, FileGone):
        return "NO HARM" if (tree / harm.path).exists() else "HARM"
    path = tree / harm.path
    found = path.is_file() and harm.needle in path.read_text(encoding="utf-8")
    return "HARM" if found else "NO HARM"


@pytest.mark.parametrize("case", HOSTILE, ids=lambda c: c.name)
def test_every_hostile_variant_is_broken_outside_the_gates(tmp_path: Path, case: Case) -> None:
    tree = _patched(tmp_path, case)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert shows(tree, harm_of(case), scratch) == "HARM", harm_of(case)


@pytest.mark.parametrize("case", HOSTILE, ids=lambda c: c.name)
def test_the_harm_is_absent_at_the_base(tmp_path: Path, case: Case) -> None:
    """The probe can fail: on the unpatched toy repository it shows nothing."""
    repo, _ = make_base_repo(tmp_path, case)
    harm = harm_of(case)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert shows(repo, harm, scratch) != "HARM", harm


def test_harms_name_only_hostile_cases() -> None:
    names = {c.name for c in HOSTILE}
    assert set(HARMS) <= names, sorted(set(HARMS) - names)


def test_the_shell_trap_refuses_and_records() -> None:
    """The probes never run a command: the audit hook refuses it and keeps its text."""
    code = PYTHON_PRELUDE + (
        "import subprocess\n"
        "attempt(subprocess.run, 'echo trapped', shell=True)\n"
        "attempt(os.system, 'echo also')\n"
        "harm(shell_ran('echo trapped') and shell_ran('echo also'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code, "/nonexistent"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.splitlines() == ["HARM"]
