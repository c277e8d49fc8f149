"""``ribbit sandbox run`` / ``check`` on the real backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.plugins.sandbox import REPO_ROOT, tree_snapshot
from worker.sandbox.cli import sandbox
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration


def backend_args(settings: SandboxSettings) -> list[str]:
    args = ["--backend", settings.backend]
    if settings.backend == "docker":
        assert settings.docker_url
        args += ["--docker-url", settings.docker_url, "--image", settings.image]
    return args


def run_cli(settings: SandboxSettings, checkout: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        sandbox, ["run", *backend_args(settings), "--checkout", str(checkout), *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_sandbox_cli_prints_output_and_exit_status(
    backend_settings: SandboxSettings, source_repo: Path
) -> None:
    before = tree_snapshot(source_repo)
    code, out, err = run_cli(
        backend_settings,
        source_repo,
        "--",
        "sh",
        "-c",
        "cat README.md; echo oops >&2; echo x > README.md; exit 7",
    )
    assert code == 7
    assert out == "hello\n"
    assert "oops" in err
    assert tree_snapshot(source_repo) == before


def test_sandbox_cli_timeout_exits_124(
    backend_settings: SandboxSettings, source_repo: Path
) -> None:
    code, _, err = run_cli(backend_settings, source_repo, "--timeout", "1", "--", "sleep", "30")
    assert code == 124
    assert "killed after 1 s" in err


def test_sandbox_cli_memory_limit(backend_settings: SandboxSettings, source_repo: Path) -> None:
    hog = "x = b'x' * (512 * 1024 * 1024); print('ALLOCATED')"
    code, out, _ = run_cli(
        backend_settings, source_repo, "--memory", "128", "--", "python3", "-c", hog
    )
    assert code != 0
    assert "ALLOCATED" not in out


def test_sandbox_cli_has_no_network_by_default(
    backend_settings: SandboxSettings, source_repo: Path
) -> None:
    # --network turns setup_network on for this run; without it the sandbox has none.
    code, out, _ = run_cli(backend_settings, source_repo, "--", "cat", "/proc/net/dev")
    assert code == 0
    assert "eth0" not in out


def test_sandbox_cli_network_is_the_registry_proxy_and_reports_refusals(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    probe = "import urllib.request as u; u.urlopen('https://github.com/', timeout=20)"
    code, _, err = run_cli(
        bubblewrap_settings, source_repo, "--network", "--", "python3", "-c", probe
    )
    assert code != 0
    assert "403 Forbidden" in err
    assert "the setup proxy refused CONNECT github.com:443 (host not on the allow-list)" in err


def test_sandbox_cli_check_lists_backends(bubblewrap_settings: SandboxSettings) -> None:
    result = CliRunner().invoke(sandbox, ["check", "--docker-url", "unix:///nonexistent.sock"])
    assert result.exit_code == 0, result.output
    assert "ok   bubblewrap" in result.output
    assert "FAIL docker: no engine answers" in result.output


def test_sandbox_cli_runs_as_module(
    bubblewrap_settings: SandboxSettings, source_repo: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "worker.sandbox.cli",
            "run",
            "--backend",
            "bubblewrap",
            "--checkout",
            str(source_repo),
            "--",
            "sh",
            "-c",
            "echo from-module; exit 5",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 5, done.stderr
    assert done.stdout == "from-module\n"
