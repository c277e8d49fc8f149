"""The setup step: make a sandbox ready for the agent and the tests.

Every sandbox that runs a repository's code (the agent's, each test run's) goes through
``run_setup`` first. It creates the set-up environment, a virtualenv at ``VENV`` that
sees the image's system packages (so ``python``, ``pip`` and the image's pytest are
there, and PEP 668 never bites), then runs the repository's ``setup`` command with
network only through the registry-only proxy (worker/sandbox/egress.py), when the
sandbox was opened for it and the deployment allows it. The proxy stops when the step
ends: nothing that runs afterwards in the sandbox has any network.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bot.store.records import SetupRecord
from worker.repo_config import RepoConfig
from worker.sandbox.base import ExecResult, Sandbox
from worker.sandbox.common import ENV_ROOT, VENV
from worker.sandbox.egress import EGRESS_MOUNT, EgressProxy, egress_env, forwarder_argv
from worker.sandbox.egress_policy import BlockedRequest, EgressPolicy, repo_setup_hosts
from worker.sandbox.secretscan import SecretScanner
from worker.settings import SandboxSettings

log = logging.getLogger(__name__)

OUTPUT_TAIL = 4000
# Part of every cached environment's key (worker/sandbox/envcache.py): bump it when what
# this step builds changes (the virtualenv's layout, the environment variables), so no
# job restores an environment built the old way. 2: snapshots of a setup shown
# credentials are searched for them, and the key says which credentials; entries of
# version 1 may hold copies, so the cache deletes them (EnvCache.entries).
SETUP_VERSION = 2
_VENV_TIMEOUT_S = 120
# The image's pip (Debian's python3-pip), run by the venv's interpreter, installs into
# the venv; without it the venv gets its own through ensurepip. ``pip`` and ``pip3``
# then name that pip, whatever the image's /usr/bin/pip would do.
_MAKE_VENV = f"""\
set -e
if [ ! -x {VENV}/bin/python ]; then
  mkdir -p {ENV_ROOT}/cache
  python3 -m venv --system-site-packages --without-pip {VENV}
  if ! {VENV}/bin/python -m pip --version >/dev/null 2>&1; then
    {VENV}/bin/python -m ensurepip --default-pip >/dev/null
  fi
  for name in pip pip3; do
    if [ ! -e {VENV}/bin/$name ]; then
      printf '#!/bin/sh\\nexec {VENV}/bin/python -m pip "$@"\\n' > {VENV}/bin/$name
      chmod 755 {VENV}/bin/$name
    fi
  done
fi
"""


@dataclass(frozen=True)
class SetupResult:
    """What the setup step did, for the job record, the agent's brief and the report."""

    command: str | None  # the repository's setup command (None: only the environment)
    ok: bool
    exit_code: int | None  # the setup command's; None when it did not run
    output: str  # the tail of its output (or of the environment's creation, if that failed)
    duration_s: float
    timed_out: bool = False
    network: bool = False  # the command could reach the allow-listed registries
    blocked: tuple[BlockedRequest, ...] = ()  # requests the proxy refused
    # Where the environment came from when setup did not run here: "cache" (an earlier
    # job's on this repository) or "snapshot" (this job's, taken right after its setup).
    restored_from: str | None = None
    # When a snapshot's restore into this sandbox ended (the host's clock, which the
    # sandbox's file times share): what changed in the environment later was written by
    # a step after it (a copy of the package installed again from the tree).
    restored_at_ns: int | None = None

    @property
    def installed(self) -> bool:
        """Whether the agent may be told the repository's setup command ran and worked."""
        return self.ok and self.command is not None

    def summary(self) -> str:
        if self.ok:
            what = f"`{self.command}` succeeded" if self.command else "environment ready"
        elif self.exit_code is None:
            what = "could not create the Python environment"
        elif self.timed_out:
            what = f"`{self.command}` timed out"
        else:
            what = f"`{self.command}` exited {self.exit_code}"
        if self.restored_from == "cache":
            what += " (environment restored from the repository's cache)"
        if self.blocked:
            what += f"; the setup network refused {len(self.blocked)} request(s)"
        return what

    def blocked_markdown(self) -> str:
        """The refused requests as a Markdown list (empty when none)."""
        if not self.blocked:
            return ""
        lines = [
            "The setup step's network (package registries only) refused these requests:",
            "",
        ]
        lines += [f"- `{b.describe()}`" for b in self.blocked]
        return "\n".join(lines)

    def to_record(self) -> SetupRecord:
        """What the job's record keeps of the step."""
        return SetupRecord(
            command=self.command,
            ok=self.ok,
            exit_code=self.exit_code,
            timed_out=self.timed_out,
            duration_s=round(self.duration_s, 3),
            network=self.network,
            blocked=tuple(b.describe() for b in self.blocked),
            restored_from=self.restored_from,
            output_tail=self.output,
        )

    def to_dict(self) -> dict[str, object]:
        return self.to_record().to_json()


