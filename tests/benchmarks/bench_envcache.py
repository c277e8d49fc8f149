"""Set-up environments: setup cold (install through the registry proxy, snapshot, cache)
against cached (restore), and sandbox exec overhead against a bare subprocess, per
backend.

    python -m tests.benchmarks.bench_envcache [--runs N] [--project NAME]
        [--backend bubblewrap|docker ...]

On a real project: toolz 0.12.1's sdist from PyPI (the fixture of
tests/integration/test_real_projects.py), set up the README's way (``pip install -e .``;
nothing but the build is fetched), or one of the vendored projects the end to end tests
run (tests/integration/test_real_projects_e2e.py), its tree built from its
``base.patch`` as those tests build it and set up as Ribbit detects it with no
``.ribbit.yml``: python-humanize (``pip install -e '.[tests]'``: a hatch-vcs build and its
tests extra from PyPI), structlog (its PEP 735 ``tests`` group on pip's command line),
itsdangerous (``src/`` layout, what tox's ``[testenv]`` installs), jshttp/cookie and
broofa/mime (``npm ci`` from their lock files, from the npm registry). Needs PyPI or the
npm registry; the docker rows need an engine (see bench_sandbox), and ``--backend
bubblewrap`` leaves it alone. Prints medians, no assertions. The issue's target: a
cached setup in 10 s or less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from tests.benchmarks.bench_sandbox import COMMAND, median_ms, podman_service
from tests.fakes import make_git_repo
from tests.plugins.sandbox import TEST_IMAGE
from tests.support import pinned_sdist, tree_from_patch
from worker.repo_config import RepoConfig
from worker.sandbox import check_backends, open_sandbox
from worker.sandbox.envcache import EnvCache, JobEnvironment, env_key
from worker.sandbox.setupcmd import with_detected_setup
from worker.settings import SandboxSettings

TOOLZ = "toolz==0.12.1"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOST_CA = Path(os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"))
BACKENDS = ("bubblewrap", "docker")


def toolz_checkout(where: Path) -> Path | None:
    tree = pinned_sdist(TOOLZ, where)
    if tree is None:
        return None
    files = {
        str(p.relative_to(tree)): p.read_text()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and "egg-info" not in p.parts[-2]
    }
    repo = where / "repo"
    make_git_repo(repo, files)
    return repo


def vendored_checkout(fixture: str) -> Callable[[Path], Path | None]:
    """A vendored fixture's tree before its fix (tests/fixtures/<fixture>/base.patch), as
    a one-commit repository, built as the end to end tests build it."""

    def checkout(where: Path) -> Path:
        repo = tree_from_patch(FIXTURES / fixture / "base.patch", where / "repo")
        make_git_repo(repo, {})  # commits the tree as git apply left it
        return repo

    return checkout


@dataclass(frozen=True)
class BenchProject:
    label: str
    repo: str  # the env cache's repository
    # Its set-up; None: detected from the checkout, as a job with no .ribbit.yml gets it.
    config: RepoConfig | None
    checkout: Callable[[Path], Path | None]  # None: its source is not reachable


PROJECTS = {
    "toolz": BenchProject(
        TOOLZ,
        "github:pytoolz/toolz",
        RepoConfig(setup="pip install -e .", test="python -m pytest -q"),
        toolz_checkout,
    ),
    "humanize": BenchProject(
        "python-humanize/humanize 4.15.0 (vendored)",
        "github:python-humanize/humanize",
        RepoConfig(setup="pip install -e '.[tests]'", test="python -m pytest -q"),
        vendored_checkout("humanize"),
    ),
    "structlog": BenchProject(
        "hynek/structlog 25.4.0 (vendored; PEP 735 tests group, detected)",
        "github:hynek/structlog",
        None,
        vendored_checkout("structlog"),
    ),
    "itsdangerous": BenchProject(
        "pallets/itsdangerous 2.1.0 (vendored; src/ layout, tox's [testenv], detected)",
        "github:pallets/itsdangerous",
        None,
        vendored_checkout("itsdangerous"),
    ),
    "cookie": BenchProject(
        "jshttp/cookie 0.7.1 (vendored; mocha, npm ci detected)",
        "github:jshttp/cookie",
        None,
        vendored_checkout("cookie"),
    ),
    "mime": BenchProject(
        "broofa/mime 4.1.0 (vendored; TypeScript, npm ci detected)",
        "github:broofa/mime",
        None,
        vendored_checkout("mime"),
    ),
}


def setup_config(project: BenchProject, checkout: Path) -> RepoConfig:
    """The project's set-up as a job runs it: its own, or the one detected from the tree."""
    if project.config is not None:
        return project.config
    return with_detected_setup(RepoConfig(), checkout)


