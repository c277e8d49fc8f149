"""Which of Ribbit's optional extras (``pip install 'ribbit[worker]'``) this install has.

Read from Ribbit's own package metadata, the list pip installed from: every requirement
marked ``extra == "worker"`` must be an installed distribution. A web-only install (no
torch, no docker client) then says so before a worker starts, instead of a worker that
starts and fails every job it takes.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution, requires

from packaging.requirements import Requirement

DISTRIBUTION = "ribbit"


def missing_requirements(extra: str) -> list[str]:
    """The distributions the extra asks for that are not installed (none: it is)."""
    try:
        declared = requires(DISTRIBUTION) or []
    except PackageNotFoundError:  # run from a source tree: nothing to compare against
        return []
    missing: list[str] = []
    for line in declared:
        req = Requirement(line)
        if req.marker is None or not req.marker.evaluate({"extra": extra}):
            continue
        if req.name == DISTRIBUTION:  # ribbit[worker] inside another extra
            missing += [m for e in sorted(req.extras) for m in missing_requirements(e)]
            continue
        try:
            distribution(req.name)
        except PackageNotFoundError:
            missing.append(req.name)
    return missing


def missing_extra_message(command: str, extra: str, missing: list[str]) -> str:
    return (
        f"`ribbit {command}` needs the {extra} extra, which this install lacks "
        f"({', '.join(missing)} not installed): pip install 'ribbit[{extra}]'"
    )
