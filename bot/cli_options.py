"""The flags that mean one thing in every ``ribbit`` command (issue #36): ``--repo`` is a
repository on a forge, ``[forge:]owner/name``, checked by bot/forges/base.py's
``parse_repo_ref``; ``--forge`` is its forge where it has no prefix; ``--checkout`` is a
local repository directory. The worker's ``--backend`` is worker/sandbox/backend_option.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from bot.forges.base import FORGE_NAMES, RepoRef, forge_name, parse_repo_ref

F = TypeVar("F", bound=Callable[..., Any])

REPO_HELP = "a repository on its forge: [forge:]owner/name, group/subgroup/project on GitLab"
CHECKOUT_HELP = "a local repository directory"
# The directory spelling the four checkout commands had before --checkout; accepted,
# hidden and warned about for one release (docs/CHANGELOG.md), then removed.
DEPRECATED_CHECKOUT_ALIAS = "--repo"
# What each old spelling of --checkout means now, for its warning.
_ALIAS_NOW = {
    "--repo": "--repo now means a forge repository",
    "--workspace": "--checkout is a local directory in every command",
}


class RepoRefType(click.ParamType):
    """``[forge:]owner/name`` to a RepoRef. Without a prefix the forge is the command's
    ``--forge`` (eager, so it is known here whatever the order typed), else GitHub; a
    prefix wins over ``--forge``, as it always did for `ribbit pause`."""

    name = "[forge:]owner/name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, RepoRef):
            return value
        try:
            return parse_repo_ref(str(value), forge_name(_forge_of(ctx) or "github"))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


REPO_REF = RepoRefType()


def _forge_of(ctx: click.Context | None) -> str | None:
    """The command's ``--forge`` value, where it has one."""
    if ctx is None:
        return None
    for param in ctx.command.params:
        if "--forge" in getattr(param, "opts", ()) and param.name is not None:
            found = ctx.params.get(param.name)
            return None if found is None else str(found)
    return None


def repo_option(help: str, **kwargs: Any) -> Callable[[F], F]:
    """``--repo``: a repository on a forge; the command receives a RepoRef (a tuple of them
    with ``multiple=True``)."""
    return click.option("--repo", type=REPO_REF, help=f"{help} ({REPO_HELP}).", **kwargs)


def forge_option(
    help: str = "The repository's forge, where --repo has no forge: prefix.",
    *,
    default: str | None = "github",
    required: bool = False,
) -> Callable[[F], F]:
    """``--forge``, eager so that ``--repo`` is parsed knowing it. A required one has no
    default at all: click 8.5 reads an explicit None default as given."""
    given_default: dict[str, Any] = {} if required else {"default": default}
    return click.option(
        "--forge",
        type=click.Choice(FORGE_NAMES),
        required=required,
        show_default=default is not None,
        is_eager=True,
        help=help,
        **given_default,
    )


# A listing's --forge: a filter of its own, and --repo's forge where it has no prefix.
FILTER_FORGE_HELP = "Only this forge's (and --repo's forge where it has no prefix; default github)."


def filter_forge(repo: RepoRef | None, forge: str | None) -> str | None:
    """The forge a listing keeps: --repo's, else --forge's, else every forge."""
    return forge if repo is None else repo.forge


_DIRECTORY = click.Path(exists=True, file_okay=False, path_type=Path)


def checkout_option(
    help: str, *, deprecated_alias: str = DEPRECATED_CHECKOUT_ALIAS
) -> Callable[[F], F]:
    """``--checkout PATH``, required, passed to the command as ``checkout``. The command's
    old spelling (``--repo PATH``, or ``--workspace PATH`` for `ribbit sandbox run`) still
    works, hidden, with a one-line warning on stderr."""
    if deprecated_alias not in _ALIAS_NOW:
        raise ValueError(f"{deprecated_alias} is no old spelling of --checkout")

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def with_checkout(
            *args: Any, checkout: Path | None, deprecated_checkout: Path | None, **kwargs: Any
        ) -> Any:
            given = _checkout(checkout, deprecated_checkout, deprecated_alias)
            return command(*args, checkout=given, **kwargs)

        hidden = click.option(
            deprecated_alias,
            "deprecated_checkout",
            type=_DIRECTORY,
            hidden=True,
            help=f"Deprecated spelling of --checkout ({CHECKOUT_HELP}).",
        )
        shown = click.option(
            "--checkout",
            type=_DIRECTORY,
            default=None,
            metavar="PATH",
            # Not click-required: the hidden old spelling may stand in for it.
            help=f"{help} ({CHECKOUT_HELP}).  [required]",
        )
        return cast(F, shown(hidden(with_checkout)))

    return decorate


def _checkout(checkout: Path | None, deprecated: Path | None, alias: str) -> Path:
    if checkout is not None and deprecated is not None:
        raise click.UsageError(f"give --checkout only ({alias} PATH is its deprecated spelling)")
    if deprecated is not None:
        click.echo(
            f"warning: {alias} PATH is deprecated here and goes in the next release; say "
            f"--checkout PATH ({_ALIAS_NOW[alias]})",
            err=True,
        )
        return deprecated
    if checkout is None:
        raise click.UsageError("Missing option '--checkout'.")
    return checkout
