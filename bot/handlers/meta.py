"""Deliveries about the webhook itself."""

from __future__ import annotations

from bot.context import Context
from bot.routing import Registry

registry = Registry()


@registry.on("ping")
def pong(ctx: Context) -> None:
    ctx.ignore("pong")
