"""What build a process runs, and the series every Ribbit /metrics endpoint carries
whatever its job: ``ribbit_build_info`` and prometheus_client's ``process_*`` and
``python_info``.

Both endpoints (the web app's and each worker's) serve a registry of their own, not
prometheus_client's default one, so the default registry's process and platform
collectors never reach them: each registry gets its own here, once. In the worker's
multiprocess mode they describe the main process that serves /metrics (the pool
children's CPU and memory are not summed: prometheus_client cannot add them up across
processes, and the children come and go).

prometheus_client is imported only inside the functions: the worker must choose its
value store (worker/metrics.py ``prepare``) before anything imports it.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# Set by the image build (deploy/Dockerfile's RIBBIT_COMMIT build argument): an installed
# wheel has no checkout to ask.
COMMIT_ENV = "RIBBIT_BUILD_COMMIT"
UNKNOWN = "unknown"
# A label value an operator's variable sets: kept to what a commit name looks like, so a
# stray value cannot make a long or odd label.
_COMMIT = re.compile(r"[0-9a-fA-F]{7,64}")
_CHECKOUT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class BuildInfo:
    version: str  # the installed ribbit distribution's
    commit: str  # the git commit it was built from, or "unknown"
    python: str  # the interpreter's x.y.z


def _version() -> str:
    try:
        return version("ribbit")
    except PackageNotFoundError:
        return UNKNOWN


def _commit(environ: Mapping[str, str]) -> str:
    given = environ.get(COMMIT_ENV, "").strip()
    if given:
        return given.lower() if _COMMIT.fullmatch(given) else UNKNOWN
    if (_CHECKOUT / ".git").exists():
        from bot.hostgit import head_commit

        return head_commit(_CHECKOUT) or UNKNOWN
    return UNKNOWN


@cache
def build_info() -> BuildInfo:
    """Read once per process: the build does not change under a running process, and a
    scrape should not start git."""
    return BuildInfo(_version(), _commit(os.environ), platform.python_version())


class BuildInfoCollector:
    """``ribbit_build_info{version,commit,python} 1``: join it on ``instance`` to see
    which build each process runs (a half-finished rollout shows two)."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        info = build_info()
        family = GaugeMetricFamily(
            "ribbit_build_info",
            "The build this process runs (always 1): Ribbit's version, commit and Python",
            labels=["version", "commit", "python"],
        )
        family.add_metric([info.version, info.commit, info.python], 1)
        yield family


def register_process_metrics(registry: CollectorRegistry) -> None:
    """Add the build-info, process and platform series to ``registry`` (call once per
    registry: a second call raises, as registering a series twice does)."""
    from prometheus_client import PlatformCollector, ProcessCollector

    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    registry.register(BuildInfoCollector())
