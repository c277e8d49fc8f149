"""The dependency group (PEP 735) a repository's tests need, resolved to requirements.

Groups live in ``pyproject.toml``'s ``[dependency-groups]`` table and are no package
metadata: ``pip install -e .`` never sees them, and pip learnt ``--group`` only in 25.1
(the sandbox image's is older). So the group is resolved here, its
``{include-group = ...}`` entries followed, by packaging's resolver (the one pip itself
uses), and set-up detection hands its requirement strings to ``pip install`` as plain
arguments, which every pip takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.dependency_groups import DependencyGroupResolver
from packaging.utils import canonicalize_name

# Names compared after PEP 735's normalisation (that of package names). A group named for
# the tests holds what a test run needs; `dev` is only the fallback, since it usually adds
# linters, type checkers and docs tools (more to download, more that can fail to build).
_TEST_GROUPS = ("test", "tests", "testing")
_DEV_GROUP = "dev"


@dataclass(frozen=True)
class GroupRequirements:
    """A group chosen for the tests and the requirements it resolves to."""

    group: str
    """The group's name as ``pyproject.toml`` spells it."""
    requirements: tuple[str, ...]
    """PEP 508 strings, includes resolved, in the file's order."""


class DependencyGroupError(ValueError):
    """The chosen group cannot be resolved: a cycle, an include of no group, a string
    that is no requirement. ``pip install --group`` would refuse it too."""


def group_for_tests(
    pyproject: Mapping[str, Any], *, dev_fallback: bool
) -> GroupRequirements | None:
    """The first of ``test``, ``tests``, ``testing`` (then ``dev`` when ``dev_fallback``)
    that ``pyproject`` declares, resolved; None when it declares none of them.

    Raises DependencyGroupError when that group cannot be resolved."""
    table = pyproject.get("dependency-groups")
    if not isinstance(table, dict):
        return None
    names: dict[str, str] = {canonicalize_name(name): name for name in table}
    wanted = _TEST_GROUPS + ((_DEV_GROUP,) if dev_fallback else ())
    chosen = next((names[name] for name in wanted if name in names), None)
    if chosen is None:
        return None
    try:
        resolved = DependencyGroupResolver(table).resolve(chosen)
    except (ExceptionGroup, ValueError, TypeError) as exc:
        # The table is the repository's: anything malformed in it is its error to fix.
        detail = "; ".join(_messages(exc))
        raise DependencyGroupError(f"[dependency-groups] {chosen}: {detail}") from None
    return GroupRequirements(chosen, tuple(str(requirement) for requirement in resolved))


def _messages(exc: BaseException) -> list[str]:
    if isinstance(exc, BaseExceptionGroup):
        return [message for inner in exc.exceptions for message in _messages(inner)]
    # InvalidRequirement's text spans lines (the string, then a caret under the fault).
    return [" ".join(str(exc).split())]
