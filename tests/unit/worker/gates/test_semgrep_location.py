"""Which semgrep the gate runs (gates.semgrep_bin, the isolated install, PATH) and what
`ribbit doctor` says about it, with stand-in executables: no real semgrep needed."""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from worker.doctor import semgrep_check
from worker.gates.semgrep import SemgrepGate, isolated_semgrep, locate_semgrep
from worker.settings import GateSettings, WorkerSettings

ROOT = Path(__file__).resolve().parents[4]


def _fake_semgrep(path: Path, log: Path | None = None) -> Path:
    """A semgrep that answers --version and scans to no results, logging its argv."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = f'printf "%s\\n" "$@" >> "{log}"\n' if log else ""
    path.write_text(
        "#!/bin/sh\n"
        + record
        + 'if [ "$1" = --version ]; then echo 9.9.9; exit 0; fi\n'
        + 'echo \'{"results": [], "errors": []}\'\n'
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def app_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This interpreter's venv moved to tmp_path/venv; PATH holds git alone (tmp_path/tools),
    so no semgrep of this machine's is found."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    tools = tmp_path / "tools"
    tools.mkdir()
    git = shutil.which("git")
    assert git is not None
    (tools / "git").symlink_to(git)
    monkeypatch.setenv("PATH", str(tools))
    return venv


def test_semgrep_isolated_install_sits_beside_the_apps_venv(app_venv: Path) -> None:
    assert isolated_semgrep() == app_venv.parent / "venv-semgrep" / "bin" / "semgrep"


def test_semgrep_default_prefers_the_isolated_install_over_path(
    app_venv: Path, tmp_path: Path
) -> None:
    on_path = _fake_semgrep(tmp_path / "tools" / "semgrep")
    assert locate_semgrep().path == str(on_path)
    assert locate_semgrep().source == "PATH"
    isolated = _fake_semgrep(isolated_semgrep())
    found = locate_semgrep()
    assert (found.path, found.source) == (str(isolated), "isolated install")


def test_semgrep_configured_binary_wins_and_is_never_replaced_by_another(
    app_venv: Path, tmp_path: Path
) -> None:
    _fake_semgrep(isolated_semgrep())
    on_path = _fake_semgrep(tmp_path / "tools" / "semgrep")
    configured = _fake_semgrep(tmp_path / "chosen" / "semgrep")
    found = locate_semgrep(configured)
    assert (found.path, found.source) == (str(configured), "RIBBIT_GATES__SEMGREP_BIN")
    # A typo or a removed install must not fall back to whichever semgrep is lying around.
    missing = locate_semgrep(tmp_path / "gone" / "semgrep")
    assert missing.path is None
    assert str(tmp_path / "gone" / "semgrep") in missing.problem
    not_executable = tmp_path / "plain" / "semgrep"
    not_executable.parent.mkdir()
    not_executable.write_text("#!/bin/sh\n")
    assert locate_semgrep(not_executable).path is None
    # A bare name is looked up on PATH.
    assert locate_semgrep(Path("semgrep")).path == str(on_path)


def test_semgrep_setting_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIBBIT_GATES__SEMGREP_BIN", "/opt/x/bin/semgrep")
    assert WorkerSettings().gates.semgrep_bin == Path("/opt/x/bin/semgrep")
    assert GateSettings().semgrep_bin is None


def test_semgrep_gate_runs_the_configured_binary(tmp_path: Path, app_venv: Path) -> None:
    _fake_semgrep(isolated_semgrep(), log=tmp_path / "isolated.log")
    configured = _fake_semgrep(tmp_path / "chosen" / "semgrep", log=tmp_path / "chosen.log")
    repo, base = repo_with(tmp_path, {"app.py": "x = 1\n"})
    patch = make_patch(repo, {"app.py": "x = 2\n"})
    ctx = make_ctx(repo, base, patch, settings=GateSettings(semgrep_bin=configured))
    result = SemgrepGate().run(ctx)
    assert result.passed, result.findings
    argv = (tmp_path / "chosen.log").read_text().splitlines()
    # osemgrep walks the trees' folder with one anchored --include per changed file.
    assert argv[:2] == ["scan", "--experimental"]
    assert ["--include", "/after/app.py"] in [argv[i : i + 2] for i in range(len(argv))]
    assert not (tmp_path / "isolated.log").exists()


def test_semgrep_gate_blocks_when_the_configured_binary_is_missing(
    tmp_path: Path, app_venv: Path
) -> None:
    _fake_semgrep(isolated_semgrep())
    repo, base = repo_with(tmp_path, {"app.py": "x = 1\n"})
    patch = make_patch(repo, {"app.py": "x = 2\n"})
    gone = tmp_path / "secret-host-path" / "semgrep"
    result = SemgrepGate().run(make_ctx(repo, base, patch, settings=GateSettings(semgrep_bin=gone)))
    assert not result.passed
    (finding,) = result.findings
    assert finding.rule == "semgrep-missing"
    assert "secret-host-path" not in finding.message  # the report goes to the forge


def test_semgrep_doctor_fails_with_the_fix(tmp_path: Path, app_venv: Path) -> None:
    check = semgrep_check(WorkerSettings(data_dir=tmp_path / "data"))
    assert check.status == "fail"
    assert "make install" in check.detail and "RIBBIT_GATES__SEMGREP_BIN" in check.detail
    assert str(isolated_semgrep()) in check.detail
    gone = tmp_path / "gone"
    check = semgrep_check(
        WorkerSettings(data_dir=tmp_path / "data", gates=GateSettings(semgrep_bin=gone))
    )
    assert check.status == "fail" and f"RIBBIT_GATES__SEMGREP_BIN={gone}" in check.detail


def test_semgrep_doctor_runs_it_and_warns_when_it_shares_the_apps_venv(
    tmp_path: Path, app_venv: Path
) -> None:
    data = tmp_path / "data"
    isolated = _fake_semgrep(isolated_semgrep())
    check = semgrep_check(WorkerSettings(data_dir=data))
    assert check.status == "ok"
    assert check.detail == f"semgrep 9.9.9 at {isolated} (isolated install)"
    in_app = _fake_semgrep(app_venv / "bin" / "semgrep")
    check = semgrep_check(WorkerSettings(data_dir=data, gates=GateSettings(semgrep_bin=in_app)))
    assert check.status == "warn" and "the app's own venv" in check.detail
    broken = tmp_path / "broken" / "semgrep"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: semgrep' >&2\nexit 1\n")
    broken.chmod(0o755)
    check = semgrep_check(WorkerSettings(data_dir=data, gates=GateSettings(semgrep_bin=broken)))
    assert check.status == "fail" and "ModuleNotFoundError: semgrep" in check.detail


def test_semgrep_doctor_check_is_registered() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    checks = project["project"]["entry-points"]["ribbit.doctor"]
    assert checks["semgrep"] == "worker.doctor:semgrep_check"