def timed_setup(
    settings: SandboxSettings, env: JobEnvironment, checkout: Path
) -> tuple[float, str]:
    """Seconds from opening the agent's sandbox to a set-up environment."""
    start = time.perf_counter()
    with open_sandbox(settings, checkout, network=settings.setup_network) as sandbox:
        result = env.setup(sandbox)
        elapsed = time.perf_counter() - start
        if not result.ok:
            raise RuntimeError(f"setup failed: {result.output[-2000:]}")
    return elapsed, result.restored_from or "installed"


def timed_restore(settings: SandboxSettings, env: JobEnvironment, checkout: Path) -> float:
    """Seconds from opening a gate's test sandbox to the job's environment restored."""
    start = time.perf_counter()
    with open_sandbox(settings, checkout) as sandbox:
        env.restore(sandbox)
        return time.perf_counter() - start


def bench_backend(
    name: str,
    settings: SandboxSettings,
    project: BenchProject,
    config: RepoConfig,
    checkout: Path,
    work: Path,
    runs: int,
) -> dict[str, float]:
    cache = EnvCache(work / f"cache-{name}", max_bytes=4 * 1024**3, max_age_s=86400)
    key = env_key(project.repo, settings, checkout, config.setup)

    def job(n: int) -> JobEnvironment:
        return JobEnvironment(
            config,
            settings,
            checkout=checkout,
            workdir=work / f"{name}-{n}",
            cache=cache,
            key=key,
        )

    cold_env = job(0)
    cold, how = timed_setup(settings, cold_env, checkout)
    assert how == "installed", how
    cached = []
    for n in range(1, runs + 1):
        took, how = timed_setup(settings, job(n), checkout)
        assert how == "cache", how
        cached.append(took)
    restores = [timed_restore(settings, cold_env, checkout) for _ in range(runs)]
    with open_sandbox(settings, checkout) as sb:
        exec_ms = median_ms(lambda: sb.exec(COMMAND, timeout=60), runs * 5)
    return {
        "cold": cold,
        "cached": statistics.median(cached),
        "restore": statistics.median(restores),
        "exec_ms": exec_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--project", choices=sorted(PROJECTS), default="toolz")
    parser.add_argument(
        "--backend", action="append", choices=BACKENDS, help="repeatable (default: both)"
    )
    args, _ = parser.parse_known_args()
    backends = args.backend or list(BACKENDS)
    project = PROJECTS[args.project]
    with tempfile.TemporaryDirectory(prefix="ribbit-bench-env-") as tmp:
        work = Path(tmp)
        checkout = project.checkout(work / "source")
        if checkout is None:
            print(f"skipped: PyPI did not serve the {project.label} sdist")
            return
        config = setup_config(project, checkout)
        base: dict[str, object] = {
            "setup_network": True,
            "setup_ca_bundle": HOST_CA if HOST_CA.is_file() else None,
            "memory_mb": 1024,
            "pids": 256,
            "workspace_mb": 256,
        }
        bare_ms = median_ms(
            lambda: subprocess.run(COMMAND, capture_output=True, check=True), args.runs * 5
        )
        rows: dict[str, dict[str, float]] = {}
        with podman_service() if "docker" in backends else nullcontext(None) as url:
            configs = {}
            if "bubblewrap" in backends:
                configs["bubblewrap"] = SandboxSettings(backend="bubblewrap").model_copy(
                    update=base
                )
            if url:
                docker = SandboxSettings(
                    backend="docker", docker_url=url, image=TEST_IMAGE
                ).model_copy(update=base)
                if check_backends(docker)[0].ok:
                    configs["docker"] = docker
            for name, settings in configs.items():
                rows[name] = bench_backend(
                    name, settings, project, config, checkout, work, args.runs
                )
    print(
        f"project: {project.label}, setup `{config.setup}`; "
        f"cached and restore: median of {args.runs}"
    )
    print(
        f"{'backend':<11} {'setup cold':>11} {'cached':>8} {'cold/cached':>12} {'gate restore':>13}"
    )
    for name, r in rows.items():
        print(
            f"{name:<11} {r['cold']:>9.1f} s {r['cached']:>6.1f} s "
            f"{r['cold'] / r['cached']:>11.1f}x {r['restore']:>11.1f} s"
        )
    print(f"\nexec of `{' '.join(COMMAND)}`: median of {args.runs * 5} runs")
    print(f"{'backend':<16} {'exec':>9} {'ratio':>7} {'overhead':>9}")
    print(f"{'bare subprocess':<16} {bare_ms:>6.1f} ms {1:>6.1f}x {0:>6.1f} ms")
    for name, r in rows.items():
        ms = r["exec_ms"]
        print(f"{name:<16} {ms:>6.1f} ms {ms / bare_ms:>6.1f}x {ms - bare_ms:>6.1f} ms")
    if "docker" not in backends:
        print("docker: not run (--backend)")
    elif "docker" not in rows:
        print("docker: skipped (no engine or no image; see `ribbit sandbox check`)")


if __name__ == "__main__":
    main()
