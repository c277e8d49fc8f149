"""Click options generated from a settings dataclass, as TRL's scripts build their
parsers from config dataclasses (HfArgumentParser): one option per field, spelt as the
field with dashes, typed by its annotation (a ``Literal`` is a choice, a ``bool`` an
on/off pair), its help the field's ``help``. A new field is a new option with nothing
else to write; what a field cannot say itself is an :class:`OptionOverride`."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

_PLAIN_TYPES: dict[Any, type] = {str: str, int: int, float: float}


@dataclasses.dataclass(frozen=True)
class OptionOverride:
    """Where a field's option differs from what the field alone would make of it."""

    # The option's name where it is older than the generated one (kept for scripts).
    flag: str | None = None
    # Where the default comes from when it is the deployment's, resolved as the command
    # runs, not the dataclass's: the option then defaults to None and its help says this.
    default_from: str | None = None
    # A folder: click refuses a file there, as it does for the other commands' folders.
    folder: bool = False


def settings_options(
    cls: type, overrides: Mapping[str, OptionOverride] | None = None
) -> Callable[[F], F]:
    """A decorator that adds one option per field of the dataclass ``cls``, in field
    order; each option's value arrives under the field's name."""
    overrides = dict(overrides or {})
    fields = dataclasses.fields(cls)
    unknown = sorted(set(overrides) - {f.name for f in fields})
    if unknown:
        # An override left behind by a renamed field would otherwise be silently unused.
        raise TypeError(f"overrides name no field of {cls.__name__}: {', '.join(unknown)}")
    hints = typing.get_type_hints(cls)
    made = [_option(f, hints[f.name], overrides.get(f.name, OptionOverride())) for f in fields]

    def decorate(command: F) -> F:
        # click lists options in the reverse of the order decorators are applied.
        for option in reversed(made):
            command = option(command)
        return command

    return decorate


def _option(
    field: dataclasses.Field[Any], annotation: Any, override: OptionOverride
) -> Callable[[F], F]:
    flag = override.flag or "--" + field.name.replace("_", "-")
    help_text = str(field.metadata.get("help", ""))
    kwargs: dict[str, Any] = {"type": _click_type(field.name, annotation, override)}
    if override.default_from is not None:
        kwargs["default"] = None
        help_text = f"{help_text.rstrip('.')} (default: {override.default_from})."
    elif field.default is not dataclasses.MISSING:
        kwargs["default"], kwargs["show_default"] = field.default, True
    elif field.default_factory is not dataclasses.MISSING:
        kwargs["default"], kwargs["show_default"] = field.default_factory(), True
    else:
        kwargs["required"] = True
    if annotation is bool:
        del kwargs["type"]
        flag = f"{flag}/--no-{flag.removeprefix('--')}"
    return click.option(flag, field.name, help=help_text, **kwargs)


def _click_type(name: str, annotation: Any, override: OptionOverride) -> Any:
    if annotation is bool:
        return bool
    if typing.get_origin(annotation) is Literal:
        return click.Choice([str(choice) for choice in typing.get_args(annotation)])
    if annotation is str and override.folder:
        return click.Path(file_okay=False)
    if annotation in _PLAIN_TYPES:
        return _PLAIN_TYPES[annotation]
    raise TypeError(f"field {name!r}: no option type for {annotation!r}; add one here")
