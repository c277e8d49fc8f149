"""Event routing: a registry per feature module, composed in registration order.

A handler registered for "issues.labeled" runs for that key; one registered for
"issues" runs for every action of it. Exact-key handlers run first, then
event-wide ones, each group in the order they were registered (never a set).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from bot.web.context import Context

Handler = Callable[["Context"], None]
H = TypeVar("H", bound=Handler)


class Registry:
    def __init__(self, *children: Registry) -> None:
        self._routes: list[tuple[str, Handler]] = []
        for child in children:
            self._routes.extend(child._routes)

    def on(self, key: str) -> Callable[[H], H]:
        def register(handler: H) -> H:
            self._routes.append((key, handler))
            return handler

        return register

    def handlers_for(self, key: str) -> list[Handler]:
        event = key.split(".", 1)[0]
        exact = [h for k, h in self._routes if k == key]
        broad = [h for k, h in self._routes if k == event and k != key]
        return exact + broad
