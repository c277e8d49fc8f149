"""Per-repository setup hosts and private registry credentials on both real backends.

A repository may add registry hosts only within what the deployment lets repositories
add; one outside it is refused and reported with the proxy's refusals. The
deployment's credentials (netrc, pip.conf, npmrc) are shown to the setup command
alone: the agent's first command, which reads every file it can reach and every
process's environment, finds nothing of them, and neither do the gates' sandboxes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worker.repo_config import RepoConfig
from worker.sandbox import open_sandbox
from worker.sandbox.envcache import JobEnvironment
from worker.sandbox.setup import run_setup
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

HOST_CA = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
SECRET = "ribbit-test-secret-7f3a9c"
# Fetches through the proxy with the standard library; prints what happened per host.
FETCH = (
    "python - <<'EOF'\n"
    "import urllib.request\n"
    "for url in ('https://registry.npmjs.org/', 'https://pkgs.evil.example.com/'):\n"
    "    try:\n"
    "        urllib.request.urlopen(url, timeout=30).read(100)\n"
    "        print('GOT', url)\n"
    "    except OSError as exc:\n"
    "        print('NO', url, exc)\n"
    "EOF"
)
# The setup command proves it could read the credentials, without printing them.
SAW = (
    'grep -q machine "$NETRC" && grep -q index-url "$PIP_CONFIG_FILE" '
    '&& grep -q _authToken "$NPM_CONFIG_USERCONFIG" && echo SAW-CREDENTIALS'
)
# The agent's first command: every readable file in the places a sandbox can write or
# that the worker could have left something in, and every process's environment.
HUNT = (
    "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; "
    "grep -rIsh --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
    f"-e {SECRET} / 2>/dev/null; ls -la /run/ribbit-egress 2>&1; echo HUNT-DONE"
)


@pytest.fixture(params=["bubblewrap", "docker"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxSettings:
    base: SandboxSettings = request.getfixturevalue(f"{request.param}_settings")
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "netrc").write_text(f"machine pypi.org login ribbit password {SECRET}\n")
    (creds / "pip.conf").write_text(
        f"[global]\nindex-url = https://ribbit:{SECRET}@pypi.org/simple\n"
    )
    (creds / "npmrc").write_text(f"//registry.npmjs.org/:_authToken={SECRET}\n")
    return base.model_copy(
        update={
            "setup_network": True,
            "setup_ca_bundle": HOST_CA if HOST_CA.is_file() else None,
            # The deployment's list lacks npm; repositories may add it, nothing else.
            "setup_allowed_hosts": ["pypi.org", "files.pythonhosted.org"],
            "repo_setup_hosts": ["registry.npmjs.org", "*.example.org"],
            "setup_credentials_dir": creds,
            "memory_mb": 1024,
            "pids": 256,
            "workspace_mb": 256,
        }
    )


def test_repo_hosts_within_the_deployment_only(
    settings: SandboxSettings, source_repo: Path
) -> None:
    config = RepoConfig(setup=FETCH, setup_hosts=["registry.npmjs.org", "pkgs.evil.example.com"])
    with open_sandbox(settings, source_repo, network=True) as sb:
        setup = run_setup(sb, config, settings)
    assert setup.ok, setup.output
    assert "GOT https://registry.npmjs.org/" in setup.output
    assert "NO https://pkgs.evil.example.com/" in setup.output
    refused = [(b.method, b.host, b.reason) for b in setup.blocked]
    assert refused[0] == (
        "setup_hosts",
        "pkgs.evil.example.com",
        "not among the hosts this deployment lets repositories add",
    )
    assert ("CONNECT", "pkgs.evil.example.com") in [(m, h) for m, h, _ in refused]
    assert "pkgs.evil.example.com" in setup.blocked_markdown()
    # Without the repository's word, npm is not reachable.
    with open_sandbox(settings, source_repo, network=True) as sb:
        plain = run_setup(sb, RepoConfig(setup=FETCH), settings)
    assert "GOT https://registry.npmjs.org/" not in plain.output


def test_credentials_reach_the_setup_command_and_nothing_after_it(
    settings: SandboxSettings, source_repo: Path, tmp_path: Path
) -> None:
    config = RepoConfig(setup=SAW)
    job = JobEnvironment(config, settings, checkout=source_repo, workdir=tmp_path / "job")
    with job:
        with open_sandbox(settings, source_repo, network=True) as sb:
            setup = job.setup(sb)
            assert setup.ok, setup.output
            assert "SAW-CREDENTIALS" in setup.output
            hunt = sb.exec(HUNT, timeout=300, output_cap=4 * 1024 * 1024)
            assert "HUNT-DONE" in hunt.stdout, hunt.stderr
            assert SECRET not in hunt.stdout + hunt.stderr
            assert "pip.conf" not in hunt.stdout and "netrc" not in hunt.stdout
            assert SECRET not in str(setup.to_dict())
            # Nor in the snapshot the gates' sandboxes start from.
            assert job.snapshot is not None
            for path in job.snapshot.root.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    assert SECRET.encode() not in path.read_bytes(), path
        # The gates' sandboxes start from the snapshot: nothing of the credentials there.
        with open_sandbox(settings, source_repo) as gate_sb:
            restored = job.restore(gate_sb)
            again = gate_sb.exec(HUNT, timeout=300, output_cap=4 * 1024 * 1024)
    assert restored.ok and "HUNT-DONE" in again.stdout
    assert SECRET not in again.stdout + again.stderr
