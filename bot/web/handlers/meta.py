"""Deliveries about the webhook itself."""

from __future__ import annotations

from bot.web.context import Context
from bot.web.routing import Registry

registry = Registry()


@registry.on("ping")
def pong(ctx: Context) -> None:
    ctx.ignore("pong")
