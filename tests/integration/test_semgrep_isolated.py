"""The Semgrep gate scans with the semgrep the setting names, here the isolated install
that `make install` builds beside the app's venv from deploy/semgrep.lock (its own
interpreter and packages, none of the app's pins): a real scan finds a planted
finding, and the wrapper the setting points at proves that binary is the one that ran."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from bot.settings import Settings
from tests.support import require_service
from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from tests.unit.worker.gates.snippets import INSECURE
from worker.doctor import semgrep_check
from worker.gates.semgrep import SemgrepGate, isolated_semgrep
from worker.settings import GateSettings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def isolated() -> Path:
    binary = isolated_semgrep()
    require_service(
        binary.is_file() and os.access(binary, os.X_OK),
        f"Semgrep's isolated install at {binary} (make semgrep)",
    )
    return binary


def test_semgrep_isolated_install_has_its_own_interpreter(isolated: Path) -> None:
    venv = isolated.parent.parent
    shebang = isolated.read_text().splitlines()[0].removeprefix("#!")
    assert Path(shebang).parent == venv / "bin", shebang
    # Its packages are not the app's: no ribbit dependency there, and semgrep's own
    # site-packages live under its venv.
    (site,) = (venv / "lib").glob("python3*/site-packages")
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert "semgrep" in installed
    assert not installed & {"ribbit", "flask", "celery", "torch", "transformers"}


def test_semgrep_gate_scans_with_the_configured_isolated_binary(
    tmp_path: Path, isolated: Path
) -> None:
    marker = tmp_path / "ran"
    wrapper = tmp_path / "bin" / "semgrep"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\necho "$0" >> {shlex.quote(str(marker))}\n'
        f'exec {shlex.quote(str(isolated))} "$@"\n'
    )
    wrapper.chmod(0o755)
    repo, base = repo_with(tmp_path, {"app/__init__.py": "", "app/calc.py": "X = 1\n"})
    patch = make_patch(repo, {"app/calc.py": INSECURE["code-injection"]})
    settings = GateSettings(semgrep_bin=wrapper)
    result = SemgrepGate().run(make_ctx(repo, base, patch, settings=settings))
    assert marker.read_text().split() == [str(wrapper)]  # one scan, both trees
    assert not result.passed
    assert [(f.path, f.severity) for f in result.findings] == [("app/calc.py", "error")]
    assert "eval" in result.findings[0].rule


def test_semgrep_doctor_runs_the_isolated_install(tmp_path: Path, isolated: Path) -> None:
    check = semgrep_check(Settings(data_dir=tmp_path / "data"))
    assert check.status == "ok", check.detail
    assert check.detail.endswith(f"at {isolated} (isolated install)")