def run_setup(sandbox: Sandbox, repo_config: RepoConfig, settings: SandboxSettings) -> SetupResult:
    """Create the set-up environment and run the repository's setup command in
    ``sandbox``. The command gets the registry proxy when the sandbox was opened with
    ``network=True`` (which needs ``settings.setup_network``); otherwise none at all.
    A failed step is returned, not raised: the caller decides what the job does."""
    start = time.monotonic()
    venv = sandbox.exec(_MAKE_VENV, timeout=_VENV_TIMEOUT_S)
    if venv.exit_code != 0:
        log.warning("could not create the sandbox's virtualenv: %s", _tail(venv))
        return SetupResult(
            command=repo_config.setup,
            ok=False,
            exit_code=None,
            output=_tail(venv),
            duration_s=time.monotonic() - start,
            timed_out=venv.timed_out,
        )
    if not repo_config.setup:
        return SetupResult(
            command=None, ok=True, exit_code=None, output="", duration_s=time.monotonic() - start
        )
    hosts = repo_setup_hosts(repo_config.setup_hosts, settings.repo_setup_hosts)
    run = exec_with_egress(
        sandbox,
        ["bash", "-c", repo_config.setup],
        settings,
        timeout=settings.setup_timeout_s,
        extra_hosts=hosts.allowed,
        credentials=True,
    )
    # A host the repository asked for and the deployment does not permit is reported
    # with the proxy's refusals (first: it explains the ones that follow).
    run = replace(run, blocked=hosts.refused + run.blocked)
    return _finish(repo_config.setup, run, start)


@dataclass(frozen=True)
class EgressRun:
    result: ExecResult
    network: bool  # the registry proxy was there
    blocked: tuple[BlockedRequest, ...]


def exec_with_egress(
    sandbox: Sandbox,
    argv: list[str],
    settings: SandboxSettings,
    *,
    timeout: float,
    extra_hosts: Sequence[str] = (),
    credentials: bool = False,
    env: Mapping[str, str] | None = None,
) -> EgressRun:
    """Run ``argv`` with the registry proxy listening for exactly as long as it runs,
    when the sandbox was opened for it (``network=True``) and the settings allow it;
    otherwise with no network at all. ``extra_hosts`` join the deployment's allow-list
    (already checked against what it lets repositories add); ``credentials``: the
    deployment's private registry credentials are shown to this command alone; ``env``:
    more variables for the command."""
    # Only sandboxes opened with network=True have the egress folder.
    egress_dir = getattr(sandbox, "egress_dir", None)
    if egress_dir is None or not settings.setup_network:
        return EgressRun(sandbox.exec(argv, timeout=timeout, env=env), network=False, blocked=())
    policy = EgressPolicy.build(
        [*settings.setup_allowed_hosts, *extra_hosts], [settings.package_index_url]
    )
    ca = settings.setup_ca_bundle
    full_env = {**(env or {}), **egress_env(settings.package_index_url, ca_bundle=ca is not None)}
    secrets = load_credentials(settings) if credentials else {}
    with EgressProxy(egress_dir, policy, ca_bundle=ca) as proxy:
        try:
            full_env.update(_place_credentials(egress_dir, secrets))
            result = sandbox.exec(forwarder_argv(argv), timeout=timeout, env=full_env)
            if secrets:
                # The output goes to the job record and the status comment.
                scanner = SecretScanner.from_credentials(secrets)
                result = replace(
                    result,
                    stdout=scanner.redact(result.stdout),
                    stderr=scanner.redact(result.stderr),
                )
        finally:
            # Gone before anything else runs in the sandbox: the egress folder stays
            # bound (read-only) for the sandbox's life, the agent's commands included.
            for name in secrets:
                (egress_dir / name).unlink(missing_ok=True)
        blocked = proxy.blocked
    if secrets:  # the refused hosts go to the report, and a host name can carry a value
        scanner = SecretScanner.from_credentials(secrets)
        blocked = tuple(replace(b, host=scanner.withhold(b.host)) for b in blocked)
    return EgressRun(result, network=True, blocked=blocked)


# Credential file name -> the variables that point package managers at it.
CREDENTIAL_FILES: Mapping[str, tuple[str, ...]] = {
    "netrc": ("NETRC",),
    "pip.conf": ("PIP_CONFIG_FILE",),
    "npmrc": ("NPM_CONFIG_USERCONFIG", "npm_config_userconfig"),
}


def load_credentials(settings: SandboxSettings) -> dict[str, bytes]:
    """The deployment's private registry credentials (``setup_credentials_dir``): never
    the repository's, which could name anything."""
    folder = settings.setup_credentials_dir
    if folder is None:
        return {}
    return {
        name: (folder / name).read_bytes() for name in CREDENTIAL_FILES if (folder / name).is_file()
    }


def credentials_in_use(settings: SandboxSettings, setup_command: str | None) -> dict[str, bytes]:
    """The credentials a setup step with ``setup_command`` is shown under ``settings``
    (none without a command or without the registry network)."""
    if not setup_command or not settings.setup_network:
        return {}
    return load_credentials(settings)


def _place_credentials(egress_dir: Path, secrets: Mapping[str, bytes]) -> dict[str, str]:
    env: dict[str, str] = {}
    for name, data in secrets.items():
        path = egress_dir / name
        # Readable by the sandbox user (another uid); the folder is private to this
        # sandbox and the file lives only while the setup command runs.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(path, 0o644)
        for var in CREDENTIAL_FILES[name]:
            env[var] = f"{EGRESS_MOUNT}/{name}"
    return env


def _finish(command: str, run: EgressRun, start: float) -> SetupResult:
    result, blocked = run.result, run.blocked
    done = SetupResult(
        command=command,
        ok=result.exit_code == 0 and not result.timed_out,
        exit_code=result.exit_code,
        output=_tail(result),
        duration_s=time.monotonic() - start,
        timed_out=result.timed_out,
        network=run.network,
        blocked=blocked,
    )
    if not done.ok:
        log.warning("setup failed: %s", done.summary())
    if blocked:
        log.warning(
            "the setup proxy refused %d request(s): %s",
            len(blocked),
            ", ".join(b.describe() for b in blocked[:10]),
        )
    return done


def _tail(result: ExecResult) -> str:
    text = f"{result.stdout}\n{result.stderr}".strip()
    if result.timed_out:
        text += "\n[timed out]"
    return text if len(text) <= OUTPUT_TAIL else "…" + text[-OUTPUT_TAIL:]
