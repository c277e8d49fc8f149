"""Feature handlers, composed in the order below."""

from bot.handlers import comments, issues, meta, pull_requests
from bot.routing import Registry

registry = Registry(meta.registry, issues.registry, comments.registry, pull_requests.registry)

__all__ = ["registry"]
