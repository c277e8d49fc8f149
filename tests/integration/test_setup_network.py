"""The setup step on both real backends, against the real PyPI: installs go through the
worker's registry-only proxy, every other request is refused and reported, what setup
installed lasts for the sandbox's life, and nothing after setup has any network. Then
the README's own ``.ribbit.yml`` (``pip install -e .`` + ``python -m pytest -q``)
through the test gate."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import pytest

from tests.support import require_service
from tests.unit.worker.gates.helpers import make_patch, repo_with
from worker.gates import GateContext, run_gates
from worker.repo_config import RepoConfig
from worker.sandbox import open_sandbox, sandbox_factory
from worker.sandbox.setup import run_setup
from worker.settings import GateSettings, SandboxSettings

pytestmark = pytest.mark.integration

# A controlled network may inspect TLS with its own CA, which the host trusts and the
# image does not: hand the host's bundle to the setup step, as a deployment would.
HOST_CA = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
PROBE_OTHER_HOST = (
    "python - <<'EOF'\n"
    "import urllib.request\n"
    "try:\n"
    "    urllib.request.urlopen('https://github.com/', timeout=20)\n"
    "    print('REACHED github.com')\n"
    "except OSError as exc:\n"
    "    print('refused:', exc)\n"
    "EOF"
)
NO_NETWORK = (
    "python - <<'EOF'\n"
    "import socket, urllib.request\n"
    "for how in ('proxy', 'direct'):\n"
    "    try:\n"
    "        if how == 'proxy':\n"
    "            opener = urllib.request.build_opener(\n"
    "                urllib.request.ProxyHandler({'https': 'http://127.0.0.1:3128'}))\n"
    "            opener.open('https://pypi.org/simple/', timeout=10)\n"
    "        else:\n"
    "            socket.create_connection(('151.101.0.223', 443), timeout=10)\n"
    "        print('NETWORK via', how)\n"
    "    except OSError:\n"
    "        pass\n"
    "import os\n"
    "print(sorted(os.listdir('/run/ribbit-egress')) if os.path.isdir('/run/ribbit-egress') "
    "else 'no egress folder')\n"
    "EOF"
)


@pytest.fixture(params=["bubblewrap", "docker"])
def settings(request: pytest.FixtureRequest) -> SandboxSettings:
    base: SandboxSettings = request.getfixturevalue(f"{request.param}_settings")
    return base.model_copy(
        update={
            "setup_network": True,
            "setup_ca_bundle": HOST_CA if HOST_CA.is_file() else None,
            "memory_mb": 1024,
            "pids": 256,
            "workspace_mb": 256,
        }
    )


def test_setup_installs_from_pypi_refuses_and_reports_other_hosts_then_no_network(
    settings: SandboxSettings, source_repo: Path
) -> None:
    config = RepoConfig(setup=f"pip install tomli-w==1.0.0 && {PROBE_OTHER_HOST}")
    with open_sandbox(settings, source_repo, network=True) as sb:
        setup = run_setup(sb, config, settings)
        assert setup.ok, setup.output
        assert setup.network and setup.installed
        assert "Successfully installed tomli-w-1.0.0" in setup.output
        assert "REACHED" not in setup.output and "refused:" in setup.output
        assert [(b.host, b.port) for b in setup.blocked] == [("github.com", 443)]
        # What setup installed is there for the agent's later commands...
        later = sb.exec("python -c 'import tomli_w; print(tomli_w.__file__)'", timeout=60)
        assert later.stdout.startswith("/opt/ribbit/venv/"), later.stderr
        # ...through a login shell too (the agent's Bash), and outside the diff.
        login = sb.exec(["bash", "-lc", "command -v python pip"], timeout=60)
        assert login.stdout.split() == ["/opt/ribbit/venv/bin/python", "/opt/ribbit/venv/bin/pip"]
        assert sb.diff() == ""
        # ...but the network is gone: no proxy, no socket, no route.
        after = sb.exec(NO_NETWORK, timeout=120)
        assert "NETWORK" not in after.stdout, after.stdout
        assert "proxy.sock" not in after.stdout


def test_setup_failure_is_a_result_with_the_output_tail(
    settings: SandboxSettings, source_repo: Path
) -> None:
    config = RepoConfig(setup="echo installing; pip install ribbit-no-such-package-xyz")
    with open_sandbox(settings, source_repo, network=True) as sb:
        setup = run_setup(sb, config, settings)
    assert not setup.ok and not setup.installed
    assert setup.exit_code == 1
    assert "ribbit-no-such-package-xyz" in setup.output
    assert "exited 1" in setup.summary()


def test_setup_without_the_proxy_has_no_network(
    settings: SandboxSettings, source_repo: Path
) -> None:
    closed = settings.model_copy(update={"setup_network": False})
    with open_sandbox(closed, source_repo) as sb:
        setup = run_setup(sb, RepoConfig(setup="pip install --timeout 5 tomli-w==1.0.0"), closed)
    assert not setup.ok and not setup.network


# A project set up the way the README tells teams to: its own dependency from PyPI,
# ``pip install -e .`` (whose build isolation fetches setuptools through the proxy too).
PROJECT = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "greet"\nversion = "0.1.0"\ndependencies = ["tomli-w==1.0.0"]\n\n'
        '[tool.setuptools]\npackages = ["greet"]\n'
    ),
    "greet/__init__.py": (
        "import tomli_w\n\n\ndef as_toml(name):\n    return tomli_w.dumps({'name': name})\n\n\n"
        "def shout(text):\n    return text.lower() + '!'\n"
    ),
    "tests/test_greet.py": (
        "from greet import as_toml\n\n\ndef test_as_toml():\n"
        "    assert as_toml('x') == 'name = \"x\"\\n'\n"
    ),
}
FIX = {
    "greet/__init__.py": PROJECT["greet/__init__.py"].replace("text.lower()", "text.upper()"),
    "tests/test_greet.py": PROJECT["tests/test_greet.py"]
    + "\n\ndef test_shout():\n    from greet import shout\n\n    assert shout('hi') == 'HI!'\n",
}


def test_readme_config_on_a_project_with_pypi_dependencies_passes_the_test_gate(
    settings: SandboxSettings, tmp_path: Path
) -> None:
    repo, base = repo_with(tmp_path, PROJECT)
    config = RepoConfig(setup="pip install -e .", test="python -m pytest -q")
    report = run_gates(
        GateContext(
            repo_dir=repo,
            base_commit=base,
            patch=make_patch(repo, FIX),
            repo_config=config,
            gate_settings=GateSettings(),
            sandbox_factory=sandbox_factory(settings, network=True),
            setup_step=partial(run_setup, repo_config=config, settings=settings),
        )
    )
    tests = report.result("tests")
    assert tests is not None and tests.passed, report.to_markdown() + tests.logs
    assert tests.details["after"]["counts"]["passed"] == 2
    assert tests.details["before"]["counts"]["passed"] == 1
    assert "test_shout" in tests.details["targets"]


# A project with one locked npm dependency (is-number 7.0.0, itself without any, pinned
# by the registry's sha512): ``npm ci`` fetches it through the proxy. Docker runs the
# image's npm (deploy/sandbox/install-npm.sh: bookworm's nodejs comes without one);
# bubblewrap, the host's.
NPM_PROJECT = {
    "package.json": json.dumps(
        {"name": "npmproj", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}
    ),
    "package-lock.json": json.dumps(
        {
            "name": "npmproj",
            "version": "1.0.0",
            "lockfileVersion": 3,
            "requires": True,
            "packages": {
                "": {"name": "npmproj", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}},
                "node_modules/is-number": {
                    "version": "7.0.0",
                    "resolved": "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
                    "integrity": "sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004M"
                    "RL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==",
                    "engines": {"node": ">=0.12.0"},
                },
            },
        }
    ),
}


def test_npm_ci_installs_a_locked_dependency_through_the_proxy(
    settings: SandboxSettings, tmp_path: Path
) -> None:
    if settings.backend == "bubblewrap":
        require_service(Path("/usr/bin/npm").exists(), "npm in /usr/bin")
    repo, _ = repo_with(tmp_path, NPM_PROJECT)
    with open_sandbox(settings, repo, network=True) as sb:
        setup = run_setup(sb, RepoConfig(setup="npm ci --no-audit --no-fund"), settings)
        assert setup.ok, setup.output
        assert setup.network and not setup.blocked, setup.blocked
        ran = sb.exec("node -e \"console.log(require('is-number')(7))\"", timeout=60)
        assert ran.stdout.strip() == "true", ran.stdout + ran.stderr
