"""Ribbit's web side. ``create_app`` is imported lazily so that ``import bot.forges``
(used by the worker) does not pull in Flask."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from bot.app import create_app

        return create_app
    raise AttributeError(name)
