"""The copy of the repository's package a set-up installed, installed again from each
sandbox's own tree, with no network.

A set-up that runs ``pip install .`` (not ``-e``) leaves a copy of the package in the
virtualenv, of the commit it ran on; the tests would import it whatever the tree holds.
So every later sandbox of the job (worker/sandbox/envcache.py ``JobEnvironment.restore``)
installs the copy again from its tree (:func:`reinstall_copies`), offline and without
build isolation. pip built the first copy in an isolated environment it filled from the
index, so the backend the project names (hatchling, flit_core, pdm-backend, a newer
setuptools than the image's) is not in the virtualenv, and the offline install could
not import it (every test run's set-up failed, and so every patch of such a repository
was refused). So, while the set-up's registry network is still there, the backend's
requirements (``[build-system] requires`` of the base's ``pyproject.toml``) go into a
folder of their own (:data:`BUILD_BACKEND`), which is on ``PYTHONPATH`` for the
reinstall alone: the tests' environment holds nothing the set-up did not put there.
"""

from __future__ import annotations

import logging
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from worker.sandbox.base import WORKSPACE, Sandbox
from worker.sandbox.common import ENV_ROOT
from worker.sandbox.setup import OUTPUT_TAIL, SetupResult, exec_with_egress
from worker.sandbox.snapshot import EnvSnapshot, workspace_copies
from worker.settings import SandboxSettings

log = logging.getLogger(__name__)

BUILD_BACKEND = f"{ENV_ROOT}/build-backend"
# --upgrade: a patched tree's set-up fetches over the base's (its requires may differ).
_FETCH = ["python", "-m", "pip", "install", "-q", "--upgrade", "--target", BUILD_BACKEND]
# What a copy installed from a package file rather than the tree's folder ends with.
_ARCHIVES = (".whl", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
REINSTALL = [
    *("python", "-m", "pip", "install", "-q", "--no-deps", "--no-index"),
    *("--no-build-isolation", "--force-reinstall"),
]


def build_requirements(checkout: Path, copies: Sequence[str]) -> list[str]:
    """What the build backends of ``copies`` (workspace paths pip installed a copy from)
    require, from each one's ``pyproject.toml`` in ``checkout`` (the base's tree, which
    the set-up ran on). A project with no ``[build-system]`` gets pip's default,
    setuptools, which the virtualenv already has: nothing to fetch for it."""
    found: list[str] = []
    for copy in copies:
        pyproject = _in_tree(checkout, copy) / "pyproject.toml"
        try:
            table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("build-system")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue  # pip could not have read it either; its own error says why
        requires = table.get("requires") if isinstance(table, dict) else None
        if isinstance(requires, list):
            found += [r for r in requires if isinstance(r, str) and r not in found]
    return found


def _in_tree(tree: Path, copy: str) -> Path:
    """Where ``copy`` (a workspace path pip installed a copy from) lies in ``tree``, a
    host folder holding the workspace (a checkout, a snapshot's)."""
    return tree / copy.removeprefix(WORKSPACE).strip("/")


@dataclass(frozen=True)
class SetupManner:
    """How a set-up step ran, which the fetch of its build backend follows: shown the
    deployment's registry credentials (the base's manifests; a patch's are not), with
    these variables (a patch's: install scripts off, wheels only)."""

    credentials: bool = True
    env: Mapping[str, str] | None = None


def fetch_build_backend(
    sandbox: Sandbox, requirements: Sequence[str], settings: SandboxSettings, manner: SetupManner
) -> str:
    """Install ``requirements`` into :data:`BUILD_BACKEND` through the set-up's registry
    proxy, as the set-up step ran (``manner``); what it did, for the set-up's output.
    Where it fails, the set-up still worked: the reinstall's own error (the backend it
    cannot import) then says why each test run's set-up failed."""
    argv = [*_FETCH, "--", *requirements]
    timeout = settings.setup_timeout_s
    run = exec_with_egress(
        sandbox, argv, settings, timeout=timeout, credentials=manner.credentials, env=manner.env
    ).result
    said = f"$ {' '.join(argv)}\n{run.stdout}{run.stderr}"
    if run.exit_code != 0 or run.timed_out:
        log.warning("could not fetch the build backend %s: exit %s", requirements, run.exit_code)
        said += f"[could not fetch the build backend (exit {run.exit_code})]"
    return said


def reinstall_copies(
    sandbox: Sandbox,
    snapshot: EnvSnapshot,
    restored: SetupResult,
    timeout: float,
    *,
    started: float,
) -> SetupResult:
    """``restored`` (``snapshot`` just restored into ``sandbox``, at ``started`` on the
    monotonic clock) after the copies the set-up installed are installed again from
    ``sandbox``'s tree: not ok where that failed, its command and output in the step's."""
    copies = workspace_copies(snapshot.env)
    if not copies:
        return restored
    built = [path for path in copies if path.endswith(_ARCHIVES)]
    if built:
        # A wheel or sdist the set-up built into the workspace holds the base's code;
        # installed again, the patched tree's tests would test the base's code.
        note = (
            f"[the set-up installed {', '.join(built)}, a package file it built from the "
            "base commit's tree: no other tree can be installed from it, so the tests "
            "would import the base's code. Install the project's folder instead "
            "(`pip install .` or `pip install -e .`).]"
        )
        output = f"{restored.output}\n{note}"[-OUTPUT_TAIL:]
        return replace(restored, ok=False, exit_code=1, output=output)
    # Without the build/ folder the set-up left: setuptools would reuse its stale copy.
    stale = [
        f"{path}/build"
        for path in copies
        if (_in_tree(snapshot.workspace, path) / "build").is_dir()
    ]
    if stale:
        sandbox.exec(["rm", "-rf", "--", *stale], timeout=120)
    env = {}
    if (snapshot.env / BUILD_BACKEND.removeprefix(ENV_ROOT + "/")).is_dir():
        env["PYTHONPATH"] = BUILD_BACKEND
    argv = [*REINSTALL, *copies]
    again = sandbox.exec(argv, timeout=timeout, env=env)
    shown = " ".join([*(f"{k}={v}" for k, v in env.items()), *argv])
    output = f"{restored.output}\n$ {shown}\n{again.stdout}{again.stderr}"
    ok = again.exit_code == 0 and not again.timed_out
    return replace(
        restored,
        ok=ok,
        exit_code=restored.exit_code if ok else again.exit_code,
        output=output[-OUTPUT_TAIL:],
        duration_s=time.monotonic() - started,
        timed_out=again.timed_out,
    )
